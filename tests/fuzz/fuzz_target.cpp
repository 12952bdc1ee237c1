// tests/fuzz/fuzz_target.cpp: libFuzzer harness of --task boolean's parsers (tasks/boolean_target.h):
// TargetParser, the --target expression, and parse_unseen, the --unseen hold-out (single bits and
// products of bits set to -1 or +1). An input is the expression, a newline, then the hold-out (no
// newline: the hold-out is empty). Each is parsed on 15 bits as the program does; the pair is then
// parsed and evaluated whole by parse_boolean_target on a cube of 6 bits (64 points, so that an
// input costs little). An accepted expression must read only bits below the cube's size; an
// accepted hold-out must have at least one constraint, each a nonempty product of bits below the
// size with a sign of -1 or +1, none following from the others; an accepted target must be finite,
// and finite in float, at every point, its hold-out neither empty nor the whole cube, and the MDI
// of the hold-out must equal f where it is seen. Valid seeds: tests/fuzz/corpus/target/valid/
// (maj3, 2parity, threesym, and two of every piece of the grammar), parsed on 15 bits.
//   make tests/fuzz/bin/fuzz_target && sh tests/fuzz/run_fuzz.sh --seconds 60 target
//   tests/fuzz/bin/fuzz_target CRASH_FILE           (replays one input, from the repository root)
#define FUZZ_NAME "target"
#include <cmath>
#include "tests/fuzz/fuzz.h"
#include "tasks/boolean_target.h"
#include "tasks/holdout.h"  // ParityBasis, min_degree_interpolator

static void check_expression(const std::string& text, int bits) {
    const TargetProgram program = TargetParser(text, bits).parse();
    check(!program.steps.empty(), "an expression accepted with no steps");
    for (const TargetStep& step : program.steps)
        check(step.op != TARGET_BIT || (step.bit >= 0 && step.bit < bits), "a bit past the cube accepted");
}

static void check_unseen(const std::string& text, int bits) {
    const HoldOut unseen = parse_unseen(text, bits);
    check(!unseen.parities.empty(), "a hold-out accepted with no constraint");
    ParityBasis basis;
    for (const Parity& c : unseen.parities) {
        check(c.product != 0 && c.product < (1u << bits), "an empty product, or one past the cube, accepted");
        check(c.sign == 1 || c.sign == -1, "a sign that is not -1 or +1");
        const Parity reduced = basis.reduce(c);
        check(reduced.product != 0, "a constraint that follows from the others, or contradicts them, accepted");
        basis.add(reduced);
    }
}

static void check_target(const std::string& expr, const std::string& cond, int bits) {
    const BooleanTarget target = parse_boolean_target(expr, cond, bits);
    check(target.values.size() == (1u << bits), "a target with the wrong count of values");
    for (double v : target.values)
        check(std::isfinite(v) && std::isfinite((float)v), "a target accepted with a value that is not finite");
    int held = 0;
    for (uint32_t p = 0; p < (1u << bits); p++) held += target.unseen.holds(p);
    check(held == target.unseen.points(bits) && held > 0 && held < (1 << bits),
          "a hold-out of no point, of the whole cube, or of another size than its constraints say");
    const std::vector<double> mdi = min_degree_interpolator(target.values, target.unseen, bits);
    double scale = 0;
    for (double v : target.values) scale = std::fmax(scale, std::fabs(v));
    for (uint32_t p = 0; p < (1u << bits); p++)
        if (!target.unseen.holds(p))
            check(std::fabs(mdi[p] - target.values[p]) <= 1e-9 * scale, "an MDI that is not f where f is seen");
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
