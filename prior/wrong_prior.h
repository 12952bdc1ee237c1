// prior/wrong_prior.h: a prior made wrong on purpose (docs/method.md, "A wrong prior"), to
// measure what learning the mask does when the G a user writes is partly wrong, as any
// hand-written prior will be:
//   --prior-drop K   removes K of the edges the target needs (Task::needed_edges: for maj3 the
//                    links between CLS and x0, x1, x2), K drawn from them;
//   --prior-noise P  then flips round(P·n) of the n entries of G that can matter: those off the
//                    diagonal, and for a causal model only those below it (the keys after a
//                    query are hidden anyway). Where a head's G is symmetric (G = Gᵀ) the entries
//                    flip in pairs, (i, j) with (j, i), n counting the pairs, so G stays symmetric.
// Both draw from Rng(--prior-seed), by default the run's seed, and from nothing else: every init
// of one seed gets the same wrong G. The picks are the first k of a seeded shuffle, so on one
// seed a smaller P flips a subset of what a larger P flips. The G that the inits get carries
// the true one (Structure::truth), on which each evaluation also measures the prior mass
// (prior_mass_true), so that a log shows whether a learnable mask moves off the wrong edges.
// Host only.
#pragma once
#include <cmath>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>
#include "layers/errors.h"    // fail()
#include "layers/rng.h"       // Rng: the draws come from --prior-seed alone
#include "prior/structure.h"  // Structure
#include "tasks/task.h"       // PriorEdge

struct WrongPrior {
    double noise = 0;   // --prior-noise P: the fraction of G's entries that can matter to flip
    int drop = 0;       // --prior-drop K: the edges the target needs to remove
    uint64_t seed = 0;  // --prior-seed
    bool on() const { return noise > 0 || drop > 0; }
};

// The first k of a seeded shuffle of 0 .. n-1 (Fisher-Yates, stopped after k swaps): k distinct
// picks, each k-subset equally likely, and the picks for k a prefix of those for any larger k.
inline std::vector<int> seeded_picks(int n, int k, Rng& rng) {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    for (int i = 0; i < k; i++) std::swap(order[i], order[i + rng.below(n - i)]);
    order.resize(k);
    return order;
}

inline bool head_is_symmetric(const Structure& G, int h) {
    const float* g = G.head(h);  // (T,T)
    for (int i = 0; i < G.T; i++)
        for (int j = 0; j < i; j++)
            if (g[i * G.T + j] != g[j * G.T + i]) return false;
    return true;
}

// truth made wrong as `wrong` says (needed: the task's edges the target needs; causal: the
// model hides the keys after each query). The result carries truth in Structure::truth.
inline Structure make_prior_wrong(const Structure& truth, const WrongPrior& wrong, const std::vector<PriorEdge>& needed,
                                  bool causal) {
    const int T = truth.T;
    Structure G = truth;
    G.truth = truth.g;
    Rng rng(wrong.seed);
    if (wrong.drop > (int)needed.size())
        fail("--prior-drop %d: the task's target needs %zu edges of G, so at most %zu can be dropped", wrong.drop,
             needed.size(), needed.size());
    for (int e : seeded_picks((int)needed.size(), wrong.drop, rng))
        for (const auto& [query, key] : needed[e])
            for (int h = 0; h < G.heads; h++) G.g[((size_t)h * T + query) * T + key] = 0.0f;
    if (wrong.noise <= 0) return G;
    for (int h = 0; h < G.heads; h++) {
        const bool pairs = !causal && head_is_symmetric(truth, h);
        std::vector<std::pair<int, int>> candidates;  // (query, key); in pairs: the upper entry of each pair
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++)
                if (causal ? j < i : pairs ? j > i : j != i) candidates.push_back({i, j});
        const int flips = (int)std::lround(wrong.noise * candidates.size());
        float* g = G.g.data() + (size_t)h * T * T;  // (T,T)
        for (int c : seeded_picks((int)candidates.size(), flips, rng)) {
            const auto [i, j] = candidates[c];
            g[i * T + j] = 1.0f - g[i * T + j];
            if (pairs) g[j * T + i] = g[i * T + j];
        }
    }
    return G;
}

// How many entries of G differ from its truth (0 for a G that was not made wrong)
inline int wrong_entries(const Structure& G) {
    int n = 0;
    for (size_t k = 0; k < G.truth.size(); k++) n += G.g[k] != G.truth[k];
    return n;
}
