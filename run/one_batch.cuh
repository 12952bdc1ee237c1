// run/one_batch.cuh: the programs that set a run up as main.cu's train() does and stop after its
// first batches, without a run folder:
//   --dump-state FILE  one forward and backward pass on the first training batch, written out
//                      (the parameters, the batch, its loss and every gradient: run/checkpoint.h)
//                      for a reference to check the whole backward pass against
//   --profile N        N training steps on the GPU, every launch recorded, one table by kernel
//                      (gpu/profile_report.cuh)
// Both start where the run would: at step 0, or at a --resume checkpoint's step.
#pragma once
#include <algorithm>
#include <memory>
#include <string>
#include "gpu/profile_report.cuh"  // record_profile, print_profile, profiler
#include "model.cuh"               // Model, ModelOwner, model_forward, model_zero_grad, model_backward
#include "run/checkpoint.h"        // dump_state
#include "run/checkpointing.cuh"   // checkpoint_to_resume, start_state
#include "run/options.h"           // Options
#include "run/setup.cuh"           // make_task, set_up_model, prior_structure, initialise, training_steps, ...
#include "run/step.cuh"            // training_step, batch_input
#include "tasks/batch.h"           // Batch, training_batch, loss_positions

// A run set up as train() sets it up: the task, the model, its prior and initialisation, the state
// a --resume checkpoint holds, and the first batch's room
struct FirstBatches {
    std::unique_ptr<Task> task;
    Model model;
    ModelOwner owner{model};
    int64_t steps = 0, start_step = 0;
    Batch batch;

    explicit FirstBatches(const Options& opt) : task(make_task(opt)) {
        set_up_model(model, opt, *task);
        const Structure G = prior_structure(opt, *task, model.cfg);
        initialise(model, opt, *task, G);
        steps = training_steps(opt, *task);
        TrainAccuracy unused;
        start_step = start_state(model, opt, checkpoint_to_resume(opt, RunPaths{}), steps, unused).step;
        batch = training_batch_room(opt, *task, loss_positions(*task, opt.loss_on));
    }
};

// --dump-state FILE: the first training batch's forward and backward pass, written out; exit 0
inline int dump_first_batch(const Options& opt) {
    check_writable(opt.dump_state);  // before anything loads
    FirstBatches run(opt);
    Model& model = run.model;
    Batch& batch = run.batch;
    EpochOrder order(opt.seed, run.task->train_size());
    training_batch(*run.task, order, run.start_step, batch);
    const float loss = model_forward(model, batch_input(batch), batch.targets.data(), batch.rows, batch.mask());
    model_zero_grad(model);
    model_backward(model, batch.rows);
    Metadata meta = run_metadata(opt);
    meta["step"] = std::to_string(run.start_step);
    dump_state(opt.dump_state, model.cfg, model_download(model, model.params_mem),
               model_download(model, model.grads_mem),
               {batch.tokens, batch.pixels, batch.targets, batch.loss_mask, batch.rows, loss}, meta);
    printf("wrote %s (loss %.6f)\n", opt.dump_state.c_str(), loss);
    return 0;
}

// --profile N: N recorded GPU training steps from the first batch on (after one warm-up step), the
// table; exit 0
inline int profile_first_steps(const Options& opt) {
    if (pick_device(opt) != DEVICE_GPU) fail("--profile records GPU launches, and no GPU is in use");
    FirstBatches run(opt);
    Model& model = run.model;
    EpochOrder order(opt.seed, run.task->train_size());
    record_profile(model.dev, opt.profile, [&](int64_t i) {
        training_batch(*run.task, order, run.start_step + i, run.batch);
        const int64_t step = std::min(run.start_step + i, run.steps - 1);
        training_step(model, run.batch, step_learning_rate(opt, step, run.steps), opt.clip_grad, step);
    });
    print_profile(profiler(), opt.profile, model.kernels.tf32);
    return 0;
}
