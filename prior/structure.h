// prior/structure.h: the prior's structure G, which keys each query may attend to, and the two
// things every structured init and every measurement derive from it (docs/method.md):
//   - the target pattern P = softmax_rows(c·G), where all three structured inits start;
//   - the prior mass of an attention map: the mean weight its queries put on G's keys
//     (attention_mass_where_allowed: over the queries G gives a key).
// G is one (T,T) matrix of 0/1 for every head, or one per head (NH,T,T). A task gives one
// (Task::structure); --mask-structure reads one from a text file; prior/wrong_prior.h makes one
// wrong on purpose. Host only.
#pragma once
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include "layers/errors.h"  // fail()

struct Structure {
    int heads = 1, T = 0;
    std::vector<float> g;      // (heads,T,T) of 0/1
    std::vector<float> truth;  // (heads,T,T) G before --prior-noise, --prior-drop made it wrong; else empty
    const float* head(int h) const { return g.data() + (size_t)(heads == 1 ? 0 : h) * T * T; }
    bool made_wrong() const { return !truth.empty(); }
    Structure true_structure() const { return {heads, T, truth}; }  // the right G of a wrong one
};

// G from a text file: T*T numbers (one G for every head) or NH*T*T (one per head), each 0 or 1,
// separated by white space; '#' starts a comment to the end of the line. Throws InputError
// naming the file (and the line) when the file is missing, holds another token, or has the
// wrong count.
inline Structure read_structure(const std::string& path, int T, int NH) {
    std::ifstream f(path);
    if (!f) fail("cannot read --mask-structure file %s", path.c_str());
    Structure G;
    G.T = T;
    std::string line, word;
    for (int line_no = 1; std::getline(f, line); line_no++) {
        std::istringstream words(line.substr(0, line.find('#')));
        while (words >> word) {
            if (word != "0" && word != "1")
                fail("%s line %d: '%s' is not 0 or 1", path.c_str(), line_no, word.substr(0, 40).c_str());
            G.g.push_back(word == "1" ? 1.0f : 0.0f);
        }
    }
    if (G.g.size() == (size_t)T * T) G.heads = 1;
    else if (G.g.size() == (size_t)NH * T * T) G.heads = NH;
    else fail("%s has %zu entries; this task needs T*T = %d (or NH*T*T = %d)", path.c_str(), G.g.size(), T * T,
              NH * T * T);
    return G;
}

// P_h = softmax_rows(c·G_h), the pattern the structured inits aim at: the mask init's own
// pattern when the QK logits are zero, because log σ(c) - log σ(-c) = c. (T,T)
inline std::vector<double> prior_pattern(const Structure& G, int h, float mask_c, bool causal) {
    const int T = G.T;
    std::vector<double> P((size_t)T * T, 0.0);
    for (int i = 0; i < T; i++) {
        const int last = causal ? i : T - 1;
        double sum = 0;
        for (int j = 0; j <= last; j++) sum += P[i * T + j] = std::exp(mask_c * G.head(h)[i * T + j]);
        for (int j = 0; j <= last; j++) P[i * T + j] /= sum;
    }
    return P;
}

// Prior mass: the mean attention weight that a query puts on the keys its structure G allows,
// averaged over batch, heads and queries. att on the host.
inline double attention_prior_mass(const float* att, const Structure& G, int B, int NH, int T) {
    // att (B,NH,T,T)
    double total = 0;
    for (size_t r = 0; r < (size_t)B * NH * T; r++) {
        const float* g_row = G.head((int)(r / T % NH)) + (r % T) * T;  // G_i,: of this row's head and query
        for (int j = 0; j < T; j++) total += att[r * T + j] * g_row[j];
    }
    return total / ((double)B * NH * T);
}

// The same mean over the queries that G lets attend to some key (a row with a 1) only: for a
// structure that leaves queries without a key, as the impulse heads' offsets at the grid's edge.
inline double attention_mass_where_allowed(const float* att, const Structure& G, int B, int NH, int T) {
    // att (B,NH,T,T)
    double total = 0;
    size_t counted = 0;
    for (size_t r = 0; r < (size_t)B * NH * T; r++) {
        const float* g_row = G.head((int)(r / T % NH)) + (r % T) * T;
        double mass = 0, keys = 0;
        for (int j = 0; j < T; j++) { mass += att[r * T + j] * g_row[j]; keys += g_row[j]; }
        if (keys > 0) { total += mass; counted++; }
    }
    return counted ? total / counted : 0.0;
}
