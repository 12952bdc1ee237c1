// tests/fuzz/fuzz_arithmetic.cpp: libFuzzer harness of read_arithmetic_file (tasks/arithmetic.h),
// the reader of --train-file and --test-file. Each input is read as mul2, and as add3 when it holds
// a '+' (without one no line can be an add3 example, and an add3 read costs a fresh 4 MB table of
// the pairs seen, 6 ms under AddressSanitizer). An accepted file must give one operand pair per
// example, each in range and each seen once, with its line.
// Valid seeds: tests/fuzz/corpus/arithmetic/valid/, add3-*.txt and mul2-*.txt.
//   make tests/fuzz/bin/fuzz_arithmetic && sh tests/fuzz/run_fuzz.sh --seconds 60 arithmetic
//   tests/fuzz/bin/fuzz_arithmetic CRASH_FILE          (replays one input, from the repository root)
#define FUZZ_NAME "arithmetic"
#include <cstring>
#include <set>
#include "tests/fuzz/fuzz.h"
#include "tasks/arithmetic.h"

static void read(const std::string& path, ArithOp op) {
    const ArithmeticFile file = read_arithmetic_file(op, path);
    const int pairs = power_of_ten(2 * arith_operand_digits(op));
    check(!file.pairs.empty() && file.pairs.size() == file.lines.size(), "pairs and lines do not match");
    std::set<int> seen;
    for (size_t i = 0; i < file.pairs.size(); i++) {
        check(file.pairs[i] >= 0 && file.pairs[i] < pairs, "a pair out of range: " + std::to_string(file.pairs[i]));
        check(seen.insert(file.pairs[i]).second, "a repeated pair accepted");
        check(file.lines[i] > (i ? file.lines[i - 1] : 0), "line numbers out of order");
    }
}

void parse(const std::string& seed, const uint8_t* data, size_t size) {
    const std::string path = write_input("data.txt", data, size);
    if (seed.empty()) {
        try_parse([&] { read(path, ARITH_MUL); });
        if (memchr(data, '+', size)) try_parse([&] { read(path, ARITH_ADD); });
        return;
    }
    read(path, seed.rfind("mul2", 0) == 0 ? ARITH_MUL : ARITH_ADD);  // add3-*.txt, mul2-*.txt
}
