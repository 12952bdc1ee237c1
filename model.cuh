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
//   (--drop-path, training passes: proj and mlp_proj scaled per example first, recipe/drop_path.cuh)
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
#include "layers/activations.h"        // Activations, activations_bind, BlockActivations, block_activations
#include "layers/adamw.cuh"            // adamw_update_groups, AdamWGroups
#include "layers/clip.cuh"             // clip_gradients, grad_norm_scratch_size
#include "layers/config.h"             // Config, ParamTensors, param_layout, block_params
#include "gpu/device_step.cuh"      // DeviceBatch, StepScalars, StepLog, loss_mean_gpu, step_log_add_*
#include "recipe/drop_path.cuh"        // DropPath, drop_path_draw, drop_path_forward, drop_path_backward
#include "recipe/ema.cuh"              // WeightAverage
#include "layers/embedding.cuh"        // embedding_*, scalar_embedding_*
#include "layers/fused.cuh"            // residual_layernorm_*, matmul_bias_gelu_*, mlp_backward
#include "gpu/graph.cuh"            // GraphCache
#include "layers/layernorm.cuh"        // layernorm_*
#include "layers/loss.cuh"             // mse_*, logistic_*, crossentropy_*
#include "layers/matmul.cuh"           // matmul_*
#include "layers/patch_embedding.cuh"  // patchify_*, assemble_*, mean_pool_*
#include "layers/pointwise.cuh"        // gelu_*, residual_*, pick_position_*

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
    // the batch: on the CPU buffers of their own; on the GPU slices of the batch block, one
    // asynchronous copy a batch (gpu/device_step.cuh)
    int* tokens = nullptr;        // (B,T) on dev, token models
    TokenRows by_token;           // the batch's rows grouped by token: the GPU's kernel 2 embedding gradient
    float* pixels = nullptr;      // (B,channels,H,W) on dev, image models
    float* targets = nullptr;     // (B·readout_rows) on dev: a value, a class, or the next token at each position
    float* loss_mask = nullptr;   // (B·T) on dev, next-token readout only: 1 where a position counts in the loss
    float* mix = nullptr;         // (B,2) on dev, image models: a mixed batch's second class and λ of each row
    DeviceBatch batch_block;      // GPU only
    StepScalars* scalars = nullptr;  // (1) on dev: the batch's loss count, the step's AdamW scalars and index
    float* mean_loss = nullptr;   // (1) on dev: the last forward pass's mean loss
    StepLog* step_log = nullptr;  // (1) on dev: the training steps since the host last read it
    int batch_rows = 0;         // the rows of the batch model_set_batch gave last
    bool batch_targets = false;  // whether it had targets
    bool batch_mixed = false;    // whether they were mixed (model.mix holds the rest of them)
    bool loss_masked;   // whether it weights its rows by loss_mask
    int loss_rows;      // the rows of the last forward pass with targets; 0 when it had none
    bool readout_row_only;  // whether the last forward pass ran the last block's tail on the readout's row alone
    float* token_value = nullptr;  // (V) on dev: cfg.token_value; nullptr under token encoding
    AdamWSettings adam;
    float weight_decay = 1e-3f, mask_weight_decay = 0.0f, mask_lr_scale = 1.0f;  // the mask's lr: scale x lr
    bool decay_matrices_only = false;  // weight decay on the weight matrices alone (model_adamw_groups)
    float label_smoothing = 0.0f;  // of the cross-entropy readouts
    bool freeze_mask = false;      // --freeze-mask: M is a constant, with no gradient and no update
    float* norm_scratch = nullptr;  // (grad_norm_scratch_size(num_params)) model_clip_gradients' sums and result
    int adam_t = 0;  // optimizer steps taken
    DropPath drop_path;  // stochastic depth in training passes (--drop-path; recipe/drop_path.cuh)
    WeightAverage ema;   // the weights' moving average (--ema; recipe/ema.cuh), which run/step.cuh updates
    GraphCache graphs;  // the captured passes and steps, by shape (Kernels::graph; gpu/graph.cuh)
};

// The most column scratch (layers/column_sums.cuh) the model's layers ask for at B rows, which
// model_build reserves: the bias and LayerNorm gradients over the B·T rows and over the readout's,
// the position embedding's and CLS's sums over the B examples, the patch embedding's bias, and
// the token embedding's chunks.
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
    const size_t R = (size_t)B * cfg.readout_rows(), BT = (size_t)B * cfg.T;
    const size_t token_ints = cfg.image_input() ? 0 : BT;
    const size_t pixel_floats = cfg.image_input() ? (size_t)B * cfg.image_size() : 0;
    const size_t mask_floats = cfg.readout == READOUT_NEXT_TOKEN ? R : 0;
    const size_t mix_floats = cfg.image_input() ? 2 * R : 0;
    if (dev == DEVICE_GPU) {
        gpu_setup();  // the stream and cuBLAS's handle and workspace, before any capture
        const size_t token_rows = token_ints > 0 ? token_rows_capacity((int)BT, cfg.V) : 0;
        DeviceBatch& block = model.batch_block;
        device_batch_build(block, {token_ints, pixel_floats, R, mask_floats, token_rows, mix_floats});
        model.tokens = token_ints ? block.on_device<int>(block.tokens) : nullptr;
        model.by_token.device = token_rows ? block.on_device<int>(block.token_rows) : nullptr;
        model.pixels = pixel_floats ? block.on_device<float>(block.pixels) : nullptr;
        model.targets = block.on_device<float>(block.targets);
        model.loss_mask = mask_floats ? block.on_device<float>(block.loss_mask) : nullptr;
        model.mix = mix_floats ? block.on_device<float>(block.mix) : nullptr;
        model.scalars = block.on_device<StepScalars>(block.scalars);
        cudaCheck(cudaMalloc(&model.mean_loss, sizeof(float)));
        cudaCheck(cudaMalloc(&model.step_log, sizeof(StepLog)));
        const StepLog cleared = step_log_cleared();
        device_copy(model.step_log, &cleared, sizeof cleared, cudaMemcpyHostToDevice);
        column_scratch_reserve(column_scratch_bound(cfg, B));  // so that no step allocates
    } else {
        model.tokens = token_ints ? (int*)malloc(token_ints * sizeof(int)) : nullptr;
        model.pixels = pixel_floats ? buffer_alloc(dev, pixel_floats) : nullptr;
        model.targets = buffer_alloc(dev, R);
        model.loss_mask = mask_floats ? buffer_alloc(dev, mask_floats) : nullptr;
        model.mix = mix_floats ? buffer_alloc(dev, mix_floats) : nullptr;
        model.scalars = new StepScalars();
        model.mean_loss = new float(0.0f);
        model.step_log = new StepLog(step_log_cleared());
    }
    model.loss_masked = false;
    model.loss_rows = 0;
    model.readout_row_only = false;
    model.token_value = nullptr;
    if (cfg.encoding == ENCODING_SCALAR) {
        model.token_value = buffer_alloc(dev, cfg.V);
        buffer_copy(model.token_value, dev, cfg.token_value.data(), DEVICE_CPU, cfg.V);
    }
}

inline void model_free(Model& model) {
    model.graphs.clear();
    for (float* p : {model.params_mem, model.grads_mem, model.m_mem, model.v_mem, model.acts_mem, model.dacts_mem,
                     model.dscores, model.mask_term, model.norm_scratch})
        buffer_free(model.dev, p);
    if (model.token_value) buffer_free(model.dev, model.token_value);
    drop_path_free(model.dev, model.drop_path);
    weight_average_free(model.dev, model.ema);
    if (model.dev == DEVICE_GPU) {
        device_batch_free(model.batch_block);
        cudaCheck(cudaFree(model.mean_loss));
        cudaCheck(cudaFree(model.step_log));
    } else {
        free(model.tokens);
        for (float* p : {model.pixels, model.targets, model.loss_mask, model.mix})
            if (p) buffer_free(model.dev, p);
        delete model.scalars;
        delete model.mean_loss;
        delete model.step_log;
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
// drop (2,N/T), or nullptr: a training pass's drop-path factors of the two branches, which scale proj
// and mlp_proj in place before their sums (N = B·T rows then).
inline void block_tail_forward(const Model& model, const BlockParams& w, const BlockActivations& x, int N,
                               const float* drop = nullptr) {
    const Config& c = model.cfg;
    const Device dev = model.dev;
    const Kernels& k = model.kernels;
    const int C = c.C, B = N / c.T;
    matmul_forward(dev, k, x.proj, x.y, w.projw, w.projb, N, c.attention_width(), C);
    if (drop) drop_path_forward(dev, x.proj, x.proj, drop, B, (size_t)c.T * C);
    residual_layernorm_forward(dev, k, x.x_mid, x.ln2, x.ln2_mean, x.ln2_rstd, x.input, x.proj, w.ln2w, w.ln2b, N, C);
    matmul_bias_gelu_forward(dev, k, x.mlp_fc, x.mlp_gelu, x.ln2, w.mlp_fcw, w.mlp_fcb, N, C, c.MLP);
    matmul_forward(dev, k, x.mlp_proj, x.mlp_gelu, w.mlp_projw, w.mlp_projb, N, c.MLP, C);
    if (drop) drop_path_forward(dev, x.mlp_proj, x.mlp_proj, drop + B, B, (size_t)c.T * C);
    residual_forward(dev, x.x_out, x.x_mid, x.mlp_proj, (size_t)N * C);
}

// Its backward, the forward's lines in reverse, from the residual gradient (the gradients dx, dw
// accumulate). dx's residual fields are the one residual gradient (block_gradients): each sum
// passes it on unchanged, and the LayerNorm backward adds its part into it in place. drop: as the
// forward's; a dropped branch's gradient f · (the residual gradient) goes to DropPath::branch_grad.
inline void block_tail_backward(const Model& model, const BlockParams& w, const BlockParams& dw,
                                const BlockActivations& x, const BlockActivations& dx, int N,
                                const float* drop = nullptr) {
    const Config& c = model.cfg;
    const Device dev = model.dev;
    const Kernels& k = model.kernels;
    const int C = c.C, B = N / c.T;
    float* branch_grad = model.drop_path.branch_grad;  // (B,T,C)
    // x_out = x_mid + mlp_proj: dx_mid = dmlp_proj = dx_out, the residual gradient as it is
    // (dropped: x_out = x_mid + f mlp_proj, dmlp_proj = f dx_out)
    const float* dmlp_proj = drop ? branch_grad : dx.mlp_proj;
    if (drop) drop_path_backward(dev, branch_grad, dx.mlp_proj, drop + B, B, (size_t)c.T * C);
    // mlp_proj = mlp_gelu Wmlp^T + bmlp, mlp_gelu = gelu(mlp_fc), mlp_fc = ln2 Wfc^T + bfc (mlp_backward:
    // the two layers' backwards, or at matmul version 2 the GELU's fused into the second's product)
    mlp_backward(dev, k, dx.ln2, dw.mlp_fcw, dw.mlp_fcb, dx.mlp_fc, dx.mlp_gelu, dw.mlp_projw, dw.mlp_projb,
                 dmlp_proj, x.ln2, x.mlp_fc, x.mlp_gelu, w.mlp_fcw, w.mlp_projw, N, C, c.MLP);
    // ln2 = layernorm(x_mid): dx_mid += its input gradient; x_mid = x + proj: dx = dproj = dx_mid
    // (dropped: dproj = f dx_mid)
    layernorm_backward(dev, k, dx.x_mid, dw.ln2w, dw.ln2b, dx.ln2, x.x_mid, w.ln2w, x.ln2_mean, x.ln2_rstd, N, C);
    const float* dproj = drop ? branch_grad : dx.proj;
    if (drop) drop_path_backward(dev, branch_grad, dx.proj, drop, B, (size_t)c.T * C);
    // proj = y Wproj^T + bproj
    matmul_backward(dev, k, dx.y, dw.projw, dw.projb, dproj, x.y, w.projw, N, c.attention_width(), C);
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

// Hands the model a batch of `rows` <= model.B examples in host memory: the input (tokens or
// pixels), targets (rows·readout_rows, or nullptr: no loss) and for the next-token readout
// loss_mask (rows·T) of 0/1 (nullptr: every position counts), with the step's scalars (a
// training step's AdamW values and index; the loss count is filled in here), and for a mixed image
// batch mix (rows,2), each row's second class and λ (recipe/mix.h; nullptr: unmixed). On the CPU
// they are copied into the model's buffers; on the GPU written into the next pinned copy of the
// batch block (with the token rows of the embedding's kernel 2) and uploaded in one asynchronous copy.
inline void model_set_batch(Model& model, ModelInput input, const float* targets, int rows, const float* loss_mask,
                            StepScalars scalars = {}, const float* mix = nullptr) {
    const Config& c = model.cfg;
    const int R = rows * c.readout_rows();
    if (rows < 1 || rows > model.B)
        throw std::logic_error("model_set_batch: " + std::to_string(rows) + " rows, but the buffers hold 1 to " +
                               std::to_string(model.B));
    if (c.image_input() != (input.pixels != nullptr))
        throw std::logic_error(std::string("model_set_batch: an ") + (c.image_input() ? "image" : "token") +
                               " model was given " + (input.pixels ? "pixels" : "tokens"));
    if (mix && !model.mix) throw std::logic_error("model_set_batch: a mixed batch for a token model");
    model.batch_rows = rows;
    model.batch_targets = targets != nullptr;
    model.batch_mixed = targets && mix;
    model.loss_masked = targets && c.readout == READOUT_NEXT_TOKEN && loss_mask;
    scalars.loss_count = (float)R;
    if (model.loss_masked) {
        scalars.loss_count = 0;
        for (int r = 0; r < R; r++) scalars.loss_count += loss_mask[r];
        if (scalars.loss_count == 0) fail("the loss mask counts no position");
    }
    const size_t input_bytes = c.image_input() ? (size_t)rows * c.image_size() * sizeof(float)
                                               : (size_t)rows * c.T * sizeof(int);
    const void* input_data = c.image_input() ? (const void*)input.pixels : (const void*)input.tokens;
    if (model.dev == DEVICE_CPU) {
        memcpy(c.image_input() ? (void*)model.pixels : (void*)model.tokens, input_data, input_bytes);
        if (targets) memcpy(model.targets, targets, R * sizeof(float));
        if (model.loss_masked) memcpy(model.loss_mask, loss_mask, R * sizeof(float));
        if (model.batch_mixed) memcpy(model.mix, mix, 2 * R * sizeof(float));
        *model.scalars = scalars;
        return;
    }
    DeviceBatch& block = model.batch_block;
    char* staging = device_batch_begin(block);
    memcpy(staging + (c.image_input() ? block.pixels : block.tokens), input_data, input_bytes);
    if (targets) memcpy(staging + block.targets, targets, R * sizeof(float));
    if (model.loss_masked) memcpy(staging + block.loss_mask, loss_mask, R * sizeof(float));
    if (model.batch_mixed) memcpy(staging + block.mix, mix, 2 * R * sizeof(float));
    memcpy(staging + block.scalars, &scalars, sizeof scalars);
    if (!c.image_input() && model.kernels.fast_layers) {
        token_rows_build(model.by_token, input.tokens, rows * c.T, c.V);
        memcpy(staging + block.token_rows, model.by_token.host.data(), model.by_token.host.size() * sizeof(int));
    }
    device_batch_upload(block);
}

// The first residual stream a.encoded (B,T,C) from the batch on the device: token ids through
// the (scalar) embedding, or an image through patchify, the patch embedding (a matmul) and
// assemble (CLS, position embedding).
inline void input_forward(Model& model, const Activations& a, int B) {
    const Config& c = model.cfg;
    const ParamTensors& p = model.params;
    const Device dev = model.dev;
    if (c.image_input()) {
        patchify_forward(dev, a.patches, model.pixels, B, c.channels, c.height, c.width, c.patch);
        matmul_forward(dev, model.kernels, a.embedded, a.patches, p.patchw, p.patchb, B * c.patches(), c.patch_size(),
                       c.C);
        assemble_forward(dev, a.encoded, a.embedded, p.cls, p.wpe, B, c.T, c.C);
        return;
    }
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
// which draws and applies the drop-path factors when --drop-path is on (evaluation drops nothing).
inline void model_forward_state(Model& model, int rows, bool with_loss, bool readout_row_only,
                                bool training = false) {
    const Config& c = model.cfg;
    if (rows != model.batch_rows || (with_loss && !model.batch_targets))
        throw std::logic_error("model_forward: " + std::to_string(rows) + " rows" + (with_loss ? " with a loss" : "") +
                               ", but model_set_batch gave " + std::to_string(model.batch_rows) +
                               (model.batch_targets ? " with targets" : " without targets"));
    model.readout_row_only = readout_row_only && c.readout != READOUT_NEXT_TOKEN && c.pool == POOL_CLS;
    model.loss_rows = with_loss ? rows : 0;
    model.drop_path.applied = training && model.drop_path.rate > 0 && !model.readout_row_only;
}

inline void model_forward_pass(Model& model, int rows, bool with_loss) {
    const Config& c = model.cfg;
    const Device dev = model.dev;
    const Kernels& k = model.kernels;
    const int B = rows, T = c.T, C = c.C, BT = B * T, R = B * c.readout_rows();
    const int AW = c.attention_width();
    Activations a = model_activations(model, B);
    const ParamTensors& p = model.params;
    if (model.drop_path.applied) drop_path_draw(dev, model.drop_path, &model.scalars->step, c.L, B);
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
            pick_position_forward(dev, r.y, x.y, B, T, AW, c.readout_position());
            block_tail_forward(model, w, r, B);
        } else {
            block_tail_forward(model, w, x, BT, drop_path_layer(model.drop_path, l, B));
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
    if (!with_loss) return;

    const float* row_weight = model.loss_masked ? model.loss_mask : nullptr;
    if (c.readout != READOUT_REGRESSION)
        crossentropy_forward(dev, k, a.losses, a.probs, a.logits, model.targets, row_weight, R, c.OUT,
                             model.label_smoothing, model.batch_mixed ? model.mix : nullptr);
    else if (c.loss == LOSS_LOGISTIC) logistic_forward(dev, a.losses, a.logits, model.targets, B);
    else mse_forward(dev, a.losses, a.logits, model.targets, B);
    if (dev == DEVICE_GPU) {
        loss_mean_gpu(model.mean_loss, a.losses, R, &model.scalars->loss_count);
    } else {
        double sum = 0;
        for (int r = 0; r < R; r++) sum += a.losses[r];  // fixed order: reproducible
        *model.mean_loss = (float)(sum / model.scalars->loss_count);
    }
}

// The mean loss of the last forward pass with a loss, read by the host (on the GPU a copy that
// waits for the pass)
inline float model_read_loss(const Model& model) {
    if (model.dev == DEVICE_CPU) return *model.mean_loss;
    float loss;
    device_copy(&loss, model.mean_loss, sizeof loss, cudaMemcpyDeviceToHost);
    return loss;
}

// Forward pass on `rows` <= model.B examples, host memory, as model_set_batch takes them; returns
// the mean loss over the counted rows (targets = nullptr: the outputs only, and 0).
inline float model_forward(Model& model, ModelInput input, const float* targets, int rows,
                           const float* loss_mask = nullptr, bool readout_row_only = false,
                           const float* mix = nullptr) {
    model_set_batch(model, input, targets, rows, loss_mask, {}, mix);
    const bool with_loss = targets != nullptr;
    model_forward_state(model, rows, with_loss, readout_row_only);
    if (model.dev == DEVICE_GPU && model.kernels.graph) {
        const std::string shape = "forward pass: " + std::to_string(rows) + " rows" + (with_loss ? ", loss" : "") +
                                  (model.loss_masked ? " masked" : "") + (model.batch_mixed ? " mixed" : "") +
                                  (model.readout_row_only ? ", readout row" : "") + ", smoothing " +
                                  std::to_string(model.label_smoothing);
        model.graphs.run(shape, [&] { model_forward_pass(model, rows, with_loss); });
    } else {
        model_forward_pass(model, rows, with_loss);
    }
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
        crossentropy_backward(dev, d.logits, a.probs, model.targets, row_weight, &model.scalars->loss_count, R, c.OUT,
                              model.label_smoothing, model.batch_mixed ? model.mix : nullptr);
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
        block_tail_backward(model, w, dw, x, dx, BT, drop_path_layer(model.drop_path, l, B));
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
