// run/step.cuh: one training step, the host's part and the device's. The host makes the batch
// (tasks/), computes the step's learning rate and Adam's bias corrections, and hands all of it to
// the model in one upload (model_set_batch); the device's part (training_step_work) is the
// forward pass, the step log, the backward pass, clipping and AdamW, with no value read back: on
// the GPU the host queues it and goes on to the next batch while the GPU runs it, and with
// Kernels::graph (--cuda-graph) it is captured once as a CUDA graph and replayed every step
// (layers/graph.cuh). The host reads the step log (the loss, the first non-finite one, a
// classifier's hits) only where it reports or saves (main.cu).
#pragma once
#include "model.cuh"  // Model, model_set_batch, model_forward_state, model_forward_pass, model_log_step, ...

// What a graph captures: everything of the step that runs on the device, in order
inline void training_step_work(Model& model, float clip_grad) {
    model_forward_pass(model, model.B, true);
    model_log_step(model);
    model_zero_grad(model);
    model_backward(model, model.B);
    if (clip_grad > 0) model_clip_gradients(model, clip_grad);
    model_adamw(model, true);
}

// One training step, number `step`, on a batch of model.B rows in host memory (as model_set_batch
// takes it), at learning rate lr, clipping the gradient's norm to clip_grad (0: no clipping): the
// host's part, then the device's, call by call or as the replay of the captured step.
inline void training_step(Model& model, ModelInput input, const float* targets, const float* loss_mask, float lr,
                          float clip_grad, int64_t step) {
    model.adam.lr = lr;
    model.adam_t++;
    StepScalars scalars;
    scalars.adam = adamw_step(model.adam, model.adam_t);
    scalars.step = step;
    model_set_batch(model, input, targets, model.B, loss_mask, scalars);
    model_forward_state(model, model.B, true, false);
    if (model.dev == DEVICE_GPU && model.kernels.graph)
        model.graphs.run("training step", [&] { training_step_work(model, clip_grad); });
    else
        training_step_work(model, clip_grad);
}
