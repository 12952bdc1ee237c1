// model.cuh: the transformer as wiring. It owns four buffers (parameters, gradients, and the
// two AdamW moments, all with the same layout: layers/config.h) and two more (activations and
// their gradients), each carved from one allocation, and calls the layers in order. It knows
// no task: a task hands it token ids, targets and, for the mask init, a plain matrix G.
//
//   x = wte[tokens] + wpe                                   (B,T,C)  the embedding
//       (scalar encoding: a valued token v gives value[v] * wval in place of wte[v])
//   images: x = [cls, patchify(pixels) patch_w^T + patch_b] + wpe   (layers/patch_embedding.cuh)
//   for each layer l (pre-LN), the fields of BlockActivations:
//     ln1 = layernorm(x)                 qkv = ln1 Wqkv^T + bqkv
//     y = attention(qkv, mask_l)         (att: A, attention.cuh; y: the heads' outputs)
//     proj = y Wproj^T + bproj           x_mid = x + proj
//     ln2 = layernorm(x_mid)             mlp_fc = ln2 Wfc^T + bfc,   mlp_gelu = gelu(mlp_fc)
//     mlp_proj = mlp_gelu Wmlp^T + bmlp  x_out = x_mid + mlp_proj    (the next layer's x)
//   the readout (the output layer, "head" in the checkpoint), on the pooled row:
//     pooled = x_out[:, p]  p = 0 (CLS); causal: p = T-1     (B,C)
//              (--pool mean: the mean of x_out[:, 1:])
//     logits = ln_f(pooled) Wout^T + bout                    (B,OUT)
//     loss = MSE(logits, target) or logistic(logits, ±1 label) (regression), cross-entropy (class)
//   The next-token readout (a causal language model) reads every position instead:
//     logits = ln_f(x_out) Wout^T + bout                     (B,T,V)
//     loss = sum_{b,t} w_bt CE(logits_bt, next token_bt) / sum w_bt   w: the loss mask (the answer)
// How the GPU computes (kernel versions, TF32) is the model's Kernels, handed to each layer call
// that depends on it.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>
#include "attention/versions.cuh"      // attention_forward, attention_backward: the method (attention.cuh)
#include "layers/adamw.cuh"            // adamw_update_groups, AdamWGroups
#include "layers/clip.cuh"             // clip_grad_norm, grad_norm_scratch_size
#include "layers/config.h"             // Config, ParamTensors, param_layout, block_params
#include "layers/embedding.cuh"        // embedding_*, scalar_embedding_*
#include "layers/fused.cuh"            // residual_layernorm_*, matmul_bias_gelu_*
#include "layers/layernorm.cuh"        // layernorm_*
#include "layers/loss.cuh"             // mse_*, logistic_*, crossentropy_*
#include "layers/matmul.cuh"           // matmul_*
#include "layers/patch_embedding.cuh"  // patchify_*, assemble_*, mean_pool_*
#include "layers/pointwise.cuh"        // gelu_*, residual_*, pick_position_*

// ----------------------------------------------------------------------------
// activations for a batch of B rows; the same struct over the gradient buffers holds their
// gradients, where what has no gradient (the LayerNorm statistics, A, the probabilities, the
// losses) has no room and a null pointer

struct Activations {
    // images only (empty for a token model): the flattened patches and their embedding
    float* patches;    // (B,NP,channels·P·P)
    float* embedded;   // (B,NP,C)
    float* encoded;    // (B,T,C)  the embedding: layer 0's x
    // every layer's block, as in BlockActivations (layer l's slice: block_activations)
    float* ln1;        // (L,B,T,C)
    float* ln1_mean;   // (L,B,T)
    float* ln1_rstd;   // (L,B,T)
    float* qkv;        // (L,B,T,3·NH·HS)
    float* att;        // (L,B,NH,T,T)  A (its gradient is never stored: see Model::dscores)
    float* y;          // (L,B,T,NH·HS)
    float* proj;       // (L,B,T,C)
    float* x_mid;      // (L,B,T,C)  x after the attention half of the block
    float* ln2;        // (L,B,T,C)
    float* ln2_mean;   // (L,B,T)
    float* ln2_rstd;   // (L,B,T)
    float* mlp_fc;     // (L,B,T,MLP)
    float* mlp_gelu;   // (L,B,T,MLP)
    float* mlp_proj;   // (L,B,T,C)
    float* x_out;      // (L,B,T,C)  x after the whole block
    // the readout's rows R = B·readout_rows(): one per example, or (next token) every position
    float* pooled;     // (B,C)  x_out[:, readout_position] of the last block (--pool mean: the patches'
                       //        mean); unused by next token
    // the last block after attention on the readout's row alone (model_forward with
    // readout_row_only): BlockActivations' fields, one row per example; its x_out is pooled
    float* readout_input;     // (B,C)  x[:, readout_position] entering the last block
    float* readout_y;         // (B,NH·HS)
    float* readout_proj;      // (B,C)
    float* readout_x_mid;     // (B,C)
    float* readout_ln2;       // (B,C)
    float* readout_ln2_mean;  // (B)
    float* readout_ln2_rstd;  // (B)
    float* readout_mlp_fc;    // (B,MLP)
    float* readout_mlp_gelu;  // (B,MLP)
    float* readout_mlp_proj;  // (B,C)
    float* lnf;        // (R,C)
    float* lnf_mean;   // (R)
    float* lnf_rstd;   // (R)
    float* logits;     // (R,OUT)
    float* probs;      // (R,OUT)  softmax, classification and next token
    float* losses;     // (R)
};

// Points the fields of a at consecutive slices of base (nullptr: only count) and returns the
// floats they take; gradients = true lays out the gradient buffers, without the slots that
// have no gradient, and without the residual stream's slots but one: a sum passes its gradient
// to both its terms unchanged, so the gradients of every block's x, proj, x_mid, mlp_proj and
// x_out are one buffer, encoded's (B,T,C), which the backward reads and adds into in place
// (block_gradients).
inline size_t activations_bind(const Config& c, int B, Activations* a, float* base, bool gradients) {
    const size_t BT = (size_t)B * c.T, L = c.L, R = (size_t)B * c.readout_rows(), BP = (size_t)B * c.patches();
    const bool FWD = true;  // a slot only the forward pass has: no room in the gradient buffers
    const bool RESIDUAL = true;  // a residual-stream slot: its gradient is encoded's (no room of its own)
    struct Slot { float** ptr; size_t n; bool forward_only = false; };
    const Slot slots[] = {
        {&a->patches, BP * c.patch_size(), FWD},  {&a->embedded, BP * c.C},
        {&a->encoded, BT * c.C},
        {&a->ln1, L * BT * c.C},           {&a->ln1_mean, L * BT, FWD},   {&a->ln1_rstd, L * BT, FWD},
        {&a->qkv, L * BT * c.qkv_width()}, {&a->att, L * B * c.NH * c.T * c.T, FWD},
        {&a->y, L * BT * c.attention_width()},
        {&a->proj, L * BT * c.C, RESIDUAL}, {&a->x_mid, L * BT * c.C, RESIDUAL},
        {&a->ln2, L * BT * c.C},           {&a->ln2_mean, L * BT, FWD},   {&a->ln2_rstd, L * BT, FWD},
        {&a->mlp_fc, L * BT * c.MLP},      {&a->mlp_gelu, L * BT * c.MLP},
        {&a->mlp_proj, L * BT * c.C, RESIDUAL}, {&a->x_out, L * BT * c.C, RESIDUAL},
        {&a->pooled, (size_t)B * c.C},
        {&a->readout_input, (size_t)B * c.C, FWD},       {&a->readout_y, (size_t)B * c.attention_width(), FWD},
        {&a->readout_proj, (size_t)B * c.C, FWD},        {&a->readout_x_mid, (size_t)B * c.C, FWD},
        {&a->readout_ln2, (size_t)B * c.C, FWD},         {&a->readout_ln2_mean, (size_t)B, FWD},
        {&a->readout_ln2_rstd, (size_t)B, FWD},          {&a->readout_mlp_fc, (size_t)B * c.MLP, FWD},
        {&a->readout_mlp_gelu, (size_t)B * c.MLP, FWD},  {&a->readout_mlp_proj, (size_t)B * c.C, FWD},
        {&a->lnf, R * c.C},                {&a->lnf_mean, R, FWD},        {&a->lnf_rstd, R, FWD},
        {&a->logits, R * c.OUT},           {&a->probs, R * c.OUT, FWD},   {&a->losses, R, FWD},
    };
    size_t total = 0;
    for (const Slot& slot : slots) {
        if (gradients && slot.forward_only) {
            if (base) *slot.ptr = nullptr;
            continue;
        }
        if (base) *slot.ptr = base + total;
        total += slot.n;
    }
    return total;
}

// Layer l's slice of the activations (or of their gradients): what one block reads and writes.
// input is the block's x: the embedding for layer 0, the previous block's output after that.
struct BlockActivations {
    float* input;      // (B,T,C)
    float* ln1;        // (B,T,C)
    float* ln1_mean;   // (B,T)
    float* ln1_rstd;   // (B,T)
    float* qkv;        // (B,T,3·NH·HS)
    float* att;        // (B,NH,T,T)
    float* y;          // (B,T,NH·HS)
    float* proj;       // (B,T,C)
    float* x_mid;      // (B,T,C)
    float* ln2;        // (B,T,C)
    float* ln2_mean;   // (B,T)
    float* ln2_rstd;   // (B,T)
    float* mlp_fc;     // (B,T,MLP)
    float* mlp_gelu;   // (B,T,MLP)
    float* mlp_proj;   // (B,T,C)
    float* x_out;      // (B,T,C)
};

inline BlockActivations block_activations(const Config& c, const Activations& a, int B, int l) {
    const size_t BT = (size_t)B * c.T, C = c.C;
    // slot + l * per_layer, or null where the slot has no room (the gradient buffers)
    auto at = [l](float* slot, size_t per_layer) { return slot ? slot + l * per_layer : nullptr; };
    return {l == 0 ? a.encoded : a.x_out ? a.x_out + (l - 1) * BT * C : nullptr,
            at(a.ln1, BT * C),
            at(a.ln1_mean, BT),
            at(a.ln1_rstd, BT),
            at(a.qkv, BT * c.qkv_width()),
            at(a.att, (size_t)B * c.NH * c.T * c.T),
            at(a.y, BT * c.attention_width()),
            at(a.proj, BT * C),
            at(a.x_mid, BT * C),
            at(a.ln2, BT * C),
            at(a.ln2_mean, BT),
            at(a.ln2_rstd, BT),
            at(a.mlp_fc, BT * c.MLP),
            at(a.mlp_gelu, BT * c.MLP),
            at(a.mlp_proj, BT * C),
            at(a.x_out, BT * C)};
}

// Layer l's slice of the gradient buffers: the residual stream's fields all the one residual
// gradient (activations_bind), the others as block_activations gives them.
inline BlockActivations block_gradients(const Config& c, const Activations& d, int B, int l) {
    BlockActivations dx = block_activations(c, d, B, l);
    dx.input = dx.proj = dx.x_mid = dx.mlp_proj = dx.x_out = d.encoded;
    return dx;
}

// The last block's readout row (forward only): the compact slots of Activations as a block whose
// rows are the examples, for block_tail_forward. Only the fields after attention are used.
inline BlockActivations readout_row_block(const Activations& a) {
    BlockActivations h = {};
    h.input = a.readout_input;
    h.y = a.readout_y;
    h.proj = a.readout_proj;
    h.x_mid = a.readout_x_mid;
    h.ln2 = a.readout_ln2;
    h.ln2_mean = a.readout_ln2_mean;
    h.ln2_rstd = a.readout_ln2_rstd;
    h.mlp_fc = a.readout_mlp_fc;
    h.mlp_gelu = a.readout_mlp_gelu;
    h.mlp_proj = a.readout_mlp_proj;
    h.x_out = a.pooled;
    return h;
}

// ----------------------------------------------------------------------------
// the model

// The pointers start null, so that model_free may free a model whose model_build failed halfway.
struct Model {
    Config cfg;
    Device dev = DEVICE_CPU;
    Kernels kernels;  // how the GPU computes (set at setup from the flags; the CPU ignores it)
    int B;  // rows per batch the buffers hold
    std::vector<TensorInfo> layout;
    size_t num_params, num_acts, num_dacts, num_dscores;  // floats in each buffer
    float *params_mem = nullptr, *grads_mem = nullptr, *m_mem = nullptr, *v_mem = nullptr;
    float *acts_mem = nullptr, *dacts_mem = nullptr;
    ParamTensors params, grads, m, v;
    // (B,NH,T,T) dS, the gradient of one layer's attention scores: attention_backward writes
    // it and reads it back (for dq, dk and dM); the layers take turns, so one buffer serves all
    float* dscores = nullptr;
    float* mask_term = nullptr;  // (NH,T,T) log σ(M) of the layer attention_forward is on: scratch, per layer
    int* tokens = nullptr;        // (B,T) on dev, token models
    TokenRows by_token;           // the batch's rows grouped by token: the GPU's kernel 2 embedding gradient
    float* pixels = nullptr;      // (B,channels,H,W) on dev, image models
    float* targets = nullptr;     // (B·readout_rows) on dev: a value, a class, or the next token at each position
    float* loss_mask = nullptr;   // (B·T) on dev, next-token readout only: 1 where a position counts in the loss
    bool loss_masked;   // whether the last forward pass weighted its rows by loss_mask
    float loss_count;   // the counted rows of the last forward pass: the loss's denominator
    int loss_rows;      // the rows of the last forward pass with targets; 0 when it had none
    bool readout_row_only;  // whether the last forward pass ran the last block's tail on the readout's row alone
    float* token_value = nullptr;  // (V) on dev: cfg.token_value; nullptr under token encoding
    std::vector<float> losses_host;  // (B·readout_rows)
    AdamWSettings adam;
    float weight_decay = 1e-3f, mask_weight_decay = 0.0f;
    float label_smoothing = 0.0f;  // of the cross-entropy readouts
    bool freeze_mask = false;      // --freeze-mask: M is a constant, with no gradient and no update
    float* norm_scratch = nullptr;  // (grad_norm_scratch_size(num_params)) model_clip_gradients' partial sums
    int adam_t = 0;  // optimizer steps taken
};

inline void model_build(Model& model, const Config& cfg, Device dev, int B) {
    if (cfg.encoding == ENCODING_SCALAR && (int)cfg.token_value.size() != cfg.V)
        fail("scalar encoding needs a value per token (%zu values for V = %d)", cfg.token_value.size(), cfg.V);
    if (cfg.loss == LOSS_LOGISTIC && cfg.readout != READOUT_REGRESSION)
        fail("the logistic loss needs a regression readout");
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
    model.num_acts = activations_bind(cfg, B, &unbound, nullptr, false);
    model.num_dacts = activations_bind(cfg, B, &unbound, nullptr, true);
    model.acts_mem = buffer_alloc(dev, model.num_acts);
    model.dacts_mem = buffer_alloc(dev, model.num_dacts);
    buffer_zero(dev, model.acts_mem, model.num_acts);
    buffer_zero(dev, model.dacts_mem, model.num_dacts);
    model.num_dscores = (size_t)B * cfg.NH * cfg.T * cfg.T;
    model.dscores = buffer_alloc(dev, model.num_dscores);
    model.norm_scratch = buffer_alloc(dev, grad_norm_scratch_size(model.num_params));
    model.mask_term = buffer_alloc(dev, (size_t)cfg.NH * cfg.T * cfg.T);
    const size_t R = (size_t)B * cfg.readout_rows();
    if (dev == DEVICE_GPU) {
        cudaCheck(cudaMalloc(&model.tokens, (size_t)B * cfg.T * sizeof(int)));
        cudaCheck(cudaMalloc(&model.by_token.device, token_rows_capacity(B * cfg.T) * sizeof(int)));
    } else {
        model.tokens = (int*)malloc((size_t)B * cfg.T * sizeof(int));
    }
    model.pixels = cfg.image_input() ? buffer_alloc(dev, (size_t)B * cfg.image_size()) : nullptr;
    model.targets = buffer_alloc(dev, R);
    model.loss_mask = cfg.readout == READOUT_NEXT_TOKEN ? buffer_alloc(dev, R) : nullptr;
    model.loss_masked = false;
    model.loss_count = 0;
    model.loss_rows = 0;
    model.readout_row_only = false;
    model.token_value = nullptr;
    if (cfg.encoding == ENCODING_SCALAR) {
        model.token_value = buffer_alloc(dev, cfg.V);
        buffer_copy(model.token_value, dev, cfg.token_value.data(), DEVICE_CPU, cfg.V);
    }
    model.losses_host.assign(R, 0.0f);
}

inline void model_free(Model& model) {
    for (float* p : {model.params_mem, model.grads_mem, model.m_mem, model.v_mem, model.acts_mem, model.dacts_mem,
                     model.dscores, model.mask_term, model.targets, model.norm_scratch})
        buffer_free(model.dev, p);
    if (model.token_value) buffer_free(model.dev, model.token_value);
    if (model.loss_mask) buffer_free(model.dev, model.loss_mask);
    if (model.pixels) buffer_free(model.dev, model.pixels);
    if (model.dev == DEVICE_GPU) {
        cudaCheck(cudaFree(model.tokens));
        cudaCheck(cudaFree(model.by_token.device));
    } else {
        free(model.tokens);
    }
}

// Frees a model's buffers when the scope that holds it ends, however it ends: a run that fails
// throws out of that scope (main.cu), and nothing it allocated may leak (make test-sanitize).
struct ModelOwner {
    Model& model;
    ~ModelOwner() { model_free(model); }
};

// The activations of the last forward pass on `rows` examples (the layout depends on rows).
inline Activations model_activations(const Model& model, int rows) {
    Activations a;
    activations_bind(model.cfg, rows, &a, model.acts_mem, false);
    return a;
}

// A host copy of one of the model's flat buffers: params_mem, grads_mem, m_mem or v_mem.
inline std::vector<float> model_download(const Model& model, const float* buffer) {
    std::vector<float> host(model.num_params);
    buffer_copy(host.data(), DEVICE_CPU, buffer, model.dev, model.num_params);
    return host;
}

// Fills one of the model's flat buffers from a host copy (num_params floats).
inline void model_upload(Model& model, float* buffer, const std::vector<float>& host) {
    buffer_copy(buffer, model.dev, host.data(), DEVICE_CPU, model.num_params);
}

// The attention shape of layer l: a layer without a mask has mask_heads 0.
inline AttentionShape model_attention_shape(const Config& c, int B, int l) {
    return {B, c.T, c.NH, c.HS, c.layer_has_mask(l) ? c.mask_heads : 0, c.causal};
}

// The block after attention, on N rows (every position, or one per example):
//   proj = y Wproj^T + bproj,  x_mid = x + proj,  ln2 = layernorm(x_mid),
//   mlp_fc = ln2 Wfc^T + bfc,  mlp_gelu = gelu(mlp_fc),  mlp_proj = mlp_gelu Wmlp^T + bmlp,
//   x_out = x_mid + mlp_proj
inline void block_tail_forward(const Model& model, const BlockParams& w, const BlockActivations& x, int N) {
    const Config& c = model.cfg;
    const Device dev = model.dev;
    const Kernels& k = model.kernels;
    const int C = c.C;
    matmul_forward(dev, k, x.proj, x.y, w.projw, w.projb, N, c.attention_width(), C);
    residual_layernorm_forward(dev, k, x.x_mid, x.ln2, x.ln2_mean, x.ln2_rstd, x.input, x.proj, w.ln2w, w.ln2b, N, C);
    matmul_bias_gelu_forward(dev, k, x.mlp_fc, x.mlp_gelu, x.ln2, w.mlp_fcw, w.mlp_fcb, N, C, c.MLP);
    matmul_forward(dev, k, x.mlp_proj, x.mlp_gelu, w.mlp_projw, w.mlp_projb, N, c.MLP, C);
    residual_forward(dev, x.x_out, x.x_mid, x.mlp_proj, (size_t)N * C);
}

// Its backward, the forward's lines in reverse, from the residual gradient (the gradients dx, dw
// accumulate). dx's residual fields are the one residual gradient (block_gradients): each sum
// passes it on unchanged, and the LayerNorm backward adds its part into it in place.
inline void block_tail_backward(const Model& model, const BlockParams& w, const BlockParams& dw,
                                const BlockActivations& x, const BlockActivations& dx, int N) {
    const Config& c = model.cfg;
    const Device dev = model.dev;
    const Kernels& k = model.kernels;
    const int C = c.C;
    // x_out = x_mid + mlp_proj: dx_mid = dmlp_proj = dx_out, the residual gradient as it is
    // mlp_proj = mlp_gelu Wmlp^T + bmlp
    matmul_backward(dev, k, dx.mlp_gelu, dw.mlp_projw, dw.mlp_projb, dx.mlp_proj, x.mlp_gelu, w.mlp_projw, N, c.MLP, C);
    // mlp_gelu = gelu(mlp_fc), mlp_fc = ln2 Wfc^T + bfc
    matmul_bias_gelu_backward(dev, k, dx.ln2, dw.mlp_fcw, dw.mlp_fcb, dx.mlp_fc, dx.mlp_gelu, x.mlp_fc, x.ln2,
                              w.mlp_fcw, N, C, c.MLP);
    // ln2 = layernorm(x_mid): dx_mid += its input gradient; x_mid = x + proj: dx = dproj = dx_mid
    layernorm_backward(dev, k, dx.x_mid, dw.ln2w, dw.ln2b, dx.ln2, x.x_mid, w.ln2w, x.ln2_mean, x.ln2_rstd, N, C);
    // proj = y Wproj^T + bproj
    matmul_backward(dev, k, dx.y, dw.projw, dw.projb, dx.proj, x.y, w.projw, N, c.attention_width(), C);
}

// What a forward pass reads, in host memory: token ids (rows,T), or for an image model the
// normalised pixels (rows,channels,H,W). A token array converts to it, as most callers pass one.
struct ModelInput {
    const int* tokens = nullptr;
    const float* pixels = nullptr;
    ModelInput(const int* token_ids) : tokens(token_ids) {}
    ModelInput(const float* image_pixels) : pixels(image_pixels) {}
    // the same input from example `first` on
    ModelInput from(int first, const Config& c) const {
        return pixels ? ModelInput(pixels + (size_t)first * c.image_size()) : ModelInput(tokens + (size_t)first * c.T);
    }
};

// The first residual stream a.encoded (B,T,C) from the input, uploaded to the device: token ids
// through the (scalar) embedding, or an image through patchify, the patch embedding (a matmul)
// and assemble (CLS, position embedding).
inline void input_forward(Model& model, ModelInput input, const Activations& a, int B) {
    const Config& c = model.cfg;
    const ParamTensors& p = model.params;
    const Device dev = model.dev;
    if (c.image_input()) {
        buffer_copy(model.pixels, dev, input.pixels, DEVICE_CPU, (size_t)B * c.image_size());
        patchify_forward(dev, a.patches, model.pixels, B, c.channels, c.height, c.width, c.patch);
        matmul_forward(dev, model.kernels, a.embedded, a.patches, p.patchw, p.patchb, B * c.patches(), c.patch_size(),
                       c.C);
        assemble_forward(dev, a.encoded, a.embedded, p.cls, p.wpe, B, c.T, c.C);
        return;
    }
    const size_t bytes = (size_t)B * c.T * sizeof(int);
    if (dev == DEVICE_GPU) device_copy(model.tokens, input.tokens, bytes, cudaMemcpyHostToDevice);
    else memcpy(model.tokens, input.tokens, bytes);
    if (dev == DEVICE_GPU && model.kernels.fast_layers) token_rows_build(model.by_token, input.tokens, B * c.T, c.V);
    if (c.encoding == ENCODING_SCALAR)
        scalar_embedding_forward(dev, a.encoded, model.tokens, model.token_value, p.wte, p.wval, p.wpe, B, c.T, c.C);
    else embedding_forward(dev, a.encoded, model.tokens, p.wte, p.wpe, B, c.T, c.C);
}

// backward of input_forward, from d.encoded; accumulates into model.grads (the pixels and the
// token ids have no gradient)
inline void input_backward(Model& model, const Activations& a, const Activations& d, int B) {
    const Config& c = model.cfg;
    const ParamTensors& p = model.params;
    const ParamTensors& g = model.grads;
    const Device dev = model.dev;
    if (c.image_input()) {
        // encoded = assemble(embedded, cls, wpe)
        assemble_backward(dev, model.kernels, d.embedded, g.cls, g.wpe, d.encoded, B, c.T, c.C);
        // embedded = patches patch_w^T + patch_b
        matmul_backward(dev, model.kernels, nullptr, g.patchw, g.patchb, d.embedded, a.patches, p.patchw,
                        B * c.patches(), c.patch_size(), c.C);
    } else if (c.encoding == ENCODING_SCALAR) {
        scalar_embedding_backward(dev, model.kernels, g.wte, g.wval, g.wpe, d.encoded, model.tokens, model.token_value,
                                  model.by_token, B, c.T, c.C);
    } else {
        embedding_backward(dev, model.kernels, g.wte, g.wpe, d.encoded, model.tokens, model.by_token, B, c.T, c.C);
    }
}

// Forward pass on `rows` <= model.B examples, host memory: the input (tokens or pixels), targets
// (rows·readout_rows), and for the next-token readout loss_mask (rows·T) of 0/1 (nullptr: every
// position counts). Leaves the outputs in model_activations(model, rows).logits and returns
// the mean loss over the counted rows. targets = nullptr: the outputs only, no loss (returns 0),
// and model_backward refuses to run after it.
// readout_row_only (evaluation): a readout that reads one position (CLS, or the last one) needs, after
// the last block's attention, that position alone: every layer after attention treats each row
// on its own. So the last block's tail runs on one row per example, a T-th of the work, with the
// same bits in the outputs, the loss and every layer's attention; the last block's other rows
// are left unset, and model_backward refuses to run after it.
inline float model_forward(Model& model, ModelInput input, const float* targets, int rows,
                           const float* loss_mask = nullptr, bool readout_row_only = false) {
    const Config& c = model.cfg;
    const Device dev = model.dev;
    const Kernels& k = model.kernels;
    const int B = rows, T = c.T, C = c.C, BT = B * T, R = B * c.readout_rows();
    const int QKV = c.qkv_width(), AW = c.attention_width();
    if (rows < 1 || rows > model.B)
        throw std::logic_error("model_forward: " + std::to_string(rows) + " rows, but the buffers hold 1 to " +
                               std::to_string(model.B));
    model.loss_rows = 0;
    model.readout_row_only = readout_row_only && c.readout != READOUT_NEXT_TOKEN && c.pool == POOL_CLS;
    if (c.image_input() != (input.pixels != nullptr))
        throw std::logic_error(std::string("model_forward: an ") + (c.image_input() ? "image" : "token") +
                               " model was given " + (input.pixels ? "pixels" : "tokens"));
    Activations a = model_activations(model, B);
    const ParamTensors& p = model.params;
    input_forward(model, input, a, B);
    for (int l = 0; l < c.L; l++) {
        const BlockParams w = block_params(c, p, l);
        const BlockActivations x = block_activations(c, a, B, l);
        // ln1 = layernorm(x), qkv = ln1 Wqkv^T + bqkv, y = attention(qkv, mask_l)
        layernorm_forward(dev, k, x.ln1, x.ln1_mean, x.ln1_rstd, x.input, w.ln1w, w.ln1b, BT, C);
        matmul_forward(dev, k, x.qkv, x.ln1, w.qkvw, w.qkvb, BT, C, QKV);
        attention_forward(dev, k, x.y, x.att, x.qkv, w.mask, model.mask_term, model_attention_shape(c, B, l));
        if (model.readout_row_only && l == c.L - 1) {  // the tail on the readout's row: its x_out is pooled
            const BlockActivations r = readout_row_block(a);
            pick_position_forward(dev, r.input, x.input, B, T, C, c.readout_position());
            pick_position_forward(dev, r.y, x.y, B, T, AW, c.readout_position());
            block_tail_forward(model, w, r, B);
        } else {
            block_tail_forward(model, w, x, BT);
        }
    }
    // the readout's input: the pooled row, or (next token) the whole last residual stream
    float* x_last = block_activations(c, a, B, c.L - 1).x_out;  // (B,T,C)
    const float* readout_in = x_last;
    if (c.readout != READOUT_NEXT_TOKEN) {
        if (c.pool == POOL_MEAN) mean_pool_forward(dev, a.pooled, x_last, B, T, C);
        else if (!model.readout_row_only) pick_position_forward(dev, a.pooled, x_last, B, T, C, c.readout_position());
        readout_in = a.pooled;
    }
    layernorm_forward(dev, k, a.lnf, a.lnf_mean, a.lnf_rstd, readout_in, p.lnfw, p.lnfb, R, C);
    matmul_forward(dev, k, a.logits, a.lnf, p.readoutw, p.readoutb, R, C, c.OUT);
    if (!targets) return 0;

    buffer_copy(model.targets, dev, targets, DEVICE_CPU, R);
    model.loss_masked = c.readout == READOUT_NEXT_TOKEN && loss_mask;
    const float* row_weight = model.loss_masked ? model.loss_mask : nullptr;
    model.loss_count = (float)R;
    if (model.loss_masked) {
        buffer_copy(model.loss_mask, dev, loss_mask, DEVICE_CPU, R);
        model.loss_count = 0;
        for (int r = 0; r < R; r++) model.loss_count += loss_mask[r];
        if (model.loss_count == 0) fail("the loss mask counts no position");
    }
    if (c.readout != READOUT_REGRESSION)
        crossentropy_forward(dev, k, a.losses, a.probs, a.logits, model.targets, row_weight, R, c.OUT,
                             model.label_smoothing);
    else if (c.loss == LOSS_LOGISTIC) logistic_forward(dev, a.losses, a.logits, model.targets, B);
    else mse_forward(dev, a.losses, a.logits, model.targets, B);

    buffer_copy(model.losses_host.data(), DEVICE_CPU, a.losses, dev, R);
    double sum = 0;
    for (int r = 0; r < R; r++) sum += model.losses_host[r];  // fixed order: reproducible
    model.loss_rows = rows;
    return (float)(sum / model.loss_count);
}

inline void model_zero_grad(Model& model) {
    buffer_zero(model.dev, model.grads_mem, model.num_params);
    buffer_zero(model.dev, model.dacts_mem, model.num_dacts);
}

// Backward pass of the last model_forward, which must have had targets and the same rows;
// accumulates into model.grads. Anything else is a bug in the caller, refused with
// std::logic_error: the loss state would belong to another batch, or to none.
inline void model_backward(Model& model, int rows) {
    if (model.loss_rows == 0)
        throw std::logic_error("model_backward: the last model_forward had no targets, so there is no loss to "
                               "differentiate");
    if (model.readout_row_only)
        throw std::logic_error("model_backward: the last model_forward ran the last block on the readout's row only");
    if (rows != model.loss_rows)
        throw std::logic_error("model_backward: " + std::to_string(rows) + " rows, but the last model_forward had " +
                               std::to_string(model.loss_rows));
    const Config& c = model.cfg;
    const Device dev = model.dev;
    const Kernels& k = model.kernels;
    const int B = rows, T = c.T, C = c.C, BT = B * T, R = B * c.readout_rows();
    Activations a = model_activations(model, B), d;
    activations_bind(c, B, &d, model.dacts_mem, true);
    const ParamTensors& p = model.params;
    const ParamTensors& g = model.grads;

    // loss = MSE, logistic or cross-entropy of the logits
    const bool next_token = c.readout == READOUT_NEXT_TOKEN;
    if (c.readout != READOUT_REGRESSION) {
        const float* row_weight = model.loss_masked ? model.loss_mask : nullptr;
        crossentropy_backward(dev, d.logits, a.probs, model.targets, row_weight, model.loss_count, R, c.OUT,
                              model.label_smoothing);
    } else if (c.loss == LOSS_LOGISTIC) logistic_backward(dev, d.logits, a.logits, model.targets, B);
    else mse_backward(dev, d.logits, a.logits, model.targets, B);
    // logits = lnf Wout^T + bout, lnf = ln_f(pooled or x_out)
    matmul_backward(dev, k, d.lnf, g.readoutw, g.readoutb, d.logits, a.lnf, p.readoutw, R, C, c.OUT);
    float* x_last = block_activations(c, a, B, c.L - 1).x_out;  // (B,T,C)
    float* dx_last = d.encoded;  // (B,T,C) the residual gradient: the last block's dx_out, then each block's dx
    layernorm_backward(dev, k, next_token ? dx_last : d.pooled, g.lnfw, g.lnfb, d.lnf, next_token ? x_last : a.pooled,
                       p.lnfw, a.lnf_mean, a.lnf_rstd, R, C);
    // pooled = x_out[:, p], or the mean of x_out[:, 1:]
    if (!next_token && c.pool == POOL_MEAN) mean_pool_backward(dev, dx_last, d.pooled, B, T, C);
    else if (!next_token) pick_position_backward(dev, dx_last, d.pooled, B, T, C, c.readout_position());
    for (int l = c.L - 1; l >= 0; l--) {
        const BlockParams w = block_params(c, p, l), dw = block_params(c, g, l);
        const BlockActivations x = block_activations(c, a, B, l), dx = block_gradients(c, d, B, l);
        block_tail_backward(model, w, dw, x, dx, BT);
        // y = attention(qkv, mask_l)
        attention_backward(dev, k, dx.qkv, dw.mask, model.dscores, dx.y, x.qkv, x.att, w.mask,
                           model_attention_shape(c, B, l));
        // qkv = ln1 Wqkv^T + bqkv
        matmul_backward(dev, k, dx.ln1, dw.qkvw, dw.qkvb, dx.qkv, x.ln1, w.qkvw, BT, C, c.qkv_width());
        // ln1 = layernorm(x)
        layernorm_backward(dev, k, dx.input, dw.ln1w, dw.ln1b, dx.ln1, x.input, w.ln1w, x.ln1_mean, x.ln1_rstd, BT, C);
    }
    input_backward(model, a, d, B);
    if (model.freeze_mask && c.mask_heads > 0)  // a constant has no gradient: dM (prior layers, mask heads, T, T) = 0
        buffer_zero(dev, g.mask, (size_t)c.prior_layer_count() * c.mask_heads * T * T);
}

// Clips the gradient of every parameter at once to the global norm max_norm (layers/clip.cuh);
// returns the norm before clipping.
inline double model_clip_gradients(Model& model, float max_norm) {
    return clip_grad_norm(model.dev, model.grads_mem, model.num_params, max_norm, model.norm_scratch);
}

// One AdamW step over every parameter, one launch on the flat buffers: each tensor's range with
// its weight decay (the mask has its own), a frozen mask in no range (untouched).
inline void model_update(Model& model) {
    model.adam_t++;
    std::vector<const TensorInfo*> by_offset;
    for (const TensorInfo& info : model.layout)
        if (info.numel > 0) by_offset.push_back(&info);
    auto offset = [&](const TensorInfo* info) { return (size_t)(model.params.*info->field - model.params_mem); };
    std::sort(by_offset.begin(), by_offset.end(),
              [&](const TensorInfo* a, const TensorInfo* b) { return offset(a) < offset(b); });
    AdamWGroups groups;
    for (const TensorInfo* info : by_offset) {
        const bool mask = info->field == &ParamTensors::mask;
        if (mask && model.freeze_mask) continue;
        groups.add(offset(info), offset(info) + info->numel * info->slices,
                   mask ? model.mask_weight_decay : model.weight_decay);
    }
    adamw_update_groups(model.dev, model.params_mem, model.m_mem, model.v_mem, model.grads_mem, groups, model.adam,
                        model.adam_t);
}
