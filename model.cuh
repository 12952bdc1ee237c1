// model.cuh: the transformer as wiring. It owns four buffers (parameters, gradients, and the
// two AdamW moments, all with the same layout: layers/config.h) and two more (activations and
// their gradients), each carved from one allocation, and calls the layers in order. It knows
// no task: a task hands it token ids, targets and, for the mask init, a plain matrix G. What is
// not the method enters at one named call each: the batch's way to the device
// (model_batch_set, gpu/model_batch.cuh), a captured pass (device_work, gpu/graph.cuh), and the
// training recipe's drop-path (drop_path_*, recipe/drop_path.cuh) and mixed targets (mix_targets).
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
//   (--drop-path, training passes: proj and mlp_proj scaled per example first: drop_path_forward)
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
#include "attention.cuh"                // AttentionShape
#include "attention/versions.cuh"      // attention_forward, attention_backward: the method (attention.cuh)
#include "gpu/device_step.cuh"         // StepLog, StepScalars, loss_mean, step_log_cleared
#include "gpu/graph.cuh"               // GraphCache, device_work
#include "gpu/model_batch.cuh"         // ModelBatch, ModelInput, model_batch_build, model_batch_set, model_batch_free
#include "gpu/stream.cuh"              // gpu_setup
#include "layers/activations.h"        // Activations, activations_bind, BlockActivations, block_activations,
                                       // block_gradients, readout_row_block
#include "layers/adamw.cuh"            // AdamWSettings
#include "layers/clip.cuh"             // grad_norm_scratch_size
#include "layers/column_sums.cuh"      // column_groups, column_scratch_reserve
#include "layers/config.h"             // Config, ParamTensors, param_layout, block_params, BlockParams,
                                       // TensorInfo, param_bind, param_count, READOUT_*, POOL_*, LOSS_*, ENCODING_*
#include "layers/device.cuh"           // Device, DEVICE_*, buffer_*, value_*: where buffers live
#include "layers/embedding.cuh"        // embedding_*, scalar_embedding_*, TokenRows
#include "layers/errors.h"             // fail
#include "layers/fused.cuh"            // residual_layernorm_*, matmul_bias_gelu_*, mlp_backward
#include "layers/kernels.h"            // Kernels
#include "layers/layernorm.cuh"        // layernorm_*
#include "layers/loss.cuh"             // readout_loss_forward, readout_loss_backward, LossTargets
#include "layers/matmul.cuh"           // matmul_*
#include "layers/patch_embedding.cuh"  // patchify_*, assemble_*, mean_pool_*
#include "layers/pointwise.cuh"        // gelu_*, residual_*, pick_position_*
#include "recipe/drop_path.cuh"        // DropPath, drop_path_set, drop_path_draw, drop_path_forward, _backward,
                                       // drop_path_free
#include "recipe/ema.cuh"              // WeightAverage, weight_average_free

// ----------------------------------------------------------------------------
// the model

// The pointers start null, so that model_free may free a model whose model_build failed halfway.
struct Model {
    // what it is, and how it computes
    Config cfg;
    Device dev = DEVICE_CPU;
    Kernels kernels;  // which versions compute (set at setup from the flags: layers/kernels.h)
    int B;            // rows per batch the buffers hold

    // parameters, their gradients, and AdamW's two moments: four buffers of num_params floats with one
    // layout (layers/config.h), and the views that name each tensor in them
    std::vector<TensorInfo> layout;
    size_t num_params;
    float *params_mem = nullptr, *grads_mem = nullptr, *m_mem = nullptr, *v_mem = nullptr;
    ParamTensors params, grads, m, v;
    float* token_value = nullptr;  // (V) on dev: cfg.token_value, a constant of the scalar encoding; else nullptr

    // activations of the last forward pass and their gradients (layers/activations.h)
    size_t num_acts, num_dacts;
    float *acts_mem = nullptr, *dacts_mem = nullptr;
    int loss_rows;          // the rows of the last forward pass with targets; 0 when it had none
    bool readout_row_only;  // whether it ran the last block's tail on the readout's row alone

    // the batch and the step's results, on dev (gpu/model_batch.cuh, gpu/device_step.cuh)
    ModelBatch batch;
    float* mean_loss = nullptr;   // (1) the last forward pass's mean loss
    StepLog* step_log = nullptr;  // (1) the training steps since the host last read it

    // scratch that the layers take turns with
    size_t num_dscores;
    float* dscores = nullptr;       // (B,NH,T,T) dS, the gradient of one layer's attention scores:
                                    // attention_backward writes it and reads it back (for dq, dk and dM)
    float* mask_term = nullptr;     // (NH,T,T) log σ(M) of the layer attention_forward is on
    float* norm_scratch = nullptr;  // (grad_norm_scratch_size(num_params)) the gradient clipping's sums

    // the optimizer (run/step.cuh): AdamW's settings and steps, the weight decays, a frozen mask
    AdamWSettings adam;
    int adam_t = 0;  // optimizer steps taken
    float weight_decay = 1e-3f, mask_weight_decay = 0.0f, mask_lr_scale = 1.0f;  // the mask's lr: scale x lr
    bool decay_matrices_only = false;  // weight decay on the weight matrices alone (model_adamw_groups)
    bool freeze_mask = false;          // --freeze-mask: M is a constant, with no gradient and no update
    float label_smoothing = 0.0f;      // of the cross-entropy readouts

    // the training recipe (recipe/): stochastic depth in training passes (--drop-path) and the
    // weights' moving average (--ema), which run/step.cuh updates
    DropPath drop_path;
    WeightAverage ema;
    GraphCache graphs;  // the captured passes and steps, by shape (--cuda-graph; gpu/graph.cuh)
};

// The most column scratch (layers/column_sums.cuh) the model's layers ask for at B rows, which
// model_build reserves on a GPU: the bias and LayerNorm gradients over the B·T rows and over the
// readout's, the position embedding's and CLS's sums over the B examples, the patch embedding's
// bias, and the token embedding's chunks.
inline size_t column_scratch_bound(const Config& c, int B) {
    const int BT = B * c.T, R = B * c.readout_rows();
    const size_t widest = std::max({c.qkv_width(), c.attention_width(), c.MLP, 2 * c.C});
    size_t bound = std::max((size_t)column_groups(BT) * widest, (size_t)column_groups(R) * std::max(c.OUT, 2 * c.C));
    bound = std::max(bound, (size_t)column_groups(B) * c.T * c.C);
    if (c.image_input()) return std::max(bound, (size_t)column_groups(B * c.patches()) * c.C);
    TokenRows shape;
    shape.BT = BT, shape.V = c.V;
    return std::max(bound, (size_t)shape.max_chunks() * c.C);
}

inline void model_build(Model& model, const Config& cfg, Device dev, int B) {
    if (cfg.encoding == ENCODING_SCALAR && (int)cfg.token_value.size() != cfg.V)
        fail("scalar encoding needs a value per token (%zu values for V = %d)", cfg.token_value.size(), cfg.V);
    if (cfg.loss == LOSS_LOGISTIC && cfg.readout != READOUT_REGRESSION)
        fail("the logistic loss needs a regression readout");
    model.cfg = cfg;
    model.dev = dev;
    model.B = B;
    if (dev == DEVICE_GPU) {  // the stream, cuBLAS's handle and the column scratch now: no step may allocate
        gpu_setup();
        column_scratch_reserve(column_scratch_bound(cfg, B));
    }
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
    model.loss_rows = 0;
    model.readout_row_only = false;
    model_batch_build(model.batch, cfg, dev, B);
    model.mean_loss = value_alloc(dev, 0.0f);
    model.step_log = value_alloc(dev, step_log_cleared());
    model.num_dscores = (size_t)B * cfg.NH * cfg.T * cfg.T;
    model.dscores = buffer_alloc(dev, model.num_dscores);
    model.mask_term = buffer_alloc(dev, (size_t)cfg.NH * cfg.T * cfg.T);
    model.norm_scratch = buffer_alloc(dev, grad_norm_scratch_size(model.num_params));
    if (cfg.encoding == ENCODING_SCALAR) {
        model.token_value = buffer_alloc(dev, cfg.V);
        buffer_copy(model.token_value, dev, cfg.token_value.data(), DEVICE_CPU, cfg.V);
    }
}

inline void model_free(Model& model) {
    model.graphs.clear();
    for (float* p : {model.params_mem, model.grads_mem, model.m_mem, model.v_mem, model.token_value, model.acts_mem,
                     model.dacts_mem, model.dscores, model.mask_term, model.norm_scratch})
        buffer_free(model.dev, p);
    model_batch_free(model.batch);
    value_free(model.dev, model.mean_loss);
    value_free(model.dev, model.step_log);
    drop_path_free(model.dev, model.drop_path);
    weight_average_free(model.dev, model.ema);
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

// Hands the model a batch of `rows` <= model.B examples in host memory: the input (tokens or
// pixels), targets (rows·readout_rows, or nullptr: no loss), for the next-token readout
// loss_mask (rows·T) of 0/1 (nullptr: every position counts), the step's scalars, and for a mixed
// image batch mix (rows,2) (recipe/mix.h). On the GPU one asynchronous upload (gpu/model_batch.cuh).
inline void model_set_batch(Model& model, ModelInput input, const float* targets, int rows, const float* loss_mask,
                            StepScalars scalars = {}, const float* mix = nullptr) {
    model_batch_set(model.batch, model.cfg, model.B, model.kernels.fast_layers, input, targets, rows, loss_mask,
                    scalars, mix);
}

// ----------------------------------------------------------------------------
// the forward and backward passes

// The block after attention, layer l's, on N rows (every position, or one per example):
//   proj = y Wproj^T + bproj,  x_mid = x + proj,  ln2 = layernorm(x_mid),
//   mlp_fc = ln2 Wfc^T + bfc,  mlp_gelu = gelu(mlp_fc),  mlp_proj = mlp_gelu Wmlp^T + bmlp,
//   x_out = x_mid + mlp_proj
// A training pass with --drop-path scales proj and mlp_proj per example first (N = B·T rows then).
inline void block_tail_forward(const Model& model, int l, const BlockParams& w, const BlockActivations& x, int N) {
    const Config& c = model.cfg;
    const Device dev = model.dev;
    const Kernels& k = model.kernels;
    const int C = c.C, B = N / c.T;
    matmul_forward(dev, k, x.proj, x.y, w.projw, w.projb, N, c.attention_width(), C);
    drop_path_forward(dev, model.drop_path, l, 0, x.proj, B, (size_t)c.T * C);
    residual_layernorm_forward(dev, k, x.x_mid, x.ln2, x.ln2_mean, x.ln2_rstd, x.input, x.proj, w.ln2w, w.ln2b, N, C);
    matmul_bias_gelu_forward(dev, k, x.mlp_fc, x.mlp_gelu, x.ln2, w.mlp_fcw, w.mlp_fcb, N, C, c.MLP);
    matmul_forward(dev, k, x.mlp_proj, x.mlp_gelu, w.mlp_projw, w.mlp_projb, N, c.MLP, C);
    drop_path_forward(dev, model.drop_path, l, 1, x.mlp_proj, B, (size_t)c.T * C);
    residual_forward(dev, x.x_out, x.x_mid, x.mlp_proj, (size_t)N * C);
}

// Its backward, the forward's lines in reverse, from the residual gradient (the gradients dx, dw
// accumulate). dx's residual fields are the one residual gradient (block_gradients): each sum
// passes it on unchanged, and the LayerNorm backward adds its part into it in place.
inline void block_tail_backward(const Model& model, int l, const BlockParams& w, const BlockParams& dw,
                                const BlockActivations& x, const BlockActivations& dx, int N) {
    const Config& c = model.cfg;
    const Device dev = model.dev;
    const Kernels& k = model.kernels;
    const int C = c.C, B = N / c.T;
    // x_out = x_mid + mlp_proj: dx_mid = dmlp_proj = dx_out, the residual gradient as it is
    // (dropped: x_out = x_mid + f mlp_proj, dmlp_proj = f dx_out)
    const float* dmlp_proj = drop_path_backward(dev, model.drop_path, l, 1, dx.mlp_proj, B, (size_t)c.T * C);
    // mlp_proj = mlp_gelu Wmlp^T + bmlp, mlp_gelu = gelu(mlp_fc), mlp_fc = ln2 Wfc^T + bfc (mlp_backward:
    // the two layers' backwards, or at matmul version 2 the GELU's fused into the second's product)
    mlp_backward(dev, k, dx.ln2, dw.mlp_fcw, dw.mlp_fcb, dx.mlp_fc, dx.mlp_gelu, dw.mlp_projw, dw.mlp_projb,
                 dmlp_proj, x.ln2, x.mlp_fc, x.mlp_gelu, w.mlp_fcw, w.mlp_projw, N, C, c.MLP);
    // ln2 = layernorm(x_mid): dx_mid += its input gradient; x_mid = x + proj: dx = dproj = dx_mid
    // (dropped: dproj = f dx_mid)
    layernorm_backward(dev, k, dx.x_mid, dw.ln2w, dw.ln2b, dx.ln2, x.x_mid, w.ln2w, x.ln2_mean, x.ln2_rstd, N, C);
    const float* dproj = drop_path_backward(dev, model.drop_path, l, 0, dx.proj, B, (size_t)c.T * C);
    // proj = y Wproj^T + bproj
    matmul_backward(dev, k, dx.y, dw.projw, dw.projb, dproj, x.y, w.projw, N, c.attention_width(), C);
}

// The first residual stream a.encoded (B,T,C) from the batch on the device: token ids through
// the (scalar) embedding, or an image through patchify, the patch embedding (a matmul) and
// assemble (CLS, position embedding).
inline void input_forward(Model& model, const Activations& a, int B) {
    const Config& c = model.cfg;
    const ParamTensors& p = model.params;
    const Device dev = model.dev;
    const ModelBatch& batch = model.batch;
    if (c.image_input()) {
        patchify_forward(dev, a.patches, batch.pixels, B, c.channels, c.height, c.width, c.patch);
        matmul_forward(dev, model.kernels, a.embedded, a.patches, p.patchw, p.patchb, B * c.patches(), c.patch_size(),
                       c.C);
        assemble_forward(dev, a.encoded, a.embedded, p.cls, p.wpe, B, c.T, c.C);
        return;
    }
    if (c.encoding == ENCODING_SCALAR)
        scalar_embedding_forward(dev, a.encoded, batch.tokens, model.token_value, p.wte, p.wval, p.wpe, B, c.T, c.C);
    else embedding_forward(dev, a.encoded, batch.tokens, p.wte, p.wpe, B, c.T, c.C);
}

// backward of input_forward, from d.encoded; accumulates into model.grads (the pixels and the
// token ids have no gradient)
inline void input_backward(Model& model, const Activations& a, const Activations& d, int B) {
    const Config& c = model.cfg;
    const ParamTensors& p = model.params;
    const ParamTensors& g = model.grads;
    const Device dev = model.dev;
    const ModelBatch& batch = model.batch;
    if (c.image_input()) {
        // encoded = assemble(embedded, cls, wpe)
        assemble_backward(dev, model.kernels, d.embedded, g.cls, g.wpe, d.encoded, B, c.T, c.C);
        // embedded = patches patch_w^T + patch_b
        matmul_backward(dev, model.kernels, nullptr, g.patchw, g.patchb, d.embedded, a.patches, p.patchw,
                        B * c.patches(), c.patch_size(), c.C);
    } else if (c.encoding == ENCODING_SCALAR) {
        scalar_embedding_backward(dev, model.kernels, g.wte, g.wval, g.wpe, d.encoded, batch.tokens, model.token_value,
                                  batch.by_token, B, c.T, c.C);
    } else {
        embedding_backward(dev, model.kernels, g.wte, g.wpe, d.encoded, batch.tokens, batch.by_token, B, c.T, c.C);
    }
}

// What the loss compares the logits with: the batch's targets, row weights, count and mixed
// targets, on dev
inline LossTargets model_loss_targets(const Model& model) {
    const ModelBatch& batch = model.batch;
    return {batch.targets, batch.row_weights(), &batch.scalars->loss_count, batch.mix_targets(),
            model.label_smoothing};
}

// A caller's bug in the order of the model's calls: refused, naming it
inline void model_require(bool ok, const std::string& what) {
    if (!ok) throw std::logic_error(what);
}

// Forward pass on the batch model_set_batch gave (`rows` examples), on the device alone: the
// host waits for nothing, so that a graph can capture it. Leaves the outputs in
// model_activations(model, rows).logits and, with_loss, the mean loss over the counted rows in
// model.mean_loss (model_read_loss). Without it, the outputs only, and model_backward refuses to
// run after it.
// readout_row_only (evaluation): a readout that reads one position (CLS, or the last one) needs, after
// the last block's attention, that position alone: every layer after attention treats each row
// on its own. So the last block's tail runs on one row per example, a T-th of the work, with the
// same bits in the outputs, the loss and every layer's attention; the last block's other rows
// are left unset, and model_backward refuses to run after it.
// model_forward_state is the host's part (what model_backward checks), which runs every time;
// model_forward_pass the device's, which a graph may replay. training: a training step's pass,
// which drops paths with --drop-path (evaluation drops nothing).
inline void model_forward_state(Model& model, int rows, bool with_loss, bool readout_row_only,
                                bool training = false) {
    const ModelBatch& batch = model.batch;
    model_require(rows == batch.rows && (!with_loss || batch.with_targets),
                  "model_forward: " + std::to_string(rows) + " rows" + (with_loss ? " with a loss" : "") +
                      ", but model_set_batch gave " + std::to_string(batch.rows) +
                      (batch.with_targets ? " with targets" : " without targets"));
    const Config& c = model.cfg;
    model.readout_row_only = readout_row_only && c.readout != READOUT_NEXT_TOKEN && c.pool == POOL_CLS;
    model.loss_rows = with_loss ? rows : 0;
    drop_path_set(model.drop_path, training && !model.readout_row_only);
}

inline void model_forward_pass(Model& model, int rows, bool with_loss) {
    const Config& c = model.cfg;
    const Device dev = model.dev;
    const Kernels& k = model.kernels;
    const int B = rows, T = c.T, C = c.C, BT = B * T, R = B * c.readout_rows();
    Activations a = model_activations(model, B);
    const ParamTensors& p = model.params;
    drop_path_draw(dev, model.drop_path, &model.batch.scalars->step, c.L, B);  // a training pass's factors
    input_forward(model, a, B);
    for (int l = 0; l < c.L; l++) {
        const BlockParams w = block_params(c, p, l);
        const BlockActivations x = block_activations(c, a, B, l);
        // ln1 = layernorm(x), qkv = ln1 Wqkv^T + bqkv, y = attention(qkv, mask_l)
        layernorm_forward(dev, k, x.ln1, x.ln1_mean, x.ln1_rstd, x.input, w.ln1w, w.ln1b, BT, C);
        matmul_forward(dev, k, x.qkv, x.ln1, w.qkvw, w.qkvb, BT, C, c.qkv_width());
        attention_forward(dev, k, x.y, x.att, x.qkv, w.mask, model.mask_term, model_attention_shape(c, B, l));
        if (model.readout_row_only && l == c.L - 1) {  // the tail on the readout's row: its x_out is pooled
            const BlockActivations r = readout_row_block(a);
            pick_position_forward(dev, r.input, x.input, B, T, C, c.readout_position());
            pick_position_forward(dev, r.y, x.y, B, T, c.attention_width(), c.readout_position());
            block_tail_forward(model, l, w, r, B);
        } else {
            block_tail_forward(model, l, w, x, BT);
        }
    }
    // the readout's input: the pooled row (B,C), or (next token) the whole last residual stream (B,T,C)
    const bool next_token = c.readout == READOUT_NEXT_TOKEN;
    float* x_last = block_activations(c, a, B, c.L - 1).x_out;  // (B,T,C)
    if (!next_token && c.pool == POOL_MEAN) mean_pool_forward(dev, a.pooled, x_last, B, T, C);
    else if (!next_token && !model.readout_row_only)
        pick_position_forward(dev, a.pooled, x_last, B, T, C, c.readout_position());
    layernorm_forward(dev, k, a.lnf, a.lnf_mean, a.lnf_rstd, next_token ? x_last : a.pooled, p.lnfw, p.lnfb, R, C);
    matmul_forward(dev, k, a.logits, a.lnf, p.readoutw, p.readoutb, R, C, c.OUT);
    if (!with_loss) return;
    // the loss: MSE, logistic or cross-entropy of the logits, and its mean over the counted rows
    readout_loss_forward(dev, k, c, a.losses, a.probs, a.logits, model_loss_targets(model), R);
    loss_mean(dev, model.mean_loss, a.losses, R, &model.batch.scalars->loss_count);
}

// The mean loss of the last forward pass with a loss, read by the host (on the GPU a copy that
// waits for the pass)
inline float model_read_loss(const Model& model) { return value_read(model.dev, model.mean_loss); }

// Forward pass on `rows` <= model.B examples, host memory, as model_set_batch takes them; returns
// the mean loss over the counted rows (targets = nullptr: the outputs only, and 0).
inline float model_forward(Model& model, ModelInput input, const float* targets, int rows,
                           const float* loss_mask = nullptr, bool readout_row_only = false,
                           const float* mix = nullptr) {
    model_set_batch(model, input, targets, rows, loss_mask, {}, mix);
    const bool with_loss = targets != nullptr;
    model_forward_state(model, rows, with_loss, readout_row_only);
    const ModelBatch& batch = model.batch;
    const std::string shape = "forward pass: " + std::to_string(rows) + " rows" + (with_loss ? ", loss" : "") +
                              (batch.masked ? " masked" : "") + (batch.mixed ? " mixed" : "") +
                              (model.readout_row_only ? ", readout row" : "") + ", smoothing " +
                              std::to_string(model.label_smoothing);
    device_work(model.graphs, model.dev == DEVICE_GPU && model.kernels.graph, shape,
                [&] { model_forward_pass(model, rows, with_loss); });
    return with_loss ? model_read_loss(model) : 0.0f;
}

inline void model_zero_grad(Model& model) {
    buffer_zero(model.dev, model.grads_mem, model.num_params);
    buffer_zero(model.dev, model.dacts_mem, model.num_dacts);
}

// Backward pass of the last model_forward, which must have had targets and the same rows;
// accumulates into model.grads. Anything else is a bug in the caller, refused with
// std::logic_error: the loss state would belong to another batch, or to none.
inline void model_backward(Model& model, int rows) {
    model_require(model.loss_rows != 0, "model_backward: the last model_forward had no targets, so there is no loss "
                                        "to differentiate");
    model_require(!model.readout_row_only,
                  "model_backward: the last model_forward ran the last block on the readout's row only");
    model_require(rows == model.loss_rows, "model_backward: " + std::to_string(rows) +
                                               " rows, but the last model_forward had " +
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
    readout_loss_backward(dev, c, d.logits, a.probs, a.logits, model_loss_targets(model), R);
    // logits = lnf Wout^T + bout, lnf = ln_f(pooled or x_out)
    matmul_backward(dev, k, d.lnf, g.readoutw, g.readoutb, d.logits, a.lnf, p.readoutw, R, C, c.OUT);
    const bool next_token = c.readout == READOUT_NEXT_TOKEN;
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
        block_tail_backward(model, l, w, dw, x, dx, BT);
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
