// Any Boolean target (--task boolean --target EXPR --unseen COND; tasks/boolean_target.h,
// tasks/walsh.h): the parser's values and its errors, the Walsh-Hadamard transform, the min-degree
// interpolator against the named tasks' hand-written ones and against a brute-force least-degree
// interpolator found by linear algebra, G read off f's support, the readout's rules; through the
// program, bad input refused before anything is written, and maj3 and 2parity written as targets
// training to the named tasks' bytes. Uses test_cli.cu's helpers (TINY, expect_error).
#include <filesystem>
#include "test_util.h"
#include "tasks/boolean.h"  // BooleanTask, parse_boolean_target, min_degree_interpolator

// EXPR's value at every point of the 15-bit cube, from its program (no hold-out, no checks)
static std::vector<double> values_of(const std::string& expr) {
    const TargetProgram program = TargetParser(expr, BOOL_BITS).parse();
    std::vector<double> values(BOOL_POINTS), stack;
    for (uint32_t p = 0; p < BOOL_POINTS; p++) values[p] = program.at(p, stack);
    return values;
}

// the cube point with x_i = +1 for the bits listed, -1 for the others
static uint32_t point(std::initializer_list<int> plus_bits) {
    uint32_t p = 0;
    for (int i : plus_bits) p |= 1u << i;
    return p;
}

TEST_CASE("--target's expressions: precedence, unary signs, sign(), spaces anywhere") {
    const std::vector<double> f = values_of("x0*x1*x2 + x3*x4*x5 - 0.5*x6");
    CHECK(f[0] == -1.5);                                 // every bit -1: -1 - 1 + 0.5
    CHECK(f[point({0, 1, 2, 3, 4, 5, 6})] == 1.5);
    CHECK(f[point({0})] == 1 - 1 + 0.5);
    CHECK(values_of("2-3-1")[0] == -2);                  // left to right
    CHECK(values_of("-x0*x1")[point({0, 1})] == -1);     // (-x0)*x1, the same as -(x0*x1)
    CHECK(values_of("2*(x0+1)")[0] == 0);
    CHECK(values_of("2*x0+1")[0] == -1);
    CHECK(values_of(" - - x3 ")[point({3})] == 1);
    CHECK(values_of("sign(x0+x1)")[point({0})] == 0);    // sign(0) = 0
    CHECK(values_of("sign(x0+x1+x2)")[point({1, 2})] == 1);
    CHECK(values_of("sign( x0 - 3 )")[point({0})] == -1);
    CHECK(values_of("1.25*x14")[point({14})] == 1.25);
    CHECK(values_of("(((x7)))")[point({7})] == 1);
}

// The error line of parse_boolean_target, and that it names what it should
static void expect_parse_error(const std::string& expr, const std::string& cond, const std::string& words) {
    CAPTURE(expr);
    CAPTURE(cond);
    std::string message;
    try {
        parse_boolean_target(expr, cond, BOOL_BITS);
    } catch (const std::runtime_error& e) {
        message = e.what();
    }
    CAPTURE(message);
    CHECK(message.find(words) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
}

TEST_CASE("--target and --unseen: every error one line naming the column or the bit") {
    const std::string U = "x0=-1,x1=-1";
    expect_parse_error("x0+", U, "--target 'x0+': column 4: the target ends where a number, a bit or '(' should");
    expect_parse_error("x0*y1", U, "column 4: unknown name 'y1' (the bits are x0..x14, the function sign)");
    expect_parse_error("x0*x15", U, "column 4: x15 is not a bit: the bits are x0..x14 (15 bits)");
    expect_parse_error("2x0", U, "column 2: a factor follows another without an operator: write '*'");
    expect_parse_error("x0 x1", U, "column 4: a factor follows another without an operator");
    expect_parse_error("(x0+x1", U, "column 1: this '(' is not closed");
    expect_parse_error("sign(x0", U, "column 5: this '(' is not closed");
    expect_parse_error("x0)", U, "column 3: this ')' closes no '('");
    expect_parse_error("  ", U, "column 3: the target is empty");
    expect_parse_error("x0**x1", U, "column 4: '*' where a number, a bit or '(' should be");
    expect_parse_error("sign x0", U, "column 6: sign takes its argument in parentheses");
    expect_parse_error("x01", U, "column 1: write the bit without a leading zero, not x01");
    expect_parse_error(".5*x0", U, "column 1: a number starts with a digit: 0.5, not .5");
    expect_parse_error("1.*x0", U, "column 3: a number needs digits after its '.'");
    expect_parse_error("x0 # x1", U, "column 4: unexpected '#'");
    expect_parse_error("x0\n+x1", U, "--target 'x0?+x1': column 3: unexpected '?'");  // a newline, shown as '?'
    expect_parse_error("x0", "x0=-1,\nx1=1", "--unseen 'x0=-1,?x1=1': column 7: expected a bit");
    expect_parse_error(std::string(101, '(') + "x0" + std::string(101, ')'), U, "column 101: nested deeper than 100");
    expect_parse_error(std::string(400, '9') + "*x0", U, "column 1: the number is too large");
    expect_parse_error("1" + std::string(200, '0') + "*1" + std::string(200, '0') + "*x0", U,
                       "its value overflows at the cube point 0");
    expect_parse_error("x0*x1", "x0=2", "--unseen 'x0=2': x0=2: a fixed bit's value is -1 or +1");
    expect_parse_error("x0*x1", "x0=0.5,x1=1", "x0=0.5: a fixed bit's value is -1 or +1");
    expect_parse_error("x0*x1", "x0=-1, x0=1", "x0 is fixed twice");
    expect_parse_error("x0*x1", "", "--unseen '': no constraint: the whole cube would be held out");
    expect_parse_error("x0*x1", " ", "no constraint");
    expect_parse_error("x0*x1", "x15=1", "x15 is not a bit: the bits are x0..x14");
    expect_parse_error("x0*x1", "x0=-1,", "column 7: expected a bit such as x0");
    expect_parse_error("x0*x1", "x0 -1", "column 4: expected '=' and -1 or +1 after x0");
    expect_parse_error("x0*x1", "x0=-1;x1=1", "column 6: expected ',' between two constraints");
    expect_parse_error("x0+1", "x0=1", "it is constant (0) on the seen domain, the cube outside --unseen 'x0=1'");
    expect_parse_error("3", "x4=-1", "it is constant (3) on the seen domain");
    // what parses: spaces, +1 and 1, every bit fixed (a single point held out)
    const BooleanTarget t = parse_boolean_target("x0", " x0 = +1 , x2=1,x1=-1 ", BOOL_BITS);
    CHECK(t.unseen.points(BOOL_BITS) == BOOL_POINTS / 8);
    for (uint32_t p = 0; p < 8; p++) CHECK(t.unseen.holds(p) == (p == 0b101u));
    std::string all;
    for (int i = 0; i < BOOL_BITS; i++) all += (i ? ",x" : "x") + std::to_string(i) + "=-1";
    CHECK(parse_boolean_target("x0", all, BOOL_BITS).unseen.points(BOOL_BITS) == 1);
}

TEST_CASE("the Walsh-Hadamard transform: coefficients by hand, and back to f") {
    // maj3 = (x0 + x1 + x2)/2 - x0 x1 x2/2
    const std::vector<double> c = fourier_coefficients(values_of("sign(x0+x1+x2)"), BOOL_BITS);
    for (uint32_t A = 0; A < (uint32_t)c.size(); A++) {
        const double want = A == 1 || A == 2 || A == 4 ? 0.5 : A == 7 ? -0.5 : 0.0;
        if (c[A] != want) FAIL_CHECK("coefficient " << A << ": " << c[A] << ", not " << want);
    }
    Rng rng(44);
    std::vector<double> f(64);
    for (double& v : f) v = rng.uniform(-2, 2);
    const std::vector<double> back = from_fourier(fourier_coefficients(f, 6), 6);
    for (int p = 0; p < 64; p++) CHECK(back[p] == doctest::Approx(f[p]).epsilon(1e-12));
}

// The named tasks' MDIs as GOTU's derivation writes them by hand (docs/method.md)
static double hand_written_mdi(const std::string& task, uint32_t p, double f) {
    const double x0 = p & 1 ? 1 : -1, x1 = p & 2 ? 1 : -1, x2 = p & 4 ? 1 : -1;
    if (task == "2parity") return x0 + x1 - 1;
    if (task == "maj3") return (x0 + x1) / 2 + x2 - (x0 * x2 + x1 * x2) / 2;
    return f - x0 * x1 * x2 + 1 - (x0 + x1 + x2) + (x0 * x1 + x0 * x2 + x1 * x2);  // cyclic3
}

TEST_CASE("the computed MDI: f on the seen domain, and the named tasks' hand-written MDIs on all 32768 points") {
    for (const char* name : {"2parity", "maj3", "cyclic3"}) {
        CAPTURE(name);
        const BooleanTask task(name);
        int differ = 0, off_f = 0;
        for (uint32_t p = 0; p < BOOL_POINTS; p++) {
            differ += task.mdi[p] != hand_written_mdi(name, p, task.target.values[p]);
            off_f += !task.target.unseen.holds(p) && task.mdi[p] != task.target.values[p];
        }
        CHECK(differ == 0);  // bit for bit: the transform's sums are exact on these values
        CHECK(off_f == 0);   // and so is f on the seen domain
    }
    for (const char* expr : {"x0*x1*x2", "sign(x0+x1+x2+x3+x4)", "x0 + x0*x1 + x0*x1*x2", "0.1*x3 + x0*x1 - x2*x9*x4"})
        for (const char* cond : {"x0=-1,x1=-1", "x2=1", "x0=1,x3=-1,x4=1"}) {
            CAPTURE(expr);
            CAPTURE(cond);
            const BooleanTask task(parse_boolean_target(expr, cond, BOOL_BITS));
            double worst = 0;
            for (uint32_t p = 0; p < BOOL_POINTS; p++)
                if (!task.target.unseen.holds(p))
                    worst = std::max(worst, std::fabs(task.mdi[p] - task.target.values[p]));
            CHECK(worst < 1e-12);
        }
}

// ---- a brute-force least-degree interpolator: linear algebra, degree by degree ----

// Solutions of A z = b (A rows x cols): one (its free variables 0) and a basis of A's null space,
// by Gauss-Jordan elimination with the largest pivot of each column
struct Solutions {
    std::vector<double> one;
    std::vector<std::vector<double>> null_space;
};

static Solutions solve(std::vector<std::vector<double>> A, std::vector<double> b, int cols) {
    const int rows = (int)A.size();
    std::vector<int> pivot_col;
    int r = 0;
    for (int c = 0; c < cols && r < rows; c++) {
        int best = r;
        for (int i = r; i < rows; i++)
            if (std::fabs(A[i][c]) > std::fabs(A[best][c])) best = i;
        if (std::fabs(A[best][c]) < 1e-9) continue;
        std::swap(A[r], A[best]);
        std::swap(b[r], b[best]);
        const double scale = A[r][c];
        for (double& v : A[r]) v /= scale;
        b[r] /= scale;
        for (int i = 0; i < rows; i++) {
            if (i == r || A[i][c] == 0) continue;
            const double m = A[i][c];
            for (int j = 0; j < cols; j++) A[i][j] -= m * A[r][j];
            b[i] -= m * b[r];
        }
        pivot_col.push_back(c);
        r++;
    }
    for (int i = r; i < rows; i++) REQUIRE_MESSAGE(std::fabs(b[i]) < 1e-9, "the system has no solution");
    Solutions s;
    s.one.assign(cols, 0.0);
    for (int i = 0; i < r; i++) s.one[pivot_col[i]] = b[i];
    std::vector<bool> is_pivot(cols, false);
    for (int c : pivot_col) is_pivot[c] = true;
    for (int free = 0; free < cols; free++) {
        if (is_pivot[free]) continue;
        std::vector<double> z(cols, 0.0);
        z[free] = 1;
        for (int i = 0; i < r; i++) z[pivot_col[i]] = -A[i][free];
        s.null_space.push_back(z);
    }
    return s;
}

// The interpolator of f (2^n values) on the points outside `unseen` whose Fourier weight is least at
// degree n, then at n - 1, ..., then at 0: its coefficients form an affine set c0 + N z; each degree
// D in turn takes the z that minimise the weight of D's coefficients (least squares, by the normal
// equations) and keeps those. Returns it at every point.
static std::vector<double> least_degree_interpolator(const std::vector<double>& f, const HoldOut& unseen, int n) {
    const int size = 1 << n;
    auto chi = [](uint32_t A, uint32_t p) { return popcount(A & ~p) % 2 ? -1.0 : 1.0; };
    std::vector<std::vector<double>> E;
    std::vector<double> seen_f;
    for (uint32_t p = 0; p < (uint32_t)size; p++) {
        if (unseen.holds(p)) continue;
        std::vector<double> row(size);
        for (uint32_t A = 0; A < (uint32_t)size; A++) row[A] = chi(A, p);
        E.push_back(row);
        seen_f.push_back(f[p]);
    }
    const Solutions interpolators = solve(E, seen_f, size);
    std::vector<double> c0 = interpolators.one;
    std::vector<std::vector<double>> N = interpolators.null_space;  // each a (size) direction
    for (int D = n; D >= 0 && !N.empty(); D--) {
        const int k = (int)N.size();
        std::vector<uint32_t> at_D;
        for (uint32_t A = 0; A < (uint32_t)size; A++)
            if (popcount(A) == D) at_D.push_back(A);
        // minimise |r + M z|², M = N's rows at degree D, r = c0's: (MᵀM) z = -Mᵀ r
        std::vector<std::vector<double>> MtM(k, std::vector<double>(k, 0.0));
        std::vector<double> rhs(k, 0.0);
        for (int a = 0; a < k; a++) {
            for (uint32_t A : at_D) rhs[a] -= N[a][A] * c0[A];
            for (int b = 0; b < k; b++)
                for (uint32_t A : at_D) MtM[a][b] += N[a][A] * N[b][A];
        }
        const Solutions step = solve(MtM, rhs, k);
        for (int a = 0; a < k; a++)
            for (int A = 0; A < size; A++) c0[A] += N[a][A] * step.one[a];
        std::vector<std::vector<double>> kept;  // N times the null space of M (that of MᵀM)
        for (const std::vector<double>& w : step.null_space) {
            std::vector<double> direction(size, 0.0);
            for (int a = 0; a < k; a++)
                for (int A = 0; A < size; A++) direction[A] += N[a][A] * w[a];
            kept.push_back(direction);
        }
        N = kept;
    }
    REQUIRE(N.empty());  // one interpolator is left
    std::vector<double> g(size, 0.0);
    for (uint32_t p = 0; p < (uint32_t)size; p++)
        for (uint32_t A = 0; A < (uint32_t)size; A++) g[p] += c0[A] * chi(A, p);
    return g;
}

TEST_CASE("the computed MDI equals a brute-force least-degree interpolator on a 6-bit cube") {
    Rng rng(6);
    const int n = 6;
    for (int trial = 0; trial < 12; trial++) {
        std::vector<double> f(1 << n);
        for (double& v : f) v = trial % 2 ? rng.below(7) - 3 : rng.uniform(-2, 2);  // integers, then reals
        uint32_t fixed = 0;
        while (popcount(fixed) < 1 + trial % 3) fixed |= 1u << rng.below(n);
        const uint32_t plus = fixed & (uint32_t)rng.below(1 << n);
        const HoldOut unseen = HoldOut::subcube(fixed, plus);
        CAPTURE(trial);
        CAPTURE(fixed);
        CAPTURE(plus);
        const std::vector<double> fast = min_degree_interpolator(f, unseen, n);
        const std::vector<double> brute = least_degree_interpolator(f, unseen, n);
        double worst = 0;
        for (int p = 0; p < (1 << n); p++) worst = std::max(worst, std::fabs(fast[p] - brute[p]));
        CHECK(worst < 1e-9);
    }
}

TEST_CASE("G read off f's support: maj3's and 2parity's as named; cyclic3's derived one is its named one both ways") {
    for (const char* name : {"2parity", "maj3"}) {
        const NamedBooleanTask& named = named_boolean_task(name);
        const BooleanTask derived(parse_boolean_target(named.target, named.unseen, BOOL_BITS)), task(name);
        CHECK(derived.structure() == task.structure());
        CHECK(derived.needed_edges() == task.needed_edges());
    }
    const NamedBooleanTask& cyclic = named_boolean_task("cyclic3");
    const std::vector<float> one_way = BooleanTask("cyclic3").structure();
    const BooleanTask derived_cyclic3(parse_boolean_target(cyclic.target, cyclic.unseen, BOOL_BITS));
    const std::vector<float> both_ways = derived_cyclic3.structure();
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) CHECK(both_ways[i * 16 + j] == std::max(one_way[i * 16 + j], one_way[j * 16 + i]));
    // overlapping triples: x2 shares a monomial with x0, x1, x3, x4; x0 none with x3
    const BooleanTask triples(parse_boolean_target("x0*x1*x2 + x2*x3*x4", "x0=-1", BOOL_BITS));
    const std::vector<float> G = triples.structure();
    CHECK(G[3 * 16 + 1] == 1);
    CHECK(G[3 * 16 + 5] == 1);
    CHECK(G[1 * 16 + 4] == 0);
    CHECK(G[0 * 16 + 5] == 1);  // CLS with x4, a bit f reads
    CHECK(G[0 * 16 + 6] == 0);  // not with x5
    CHECK(triples.needed_edges().size() == 5);  // CLS's links to x0..x4
}

TEST_CASE("the readout: ±1 targets by sign, others by value on their grid; zero points out of the sign metrics") {
    const BooleanTask maj3("maj3"), cyclic3("cyclic3");
    CHECK(maj3.sign_readout);
    CHECK(!cyclic3.sign_readout);
    CHECK(cyclic3.grid == 1);
    CHECK(BooleanTask(parse_boolean_target("x0*x1*x2 + x3*x4*x5 - 0.5*x6", "x0=-1", BOOL_BITS)).grid == 0.5);
    const BooleanTask no_grid(parse_boolean_target("0.1*x0 + x1", "x0=-1", BOOL_BITS));
    CHECK(no_grid.grid == 0);
    // x0 + x1 is 0 on half the cube (x0 = -x1): not in acc_cube; the unseen part x0 = x1 = -1 holds -2
    const BooleanTask sum(parse_boolean_target("x0 + x1", "x0=-1,x1=-1", BOOL_BITS));
    CHECK(sum.zero_points == BOOL_POINTS / 2);
    CHECK(sum.zero_unseen == 0);
    CHECK(sum.describe().find("f = 0 on 16384 points (0 unseen)") != std::string::npos);
    std::vector<float> y(BOOL_POINTS);
    for (int p = 0; p < BOOL_POINTS; p++) y[p] = sum.target.values[p] == 0 ? -0.25f : (float)sum.target.values[p];
    for (const auto& metric : sum.evaluate(y)) {
        const std::string& key = metric.first;
        const double value = metric.second;
        CAPTURE(key);
        if (key == "acc_cube" || key == "acc_unseen") CHECK(value == 1.0);  // the zero points' -0.25 not counted
        if (key == "exact_cube") CHECK(value == 1.0);                       // round(-0.25) is 0
    }
    for (const auto& [key, value] : no_grid.evaluate(y))
        if (key == "exact_cube") CHECK(std::isnan(value));
    // f is 0 on the whole unseen part: acc_unseen has no point to count
    const BooleanTask zero_unseen(parse_boolean_target("(1 + x0) * x2", "x0=-1", BOOL_BITS));
    for (const auto& [key, value] : zero_unseen.evaluate(y))
        if (key == "acc_unseen") CHECK(std::isnan(value));
}

#ifndef MASKPRIOR_CUDA_EMULATION
// A bad --target or --unseen: one line, exit 2, and no run folder
static void expect_refused(const std::string& args, const std::string& words) {
    const std::string out = TMP_PREFIX + "refused";
    std::filesystem::remove_all(out);
    expect_error(args + " --out " + out, words);
    CHECK(!std::filesystem::exists(out));
}

TEST_CASE("--task boolean: bad flags are one line naming the column or the bit, exit 2, nothing written") {
    const std::string B = "--task boolean --unseen x0=-1,x1=-1 --target ";
    expect_refused(B + "'x0+'", "column 4: the target ends where");
    expect_refused(B + "'x0*y'", "column 4: unknown name 'y'");
    expect_refused(B + "'x0*x15'", "column 4: x15 is not a bit");
    expect_refused(B + "'2 x0'", "column 3: a factor follows another without an operator");
    expect_refused(B + "'(x0+x1'", "column 1: this '(' is not closed");
    expect_refused(B + "'x0+1' --unseen x0=1", "it is constant (0) on the seen domain");
    expect_refused("--task boolean --target x0*x1 --unseen x0=2", "x0=2: a fixed bit's value is -1 or +1");
    expect_refused("--task boolean --target x0*x1 --unseen x1=-1,x1=-1", "x1 is fixed twice");
    expect_refused("--task boolean --target x0*x1 --unseen ''", "no constraint: the whole cube would be held out");
    expect_refused("--task boolean --target x0*x1", "--task boolean needs --target EXPR and --unseen COND");
    expect_refused("--task maj3 --target x0*x1", "--target is for --task boolean, not maj3");
    expect_refused("--task 2parity --unseen x0=1", "--unseen is for --task boolean, not 2parity");
}

// metrics.json without what names the run and its time: what two runs of one training must share
static nlohmann::json shared_metrics(const std::string& folder) {
    std::ifstream file(folder + "/metrics.json");
    nlohmann::json m = nlohmann::json::parse(file);
    for (const char* key : {"task", "target", "unseen", "command", "seconds"}) m.erase(key);
    return m;
}

TEST_CASE("maj3 and 2parity written as targets train to the named tasks' log.jsonl bytes") {
    const std::string run = TINY + "--steps 12 --eval-every 6 --seed 3 --out " + TMP_PREFIX;
    const std::pair<std::string, std::string> pairs[] = {
        {"--task maj3 --init mask", "--task boolean --target 'sign(x0 + x1 + x2)' --unseen x0=-1,x1=-1 --init mask"},
        {"--task 2parity --init qk-opt --qk-opt-steps 20",
         "--task boolean --target x0*x1 --unseen 'x1=-1, x0=-1' --init qk-opt --qk-opt-steps 20"}};
    for (const auto& pair : pairs) {
        const std::string &named = pair.first, &general = pair.second;
        CAPTURE(general);
        REQUIRE(run_command(run + "named " + named).exit_code == 0);
        REQUIRE(run_command(run + "general " + general).exit_code == 0);
        CHECK(read_file(TMP_PREFIX + "named/log.jsonl") == read_file(TMP_PREFIX + "general/log.jsonl"));
        CHECK(shared_metrics(TMP_PREFIX + "named") == shared_metrics(TMP_PREFIX + "general"));
    }
    // the run records its target, and its checkpoint is refused to another
    std::ifstream file(TMP_PREFIX + "general/metrics.json");
    const nlohmann::json m = nlohmann::json::parse(file);
    CHECK(m["task"] == "boolean");
    CHECK(m["target"] == "x0*x1");
    CHECK(m["unseen"] == "x1=-1, x0=-1");
    expect_error("--task boolean --target x0*x2 --unseen 'x1=-1, x0=-1' --init qk-opt --qk-opt-steps 20 --seed 3 "
                 "--steps 14 --out " + TMP_PREFIX + "other --resume " + TMP_PREFIX + "general/model.safetensors",
                 "is a checkpoint of target=x0*x1; this run asks for target=x0*x2");
}
#endif
