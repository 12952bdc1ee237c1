// prior/persistence.cuh: does the prior stay where it was put? (docs/method.md, "Measuring
// persistence"). Besides the prior mass (prior/structure.h, measured during evaluation), per
// layer:
//   mask_drift      ||log σ(M_t) - log σ(M_0)|| / ||log σ(M_0)||        (layers with a mask)
//   qk_cosine       cos(S_t, S_0), S = (E Wq^T + bq)(E Wk^T + bk)^T / sqrt(HS) for every head,
//                   on the fixed step-0 rows E of the first attention's input (prior/init.cuh), so it
//                   follows the QK weights alone: 1 while they keep their step-0 pattern
//   grad_norm_mask  ||dL/dM|| of the last training step                  (layers with a mask)
//   grad_norm_qk    ||dL/d(Wq, bq, Wk, bk)|| of the last training step
// Entries that do not apply to a layer are NaN, written as null in the JSON files.
// Computed on the host, from copies of the parameters and gradients read back from the device.
#pragma once
#include <cmath>
#include <vector>
#include "model.cuh"       // Model, param_bind, block_params, log_sigmoid (attention.cuh)
#include "prior/linalg.h"  // Matrix

struct PersistenceReference {
    std::vector<float> params0;  // (num_params) the parameters at step 0
    Matrix E;                    // (n,C) distinct rows of the first attention's input at step 0
};

struct Persistence {
    std::vector<double> mask_drift, qk_cosine, grad_norm_mask, grad_norm_qk;  // (L) each
};

// S of every head of layer l on the rows E, heads one after another: (NH, n, n)
inline std::vector<double> qk_logits(const Config& c, const float* params, int l, const Matrix& E) {
    const BlockParams block = block_params(c, param_bind(c, (float*)params), l);
    const float* w = block.qkvw;  // (3·NH·HS, C)
    const float* b = block.qkvb;  // (3·NH·HS)
    const int n = E.rows;
    Matrix q(n, c.attention_width()), k(n, c.attention_width());  // every head's q and k of every row
    for (int r = 0; r < n; r++)
        for (int o = 0; o < c.attention_width(); o++) {
            double sq = b[o], sk = b[c.attention_width() + o];
            for (int i = 0; i < c.C; i++) {
                sq += E(r, i) * w[(size_t)o * c.C + i];
                sk += E(r, i) * w[(size_t)(c.attention_width() + o) * c.C + i];
            }
            q(r, o) = sq;
            k(r, o) = sk;
        }
    std::vector<double> S((size_t)c.NH * n * n);
    for (int h = 0; h < c.NH; h++)
        for (int a = 0; a < n; a++)
            for (int bb = 0; bb < n; bb++) {
                double dot = 0;
                for (int d = 0; d < c.HS; d++) dot += q(a, h * c.HS + d) * k(bb, h * c.HS + d);
                S[((size_t)h * n + a) * n + bb] = dot / std::sqrt((double)c.HS);
            }
    return S;
}

inline double cosine(const std::vector<double>& x, const std::vector<double>& y) {
    double xy = 0, xx = 0, yy = 0;
    for (size_t i = 0; i < x.size(); i++) {
        xy += x[i] * y[i];
        xx += x[i] * x[i];
        yy += y[i] * y[i];
    }
    return xy / std::sqrt(xx * yy);
}

// sqrt of the sum of squares of n floats at p
inline double l2_norm(const float* p, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)p[i] * p[i];
    return std::sqrt(s);
}

inline Persistence persistence_metrics(const Model& model, const PersistenceReference& ref) {
    const Config& c = model.cfg;
    const std::vector<float> params = model_download(model, model.params_mem);
    const std::vector<float> grads = model_download(model, model.grads_mem);
    const ParamTensors p = param_bind(c, (float*)params.data()), p0 = param_bind(c, (float*)ref.params0.data());
    const ParamTensors g = param_bind(c, (float*)grads.data());
    const size_t TT = (size_t)c.T * c.T, qk_rows = 2 * (size_t)c.attention_width();
    Persistence out;
    for (int l = 0; l < c.L; l++) {
        double drift = NAN, mask_grad = NAN;
        if (c.layer_has_mask(l)) {
            const size_t begin = (size_t)l * c.mask_heads * TT, n = c.mask_heads * TT;
            double diff = 0, base = 0;
            for (size_t i = begin; i < begin + n; i++) {
                double now = log_sigmoid((double)p.mask[i]), then = log_sigmoid((double)p0.mask[i]);
                diff += (now - then) * (now - then);
                base += then * then;
            }
            drift = std::sqrt(diff / base);
            mask_grad = l2_norm(g.mask + begin, n);
        }
        out.mask_drift.push_back(drift);
        out.grad_norm_mask.push_back(mask_grad);
        out.qk_cosine.push_back(cosine(qk_logits(c, params.data(), l, ref.E),
                                       qk_logits(c, ref.params0.data(), l, ref.E)));
        // q and k are the first 2·NH·HS rows of the layer's qkv weight and bias
        const BlockParams dblock = block_params(c, g, l);
        double w = l2_norm(dblock.qkvw, qk_rows * c.C);
        double b = l2_norm(dblock.qkvb, qk_rows);
        out.grad_norm_qk.push_back(std::sqrt(w * w + b * b));
    }
    return out;
}
