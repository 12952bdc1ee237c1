// Hold-outs that are affine subspaces (--unseen 'x0*x1*x2=-1'; tasks/holdout.h) and G read off the
// seen data (--g-from data): the grammar and its refusals; the coset MDI against test_boolean_target.cu's
// brute-force least-degree interpolator (linear algebra over every interpolator, no cosets) on random
// hold-outs; GOTU's threesym, its MDI and its run; the sparsest interpolator against a slow
// reimplementation of its rule and, for its count, against every interpolator's zeros; data G blind
// to f on the held-out part, and the named tasks' G from their data.
#include <functional>
#include "test_util.h"
#include "tasks/boolean.h"  // BooleanTask, parse_unseen, sparsest_support, min_degree_interpolator

// --unseen's refusal line, with the words it must hold
static void expect_unseen_error(const std::string& cond, const std::string& words) {
    expect_parse_error("x5", cond, words);
}

TEST_CASE("--unseen takes products of bits: parity hold-outs, mixed with single bits") {
    const HoldOut half = parse_unseen("x0*x1*x2=-1", BOOL_BITS);
    REQUIRE(half.parities.size() == 1);
    CHECK(half.parities[0].product == 0b111u);
    CHECK(half.parities[0].sign == -1);
    CHECK(half.points(BOOL_BITS) == BOOL_POINTS / 2);
    const HoldOut mixed = parse_unseen(" x0 * x1 = 1, x2=-1 ,x3*x4*x5=+1", BOOL_BITS);
    REQUIRE(mixed.parities.size() == 3);
    int held = 0;
    for (uint32_t p = 0; p < BOOL_POINTS; p++) {
        const double x0 = p & 1 ? 1 : -1, x1 = p & 2 ? 1 : -1, x2 = p & 4 ? 1 : -1, x3 = p & 8 ? 1 : -1,
                     x4 = p & 16 ? 1 : -1, x5 = p & 32 ? 1 : -1;
        const bool holds = x0 * x1 == 1 && x2 == -1 && x3 * x4 * x5 == 1;
        held += holds;
        if (mixed.holds(p) != holds) FAIL_CHECK("point " << p);
    }
    CHECK(held == BOOL_POINTS / 8);
    CHECK(mixed.points(BOOL_BITS) == held);
    // refused: one line naming the constraint
    expect_unseen_error("x0=-1,x1=-1,x0*x1=-1", "--unseen 'x0=-1,x1=-1,x0*x1=-1': x0*x1=-1 contradicts the "
                                               "constraints before it: no point would be held out");
    expect_unseen_error("x0*x1=1,x1*x2=1,x0*x2=-1", "x0*x2=-1 contradicts the constraints before it");
    expect_unseen_error("x0=-1,x1=-1,x0*x1=1", "x0*x1=1 follows from the constraints before it: give each once");
    expect_unseen_error("x0*x1=1, x0*x1=-1", "x0*x1 is constrained twice");
    expect_unseen_error("x0*x1*x0=1", "x0*x1*x0: x0 twice in one product (x0*x0 is 1): write each bit once");
    expect_unseen_error("x0*=1", "column 4: expected a bit such as x0, or a product x0*x1");
    expect_unseen_error("x0*x1 1", "column 7: expected '=' and -1 or +1 after x0*x1");
    expect_unseen_error("x0*x1=2", "x0*x1=2: a product's value is -1 or +1");
    expect_unseen_error("x0*x15=1", "x15 is not a bit: the bits are x0..x14");
    expect_unseen_error("", "no constraint: the whole cube would be held out, leaving nothing to train on");
    // the seen domain of a parity hold-out: x0*x1 is 1 wherever x0*x1 = -1 is held out
    expect_parse_error("x0*x1", "x0*x1=-1", "it is constant (1) on the seen domain");
}

// A random hold-out on n bits with k independent parities: drawn until its 2^(n-k) points say so
static HoldOut random_hold_out(Rng& rng, int n, int k) {
    for (;;) {
        HoldOut U;
        for (int j = 0; j < k; j++) U.parities.push_back({1 + (uint32_t)rng.below((1 << n) - 1), rng.below(2) ? 1 : -1});
        int held = 0;
        for (uint32_t p = 0; p < (1u << n); p++) held += U.holds(p);
        if (held == (1 << (n - k))) return U;
    }
}

TEST_CASE("the coset MDI equals a brute-force least-degree interpolator on random parity hold-outs") {
    const int n = 6;
    std::vector<HoldOut> holdouts;  // with several top-degree members in a coset (least squares), then random
    for (const char* cond : {"x0*x1=1", "x0*x1=1,x1*x2=-1", "x0*x1*x2=-1", "x0*x1=-1,x2*x3=1,x4=1", "x5*x2=1,x3=-1"})
        holdouts.push_back(parse_unseen(cond, n));
    Rng rng(54);
    for (int trial = 0; trial < 8; trial++) holdouts.push_back(random_hold_out(rng, n, 1 + trial % 3));
    for (size_t h = 0; h < holdouts.size(); h++) {
        std::vector<double> f(1 << n);
        for (double& v : f) v = h % 2 ? rng.below(7) - 3 : rng.uniform(-2, 2);  // integers, then reals
        CAPTURE(h);
        const std::vector<double> fast = min_degree_interpolator(f, holdouts[h], n);
        const std::vector<double> brute = least_degree_interpolator(f, holdouts[h], n);
        double worst = 0;
        for (int p = 0; p < (1 << n); p++) worst = std::max(worst, std::fabs(fast[p] - brute[p]));
        CHECK(worst < 1e-9);
    }
}

static const char* THREESYM = "x0*x1 - 1.25*x1*x2 + 1.5*x2*x0";

// threesym's f and its brute-force MDI on the 3 bits it reads, and that MDI's sign accuracy
struct ThreesymByHand {
    std::vector<double> f, mdi;
    double accuracy = 0;
    ThreesymByHand() {
        for (uint32_t p = 0; p < 8; p++) {
            const double x0 = p & 1 ? 1 : -1, x1 = p & 2 ? 1 : -1, x2 = p & 4 ? 1 : -1;
            f.push_back(x0 * x1 - 1.25 * x1 * x2 + 1.5 * x2 * x0);
        }
        mdi = least_degree_interpolator(f, HoldOut{{{0b111u, -1}}}, 3);
        for (int p = 0; p < 8; p++) accuracy += (mdi[p] > 0) == (f[p] > 0) && std::fabs(mdi[p]) > 1e-9;
        accuracy /= 8;  // f is never 0: ±1 ± 1.25 ± 1.5
    }
};

TEST_CASE("threesym: GOTU's parity hold-out, its MDI against brute force on the bits it reads") {
    const ThreesymByHand by_hand;
    const BooleanTask task("threesym");
    double worst = 0;
    for (uint32_t p = 0; p < BOOL_POINTS; p++) worst = std::max(worst, std::fabs(task.mdi[p] - by_hand.mdi[p & 7]));
    CHECK(worst < 1e-12);  // the bits it does not read change nothing
    CHECK(task.mdi_accuracy == by_hand.accuracy);
    CHECK(by_hand.accuracy == 0.5);  // x2 - 1.25 x0 + 1.5 x1 on the seen half, -f on the held-out one
    CHECK(task.train_size() == BOOL_POINTS / 2);
    CHECK(task.grid == 0.25);
}

// The sparsest interpolator's support, slowly and from the definition: f's seen values (0 on U) to
// coefficients by the direct sum, the span by closure, each coset's members' own t, and for every t
// the members it zeroes, by pairs; the best by (most zeros, lowest top degree left), ties joined.
// Also the count of nonzero coefficients the best t leave, summed over the cosets.
static std::vector<uint32_t> sparsest_by_hand(const std::vector<double>& f, const HoldOut& U, int n, int* nonzeros) {
    const uint32_t size = 1u << n;
    std::vector<double> v(size, 0.0);
    for (uint32_t A = 0; A < size; A++)
        for (uint32_t p = 0; p < size; p++)
            if (!U.holds(p)) v[A] += f[p] * (popcount(A & ~p) % 2 ? -1.0 : 1.0) / size;
    std::vector<std::pair<uint32_t, int>> span = {{0, 1}};
    for (const Parity& c : U.parities)
        for (size_t i = 0, count = span.size(); i < count; i++)
            span.push_back({span[i].first ^ c.product, span[i].second * c.sign});
    std::vector<bool> seen_set(size, false), in_support(size, false);
    *nonzeros = 0;
    for (uint32_t A = 0; A < size; A++) {
        if (seen_set[A]) continue;
        std::vector<double> t;
        for (const auto& [T, s] : span) {
            seen_set[A ^ T] = true;
            t.push_back(-s * v[A ^ T]);
        }
        const size_t m = t.size();
        auto zeroes = [&](size_t i, size_t j) { return std::fabs(t[i] - t[j]) <= 1e-9; };
        std::vector<int> zeros(m, 0), top(m, -1);
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < m; j++) {
                if (zeroes(i, j)) zeros[i]++;
                else top[i] = std::max(top[i], popcount(A ^ span[j].first));
            }
        size_t best = 0;
        for (size_t i = 1; i < m; i++)
            if (zeros[i] > zeros[best] || (zeros[i] == zeros[best] && top[i] < top[best])) best = i;
        for (size_t i = 0; i < m; i++) {
            if (zeros[i] != zeros[best] || top[i] != top[best]) continue;
            for (size_t j = 0; j < m; j++)
                if (!zeroes(i, j)) in_support[A ^ span[j].first] = true;
        }
        *nonzeros += (int)m - zeros[best];
    }
    std::vector<uint32_t> support;
    for (uint32_t A = 0; A < size; A++)
        if (in_support[A]) support.push_back(A);
    return support;
}

// The fewest nonzero coefficients of any function equal to f outside U, over every set of
// coefficients that some interpolator zeroes: the interpolators are c0 + N z (solve, on the seen
// points' equations), and Z can be zeroed when N's rows in Z reach -c0's (equal ranks)
static int fewest_nonzeros(const std::vector<double>& f, const HoldOut& U, int n) {
    const int size = 1 << n;
    std::vector<std::vector<double>> E;
    std::vector<double> seen_f;
    for (uint32_t p = 0; p < (uint32_t)size; p++) {
        if (U.holds(p)) continue;
        std::vector<double> row(size);
        for (uint32_t A = 0; A < (uint32_t)size; A++) row[A] = popcount(A & ~p) % 2 ? -1.0 : 1.0;
        E.push_back(row);
        seen_f.push_back(f[p]);
    }
    const Solutions all = solve(E, seen_f, size);
    auto rank = [](std::vector<std::vector<double>> M) {
        int r = 0;
        for (size_t c = 0; !M.empty() && c < M[0].size(); c++) {
            size_t pivot = r;
            for (size_t i = r; i < M.size(); i++)
                if (std::fabs(M[i][c]) > std::fabs(M[pivot][c])) pivot = i;
            if (pivot >= M.size() || std::fabs(M[pivot][c]) < 1e-9) continue;
            std::swap(M[r], M[pivot]);
            for (size_t i = 0; i < M.size(); i++)
                if (i != (size_t)r) {
                    const double m = M[i][c] / M[r][c];
                    for (size_t j = 0; j < M[i].size(); j++) M[i][j] -= m * M[r][j];
                }
            r++;
        }
        return r;
    };
    int fewest = size;
    for (uint32_t Z = 0; Z < (1u << size); Z++) {
        if (size - popcount(Z) >= fewest) continue;
        std::vector<std::vector<double>> lhs, both;
        for (int A = 0; A < size; A++) {
            if (!(Z >> A & 1)) continue;
            std::vector<double> row;
            for (const std::vector<double>& direction : all.null_space) row.push_back(direction[A]);
            lhs.push_back(row);
            row.push_back(-all.one[A]);
            both.push_back(row);
        }
        if (rank(lhs) == rank(both)) fewest = size - popcount(Z);
    }
    return fewest;
}

TEST_CASE("the sparsest interpolator: its rule against a slow one, and its count against every interpolator") {
    Rng rng(4);
    for (int trial = 0; trial < 24; trial++) {
        const int n = trial < 12 ? 3 : 4, k = 1 + trial % 2;
        const HoldOut U = random_hold_out(rng, n, k);
        std::vector<double> f(1 << n);
        for (double& v : f) v = (double)rng.below(3) - 1;  // -1, 0, 1: coefficients coincide, ties happen
        CAPTURE(trial);
        int nonzeros = 0;
        const std::vector<uint32_t> fast = sparsest_support(f, U, n), slow = sparsest_by_hand(f, U, n, &nonzeros);
        CHECK(fast == slow);
        if (n == 3) CHECK(nonzeros == fewest_nonzeros(f, U, n));
    }
    // x0 seen where x0*x1 = -1: x0 and -x1 fit it alike, and G keeps both
    CHECK(sparsest_support(values_of("x0"), parse_unseen("x0*x1=1", BOOL_BITS), BOOL_BITS) ==
          std::vector<uint32_t>{0b01, 0b10});
}

TEST_CASE("--g-from data: G from the seen data alone, the same for targets equal where seen") {
    const std::pair<std::string, std::string> same_where_seen[] = {
        {"x0*x1", "x0 + x1 - 1"},                           // 2parity's target and its MDI
        {THREESYM, "x2 - 1.25*x0 + 1.5*x1"},                // threesym's and its MDI
        {"sign(x0+x1+x2)", "sign(x0+x1+x2) + (1 - x0)*(1 - x1)*x7"}};  // maj3's, and it changed on U
    const char* holds_out[] = {"x0=-1,x1=-1", "x0*x1*x2=-1", "x0=-1,x1=-1"};
    for (int i = 0; i < 3; i++) {
        const std::string& one = same_where_seen[i].first;
        const std::string& other = same_where_seen[i].second;
        CAPTURE(one);
        const BooleanTask a(parse_boolean_target(one, holds_out[i], BOOL_BITS), G_FROM_DATA),
            b(parse_boolean_target(other, holds_out[i], BOOL_BITS), G_FROM_DATA);
        CHECK(a.g_support == b.g_support);
        CHECK(a.structure() == b.structure());
        // f's support reads f on U too: there the two differ
        CHECK(BooleanTask(parse_boolean_target(one, holds_out[i], BOOL_BITS)).structure() !=
              BooleanTask(parse_boolean_target(other, holds_out[i], BOOL_BITS)).structure());
    }
    // the named tasks: the target is its data's sparsest interpolator, and G is their own
    for (const char* name : {"2parity", "maj3", "cyclic3"}) {
        CAPTURE(name);
        const BooleanTask data(name, G_FROM_DATA), own(name);
        CHECK(data.g_support == data.support);
        if (std::string(name) != "cyclic3") CHECK(data.structure() == own.structure());
    }
    // cyclic3's hand-written G is one way; read off a support it is both ways
    const std::vector<float> one_way = BooleanTask("cyclic3").structure(), data = BooleanTask("cyclic3", G_FROM_DATA).structure();
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) CHECK(data[i * 16 + j] == std::max(one_way[i * 16 + j], one_way[j * 16 + i]));
    // threesym's data G is its MDI's: x2 - 1.25 x0 + 1.5 x1 reads each bit alone, so no two bits link
    const BooleanTask threesym("threesym", G_FROM_DATA);
    CHECK(threesym.g_support == std::vector<uint32_t>{0b001, 0b010, 0b100});
    const std::vector<float> G = threesym.structure();
    CHECK(G[0 * 16 + 1] == 1);
    CHECK(G[0 * 16 + 3] == 1);
    CHECK(G[1 * 16 + 2] == 0);
    CHECK(BooleanTask("threesym").structure()[1 * 16 + 2] == 1);  // f's support links x0 with x1
    CHECK(threesym.describe().find("(f's support gives another G)") != std::string::npos);
    CHECK(BooleanTask("maj3", G_FROM_DATA).describe().find("(f's support gives the same G)") != std::string::npos);
}

// random targets that agree outside U: the same data G, bit for bit
TEST_CASE("sparsest_support never reads f on the held-out part") {
    Rng rng(7);
    for (int trial = 0; trial < 6; trial++) {
        const HoldOut U = random_hold_out(rng, 6, 1 + trial % 3);
        std::vector<double> f(64), changed(64);
        for (int p = 0; p < 64; p++) {
            f[p] = (double)rng.below(5) - 2;
            changed[p] = U.holds(p) ? rng.uniform(-9, 9) : f[p];
        }
        CHECK(sparsest_support(f, U, 6) == sparsest_support(changed, U, 6));
    }
}

#ifndef MASKPRIOR_CUDA_EMULATION
TEST_CASE("threesym trains as its target does, its mdi_acc_cube the brute force's; --g-from in the run") {
    const std::string run = TINY + "--steps 4 --eval-every 2 --seed 5 --out " + TMP_PREFIX;
    REQUIRE(run_command(run + "threesym --task threesym --init mask").exit_code == 0);
    REQUIRE(run_command(run + "parity --task boolean --target '" + THREESYM + "' --unseen 'x0*x1*x2=-1' --init mask")
                .exit_code == 0);
    CHECK(read_file(TMP_PREFIX + "threesym/log.jsonl") == read_file(TMP_PREFIX + "parity/log.jsonl"));
    std::ifstream file(TMP_PREFIX + "parity/metrics.json");
    const nlohmann::json m = nlohmann::json::parse(file);
    CHECK(m["mdi_acc_cube"] == ThreesymByHand().accuracy);
    CHECK(m["g_from"] == "target");
    // --g-from data: another G, said in the start-up table and metrics.json; a checkpoint keeps to its G
    const CommandResult data = run_command(run + "data --task threesym --init mask --g-from data");
    REQUIRE(data.exit_code == 0);
    CHECK(data.out.find("G: --g-from data, off the seen data's sparsest") != std::string::npos);
    std::ifstream data_file(TMP_PREFIX + "data/metrics.json");
    CHECK(nlohmann::json::parse(data_file)["g_from"] == "data");
    CHECK(read_file(TMP_PREFIX + "threesym/log.jsonl") != read_file(TMP_PREFIX + "data/log.jsonl"));
    expect_error("--task threesym --init mask --g-from data --steps 6 --seed 5 --out " + TMP_PREFIX + "again --resume " +
                 TMP_PREFIX + "threesym/model.safetensors", "is a checkpoint of g_from=target; this run asks for g_from=data");
    expect_error("--task add3 --g-from data", "--g-from is for the Boolean tasks (2parity, maj3, cyclic3, threesym, boolean), not add3");
    expect_error("--task maj3 --g-from oracle", "--g-from must be one of target, data, got 'oracle'");
    expect_error("--task maj3 --init mask --mask-structure x.txt --g-from data", "--g-from chooses the task's G, and --mask-structure replaces it");
}
#endif
