// tests/fuzz/fuzz_idx.cpp: libFuzzer harness of the IDX reader (tasks/image_files.h: read_idx_bytes,
// idx_header, read_idx_split), raw and gzip. The input is one IDX file, written gzipped when it
// starts with gzip's magic bytes. read_idx_split wants an images file and a labels file of the
// same count, so the harness reads the input's header (through read_idx_bytes) and writes the
// other file to match: for an images file, count labels; for a labels file, count 1x1 images
// (a count over 2^16 gets a file of one, which read_idx_split must refuse). An accepted split
// must be self-consistent: rows and cols of at least 1, count x rows x cols pixels, labels 0..9.
// Valid seeds: tests/fuzz/corpus/idx/valid/, Fashion-MNIST cut to a few images, raw and .gz.
//   make tests/fuzz/bin/fuzz_idx && sh tests/fuzz/run_fuzz.sh --seconds 60 idx
//   tests/fuzz/bin/fuzz_idx CRASH_FILE                 (replays one input, from the repository root)
#define FUZZ_NAME "idx"
#include "tests/fuzz/fuzz.h"
#include "tasks/image_files.h"

static std::vector<uint8_t> big_endian(std::vector<uint32_t> words) {
    std::vector<uint8_t> bytes;
    for (uint32_t w : words)
        for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back((uint8_t)(w >> shift));
    return bytes;
}

// The IDX file that completes the input's split, as its header asks.
static std::vector<uint8_t> companion(const std::vector<uint8_t>& input) {
    const uint32_t magic = input.size() >= 4 ? big_endian_u32(input.data()) : 0;
    uint32_t count = input.size() >= 8 ? big_endian_u32(input.data() + 4) : 0;
    if (count > 1 << 16) count = 1;
    if (magic == IDX_LABELS_MAGIC) {  // count images of 1x1
        std::vector<uint8_t> images = big_endian({IDX_IMAGES_MAGIC, count, 1, 1});
        images.resize(images.size() + count, 128);
        return images;
    }
    std::vector<uint8_t> labels = big_endian({IDX_LABELS_MAGIC, count});
    for (uint32_t i = 0; i < count; i++) labels.push_back((uint8_t)(i % IDX_CLASSES));
    return labels;
}

static void read(const uint8_t* data, size_t size) {
    const bool gzipped = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    std::filesystem::remove(work_dir() + "/idx/input");
    std::filesystem::remove(work_dir() + "/idx/input.gz");
    write_input(gzipped ? "idx/input.gz" : "idx/input", data, size);
    const IdxBytes input = read_idx_bytes(work_dir() + "/idx", "input");
    const std::vector<uint8_t> other = companion(input.bytes);
    write_input("idx/other", other.data(), other.size());
    const bool labels = input.bytes.size() >= 4 && big_endian_u32(input.bytes.data()) == IDX_LABELS_MAGIC;
    const ImageSet set = labels ? read_idx_split(work_dir() + "/idx", "other", "input")
                                : read_idx_split(work_dir() + "/idx", "input", "other");
    check(set.channels == 1 && set.height >= 1 && set.width >= 1,
          "a split accepted with images of " + std::to_string(set.height) + "x" + std::to_string(set.width));
    check(set.pixels.size() == (uint64_t)set.size() * set.height * set.width,
          "a split accepted whose pixels are not count x rows x cols");
    for (int label : set.labels) check(label >= 0 && label < IDX_CLASSES, "a label outside 0..9 accepted");
}

void parse(const std::string& seed, const uint8_t* data, size_t size) {
    if (seed.empty()) try_parse([&] { read(data, size); });
    else read(data, size);
}
