// tests/fuzz/fuzz_safetensors.cpp: libFuzzer harness of safetensors_read (run/safetensors.h), the
// checkpoint reader. An accepted file must hold, for every tensor, exactly numel(shape) floats,
// its tensors' bytes must fill its data exactly (no gap, no overlap, nothing left over: what the
// official reader demands), and it must come back the same through safetensors_write and
// safetensors_read (the writer is what makes checkpoints, so a file it cannot round-trip is a
// finding too).
// Valid seeds: tests/fuzz/corpus/safetensors/valid/, checkpoints written by ./maskprior.
//   make tests/fuzz/bin/fuzz_safetensors && sh tests/fuzz/run_fuzz.sh --seconds 60 safetensors
//   tests/fuzz/bin/fuzz_safetensors CRASH_FILE         (replays one input, from the repository root)
#define FUZZ_NAME "safetensors"
#include "tests/fuzz/fuzz.h"
#include "run/safetensors.h"

static void check_tensors(const StFile& file) {
    for (const StTensor& t : file.tensors) {
        uint64_t numel = 1;
        bool overflow = false;
        for (int64_t d : t.shape) {
            check(d >= 0, "tensor " + t.name + " accepted with a negative dimension");
            overflow = overflow || __builtin_mul_overflow(numel, (uint64_t)d, &numel);
        }
        check(!overflow && numel == t.data.size(),
              "tensor " + t.name + " accepted with " + std::to_string(t.data.size()) +
                  " floats, which its shape does not describe");
    }
}

// The file's size: 8 bytes of header length, the header, then the tensors' floats and nothing else.
static void check_tiled(const StFile& file, const uint8_t* data, size_t size) {
    uint64_t header_len = 0;
    memcpy(&header_len, data, 8);  // an accepted file has its 8 bytes
    uint64_t floats = 0;
    for (const StTensor& t : file.tensors) floats += t.data.size();
    check(size == 8 + header_len + floats * sizeof(float),
          "a file of " + std::to_string(size) + " bytes accepted, but its header of " + std::to_string(header_len) +
              " bytes and " + std::to_string(floats) + " floats fill " +
              std::to_string(8 + header_len + floats * sizeof(float)));
}

static void check_round_trip(const StFile& file) {
    const std::string again = work_dir() + "/again.safetensors";
    safetensors_write(again, file);
    const StFile back = safetensors_read(again);
    check(back.metadata == file.metadata, "the metadata changed through safetensors_write and _read");
    check(back.tensors.size() == file.tensors.size(), "the tensor count changed through safetensors_write and _read");
    for (size_t i = 0; i < file.tensors.size(); i++) {
        const StTensor &a = file.tensors[i], &b = back.tensors[i];
        check(a.name == b.name && a.shape == b.shape && a.data.size() == b.data.size() &&
                  (a.data.empty() || memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) == 0),
              "tensor " + a.name + " changed through safetensors_write and _read");
    }
}

void parse(const std::string& seed, const uint8_t* data, size_t size) {
    const std::string path = write_input("input.safetensors", data, size);
    auto read = [&] {
        const StFile file = safetensors_read(path);
        check_tensors(file);
        check_tiled(file, data, size);
        check_round_trip(file);
        if (!seed.empty() && file.tensors.empty()) throw std::runtime_error("a checkpoint without tensors");
    };
    if (seed.empty()) try_parse(read);
    else read();
}
