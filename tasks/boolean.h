// tasks/boolean.h: the Boolean GOTU tasks (Abbe, Bengio, Lotfi, Rizk, ICML 2023): a target f on the
// cube of 15 bits and a part of it held out of training. Inputs x in {-1,+1}^15 as tokens
// [CLS, x0..x14] (T = 16): bit b is token (b+1)/2 and CLS is token 2. Train on the seen domain
// only (the cube outside the held-out part); evaluate on the whole cube of 2^15 points.
//
//   task      f(x)                          unseen domain      G (mask structure)
//   2parity   x0*x1                         x0 = x1 = -1       read off f: {CLS,x0,x1} all pairs; self
//   maj3      sign(x0+x1+x2)                x0 = x1 = -1       read off f: {CLS,x0,x1,x2} all pairs; self
//   cyclic3   x0*x1*x2 + ... + x14*x0*x1    x0 = x1 = x2 = -1  by hand: CLS with all; x_i -> x_{i+1}, x_{i+2}
//   threesym  x0*x1 - 1.25*x1*x2            x0*x1*x2 = -1      read off f: {CLS,x0,x1,x2} all pairs; self
//               + 1.5*x2*x0
//   boolean   --target EXPR                 --unseen COND      read off f's Fourier support
//
// Every one is a target written as text and parsed (tasks/boolean_target.h): the named tasks are
// the general one with their own text. From f's Fourier coefficients (tasks/walsh.h) come its
// min-degree interpolator (MDI), the lowest-degree function equal to f on the seen domain, which
// a transformer tends to drift to on the unseen part (tasks/holdout.h), and G: CLS and every bit
// f reads attend to each other, bits that share a monomial of f attend to each other, every token
// to itself. That G reads f on the held-out part too; --g-from data reads it off the seen data's
// sparsest interpolator instead. The MDI's sign accuracy over the cube: 75.00% (2parity), 87.50%
// (maj3), 92.83% (cyclic3), 50.00% (threesym).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include "tasks/boolean_target.h"  // BooleanTarget, parse_boolean_target
#include "tasks/task.h"            // Task, Metrics, PriorEdge, GatheringScorer
#include "tasks/holdout.h"         // mdi_coefficients, sparsest_support
#include "tasks/walsh.h"           // fourier_coefficients, fourier_support, structure_from_support

constexpr int BOOL_BITS = 15;
constexpr int BOOL_POINTS = 1 << BOOL_BITS;  // 32768
constexpr int BOOL_CLS = 2;                  // token id of CLS

inline double sign_of(double v) { return v > 0 ? 1 : (v < 0 ? -1 : 0); }

// cyclic3's G, by hand: bit x_i attends to the keys of its own monomial, x_i, x_{i+1}, x_{i+2},
// one way; CLS with every token, both ways. Measured, this directed G fits cyclic3 better than
// the symmetric one read off f (docs/results.md).
inline std::vector<float> cyclic3_structure() {
    const int T = BOOL_BITS + 1;
    std::vector<float> G(T * T, 0.0f);
    for (int t = 0; t < T; t++) G[t * T + t] = G[t] = G[t * T] = 1.0f;
    for (int i = 0; i < BOOL_BITS; i++)
        for (int ahead : {1, 2}) G[(1 + i) * T + 1 + (i + ahead) % BOOL_BITS] = 1.0f;
    return G;
}

// The edges of cyclic3's G its target needs: each bit's links to the other keys of its monomial,
// x_i -> x_{i+1} and x_i -> x_{i+2} (30 edges, one way, as G has them)
inline std::vector<PriorEdge> cyclic3_needed_edges() {
    std::vector<PriorEdge> edges;
    for (int i = 0; i < BOOL_BITS; i++)
        for (int ahead : {1, 2}) edges.push_back({{1 + i, 1 + (i + ahead) % BOOL_BITS}});
    return edges;
}

// The named tasks: a target, a held-out part, and where G and its needed edges are written by
// hand (nullptr: read off f, as for any target)
struct NamedBooleanTask {
    const char* name;
    const char* target;
    const char* unseen;
    std::vector<float> (*structure)();
    std::vector<PriorEdge> (*needed_edges)();
};

inline const NamedBooleanTask NAMED_BOOLEAN_TASKS[] = {
    {"2parity", "x0*x1", "x0=-1,x1=-1", nullptr, nullptr},
    {"maj3", "sign(x0+x1+x2)", "x0=-1,x1=-1", nullptr, nullptr},
    {"cyclic3",
     "x0*x1*x2 + x1*x2*x3 + x2*x3*x4 + x3*x4*x5 + x4*x5*x6 + x5*x6*x7 + x6*x7*x8 + x7*x8*x9 + x8*x9*x10 + "
     "x9*x10*x11 + x10*x11*x12 + x11*x12*x13 + x12*x13*x14 + x13*x14*x0 + x14*x0*x1",
     "x0=-1,x1=-1,x2=-1", cyclic3_structure, cyclic3_needed_edges},
    // GOTU's f_1 (aryol/GOTU, examples.py): seen where x0 x1 x2 = 1, so half the cube is held out
    {"threesym", "x0*x1 - 1.25*x1*x2 + 1.5*x2*x0", "x0*x1*x2=-1", nullptr, nullptr},
};

// Where G comes from (--g-from): f's Fourier support, or a named task's own G (target, the
// default: it reads f on the held-out part too, as the paper's hand-written G does); or the
// support of the seen data's sparsest interpolator (data: sparsest_support, never f on U)
enum GSource { G_FROM_TARGET, G_FROM_DATA };

inline const NamedBooleanTask& named_boolean_task(const std::string& name) {
    for (const NamedBooleanTask& task : NAMED_BOOLEAN_TASKS)
        if (name == task.name) return task;
    throw std::invalid_argument("unknown Boolean task " + name);
}

// The readout's grid: exact_cube rounds a prediction to the nearest multiple of it. 1 for a
// target with integer values (every named task: round(y) == f), else the largest 2^-k, k <= 10,
// of which every value is a multiple (0.5 for x0 + 0.5*x1); 0 when there is none (0.1*x0).
inline double readout_grid(const std::vector<double>& values) {
    for (int k = 0; k <= 10; k++) {
        bool fits = true;
        for (double v : values) fits = fits && std::nearbyint(std::ldexp(v, k)) == std::ldexp(v, k);
        if (fits) return std::ldexp(1.0, -k);
    }
    return 0;
}

struct BooleanTask : Task {
    BooleanTarget target;         // f's text and values, the held-out part
    std::vector<double> mdi;      // (2^15) the min-degree interpolator at every cube point
    std::vector<uint32_t> support;  // f's Fourier support: the monomials of nonzero coefficient, as bit masks
    GSource g_from = G_FROM_TARGET;
    std::vector<uint32_t> g_support;  // the support G is read off: f's, or the seen data's sparsest interpolator's
    std::vector<int> seen;        // cube points of the training domain, ascending
    std::vector<float> (*own_structure)() = nullptr;        // G by hand (cyclic3), else read off a support
    std::vector<PriorEdge> (*own_needed_edges)() = nullptr;
    bool sign_readout = false;    // f is ±1 everywhere: read by its sign (acc_cube)
    double grid = 1;              // exact_cube's rounding (readout_grid)
    int zero_points = 0, zero_unseen = 0;  // points where f = 0, left out of the sign metrics
    double mdi_accuracy = 0;      // the MDI's sign accuracy over the cube's points where f != 0
    double mdi_accuracy_unseen = 0;  // ... over the unseen points where f != 0 (NaN where there is none)

    // A named task: 2parity, maj3, cyclic3 or threesym; --g-from data reads G off its data instead
    // of its own G
    explicit BooleanTask(const std::string& task_name, GSource g = G_FROM_TARGET)
        : BooleanTask(task_name, named_boolean_task(task_name), g) {}
    // --task boolean: a target parsed from the command line (parse_boolean_target)
    explicit BooleanTask(const BooleanTarget& any, GSource g = G_FROM_TARGET) { set_up("boolean", any, g); }

    static void cube_tokens(int p, int* tokens) {
        tokens[0] = BOOL_CLS;
        for (int i = 0; i < BOOL_BITS; i++) tokens[i + 1] = (p >> i) & 1;
    }

    int train_size() const override { return (int)seen.size(); }
    void train_example(int index, uint64_t, const ExampleSlot& out) const override {  // no draw: no choices
        cube_tokens(seen[index], out.tokens);
        *out.targets = (float)target.values[seen[index]];
    }
    int eval_size() const override { return BOOL_POINTS; }
    void eval_example(int index, const ExampleSlot& out) const override {
        cube_tokens(index, out.tokens);
        *out.targets = (float)target.values[index];
    }
    // the metrics compare the whole cube with the MDI: gathered, then evaluate()
    std::unique_ptr<Scorer> scorer() const override {
        return std::make_unique<GatheringScorer<BooleanTask>>(*this, 1);
    }

    // outputs (32768): the prediction at every cube point, in point order. The sign metrics
    // (acc_cube, acc_unseen, mdi_acc_cube) count the points where f != 0; acc_unseen is NaN
    // (null in the logs) when f is 0 on the whole unseen part, exact_cube when f has no grid.
    Metrics evaluate(const std::vector<float>& outputs) const {
        double correct = 0, correct_unseen = 0, exact = 0, se = 0, se_unseen = 0, closer_to_mdi = 0;
        double mdi_correct = 0;
        int unseen = 0, signed_points = 0, signed_unseen = 0;
        for (int p = 0; p < BOOL_POINTS; p++) {
            double y = outputs[p], f = target.values[p], g = mdi[p];
            const bool has_sign = f != 0, right = sign_of(y) == sign_of(f);
            if (has_sign) {
                signed_points++;
                correct += right;
                mdi_correct += sign_of(g) == sign_of(f);
            }
            exact += std::round(y / grid) * grid == f;
            se += (y - f) * (y - f);
            if (target.unseen.holds(p)) {
                unseen++;
                if (has_sign) {
                    signed_unseen++;
                    correct_unseen += right;
                }
                se_unseen += (y - f) * (y - f);
                closer_to_mdi += std::fabs(y - g) < std::fabs(y - f);
            }
        }
        const double no_value = std::numeric_limits<double>::quiet_NaN();
        return {{"acc_cube", correct / signed_points},
                {"acc_unseen", signed_unseen > 0 ? correct_unseen / signed_unseen : no_value},
                {"exact_cube", grid > 0 ? exact / BOOL_POINTS : no_value},
                {"mse_cube", se / BOOL_POINTS},
                {"mse_unseen", se_unseen / unseen},
                {"mdi_agreement", closer_to_mdi / unseen},
                {"mdi_acc_cube", mdi_correct / signed_points}};
    }

    // G over positions [CLS, x0..x14]: position 0 is CLS, position i+1 is bit x_i; row = query.
    // Read off g_support (structure_from_support), or the named task's own.
    std::vector<float> structure() const override {
        return own_structure ? own_structure() : structure_from_support(g_support, BOOL_BITS);
    }

    // The edges of G the target needs (docs/method.md, "A wrong prior"): the links between CLS and
    // each bit g_support reads (each both ways; maj3's 3, 2parity's 2), or the named task's own
    // (cyclic3's 30)
    std::vector<PriorEdge> needed_edges() const override {
        if (own_needed_edges) return own_needed_edges();
        std::vector<PriorEdge> edges;
        const uint32_t read = support_bits(g_support);
        for (int bit = 0; bit < BOOL_BITS; bit++)
            if (read >> bit & 1) edges.push_back({{0, 1 + bit}, {1 + bit, 0}});
        return edges;
    }

    // The start-up table's lines: the target, its hold-out, the readout, f's support and G
    std::string describe() const override {
        std::string lines = "f = " + shown_text(target.text) + "\n";
        lines += "unseen " + shown_text(target.unseen_text) + ": " +
                 std::to_string(target.unseen.points(BOOL_BITS)) + " points held out\n";
        char line[120];
        const double mdi_percent = 100 * mdi_accuracy;
        if (sign_readout) snprintf(line, sizeof line, "readout: sign (f is ±1); MDI cube acc %.2f%%", mdi_percent);
        else if (grid > 0)
            snprintf(line, sizeof line, "readout: value, exact_cube to %g; MDI cube acc %.2f%%", grid, mdi_percent);
        else snprintf(line, sizeof line, "readout: value, no exact_cube; MDI cube acc %.2f%%", mdi_percent);
        lines += std::string(line) + "\n";
        int degree = 0;
        for (uint32_t A : support) degree = std::max(degree, popcount(A));
        snprintf(line, sizeof line, "Fourier support: %zu monomial%s, degree <= %d, %d bits", support.size(),
                 support.size() == 1 ? "" : "s", degree, popcount(support_bits(support)));
        lines += std::string(line) + "\n";
        if (g_from == G_FROM_DATA) {
            degree = 0;
            for (uint32_t A : g_support) degree = std::max(degree, popcount(A));
            snprintf(line, sizeof line, "G: --g-from data, off the seen data's sparsest\ninterpolator: %zu monomial%s, "
                     "degree <= %d, %d bits\n", g_support.size(), g_support.size() == 1 ? "" : "s", degree,
                     popcount(support_bits(g_support)));
            lines += line;
            lines += structure_from_support(support, BOOL_BITS) == structure() ? "(f's support gives the same G)"
                                                                               : "(f's support gives another G)";
        } else {
            lines += own_structure ? "G: by hand (one way: docs/method.md)" : "G: read off f's support (--g-from target)";
        }
        if (zero_points == 0) return lines;
        snprintf(line, sizeof line, "\nf = 0 on %d points (%d unseen): not in sign metrics", zero_points, zero_unseen);
        return lines + line;
    }

    // token 0 is the bit -1, token 1 the bit +1, CLS has no value
    std::vector<float> token_values() const override { return {-1.0f, 1.0f, 0.0f}; }

private:
    // f's MDI, support, G's support, seen domain and readout, from the parsed target
    void set_up(const std::string& task_name, const BooleanTarget& parsed, GSource g) {
        if (parsed.bits != BOOL_BITS) throw std::logic_error("a Boolean task has 15 bits");
        name = task_name;
        target = parsed;
        vocab = 3;
        seq_len = BOOL_BITS + 1;
        outputs = 1;
        const std::vector<double>& f = target.values;
        const std::vector<double> f_hat = fourier_coefficients(f, BOOL_BITS);
        const std::vector<double> mdi_hat = mdi_coefficients(f_hat, target.unseen);
        mdi = from_fourier(mdi_hat, BOOL_BITS);
        // |MDI(p)| <= Σ|ĝ|, and the transform's rounding is at most about 15·2^-52 of that: a value
        // within 1e-12 of it is a 0 that rounding moved, and takes no sign in mdi_acc_cube
        double scale = 0;
        for (double c : mdi_hat) scale += std::fabs(c);
        for (double& value : mdi)
            if (std::fabs(value) <= 1e-12 * scale) value = 0;
        support = fourier_support(f_hat);
        g_from = g;
        g_support = g == G_FROM_DATA ? sparsest_support(f, target.unseen, BOOL_BITS) : support;
        sign_readout = true;
        int mdi_correct = 0, mdi_correct_unseen = 0;
        for (int p = 0; p < BOOL_POINTS; p++) {
            const bool unseen = target.unseen.holds(p), right = f[p] != 0 && sign_of(mdi[p]) == sign_of(f[p]);
            if (!unseen) seen.push_back(p);
            sign_readout = sign_readout && (f[p] == 1 || f[p] == -1);
            zero_points += f[p] == 0;
            zero_unseen += f[p] == 0 && unseen;
            mdi_correct += right;
            mdi_correct_unseen += right && unseen;
        }
        grid = readout_grid(f);
        mdi_accuracy = (double)mdi_correct / (BOOL_POINTS - zero_points);
        const int signed_unseen = target.unseen.points(BOOL_BITS) - zero_unseen;
        mdi_accuracy_unseen = signed_unseen > 0 ? (double)mdi_correct_unseen / signed_unseen
                                                : std::numeric_limits<double>::quiet_NaN();
    }

    BooleanTask(const std::string& task_name, const NamedBooleanTask& named, GSource g) {
        set_up(task_name, parse_boolean_target(named.target, named.unseen, BOOL_BITS), g);
        if (g == G_FROM_DATA) return;  // G read off the data, as for any target
        own_structure = named.structure;
        own_needed_edges = named.needed_edges;
    }
};
