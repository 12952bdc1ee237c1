// main.cu: the maskprior program, top to bottom: the options, then the training run: the task,
// the model, its prior and its initialisation, the training loop (a batch, a step, an evaluation
// now and then), the final report. Every step is a call into the file that owns it; no math lives
// here. What keeps the run (its folder and lock, checkpoints, stop signals, log.jsonl, the
// progress lines) is RunKeeper (run/keeper.cuh), called at named points. README.md has the
// reading order of the files; docs/method.md explains the method.
#include <cmath>
#include <memory>
#include <new>
#include <stdexcept>
#include "model.cuh"             // Model, ModelOwner
#include "run/evaluate.cuh"      // Evaluation, evaluate_run, evaluate_before_training
#include "run/keeper.cuh"        // RunKeeper
#include "run/one_batch.cuh"     // dump_first_batch, profile_first_steps
#include "run/options.h"         // Options, parse_options
#include "prior/structure.h"     // Structure: G
#include "run/report.cuh"        // command_line, print_evaluation, print_list
#include "run/sample.cuh"        // generate
#include "run/setup.cuh"         // make_task, set_up_model, prior_structure, Initialisation, initialise,
                                 // print_startup, pick_device, training_steps, training_batch_room,
                                 // step_learning_rate
#include "run/step.cuh"          // training_step
#include "tasks/batch.h"         // Batch, training_batch, loss_positions
#include "tasks/task.h"          // Task, EpochOrder

static int train(const Options& opt, const std::string& command) {
    RunKeeper keeper(opt);  // the run folder, locked and checked writable before anything loads

    // the task, the model, its prior G (the task's structure(), or a --mask-structure file) and its
    // initialisation: initialise (run/setup.cuh) applies the --init's line of INITS
    // (prior/inits.cuh), where the mask init's apply_mask sets M = ±c from G
    // (init_mask_from_structure, prior/init.cuh) and the QK inits fit Wq, Wk to it
    const std::unique_ptr<Task> task = make_task(opt);
    Model model;
    ModelOwner owner{model};  // frees the buffers however train() ends
    set_up_model(model, opt, *task);
    const Structure G = prior_structure(opt, *task, model.cfg);
    const Initialisation init = initialise(model, opt, *task, G);
    const int64_t steps = training_steps(opt, *task);
    const int64_t start_step = keeper.start(model, steps);  // 0, or a continued run's checkpoint's step
    if (keeper.recovered_finished_run()) return 0;

    // the data: the order of the training examples (each epoch a permutation drawn from the seed and
    // the epoch's number, so the run's k-th example depends on (seed, k) alone: tasks/task.h), the
    // loss's positions, and one batch's buffers (run/setup.cuh), shaped once and refilled every step
    EpochOrder order(opt.seed, task->train_size());
    const std::vector<float> positions = loss_positions(*task, opt.loss_on);  // (T), or empty
    Batch batch = training_batch_room(opt, *task, positions);
    print_startup(opt, *task, model, G, init, steps, start_step, keeper.paths.folder);
    keeper.begin(model, *task);

    // the training loop: evaluate at step 0 (with the first batch's gradients), then each step's
    // batch, its forward and backward passes and AdamW update, and an evaluation every eval_every.
    // init.reference is the step-0 weights and first-attention inputs, which the persistence
    // metrics (mask_drift, qk_cosine: prior/persistence.cuh) compare the model with
    Evaluation ev;
    if (start_step == 0) {
        ev = evaluate_before_training(model, *task, order, batch, G, init.reference, positions);
        keeper.evaluation_at_start(model, *task, G, ev);
    }
    const int64_t eval_every = opt.eval_every > 0 ? opt.eval_every : steps;
    for (int64_t step = start_step; step < steps; step++) {
        training_batch(*task, order, step, batch);
        training_step(model, batch, step_learning_rate(opt, step, steps), opt.clip_grad, step);
        const int64_t done = step + 1;
        const bool evaluating = done % eval_every == 0 || done == steps;
        keeper.step_done(model, done, evaluating, batch.making_seconds);  // the loss where reported, progress
        if (evaluating) {
            ev = evaluate_run(model, *task, G, init.reference, positions);
            keeper.evaluation(done, ev);
        }
        if (keeper.save_or_stop(model, done)) return keeper.stopped(done);  // asked to stop: saved, exit 3
    }
    if (start_step == steps) {  // a finished run continued: nothing trained, evaluate what is there
        ev = evaluate_run(model, *task, G, init.reference, positions);
        print_evaluation(steps, ev);
    }

    // the final report: pictures, the checkpoint, metrics.json, the table
    keeper.finish(model, *task, ev, command);
    return 0;
}

// The programs: a table's names (--list), text from a checkpoint (--generate), the first batch's
// gradients (--dump-state) or a profile of the first steps (--profile); else a training run.
// Bad input (a flag, a file, a shape) throws InputError or, from the task's parsers,
// std::runtime_error: one line, exit code 2. A std::logic_error is a bug: exit code 1.
int main(int argc, char** argv) {
    try {
        const Options opt = parse_options(argc, argv);
        if (!opt.list.empty()) return print_list(opt.list);
        if (!opt.generate.empty()) return generate(opt, pick_device(opt));
        if (!opt.dump_state.empty()) return dump_first_batch(opt);
        if (opt.profile > 0) return profile_first_steps(opt);
        return train(opt, command_line(argc, argv));
    } catch (const std::logic_error& e) {
        fprintf(stderr, "maskprior: internal error: %s\n", e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        fprintf(stderr, "maskprior: error: out of memory\n");
        return 2;
    } catch (const std::exception& e) {
        fprintf(stderr, "maskprior: error: %s\n", e.what());
        return 2;
    }
}
