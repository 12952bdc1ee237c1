// model.cuh: the transformer as wiring. It owns four buffers (parameters, gradients, and the
// two AdamW moments, all with the same layout) and two more (activations and their
// gradients), each carved from one allocation, and calls the layers in order. It knows no
// task: a task hands it token ids, targets and, for the mask init, a plain matrix G.
//
//   x = wte[tokens] + wpe                                   (B,T,C)
//       (scalar encoding: a valued token v gives value[v] * wval in place of wte[v])
//   for each layer l (pre-LN):
//     x += proj(attention(qkv(ln1(x)), mask_l))
//     x += mlp_proj(gelu(mlp_fc(ln2(x))))
//   y = head(ln_f(x[:, p]))  p = 0 (CLS); causal: p = T-1    (B,OUT)
//   loss = MSE(y, target) or logistic(y, ±1 label) (regression), cross-entropy(y, class)
// The next-token head (a causal language model) reads every position instead:
//   y = head(ln_f(x))                                       (B,T,V)
//   loss = sum_{b,t} w_bt CE(y_bt, next token_bt) / sum w_bt  w: the loss mask (the answer)
#pragma once
#include <string>
#include <vector>
#include "attention.cuh"
#include "layers.cuh"

enum HeadType { HEAD_REGRESSION = 0, HEAD_CLASS = 1, HEAD_NEXT_TOKEN = 2 };
enum Encoding { ENCODING_TOKEN = 0, ENCODING_SCALAR = 1 };  // see layers.cuh, scalar embedding
enum LossType { LOSS_MSE = 0, LOSS_LOGISTIC = 1 };          // of the regression head

struct Config {
    int V = 3;      // vocabulary size
    int T = 16;     // sequence length
    int C = 32;     // width
    int L = 2;      // layers
    int NH = 2;     // heads
    int HS = 16;    // head size, independent of C; attention works in NH*HS dims
    int MLP = 32;   // MLP hidden size
    int OUT = 1;    // head outputs: 1 (regression), the number of classes, or V (next token)
    int mask_heads = 0;  // 0: no mask, 1: one M per layer shared by heads, NH: one per head
    bool mask_first_layer_only = false;  // the mask in layer 0 only; the other layers have none
    bool causal = false;
    HeadType head = HEAD_REGRESSION;
    Encoding encoding = ENCODING_TOKEN;
    std::vector<float> token_value;  // (V) scalar encoding: a token's value, 0 for none (the task's)
    LossType loss = LOSS_MSE;
    int QKV() const { return 3 * NH * HS; }
    int AH() const { return NH * HS; }  // attention width
    // the position the head reads: CLS, or under causal attention the last position, the
    // only one that sees the whole sequence
    int head_position() const { return causal ? T - 1 : 0; }
    // rows of the head per example: one, or every position for the next-token head
    int head_rows() const { return head == HEAD_NEXT_TOKEN ? T : 1; }
    bool layer_has_mask(int l) const { return mask_heads > 0 && (l == 0 || !mask_first_layer_only); }
    int mask_layers() const { return mask_heads == 0 ? 0 : mask_first_layer_only ? 1 : L; }
};

// ----------------------------------------------------------------------------
// parameters: one struct of pointers, four instances (params, grads, AdamW m and v)

struct ParamTensors {
    float* wte;       // (V,C)
    float* wval;      // (C)  scalar encoding only: a valued token is value * wval
    float* wpe;       // (T,C)
    float* ln1w;      // (L,C)
    float* ln1b;      // (L,C)
    float* qkvw;      // (L,3·NH·HS,C)
    float* qkvb;      // (L,3·NH·HS)
    float* mask;      // (L,T,T) or (L,NH,T,T), L = 1 with --prior-layers first; absent (size 0) without a mask
    float* attprojw;  // (L,C,NH·HS)
    float* attprojb;  // (L,C)
    float* ln2w;      // (L,C)
    float* ln2b;      // (L,C)
    float* fcw;       // (L,MLP,C)
    float* fcb;       // (L,MLP)
    float* fcprojw;   // (L,C,MLP)
    float* fcprojb;   // (L,C)
    float* lnfw;      // (C)
    float* lnfb;      // (C)
    float* headw;     // (OUT,C)
    float* headb;     // (OUT)
};

// One tensor of the layout: its checkpoint name ("%d" for the layer), the shape of one
// layer's slice, where it sits in the flat buffer, and which ParamTensors field points to it.
struct TensorInfo {
    std::string name;
    float* ParamTensors::*field;
    bool per_layer;
    std::vector<int64_t> shape;
    size_t numel;   // of one slice
    size_t offset;  // of the whole (stacked) tensor in the flat buffer
    int slices;     // layers stacked: L for a per-layer tensor (the mask: the layers that have one), 1 else
};

inline std::vector<TensorInfo> param_layout(const Config& c) {
    std::vector<int64_t> mask_shape = c.mask_heads == 1 ? std::vector<int64_t>{c.T, c.T}
                                                          : std::vector<int64_t>{c.NH, c.T, c.T};
    std::vector<TensorInfo> t = {
        {"wte", &ParamTensors::wte, false, {c.V, c.C}},
        {"wval", &ParamTensors::wval, false, {c.C}},
        {"wpe", &ParamTensors::wpe, false, {c.T, c.C}},
        {"h.%d.ln1.weight", &ParamTensors::ln1w, true, {c.C}},
        {"h.%d.ln1.bias", &ParamTensors::ln1b, true, {c.C}},
        {"h.%d.attn.qkv.weight", &ParamTensors::qkvw, true, {c.QKV(), c.C}},
        {"h.%d.attn.qkv.bias", &ParamTensors::qkvb, true, {c.QKV()}},
        {"h.%d.attn.mask", &ParamTensors::mask, true, mask_shape},
        {"h.%d.attn.proj.weight", &ParamTensors::attprojw, true, {c.C, c.AH()}},
        {"h.%d.attn.proj.bias", &ParamTensors::attprojb, true, {c.C}},
        {"h.%d.ln2.weight", &ParamTensors::ln2w, true, {c.C}},
        {"h.%d.ln2.bias", &ParamTensors::ln2b, true, {c.C}},
        {"h.%d.mlp.fc.weight", &ParamTensors::fcw, true, {c.MLP, c.C}},
        {"h.%d.mlp.fc.bias", &ParamTensors::fcb, true, {c.MLP}},
        {"h.%d.mlp.proj.weight", &ParamTensors::fcprojw, true, {c.C, c.MLP}},
        {"h.%d.mlp.proj.bias", &ParamTensors::fcprojb, true, {c.C}},
        {"ln_f.weight", &ParamTensors::lnfw, false, {c.C}},
        {"ln_f.bias", &ParamTensors::lnfb, false, {c.C}},
        {"head.weight", &ParamTensors::headw, false, {c.OUT, c.C}},
        {"head.bias", &ParamTensors::headb, false, {c.OUT}},
    };
    size_t offset = 0;
    for (TensorInfo& info : t) {
        info.numel = 1;
        for (int64_t d : info.shape) info.numel *= (size_t)d;
        info.slices = info.field == &ParamTensors::mask ? c.mask_layers() : info.per_layer ? c.L : 1;
        if (info.slices == 0) info.numel = 0;
        if (info.field == &ParamTensors::wval && c.encoding != ENCODING_SCALAR) info.numel = 0;
        info.offset = offset;
        offset += info.numel * info.slices;
    }
    return t;
}

inline size_t param_count(const Config& c) {
    TensorInfo last = param_layout(c).back();
    return last.offset + last.numel;
}

// Points every field of p into the flat buffer base (laid out by param_layout).
inline ParamTensors param_bind(const Config& c, float* base) {
    ParamTensors p;
    for (const TensorInfo& info : param_layout(c)) p.*info.field = info.numel ? base + info.offset : nullptr;
    return p;
}

// The checkpoint name of a tensor's slice for layer l ("h.3.ln1.weight"), or of a global one.
inline std::string tensor_name(const TensorInfo& info, int l) {
    if (!info.per_layer) return info.name;
    char buf[128];
    snprintf(buf, sizeof buf, info.name.c_str(), l);
    return buf;
}

// ----------------------------------------------------------------------------
// activations for a batch of B rows; the same struct holds their gradients

struct Activations {
    float* encoded;    // (B,T,C)
    float* ln1;        // (L,B,T,C)
    float* ln1_mean;   // (L,B,T)
    float* ln1_rstd;   // (L,B,T)
    float* qkv;        // (L,B,T,3·NH·HS)
    float* att;        // (L,B,NH,T,T)  A; in the gradient struct: dS, the pre-softmax gradient
    float* atty;       // (L,B,T,NH·HS)
    float* attproj;    // (L,B,T,C)
    float* residual2;  // (L,B,T,C)  x after the attention half of the block
    float* ln2;        // (L,B,T,C)
    float* ln2_mean;   // (L,B,T)
    float* ln2_rstd;   // (L,B,T)
    float* fch;        // (L,B,T,MLP)
    float* fch_gelu;   // (L,B,T,MLP)
    float* fcproj;     // (L,B,T,C)
    float* residual3;  // (L,B,T,C)  x after the whole block
    // the head's rows R = B·head_rows(): one per example, or (next token) every position
    float* cls;        // (B,C)  x[:, head_position] after the last block; unused by next token
    float* lnf;        // (R,C)
    float* lnf_mean;   // (R)
    float* lnf_rstd;   // (R)
    float* logits;     // (R,OUT)
    float* probs;      // (R,OUT)  softmax, classification and next token
    float* losses;     // (R)
};

inline size_t activations_bind(const Config& c, int B, Activations* a, float* base) {
    size_t BT = (size_t)B * c.T, L = c.L, R = (size_t)B * c.head_rows();
    std::vector<std::pair<float**, size_t>> sizes = {
        {&a->encoded, BT * c.C},       {&a->ln1, L * BT * c.C},        {&a->ln1_mean, L * BT},
        {&a->ln1_rstd, L * BT},        {&a->qkv, L * BT * c.QKV()},    {&a->att, L * B * c.NH * c.T * c.T},
        {&a->atty, L * BT * c.AH()},   {&a->attproj, L * BT * c.C},    {&a->residual2, L * BT * c.C},
        {&a->ln2, L * BT * c.C},       {&a->ln2_mean, L * BT},         {&a->ln2_rstd, L * BT},
        {&a->fch, L * BT * c.MLP},     {&a->fch_gelu, L * BT * c.MLP}, {&a->fcproj, L * BT * c.C},
        {&a->residual3, L * BT * c.C}, {&a->cls, (size_t)B * c.C},     {&a->lnf, R * c.C},
        {&a->lnf_mean, R},             {&a->lnf_rstd, R},              {&a->logits, R * c.OUT},
        {&a->probs, R * c.OUT},        {&a->losses, R},
    };
    size_t total = 0;
    for (auto& [ptr, n] : sizes) {
        if (base) *ptr = base + total;
        total += n;
    }
    return total;
}

// ----------------------------------------------------------------------------
// the model

struct Model {
    Config cfg;
    Device dev;
    int B;  // rows per batch the buffers hold
    std::vector<TensorInfo> layout;
    size_t num_params, num_acts;
    float *params_mem, *grads_mem, *m_mem, *v_mem, *acts_mem, *dacts_mem;
    ParamTensors params, grads, m, v;
    int* tokens;        // (B,T) on dev
    float* targets;     // (B·head_rows) on dev: a value, a class, or the next token at each position
    float* loss_mask;   // (B·T) on dev, next-token head only: 1 where a position counts in the loss
    bool loss_masked;   // whether the last forward pass weighted its rows by loss_mask
    float loss_count;   // the counted rows of the last forward pass: the loss's denominator
    float* token_value;  // (V) on dev: cfg.token_value; nullptr under token encoding
    std::vector<float> losses_host;  // (B·head_rows)
    AdamWSettings adam;
    float weight_decay = 1e-3f, mask_weight_decay = 0.0f;
    int adam_t = 0;  // optimizer steps taken
};

inline void model_build(Model& model, const Config& cfg, Device dev, int B) {
    if (cfg.encoding == ENCODING_SCALAR && (int)cfg.token_value.size() != cfg.V)
        fail("scalar encoding needs a value per token (%zu values for V = %d)", cfg.token_value.size(), cfg.V);
    if (cfg.loss == LOSS_LOGISTIC && cfg.head != HEAD_REGRESSION) fail("the logistic loss needs a regression head");
    model.cfg = cfg;
    model.dev = dev;
    model.B = B;
    model.layout = param_layout(cfg);
    model.num_params = param_count(cfg);
    float** bufs[4] = {&model.params_mem, &model.grads_mem, &model.m_mem, &model.v_mem};
    ParamTensors* views[4] = {&model.params, &model.grads, &model.m, &model.v};
    for (int i = 0; i < 4; i++) {
        *bufs[i] = buffer_alloc(dev, model.num_params);
        buffer_zero(dev, *bufs[i], model.num_params);
        *views[i] = param_bind(cfg, *bufs[i]);
    }
    Activations unbound;
    model.num_acts = activations_bind(cfg, B, &unbound, nullptr);
    model.acts_mem = buffer_alloc(dev, model.num_acts);
    model.dacts_mem = buffer_alloc(dev, model.num_acts);
    buffer_zero(dev, model.acts_mem, model.num_acts);
    buffer_zero(dev, model.dacts_mem, model.num_acts);
    const size_t R = (size_t)B * cfg.head_rows();
    if (dev == DEVICE_GPU) cudaCheck(cudaMalloc(&model.tokens, (size_t)B * cfg.T * sizeof(int)));
    else model.tokens = (int*)malloc((size_t)B * cfg.T * sizeof(int));
    model.targets = buffer_alloc(dev, R);
    model.loss_mask = cfg.head == HEAD_NEXT_TOKEN ? buffer_alloc(dev, R) : nullptr;
    model.loss_masked = false;
    model.loss_count = 0;
    model.token_value = nullptr;
    if (cfg.encoding == ENCODING_SCALAR) {
        model.token_value = buffer_alloc(dev, cfg.V);
        buffer_copy(model.token_value, dev, cfg.token_value.data(), DEVICE_CPU, cfg.V);
    }
    model.losses_host.assign(R, 0.0f);
}

inline void model_free(Model& model) {
    for (float* p : {model.params_mem, model.grads_mem, model.m_mem, model.v_mem, model.acts_mem, model.dacts_mem,
                     model.targets})
        buffer_free(model.dev, p);
    if (model.token_value) buffer_free(model.dev, model.token_value);
    if (model.loss_mask) buffer_free(model.dev, model.loss_mask);
    if (model.dev == DEVICE_GPU) cudaCheck(cudaFree(model.tokens));
    else free(model.tokens);
}

// The activations of the last forward pass on `rows` examples (the layout depends on rows).
inline Activations model_activations(const Model& model, int rows) {
    Activations a;
    activations_bind(model.cfg, rows, &a, model.acts_mem);
    return a;
}

// The attention shape of layer l: a layer without a mask has mask_heads 0.
inline AttentionShape model_attention_shape(const Config& c, int B, int l) {
    return {B, c.T, c.NH, c.HS, c.layer_has_mask(l) ? c.mask_heads : 0, c.causal};
}

// Forward pass on `rows` <= model.B examples, host memory: tokens (rows,T), targets
// (rows·head_rows), and for the next-token head loss_mask (rows·T) of 0/1 (nullptr: every
// position counts). Leaves the outputs in model_activations(model, rows).logits and returns
// the mean loss over the counted rows. targets = nullptr: the outputs only, no loss (returns 0).
inline float model_forward(Model& model, const int* tokens, const float* targets, int rows,
                           const float* loss_mask = nullptr) {
    const Config& c = model.cfg;
    const Device dev = model.dev;
    const int B = rows, T = c.T, C = c.C, BT = B * T, R = B * c.head_rows();
    Activations a = model_activations(model, B);
    if (dev == DEVICE_GPU) cudaCheck(cudaMemcpy(model.tokens, tokens, (size_t)BT * sizeof(int), cudaMemcpyHostToDevice));
    else memcpy(model.tokens, tokens, (size_t)BT * sizeof(int));
    const ParamTensors& p = model.params;
    if (c.encoding == ENCODING_SCALAR)
        scalar_embedding_forward(dev, a.encoded, model.tokens, model.token_value, p.wte, p.wval, p.wpe, B, T, C);
    else embedding_forward(dev, a.encoded, model.tokens, p.wte, p.wpe, B, T, C);
    for (int l = 0; l < c.L; l++) {
        float* x = l == 0 ? a.encoded : a.residual3 + (size_t)(l - 1) * BT * C;  // (B,T,C)
        size_t lc = (size_t)l * BT * C;
        float* ln1 = a.ln1 + lc;
        float* qkv = a.qkv + (size_t)l * BT * c.QKV();
        float* att = a.att + (size_t)l * B * c.NH * T * T;
        float* atty = a.atty + (size_t)l * BT * c.AH();
        float* fch = a.fch + (size_t)l * BT * c.MLP;
        float* fch_gelu = a.fch_gelu + (size_t)l * BT * c.MLP;
        const float* mask = c.layer_has_mask(l) ? p.mask + (size_t)l * c.mask_heads * T * T : nullptr;
        layernorm_forward(dev, ln1, a.ln1_mean + l * BT, a.ln1_rstd + l * BT, x, p.ln1w + l * C, p.ln1b + l * C, BT, C);
        matmul_forward(dev, qkv, ln1, p.qkvw + (size_t)l * c.QKV() * C, p.qkvb + l * c.QKV(), BT, C, c.QKV());
        attention_forward(dev, atty, att, qkv, mask, model_attention_shape(c, B, l));
        matmul_forward(dev, a.attproj + lc, atty, p.attprojw + (size_t)l * C * c.AH(), p.attprojb + l * C, BT, c.AH(), C);
        residual_forward(dev, a.residual2 + lc, x, a.attproj + lc, (size_t)BT * C);
        layernorm_forward(dev, a.ln2 + lc, a.ln2_mean + l * BT, a.ln2_rstd + l * BT, a.residual2 + lc,
                          p.ln2w + l * C, p.ln2b + l * C, BT, C);
        matmul_forward(dev, fch, a.ln2 + lc, p.fcw + (size_t)l * c.MLP * C, p.fcb + l * c.MLP, BT, C, c.MLP);
        gelu_forward(dev, fch_gelu, fch, (size_t)BT * c.MLP);
        matmul_forward(dev, a.fcproj + lc, fch_gelu, p.fcprojw + (size_t)l * C * c.MLP, p.fcprojb + l * C, BT, c.MLP, C);
        residual_forward(dev, a.residual3 + lc, a.residual2 + lc, a.fcproj + lc, (size_t)BT * C);
    }
    // the head's input: the summary position, or (next token) the whole last residual stream
    float* x_last = a.residual3 + (size_t)(c.L - 1) * BT * C;  // (B,T,C)
    const float* head_in = x_last;
    if (c.head != HEAD_NEXT_TOKEN) {
        pick_position_forward(dev, a.cls, x_last, B, T, C, c.head_position());
        head_in = a.cls;
    }
    layernorm_forward(dev, a.lnf, a.lnf_mean, a.lnf_rstd, head_in, p.lnfw, p.lnfb, R, C);
    matmul_forward(dev, a.logits, a.lnf, p.headw, p.headb, R, C, c.OUT);
    if (!targets) return 0;

    buffer_copy(model.targets, dev, targets, DEVICE_CPU, R);
    model.loss_masked = c.head == HEAD_NEXT_TOKEN && loss_mask;
    const float* row_weight = model.loss_masked ? model.loss_mask : nullptr;
    model.loss_count = (float)R;
    if (model.loss_masked) {
        buffer_copy(model.loss_mask, dev, loss_mask, DEVICE_CPU, R);
        model.loss_count = 0;
        for (int r = 0; r < R; r++) model.loss_count += loss_mask[r];
        if (model.loss_count == 0) fail("the loss mask counts no position");
    }
    if (c.head != HEAD_REGRESSION)
        crossentropy_forward(dev, a.losses, a.probs, a.logits, model.targets, row_weight, R, c.OUT);
    else if (c.loss == LOSS_LOGISTIC) logistic_forward(dev, a.losses, a.logits, model.targets, B);
    else mse_forward(dev, a.losses, a.logits, model.targets, B);

    buffer_copy(model.losses_host.data(), DEVICE_CPU, a.losses, dev, R);
    double sum = 0;
    for (int r = 0; r < R; r++) sum += model.losses_host[r];  // fixed order: reproducible
    return (float)(sum / model.loss_count);
}

inline void model_zero_grad(Model& model) {
    buffer_zero(model.dev, model.grads_mem, model.num_params);
    buffer_zero(model.dev, model.dacts_mem, model.num_acts);
}

// Backward pass of the last model_forward (same rows, with targets); accumulates into model.grads.
inline void model_backward(Model& model, int rows) {
    const Config& c = model.cfg;
    const Device dev = model.dev;
    const int B = rows, T = c.T, C = c.C, BT = B * T, R = B * c.head_rows();
    Activations a = model_activations(model, B), d;
    activations_bind(c, B, &d, model.dacts_mem);
    const ParamTensors& p = model.params;
    const ParamTensors& g = model.grads;

    const bool next_token = c.head == HEAD_NEXT_TOKEN;
    if (c.head != HEAD_REGRESSION) {
        const float* row_weight = model.loss_masked ? model.loss_mask : nullptr;
        crossentropy_backward(dev, d.logits, a.probs, model.targets, row_weight, model.loss_count, R, c.OUT);
    } else if (c.loss == LOSS_LOGISTIC) logistic_backward(dev, d.logits, a.logits, model.targets, B);
    else mse_backward(dev, d.logits, a.logits, model.targets, B);
    matmul_backward(dev, d.lnf, g.headw, g.headb, d.logits, a.lnf, p.headw, R, C, c.OUT);
    float* x_last = a.residual3 + (size_t)(c.L - 1) * BT * C;   // (B,T,C)
    float* dx_last = d.residual3 + (size_t)(c.L - 1) * BT * C;  // (B,T,C)
    layernorm_backward(dev, next_token ? dx_last : d.cls, g.lnfw, g.lnfb, d.lnf, next_token ? x_last : a.cls, p.lnfw,
                       a.lnf_mean, a.lnf_rstd, R, C);
    if (!next_token) pick_position_backward(dev, dx_last, d.cls, B, T, C, c.head_position());
    for (int l = c.L - 1; l >= 0; l--) {
        size_t lc = (size_t)l * BT * C;
        const float* x = l == 0 ? a.encoded : a.residual3 + (size_t)(l - 1) * BT * C;
        float* dx = l == 0 ? d.encoded : d.residual3 + (size_t)(l - 1) * BT * C;
        size_t lqkv = (size_t)l * BT * c.QKV(), latt = (size_t)l * B * c.NH * T * T;
        size_t lah = (size_t)l * BT * c.AH(), lmlp = (size_t)l * BT * c.MLP;
        size_t lmask = (size_t)l * c.mask_heads * T * T;
        // x3 = x2 + fcproj
        residual_backward(dev, d.residual2 + lc, d.fcproj + lc, d.residual3 + lc, (size_t)BT * C);
        // fcproj = fch_gelu Wp^T + bp
        matmul_backward(dev, d.fch_gelu + lmlp, g.fcprojw + (size_t)l * C * c.MLP, g.fcprojb + l * C, d.fcproj + lc,
                        a.fch_gelu + lmlp, p.fcprojw + (size_t)l * C * c.MLP, BT, c.MLP, C);
        // fch_gelu = gelu(fch)
        gelu_backward(dev, d.fch + lmlp, a.fch + lmlp, d.fch_gelu + lmlp, (size_t)BT * c.MLP);
        // fch = ln2 Wfc^T + bfc
        matmul_backward(dev, d.ln2 + lc, g.fcw + (size_t)l * c.MLP * C, g.fcb + l * c.MLP, d.fch + lmlp,
                        a.ln2 + lc, p.fcw + (size_t)l * c.MLP * C, BT, C, c.MLP);
        // ln2 = layernorm(x2)
        layernorm_backward(dev, d.residual2 + lc, g.ln2w + l * C, g.ln2b + l * C, d.ln2 + lc, a.residual2 + lc,
                           p.ln2w + l * C, a.ln2_mean + l * BT, a.ln2_rstd + l * BT, BT, C);
        // x2 = x + attproj
        residual_backward(dev, dx, d.attproj + lc, d.residual2 + lc, (size_t)BT * C);
        // attproj = atty Wo^T + bo
        matmul_backward(dev, d.atty + lah, g.attprojw + (size_t)l * C * c.AH(), g.attprojb + l * C, d.attproj + lc,
                        a.atty + lah, p.attprojw + (size_t)l * C * c.AH(), BT, c.AH(), C);
        // atty = attention(qkv, mask)
        const bool masked = c.layer_has_mask(l);
        attention_backward(dev, d.qkv + lqkv, masked ? g.mask + lmask : nullptr, d.att + latt, d.atty + lah,
                           a.qkv + lqkv, a.att + latt, masked ? p.mask + lmask : nullptr,
                           model_attention_shape(c, B, l));
        // qkv = ln1 Wqkv^T + bqkv
        matmul_backward(dev, d.ln1 + lc, g.qkvw + (size_t)l * c.QKV() * C, g.qkvb + l * c.QKV(), d.qkv + lqkv,
                        a.ln1 + lc, p.qkvw + (size_t)l * c.QKV() * C, BT, C, c.QKV());
        // ln1 = layernorm(x)
        layernorm_backward(dev, dx, g.ln1w + l * C, g.ln1b + l * C, d.ln1 + lc, x, p.ln1w + l * C,
                           a.ln1_mean + l * BT, a.ln1_rstd + l * BT, BT, C);
    }
    if (c.encoding == ENCODING_SCALAR)
        scalar_embedding_backward(dev, g.wte, g.wval, g.wpe, d.encoded, model.tokens, model.token_value, B, T, C);
    else embedding_backward(dev, g.wte, g.wpe, d.encoded, model.tokens, B, T, C);
}

// One AdamW step over every parameter tensor; the mask has its own weight decay.
inline void model_update(Model& model) {
    model.adam_t++;
    for (const TensorInfo& info : model.layout) {
        if (info.numel == 0) continue;
        size_t n = info.numel * info.slices;
        float wd = info.field == &ParamTensors::mask ? model.mask_weight_decay : model.weight_decay;
        adamw_update(model.dev, model.params.*info.field, model.m.*info.field, model.v.*info.field,
                     model.grads.*info.field, n, model.adam, wd, model.adam_t);
    }
}
