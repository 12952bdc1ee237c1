// run/step.cuh: one training step, the host's part and the device's. The host makes the batch
// (tasks/), computes the step's learning rate and Adam's bias corrections, and hands all of it to
// the model in one upload (model_set_batch); the device's part (training_step_work) is the
// forward pass (dropping paths with --drop-path), the step log, the backward pass, clipping, AdamW
// and the weights' moving average (--ema), with no value read back: on the GPU the host queues it
// and goes on to the next batch while the GPU runs it, and with Kernels::graph (--cuda-graph) it is
// captured once as a CUDA graph and replayed every step (gpu/graph.cuh). The host reads the
// step log (the loss, the first non-finite one, a classifier's hits) only where it reports or
// saves (main.cu).
#pragma once
#include <algorithm>
#include <string>
#include <vector>
#include "model.cuh"      // Model, model_set_batch, model_forward_state, model_forward_pass, model_backward, ...
#include "tasks/batch.h"  // Batch

// ----------------------------------------------------------------------------
// the model's step after its backward pass: the step log, clipping, weight decay and AdamW

// After a training forward pass: its loss, whether it is the first that is not finite, and a
// classifier's top-1 hits, into the step log (gpu/device_step.cuh), on the device.
inline void model_log_step(Model& model) {
    const Config& c = model.cfg;
    const int rows = model.loss_rows, classes = c.readout == READOUT_CLASS ? c.OUT : 0;
    step_log_add(model.dev, model.step_log, model.mean_loss, model.batch.scalars,
                 model_activations(model, rows).logits, model.batch.targets, rows, classes);
}

// The step log since the last read, and cleared: on the GPU a copy that waits for the steps.
inline StepLog model_read_step_log(Model& model) {
    const StepLog log = value_read(model.dev, model.step_log);
    value_write(model.dev, model.step_log, step_log_cleared());
    return log;
}

// Clips the gradient of every parameter at once to the global norm max_norm (layers/clip.cuh);
// the host waits for nothing (the norm stays in model.norm_scratch).
inline void model_clip_gradients(Model& model, float max_norm) {
    clip_gradients(model.dev, model.grads_mem, model.num_params, max_norm, model.norm_scratch);
}

// Whether a tensor is one of the weight matrices that timm and nanoGPT decay: a matrix of a
// linear layer or the token embedding; not a bias, a LayerNorm parameter, the position
// embedding, CLS, the scalar encoding's wval or the mask (which has a weight decay of its own).
inline bool is_decayed_matrix(const TensorInfo& info) {
    return info.shape.size() == 2 && info.field != &ParamTensors::wpe && info.field != &ParamTensors::mask;
}

// which weights decay: "matrices" or "all" (the rule's name in the checkpoint, metrics.json and
// the start-up table)
inline std::string weight_decay_on(const Model& model) { return model.decay_matrices_only ? "matrices" : "all"; }

// The ranges of the flat buffers AdamW updates: each tensor's with its weight decay: the mask its
// own; every other tensor model.weight_decay (GOTU's Adam, the Boolean and arithmetic tasks), or
// with decay_matrices_only (images and language, as timm and nanoGPT do it) the weight matrices
// alone and 0 elsewhere. The mask steps at mask_lr_scale x lr, every other tensor at lr. A frozen
// mask is in no range (untouched).
inline AdamWGroups model_adamw_groups(const Model& model) {
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
        const float decay = !model.decay_matrices_only || is_decayed_matrix(*info) ? model.weight_decay : 0.0f;
        groups.add(offset(info), offset(info) + info->numel * info->slices, mask ? model.mask_weight_decay : decay,
                   mask ? model.mask_lr_scale : 1.0f);
    }
    return groups;
}

// The AdamW step model.adam_t, at the learning rate model.adam.lr, over every parameter in one
// launch. staged: on the GPU the step's scalars are those model_set_batch uploaded with the batch
// (the training step's, run/step.cuh), which a graph replays; else they are uploaded here.
inline void model_adamw(Model& model, bool staged) {
    const AdamWGroups groups = model_adamw_groups(model);
    if (model.dev == DEVICE_GPU && staged)
        return adamw_update_groups_gpu(model.params_mem, model.m_mem, model.v_mem, model.grads_mem, groups, model.adam,
                                       &model.batch.scalars->adam);
    adamw_update_groups(model.dev, model.params_mem, model.m_mem, model.v_mem, model.grads_mem, groups, model.adam,
                        model.adam_t);
}

// One AdamW step (the next) over every parameter
inline void model_update(Model& model) {
    model.adam_t++;
    model_adamw(model, false);
}

// ----------------------------------------------------------------------------
// the training step

// What a graph captures: everything of the step that runs on the device, in order
inline void training_step_work(Model& model, float clip_grad) {
    model_forward_pass(model, model.B, true);
    model_log_step(model);
    model_zero_grad(model);
    model_backward(model, model.B);
    if (clip_grad > 0) model_clip_gradients(model, clip_grad);
    model_adamw(model, true);
    ema_update(model.dev, model.ema, model.params_mem, model.num_params);  // --ema
}

// One training step, number `step`, on a batch of model.B rows in host memory (as model_set_batch
// takes it, mix too: a mixed image batch's (B,2), or nullptr), at learning rate lr, clipping the
// gradient's norm to clip_grad (0: no clipping): the host's part, then the device's, call by call
// or as the replay of the captured step (one capture for mixed batches, one for unmixed ones).
inline void training_step(Model& model, ModelInput input, const float* targets, const float* loss_mask, float lr,
                          float clip_grad, int64_t step, const float* mix = nullptr) {
    model.adam.lr = lr;
    model.adam_t++;
    StepScalars scalars;
    scalars.adam = adamw_step(model.adam, model.adam_t);
    scalars.step = step;
    model_set_batch(model, input, targets, model.B, loss_mask, scalars, mix);
    model_forward_state(model, model.B, true, false, true);
    device_work(model.graphs, model.dev == DEVICE_GPU && model.kernels.graph,
                model.batch.mixed ? "training step, mixed" : "training step",
                [&] { training_step_work(model, clip_grad); });
}

// What the model reads of a batch: its pixels (image tasks) or its token ids.
inline ModelInput batch_input(const Batch& batch) {
    return batch.image_input ? ModelInput(batch.pixels.data()) : ModelInput(batch.tokens.data());
}

// The same step on a training batch (tasks/batch.h, training_batch) of model.B rows
inline void training_step(Model& model, const Batch& batch, float lr, float clip_grad, int64_t step) {
    training_step(model, batch_input(batch), batch.targets.data(), batch.mask(), lr, clip_grad, step,
                  batch.mix_targets());
}
