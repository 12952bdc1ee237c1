// tests/fuzz/fuzz_target.cpp: libFuzzer harness of --task boolean's parsers (tasks/boolean_target.h):
// TargetParser, the --target expression, and parse_unseen, the --unseen subcube. An input is the
// expression, a newline, then the subcube (no newline: the subcube is empty). Each is parsed on
// 15 bits as the program does; the pair is then parsed and evaluated whole by parse_boolean_target
// on a cube of 6 bits (64 points, so that an input costs little). An accepted expression must read
// only bits below the cube's size; an accepted subcube must fix at least one bit, below the size,
// with its +1 bits among its fixed ones; an accepted target must be finite at every point.
// Valid seeds: tests/fuzz/corpus/target/valid/ (maj3, 2parity, and two of every piece of the grammar),
// parsed on 15 bits.
//   make tests/fuzz/bin/fuzz_target && sh tests/fuzz/run_fuzz.sh --seconds 60 target
//   tests/fuzz/bin/fuzz_target CRASH_FILE           (replays one input, from the repository root)
#define FUZZ_NAME "target"
#include <cmath>
#include "tests/fuzz/fuzz.h"
#include "tasks/boolean_target.h"

static void check_expression(const std::string& text, int bits) {
    const TargetProgram program = TargetParser(text, bits).parse();
    check(!program.steps.empty(), "an expression accepted with no steps");
    for (const TargetStep& step : program.steps)
        check(step.op != TARGET_BIT || (step.bit >= 0 && step.bit < bits), "a bit past the cube accepted");
}

static void check_unseen(const std::string& text, int bits) {
    const Subcube cube = parse_unseen(text, bits);
    check(cube.fixed != 0 && cube.fixed < (1u << bits), "a subcube accepted with no fixed bit or one past the cube");
    check((cube.plus & ~cube.fixed) == 0, "a +1 bit that is not fixed");
}

static void check_target(const std::string& expr, const std::string& cond, int bits) {
    const BooleanTarget target = parse_boolean_target(expr, cond, bits);
    check(target.values.size() == (1u << bits), "a target with the wrong count of values");
    for (double v : target.values) check(std::isfinite(v), "a target accepted with a value that is not finite");
}

void parse(const std::string& seed, const uint8_t* data, size_t size) {
    const std::string text((const char*)data, size);
    const size_t newline = text.find('\n');
    const std::string expr = text.substr(0, newline);
    std::string cond = newline == std::string::npos ? "" : text.substr(newline + 1);
    if (!cond.empty() && cond.back() == '\n') cond.pop_back();
    if (!seed.empty()) {  // a valid seed: the program's 15 bits
        check_target(expr, cond, 15);
        return;
    }
    try_parse([&] { check_expression(expr, 15); });
    try_parse([&] { check_unseen(cond, 15); });
    try_parse([&] { check_target(expr, cond, 6); });
}
