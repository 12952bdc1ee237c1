// init.cuh: initialisations (DESIGN.md section 5). They fill a host copy of the flat
// parameter buffer (laid out by param_layout), which the caller uploads once.
//   default: PyTorch's defaults, as GOTU's code has them: wte, wpe ~ N(0, 1); Linear weight
//            and bias ~ U(±1/sqrt(fan_in)); LayerNorm weight 1, bias 0; mask (if any) 0.
//            Scalar encoding: wval ~ N(0, 1), drawn after everything else, and the wte rows of
//            valued tokens 0 (unused, they get no gradient and stay 0); so for one seed every
//            other weight is the same under both encodings.
//   mask:    default, then M_ij = +c where G_ij = 1 and -c elsewhere, in every layer and head.
// The mask draws no random numbers, so for one seed `default` and `mask` start from the very
// same weights: the runs differ only where the prior lives.
#pragma once
#include <string>
#include <vector>
#include "model.cuh"

inline bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

inline void init_default(const Config& c, float* params, Rng& rng) {
    // params (num_params) host memory
    const std::vector<TensorInfo> layout = param_layout(c);
    for (size_t t = 0; t < layout.size(); t++) {
        const TensorInfo& info = layout[t];
        float* p = params + info.offset;
        size_t n = info.numel * (info.per_layer ? c.L : 1);
        const std::string& name = info.name;
        if (info.field == &ParamTensors::wval) {
            continue;  // below, last
        } else if (name == "wte" || name == "wpe") {
            for (size_t i = 0; i < n; i++) p[i] = rng.normal();
        } else if (name.find("ln") != std::string::npos) {  // ln1, ln2, ln_f
            for (size_t i = 0; i < n; i++) p[i] = ends_with(name, ".weight") ? 1.0f : 0.0f;
        } else if (info.field == &ParamTensors::mask) {
            for (size_t i = 0; i < n; i++) p[i] = 0.0f;
        } else {
            // a Linear weight (out, in) has fan_in = in; its bias, listed right after it, the same
            const TensorInfo& weight = ends_with(name, ".bias") ? layout[t - 1] : info;
            float bound = 1.0f / sqrtf((float)weight.shape[1]);
            for (size_t i = 0; i < n; i++) p[i] = rng.uniform(-bound, bound);
        }
    }
    if (c.encoding == ENCODING_SCALAR) {
        if ((int)c.token_value.size() != c.V) fail("scalar encoding needs a value per token (internal)");
        ParamTensors p = param_bind(c, params);
        for (int i = 0; i < c.C; i++) p.wval[i] = rng.normal();
        for (int v = 0; v < c.V; v++)
            if (c.token_value[v] != 0.0f)
                for (int i = 0; i < c.C; i++) p.wte[(size_t)v * c.C + i] = 0.0f;
    }
}

// Writes ±c into every layer's mask from the (T,T) structure G (0/1).
inline void init_mask_from_structure(const Config& c, float* params, const std::vector<float>& G, float mask_c) {
    if (c.mask_heads == 0) fail("the mask init needs a mask (internal: mask_heads is 0)");
    if ((int)G.size() != c.T * c.T) fail("structure G has %zu entries, expected T*T = %d", G.size(), c.T * c.T);
    float* mask = param_bind(c, params).mask;  // (L, mask_heads, T, T)
    for (int lh = 0; lh < c.L * c.mask_heads; lh++)
        for (int ij = 0; ij < c.T * c.T; ij++) mask[(size_t)lh * c.T * c.T + ij] = G[ij] != 0 ? mask_c : -mask_c;
}
