// prior/inits.cuh: every --init in one table: its name, what it does in a line, what it uses, and
// the function that applies it. --help, the flag checks, `maskprior --list inits` and the Python
// tools take the names from here (docs/method.md, "The inits", explains each).
//
// How a run applies one (run/setup.cuh, initialise): the default weights of the task's family
// (init_default); wpe times --pe-scale (the init's pe_scale unless the flag is given; 1 leaves it
// as drawn); then an init that needs no first-attention inputs writes what it owns; then
// the inputs E are taken from the model's own forward pass on sample examples; then an init that
// needs them (INIT_USES_INPUTS) writes its weights. So for one seed every init has the same
// default weights underneath, and the runs differ only in what the init writes.
//
// To add an init: write its function (here, or in a file of its own in prior/) with the signature
// of InitKind::apply, and add its line to INITS.
#pragma once
#include <cstdio>
#include <iterator>
#include <string>
#include "prior/impulse.cuh"    // init_impulse, impulse_structure
#include "prior/init.cuh"       // init_mask_*, init_qk_*, init_mimetic, AttentionInputs
#include "prior/structure.h"    // Structure

// What an init reads and writes.
struct InitContext {
    Model& model;                // its config; qk-opt trains through its layers, on its device
    float* params;               // (num_params) host copy of the parameters, default weights in it
    Rng& rng;                    // the seed's generator, after the default weights
    const Structure& G;          // the prior's structure
    float mask_c;                // the prior's strength c (--mask-c)
    bool alibi;                  // --mask-prior alibi: the mask is ALiBi's distance bias
    int qk_opt_steps;            // --qk-opt-steps
    const AttentionInputs* E;    // the first attention's inputs: set for INIT_USES_INPUTS only
    std::string note = "";       // out: how the init was fitted, for the startup table
};

enum InitUses : unsigned {
    INIT_USES_MASK = 1,       // the model gets a mask M (Config::mask_heads > 0)
    INIT_USES_STRUCTURE = 2,  // reads G and c (--mask-structure, --mask-c, --prior-layers apply)
    INIT_USES_INPUTS = 4,     // reads the first attention's inputs E
    INIT_IMAGES_ONLY = 8,     // for the image tasks only
};

struct InitKind {
    const char* name;
    const char* help;  // one line for --help and --list inits
    unsigned uses;     // InitUses
    void (*apply)(InitContext&);
    float pe_scale = 1.0f;  // --pe-scale when the flag is not given: wpe's factor before the init
    Structure (*own_structure)(const Config&) = nullptr;  // what the step-0 check measures beside G
};

inline void apply_default(InitContext&) {}

inline void apply_qk_svd(InitContext& x) {
    init_qk_svd(x.model.cfg, x.params, *x.E, x.G, x.mask_c);
    x.note = "closed form from " + std::to_string(x.E->distinct.rows) + " distinct first-attention inputs";
}

inline void apply_qk_opt(InitContext& x) {
    const QkFit fit = init_qk_opt(x.model, x.params, *x.E, x.G, x.mask_c, x.qk_opt_steps);
    char note[96];
    snprintf(note, sizeof note, "Adam fit, %d steps: KL(P||A) %.4f -> %.6f", x.qk_opt_steps, fit.kl_start, fit.kl_end);
    x.note = note;
}

inline void apply_mimetic(InitContext& x) { init_mimetic(x.model.cfg, x.params, x.rng); }

inline void apply_impulse(InitContext& x) { init_impulse(x.model.cfg, x.params, x.rng); }

inline void apply_mask(InitContext& x) {
    if (x.alibi) init_mask_alibi(x.model.cfg, x.params, x.mask_c);
    else init_mask_from_structure(x.model.cfg, x.params, x.G, x.mask_c);
}

// In the order the tables and plots show them: the baseline, the priors in the query/key weights,
// the mask.
inline const InitKind INITS[] = {
    {"default", "no mask: the task family's default weights (docs/method.md)", 0, apply_default},
    {"qk-svd", "the prior in Wq, Wk in closed form (pseudo-inverse + SVD); no mask",
     INIT_USES_STRUCTURE | INIT_USES_INPUTS, apply_qk_svd},
    {"qk-opt", "the prior in Wq, Wk fitted by Adam through attention; no mask",
     INIT_USES_STRUCTURE | INIT_USES_INPUTS, apply_qk_opt},
    {"mimetic", "Wq^T Wk ≈ 0.7 Z + 0.7 I, per layer Wv^T Wo^T = 0.4 Z - 0.4 I; no G", 0, apply_mimetic},
    {"impulse", "images: each head one offset of a 3x3 convolution, wpe x18; no G", INIT_IMAGES_ONLY,
     apply_impulse, 18.0f, impulse_structure},
    {"mask", "M = ±c from the task's G (or ALiBi-shaped: --mask-prior)", INIT_USES_MASK | INIT_USES_STRUCTURE,
     apply_mask},
};

// The init named `name`, or nullptr
inline const InitKind* find_init(const std::string& name) {
    for (const InitKind& kind : INITS)
        if (name == kind.name) return &kind;
    return nullptr;
}

// The names of the inits that use all of `uses`: "mask", "qk-svd, qk-opt or mask"
inline std::string init_names(unsigned uses) {
    std::string names, last;
    for (const InitKind& kind : INITS) {
        if ((kind.uses & uses) != uses) continue;
        if (!last.empty()) names += (names.empty() ? "" : ", ") + last;
        last = kind.name;
    }
    return names.empty() ? last : names + " or " + last;
}
