// prior/init.cuh: the initialisations (docs/method.md, "The inits"). They fill a host copy of
// the flat parameter buffer (laid out by param_layout), which the caller uploads.
//   default: PyTorch's defaults, as GOTU's code has them: wte, wpe ~ N(0, 1); Linear weight
//            and bias ~ U(±1/sqrt(fan_in)); LayerNorm weight 1, bias 0; mask (if any) 0.
//            Scalar encoding: wval ~ N(0, 1), drawn after everything else, and the wte rows of
//            valued tokens 0 (unused, they get no gradient and stay 0); so for one seed every
//            other weight is the same under both encodings.
//            Images, as the impulse init's authors train a ViT (timm, weight_init=skip): the
//            patch embedding and every Linear keep U(±1/sqrt(fan_in)) (a Conv2d's default is the
//            same bound, fan_in = channels·P·P); position embedding N(0, 0.02²); CLS token 0.
//            Language models (WEIGHTS_GPT2), as GPT-2 and nanoGPT: every Linear weight and both
//            embeddings N(0, 0.02²), the residual projections (attn.proj, mlp.proj) N(0, (0.02/sqrt(2L))²)
//            so that the residual stream's variance does not grow with depth; biases 0.
//   mask:    default, then M_ij = +c where G_ij = 1 and -c elsewhere; or the ALiBi-shaped distance
//            prior (init_mask_alibi: log σ(M_ij) = -m_h (i - j), one slope per head).
//   qk-svd:  default, then Wq, Wk of each head set in closed form so that the first attention's
//            logits are c·G (pseudo-inverse + truncated SVD); q, k biases 0. No mask.
//   qk-opt:  default, then Wq, Wk of each head fitted by Adam, through the model's own
//            attention forward/backward, so that softmax(logits) = softmax(c·G). No mask.
//   mimetic: default, then per head Wq^T Wk ≈ 0.7 Z + 0.7 I (Trockman & Kolter 2023), Z ~ N(0, 1/C),
//            by truncated SVD, and per layer Σ_h Wv_h^T Wo_h^T = 0.4 Z' - 0.4 I, Z' ~ U(±sqrt(3/C)),
//            as the impulse init's authors write it (set_layer_value_output). Needs no G.
// Between the default weights and the init, initialise (run/setup.cuh) multiplies the position
// embedding wpe by --pe-scale S (scale_position_embedding): by default 18 for impulse, 1 (nothing
// done) for the others.
// The structured inits (mask, qk-svd, qk-opt) all aim at one attention pattern,
//   P = softmax_rows(c·G)      (causal: over the keys j <= i),
// which is exactly the mask init's pattern when the QK logits are zero, because
// log σ(c) - log σ(-c) = c. So for one seed the three runs differ only in where the prior
// lives, and `init_check` measures how closely each one's first layer starts at P.
// The mask and QK inits cover the prior layers: every layer, or with --prior-layers first only
// layer 0 (Config::prior_layer_count).
#pragma once
#include <string>
#include <vector>
#include "model.cuh"            // Model, model_forward, param_bind; the attention and matmul layers qk-opt runs
#include "layers/rng.h"         // Rng: every init draws from the run's seed
#include "prior/linalg.h"       // Matrix, pseudo_inverse, low_rank_factors
#include "prior/structure.h"    // Structure, prior_pattern, attention_prior_mass

inline bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

enum WeightInit { WEIGHTS_PYTORCH, WEIGHTS_GPT2 };

inline void init_default(const Config& c, float* params, Rng& rng, WeightInit style = WEIGHTS_PYTORCH) {
    // params (num_params) host memory
    const std::vector<TensorInfo> layout = param_layout(c);
    for (size_t t = 0; t < layout.size(); t++) {
        const TensorInfo& info = layout[t];
        float* p = params + info.offset;
        size_t n = info.numel * info.slices;
        const std::string& name = info.name;
        if (info.field == &ParamTensors::wval) {
            continue;  // below, last
        } else if (info.field == &ParamTensors::cls) {
            for (size_t i = 0; i < n; i++) p[i] = 0.0f;
        } else if (name == "wpe" && c.image_input()) {
            for (size_t i = 0; i < n; i++) p[i] = 0.02f * rng.normal();
        } else if (name == "wte" || name == "wpe") {
            const float sd = style == WEIGHTS_GPT2 ? 0.02f : 1.0f;
            for (size_t i = 0; i < n; i++) p[i] = sd * rng.normal();
        } else if (name.find("ln") != std::string::npos) {  // ln1, ln2, ln_f
            for (size_t i = 0; i < n; i++) p[i] = ends_with(name, ".weight") ? 1.0f : 0.0f;
        } else if (info.field == &ParamTensors::mask) {
            for (size_t i = 0; i < n; i++) p[i] = 0.0f;
        } else if (style == WEIGHTS_GPT2) {
            const bool residual = info.field == &ParamTensors::projw || info.field == &ParamTensors::mlp_projw;
            const float sd = residual ? 0.02f / sqrtf(2.0f * c.L) : 0.02f;
            for (size_t i = 0; i < n; i++) p[i] = ends_with(name, ".bias") ? 0.0f : sd * rng.normal();
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

// --pe-scale S: wpe <- S·wpe (T,C), every row, CLS's (row 0 of an image model) included, as the
// impulse authors scale timm's pos_embed (by 18) before fitting the heads and keep it. S = 1
// leaves the buffer untouched, so that a run without the flag is what it was before the flag.
inline void scale_position_embedding(const Config& c, float* params, float S) {
    // params (num_params) host memory, with the default init in it
    if (S == 1.0f) return;
    float* wpe = param_bind(c, params).wpe;  // (T,C)
    for (size_t i = 0; i < (size_t)c.T * c.C; i++) wpe[i] *= S;
}

// Writes ±c into the mask of every layer that has one, from G (one (T,T), or one per mask head).
inline void init_mask_from_structure(const Config& c, float* params, const Structure& G, float mask_c) {
    if (c.mask_heads == 0) fail("the mask init needs a mask (internal: mask_heads is 0)");
    if (G.T != c.T || (G.heads != 1 && G.heads != c.mask_heads))
        fail("structure G is %dx%dx%d, the mask is %dx%dx%d", G.heads, G.T, G.T, c.mask_heads, c.T, c.T);
    float* mask = param_bind(c, params).mask;  // (prior layers, mask_heads, T, T)
    for (int l = 0; l < c.prior_layer_count(); l++)
        for (int h = 0; h < c.mask_heads; h++) {
            float* m = mask + ((size_t)l * c.mask_heads + h) * c.T * c.T;
            for (int ij = 0; ij < c.T * c.T; ij++) m[ij] = G.head(h)[ij] != 0 ? mask_c : -mask_c;
        }
}

// The ALiBi-shaped distance prior (Press et al. 2022) as a mask, one per head: the target bias of
// key j for query i is b_ij = -m_h (i - j), m_h = 2^(-8(h+1)/NH) ALiBi's geometric slopes, reached
// exactly by M = b - log(1 - e^b), since then log σ(M) = b. The diagonal (b = 0, M = +inf) gets
// +c and every entry is clamped to [-c, c], so the far past saturates at log σ(-c) ≈ -c. The
// future (j > i) is hidden by causal attention anyway; it gets -c.
inline float alibi_slope(int h, int NH) { return std::pow(2.0f, -8.0f * (h + 1) / NH); }

inline void init_mask_alibi(const Config& c, float* params, float mask_c) {
    if (c.mask_heads != c.NH) fail("the ALiBi-shaped mask needs one mask per head (internal)");
    float* mask = param_bind(c, params).mask;  // (prior layers, NH, T, T)
    for (int l = 0; l < c.prior_layer_count(); l++)
        for (int h = 0; h < c.NH; h++) {
            float* m = mask + ((size_t)l * c.NH + h) * c.T * c.T;
            for (int i = 0; i < c.T; i++)
                for (int j = 0; j < c.T; j++) {
                    const double b = -(double)alibi_slope(h, c.NH) * (i - j);
                    const double exact = j > i ? -mask_c : j == i ? mask_c : b - std::log(-std::expm1(b));
                    m[(size_t)i * c.T + j] = (float)std::min<double>(mask_c, std::max<double>(-mask_c, exact));
                }
        }
}

// ----------------------------------------------------------------------------
// E: what reaches the first attention. The QK inits work on ln1(embedding) of layer 0 (the
// rows that are multiplied by Wq and Wk), taken from the model's own forward pass on sample
// training examples, so they hold for any input encoding.

struct AttentionInputs {
    int N = 0;                  // sample examples
    std::vector<float> x;       // (N,T,C) the first attention's input for each example
    Matrix distinct;            // (n,C) its distinct rows: one per (position, token) seen
    std::vector<int> position;  // (n) the position of each distinct row
};

// Images: the distinct rows are the positions alone, ln1(wpe[t]) of layer 0, with the CLS
// token's embedding added at t = 0: an image's pixels vary without end, so E describes where a
// patch is, not what it shows (as the impulse init's Pe does). host: the parameters.
inline Matrix position_rows(const Config& c, const std::vector<float>& host) {
    const ParamTensors p = param_bind(c, const_cast<float*>(host.data()));
    Matrix E(c.T, c.C);
    std::vector<double> x(c.C);
    for (int t = 0; t < c.T; t++) {
        double mean = 0, var = 0;
        for (int i = 0; i < c.C; i++) mean += (x[i] = p.wpe[(size_t)t * c.C + i] + (t == 0 ? p.cls[i] : 0.0f)) / c.C;
        for (int i = 0; i < c.C; i++) var += (x[i] - mean) * (x[i] - mean) / c.C;
        for (int i = 0; i < c.C; i++) E(t, i) = (x[i] - mean) / std::sqrt(var + 1e-5) * p.ln1w[i] + p.ln1b[i];
    }
    return E;
}

inline AttentionInputs first_attention_inputs(Model& model, ModelInput samples, int N) {
    // samples: N training examples (tokens (N,T) or pixels (N, channels, H, W))
    const Config& c = model.cfg;
    const int T = c.T, C = c.C;
    AttentionInputs E;
    E.N = N;
    E.x.resize((size_t)N * T * C);
    for (int start = 0; start < N; start += model.B) {
        int rows = std::min(model.B, N - start);
        model_forward(model, samples.from(start, c), nullptr, rows);  // no loss
        buffer_copy(E.x.data() + (size_t)start * T * C, DEVICE_CPU, model_activations(model, rows).ln1, model.dev,
                    (size_t)rows * T * C);  // layer 0's slice comes first
    }
    if (c.image_input()) {
        E.distinct = position_rows(c, model_download(model, model.params_mem));
        for (int t = 0; t < T; t++) E.position.push_back(t);
        return E;
    }
    std::vector<int> seen;  // (position, token) pairs already taken, as position * V + token
    std::vector<float> rows;
    for (int r = 0; r < N * T; r++) {
        int key = (r % T) * c.V + samples.tokens[r];
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
        seen.push_back(key);
        E.position.push_back(r % T);
        rows.insert(rows.end(), E.x.begin() + (size_t)r * C, E.x.begin() + (size_t)(r + 1) * C);
    }
    E.distinct = Matrix((int)E.position.size(), C);
    for (size_t i = 0; i < rows.size(); i++) E.distinct.a[i] = rows[i];
    return E;
}

// Head h's query and key weights (HS,C each) and biases (HS) in layer l's qkv projection.
inline void set_query_key(const Config& c, float* params, int l, int h, const Matrix& Wq, const Matrix& Wk) {
    const BlockParams block = block_params(c, param_bind(c, params), l);
    float* w = block.qkvw;  // (3·NH·HS, C)
    float* b = block.qkvb;  // (3·NH·HS)
    for (int d = 0; d < c.HS; d++) {
        int q_row = h * c.HS + d, k_row = c.attention_width() + h * c.HS + d;
        for (int i = 0; i < c.C; i++) {
            w[(size_t)q_row * c.C + i] = (float)Wq(d, i);
            w[(size_t)k_row * c.C + i] = (float)Wk(d, i);
        }
        b[q_row] = b[k_row] = 0.0f;
    }
}

// qk-svd. For head h we want the logits E Wq^T Wk E^T / sqrt(HS) = c·G_h on every pair of
// distinct rows of E (n,C); row a sits at position pos(a), so the target is the (n,n) matrix
// S_ab = c·G_h[pos(a), pos(b)]. The least-squares solution is
//   W = Wq^T Wk = sqrt(HS) · E⁺ S (E⁺)^T          (C,C), E⁺ the pseudo-inverse of E,
// exact when the n rows are independent (n <= C). Wq and Wk are then the two factors of W's
// best rank-HS approximation (truncated SVD): Wq^T Wk = U_r Σ_r V_r^T.
// The rows are not independent in practice: before the LayerNorm they are wpe[t] + wte[v], so
// they span about T + V dimensions, however many (t, v) pairs there are. E⁺ then gives the
// least-squares W, and init_check reports how close it comes.
inline void init_qk_svd(const Config& c, float* params, const AttentionInputs& E, const Structure& G,
                        float mask_c) {
    const int n = E.distinct.rows;
    const Matrix Einv = pseudo_inverse(E.distinct, 1e-5);  // (C,n); E holds float32 values
    for (int h = 0; h < c.NH; h++) {
        Matrix S(n, n);
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++)
                S(a, b) = std::sqrt((double)c.HS) * mask_c * G.head(h)[E.position[a] * c.T + E.position[b]];
        Matrix W = multiply(multiply(Einv, S), transpose(Einv));
        Matrix Wq, Wk;
        low_rank_factors(W, c.HS, Wq, Wk);
        for (int l = 0; l < c.prior_layer_count(); l++) set_query_key(c, params, l, h, Wq, Wk);
    }
}

// qk-opt. Each layer's Wq, Wk start from their default values and are fitted by Adam on the
// first attention's real inputs X (a fixed sample of training examples), minimising the mean
// KL divergence from the target pattern P to the attention A:
//   L = mean over (b, h, i) of sum_j P_hij log(P_hij / A_bhij)
//   dL/dS_bhij = (A_bhij - P_hij) / rows                  (S: the logits; rows = N·NH·T)
// The forward is the model's (qkv = X Wqkv^T with zero biases, then attention_forward), and the
// backward too: attention_backward with dS given (dout = nullptr) and matmul_backward. So the
// fit runs the very code the training runs. L and dS are computed on the host (a few KB).
struct QkFit {
    double kl_start = 0, kl_end = 0;  // mean over the fitted layers
};

inline QkFit init_qk_opt(Model& model, float* params, const AttentionInputs& E, const Structure& G, float mask_c,
                         int steps) {
    const Config& c = model.cfg;
    const int layers = c.prior_layer_count();
    const Device dev = model.dev;
    const int N = std::min(E.N, 16), T = c.T, C = c.C, QKV = c.qkv_width(), NT = N * T;
    const AttentionShape shape = {N, T, c.NH, c.HS, 0, c.causal};
    const size_t att_n = (size_t)N * c.NH * T * T;
    std::vector<std::vector<double>> P;  // (NH) x (T,T)
    for (int h = 0; h < c.NH; h++) P.push_back(prior_pattern(G, h, mask_c, c.causal));
    float *X = buffer_alloc(dev, (size_t)NT * C), *dX = buffer_alloc(dev, (size_t)NT * C);          // (N·T,C)
    float *W = buffer_alloc(dev, (size_t)QKV * C), *dW = buffer_alloc(dev, (size_t)QKV * C);        // (QKV,C)
    float *m = buffer_alloc(dev, (size_t)QKV * C), *v = buffer_alloc(dev, (size_t)QKV * C);         // Adam moments
    float *qkv = buffer_alloc(dev, (size_t)NT * QKV), *dqkv = buffer_alloc(dev, (size_t)NT * QKV);  // (N·T,QKV)
    float* bias = buffer_alloc(dev, QKV);                                                           // zeros
    float* out = buffer_alloc(dev, (size_t)NT * c.attention_width());  // attention output, unused
    float *att = buffer_alloc(dev, att_n), *dscores = buffer_alloc(dev, att_n);  // (N,NH,T,T)
    buffer_copy(X, dev, E.x.data(), DEVICE_CPU, (size_t)NT * C);
    buffer_zero(dev, bias, QKV);
    std::vector<float> A(att_n), grad(att_n), w((size_t)QKV * C);
    AdamWSettings adam;
    adam.lr = 1e-2f;
    QkFit fit;
    for (int l = 0; l < layers; l++) {
        float* layer_w = param_bind(c, params).qkvw + (size_t)l * QKV * C;
        buffer_copy(W, dev, layer_w, DEVICE_CPU, (size_t)QKV * C);
        buffer_zero(dev, m, (size_t)QKV * C);
        buffer_zero(dev, v, (size_t)QKV * C);
        for (int t = 0;; t++) {
            matmul_forward(dev, model.kernels, qkv, X, W, bias, NT, C, QKV);
            attention_forward(dev, model.kernels, out, att, qkv, nullptr, nullptr, shape);
            buffer_copy(A.data(), DEVICE_CPU, att, dev, att_n);
            double kl = 0;
            const double rows = (double)N * c.NH * T;
            for (size_t r = 0; r < (size_t)N * c.NH * T; r++) {
                const double* p = P[r / T % c.NH].data() + (r % T) * T;
                for (int j = 0; j < T; j++) {
                    double a = A[r * T + j];
                    if (p[j] > 0) kl += p[j] * std::log(p[j] / std::max(a, 1e-30)) / rows;
                    grad[r * T + j] = (float)((a - p[j]) / rows);
                }
            }
            if (t == 0) fit.kl_start += kl / layers;
            if (t == steps) { fit.kl_end += kl / layers; break; }
            buffer_copy(dscores, dev, grad.data(), DEVICE_CPU, att_n);
            buffer_zero(dev, dqkv, (size_t)NT * QKV);
            buffer_zero(dev, dX, (size_t)NT * C);
            buffer_zero(dev, dW, (size_t)QKV * C);
            attention_backward(dev, model.kernels, dqkv, nullptr, dscores, nullptr, qkv, att, nullptr, shape);
            matmul_backward(dev, model.kernels, dX, dW, nullptr, dqkv, X, W, NT, C, QKV);
            adamw_update(dev, W, m, v, dW, (size_t)QKV * C, adam, 0.0f, t + 1);  // v rows: zero gradient, unmoved
        }
        buffer_copy(w.data(), DEVICE_CPU, W, dev, (size_t)QKV * C);
        for (int h = 0; h < c.NH; h++) {
            Matrix Wq(c.HS, C), Wk(c.HS, C);
            for (int d = 0; d < c.HS; d++)
                for (int i = 0; i < C; i++) {
                    Wq(d, i) = w[(size_t)(h * c.HS + d) * C + i];
                    Wk(d, i) = w[(size_t)(c.attention_width() + h * c.HS + d) * C + i];
                }
            set_query_key(c, params, l, h, Wq, Wk);
        }
    }
    for (float* p : {X, dX, W, dW, m, v, qkv, dqkv, bias, out, att, dscores}) buffer_free(dev, p);
    return fit;
}

// mimetic's and impulse's value and output weights, one matrix per layer as the impulse init's
// authors write them for both (their get_ortho_like; not one matrix per head). For layer l:
//   M = 0.4 Z - 0.4 I                        (C,C), Z_ij ~ U(±sqrt(3/C)): variance 1/C, drawn once
//   M ≈ X^T Y                                X, Y (NH·HS, C): low_rank_factors(M, NH·HS), the SVD's
//                                            factors sqrt(S) U^T and sqrt(S) V^T, largest σ first
//   Wv_h = X[h·HS .. h·HS+HS-1, :]           head h's value rows (HS,C)
//   Wo_h^T = Y[h·HS .. h·HS+HS-1, :]         Wo_h (C,HS): head h's columns of the output projection
// The layer's output is out = Σ_h A_h x Wv_h^T Wo_h^T (the heads' y = A v side by side, times
// Wo^T), so when every head attends to itself it adds x·M with
//   Σ_h Wv_h^T Wo_h^T = X^T Y = M         exactly (to rounding) when NH·HS >= C: the factors' rows
//                                            past C are 0.
// With NH·HS < C no split is exact, and the layer gets M's best rank-NH·HS approximation.
// (The authors' mimetic code stores the two factors untransposed, so that its product is
// (Y X^T)^T, which has M's eigenvalues and trace but not its entries; M itself is used here, as
// their impulse code has it.) The v and output biases keep their default values.
inline void set_layer_value_output(const Config& c, float* params, int l, Rng& rng) {
    const int C = c.C, AW = c.attention_width();
    const double bound = std::sqrt(3.0 / C);
    Matrix M(C, C);
    for (int i = 0; i < C; i++)
        for (int j = 0; j < C; j++) M(i, j) = 0.4 * rng.uniform(-bound, bound) - (i == j ? 0.4 : 0);
    Matrix X, Y;  // (AW,C) each, X^T Y = M (or its best rank-AW approximation)
    low_rank_factors(M, AW, X, Y);
    const BlockParams block = block_params(c, param_bind(c, params), l);
    float* wv = block.qkvw + (size_t)2 * AW * C;  // (AW,C) the value rows, head after head
    float* wo = block.projw;                      // (C,AW)
    for (int k = 0; k < AW; k++)
        for (int i = 0; i < C; i++) {
            wv[(size_t)k * C + i] = (float)X(k, i);
            wo[(size_t)i * AW + k] = (float)Y(k, i);
        }
}

// mimetic (Trockman & Kolter, "Mimetic initialization of self-attention layers", 2023): the QK
// and the value-output products copy what trained attention layers look like. Per layer and
// head Wq^T Wk ≈ 0.7 Z + 0.7 I (attend to yourself, plus noise), Z ~ N(0, 1/C) (C,C), by its
// rank-HS truncated SVD, q, k biases 0; then the layer's value and output weights
// (set_layer_value_output: Σ_h Wv_h^T Wo_h^T = 0.4 Z' - 0.4 I).
inline void init_mimetic(const Config& c, float* params, Rng& rng) {
    const int C = c.C;
    for (int l = 0; l < c.L; l++) {
        for (int h = 0; h < c.NH; h++) {
            Matrix qk(C, C);
            for (int i = 0; i < C; i++)
                for (int j = 0; j < C; j++) qk(i, j) = 0.7 * rng.normal() / std::sqrt((double)C) + (i == j ? 0.7 : 0);
            Matrix Wq, Wk;
            low_rank_factors(qk, c.HS, Wq, Wk);
            set_query_key(c, params, l, h, Wq, Wk);
        }
        set_layer_value_output(c, params, l, rng);
    }
}

// ----------------------------------------------------------------------------
// How closely layer 0's attention starts at the target pattern P, on sample examples.

struct InitCheck {
    double prior_mass = 0, target_mass = 0;  // attention on G-allowed keys: A's, and P's own
    double mean_abs_diff = 0, max_abs_diff = 0;  // |A - P| over all entries
    double own_mass = -1;  // A's attention on the init's own structure (InitKind::own_structure); -1: none
};

// own: the init's own structure, or nullptr; its mass counts the queries it gives a key
inline InitCheck init_check(Model& model, ModelInput samples, int N, const Structure& G, float mask_c,
                            const Structure* own = nullptr) {
    // samples: tokens (N,T) or pixels (N, channels, H, W); the first min(N, B) are used
    const Config& c = model.cfg;
    const int rows = std::min(N, model.B), T = c.T;
    std::vector<float> att((size_t)rows * c.NH * T * T), pattern(att.size());
    model_forward(model, samples, nullptr, rows);  // the attention only, no loss
    buffer_copy(att.data(), DEVICE_CPU, model_activations(model, rows).att, model.dev, att.size());  // layer 0
    InitCheck check;
    for (int h = 0; h < c.NH; h++) {
        std::vector<double> P = prior_pattern(G, h, mask_c, c.causal);
        for (int b = 0; b < rows; b++)
            for (int ij = 0; ij < T * T; ij++) pattern[(((size_t)b * c.NH + h) * T * T) + ij] = (float)P[ij];
    }
    for (size_t k = 0; k < att.size(); k++) {
        double diff = std::fabs((double)att[k] - pattern[k]);
        check.mean_abs_diff += diff / att.size();
        check.max_abs_diff = std::max(check.max_abs_diff, diff);
    }
    check.prior_mass = attention_prior_mass(att.data(), G, rows, c.NH, T);
    check.target_mass = attention_prior_mass(pattern.data(), G, rows, c.NH, T);
    if (own) check.own_mass = attention_mass_where_allowed(att.data(), *own, rows, c.NH, T);
    return check;
}
