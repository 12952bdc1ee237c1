// tests/fuzz/fuzz_structure.cpp: libFuzzer harness of read_structure (prior/structure.h), the reader
// of --mask-structure files. Each input is read for the two shapes of the seeds (T 16 of the
// Boolean tasks, T 11 of mul2) with NH 2; an accepted G must hold heads x T x T entries of 0 and 1.
// Valid seeds: tests/fuzz/corpus/structure/valid/, the files of experiments/structures/.
//   make tests/fuzz/bin/fuzz_structure && sh tests/fuzz/run_fuzz.sh --seconds 60 structure
//   tests/fuzz/bin/fuzz_structure CRASH_FILE           (replays one input, from the repository root)
#define FUZZ_NAME "structure"
#include "tests/fuzz/fuzz.h"
#include "prior/structure.h"

constexpr int SHAPES[2][2] = {{16, 2}, {11, 2}};  // (T, NH)

static void read(const std::string& path, int T, int NH) {
    const Structure G = read_structure(path, T, NH);
    check(G.T == T && (G.heads == 1 || G.heads == NH) && G.g.size() == (size_t)G.heads * T * T,
          "G accepted with " + std::to_string(G.g.size()) + " entries for T " + std::to_string(T));
    for (float v : G.g) check(v == 0.0f || v == 1.0f, "G accepted with an entry other than 0 or 1");
}

void parse(const std::string& seed, const uint8_t* data, size_t size) {
    const std::string path = write_input("G.txt", data, size);
    if (seed.empty()) {
        for (const auto& shape : SHAPES) try_parse([&] { read(path, shape[0], shape[1]); });
        return;
    }
    const int T = seed.rfind("mul2", 0) == 0 ? 11 : 16;  // the seed's task
    read(path, T, 2);
}
