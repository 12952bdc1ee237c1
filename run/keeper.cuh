// run/keeper.cuh: what keeps a training run, around the method's loop in main.cu, which calls it
// before the loop (start, begin), after each step (step_done, save_or_stop), at each evaluation
// (evaluation) and at the end (finish):
//   - the run folder: created and locked for this process before anything loads (run/run_lock.h),
//     its outputs checked writable (run/checkpointing.cuh, run_paths); the stop signals caught
//     (SIGTERM, SIGINT, SIGUSR1: the run finishes its step, saves it and exits 3; run/signals.h);
//   - the checkpoint the run continues from (--resume, --continue) and those it writes (every
//     --checkpoint-every steps, at a stop, at the end: run/checkpointing.cuh); a finished run
//     killed before its metrics.json gets the file from its checkpoint;
//   - log.jsonl, the progress lines and metrics.json (run/report.cuh);
//   - the step log, which on the GPU the host reads only where the run reports or saves, so that
//     between those steps it never waits for the GPU (gpu/device_step.cuh); a step whose loss is
//     not finite stops the run, naming the last good checkpoint.
// The tests' exact fault points (run/atomic_file.h) are here too: "after-step".
#pragma once
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <nlohmann/json.hpp>
#include "model.cuh"              // Model
#include "run/atomic_file.h"      // fault_point
#include "run/checkpointing.cuh"  // RunPaths, run_paths, checkpoint_to_resume, start_state, Checkpointer
#include "run/evaluate.cuh"       // Evaluation, TrainAccuracy, write_pictures, write_structure_picture
#include "run/options.h"          // Options
#include "run/report.cuh"         // RunLog, Progress, metrics_json, write_metrics, print_final_table
#include "run/setup.cuh"          // run_metadata, init_variant
#include "run/signals.h"          // catch_stop_signals, stop_signal, report_stop
#include "run/step.cuh"           // model_read_step_log, weight_decay_on
#include "tasks/registry.h"       // is_language_task
#include "tasks/task.h"           // Task

struct RunKeeper {
    const Options& opt;
    RunPaths paths;                // the run folder and the checkpoint's path
    Metadata meta;                 // what every checkpoint records of the run (run_metadata)
    int64_t steps = 0, start_step = 0;
    Resumed resumed;               // the checkpoint continued from (its step and metadata), if any
    TrainAccuracy train_accuracy;  // a classifier's hits on its training batches since the last evaluation
    std::optional<Checkpointer> checkpointer;
    std::unique_ptr<RunLog> log;
    std::optional<Progress> progress;
    float loss = 0;          // the last step's training loss, as the step log last gave it
    bool step_read = false;  // whether the step log was read after this step
    double started = 0;      // when training began (its seconds go to metrics.json)

    // The run folder, locked, with its outputs checked writable: before the task and data load
    explicit RunKeeper(const Options& options) : opt(options), paths(run_paths(options)), meta(run_metadata(options)) {
        catch_stop_signals();
    }

    // The state training starts from and the step it starts at (run/checkpointing.cuh, start_state):
    // the weights' average from the initial weights (--ema); continuing a run, its checkpoint's
    // parameters, moments, average and step.
    int64_t start(Model& model, int64_t run_steps) {
        steps = run_steps;
        const std::string path = checkpoint_to_resume(opt, paths);
        resumed = start_state(model, opt, path, steps, train_accuracy);
        start_step = resumed.step;
        checkpointer = Checkpointer{paths.checkpoint, opt.checkpoint_every, path == paths.checkpoint ? start_step : -1};
        return start_step;
    }

    // Whether the run was finished already and killed before its metrics.json, which it then
    // writes from the checkpoint (the last batch's loss and gradients cannot be computed again)
    bool recovered_finished_run() {
        if (start_step != steps || !resumed.meta.count("metrics")) return false;
        const auto metrics = nlohmann::ordered_json::parse(resumed.meta.at("metrics"), nullptr, false);
        if (metrics.is_discarded()) fail("%s: its metadata 'metrics' is not JSON", paths.checkpoint.c_str());
        write_metrics(paths.folder, metrics);
        printf("the run was finished (step %lld): wrote %s/metrics.json from its checkpoint\n", (long long)steps,
               paths.folder.c_str());
        return true;
    }

    // Before step 0's evaluation: log.jsonl (a continued run's kept up to its step), the clocks
    void begin(const Model& model, const Task& task) {
        log = std::make_unique<RunLog>(paths.folder, !resumed.meta.empty(), start_step);
        const int64_t every = opt.log_every > 0 ? opt.log_every : std::max<int64_t>(1, steps / 10);
        const bool language = is_language_task(opt.task);
        const int items = task.image_input() ? model.B : language ? model.B * task.seq_len : 0;
        progress = Progress{every, steps, model.dev, items, task.image_input() ? "images" : "tokens"};
        started = now_seconds();
    }

    // The evaluation before training (step 0): its row, and the pictures of the start and of G
    void evaluation_at_start(Model& model, const Task& task, const Structure& G, const Evaluation& ev) {
        log->evaluation(0, NAN, ev);
        write_pictures(paths.folder, "step0", model, ev, task);
        write_structure_picture(paths.folder, G);
        progress->restart();
    }

    // After step `done`, its batch made in batch_seconds (not the model's time: left out of the
    // speed on the CPU): the step log read where the run reports (on the CPU every step, where it
    // costs nothing), and the progress line when due
    void step_done(Model& model, int64_t done, bool evaluating, double batch_seconds) {
        step_read = false;
        progress->exclude(batch_seconds);
        if (model.dev == DEVICE_CPU || progress->due(done) || evaluating) read_step_log(model);
        fault_point("after-step");
        progress->step_done(done, loss);
    }

    // The steps' log since the last read: the last loss, a classifier's hits; a loss that was not
    // finite stops the run
    void read_step_log(Model& model) {
        if (step_read) return;
        step_read = true;
        const StepLog steps_log = model_read_step_log(model);
        if (steps_log.first_bad_step >= 0)
            fail("the loss became %f at step %lld: lower --lr? %s", steps_log.first_bad_loss,
                 (long long)steps_log.first_bad_step, checkpointer->last_good().c_str());
        loss = steps_log.loss;
        train_accuracy.add(steps_log);
    }

    // An evaluation after step `done`: the training accuracy since the last one added to it, its
    // line and its row in log.jsonl; its time is not training time
    void evaluation(int64_t done, Evaluation& ev) {
        train_accuracy.report(ev);
        log->evaluation(done, loss, ev);
        progress->restart();
    }

    // After step `done` and its evaluation: the periodic checkpoint when due; and whether a signal
    // asked the run to stop, the step then saved (unless it is already)
    bool save_or_stop(Model& model, int64_t done) {
        if (checkpointer->due(done, steps)) {
            read_step_log(model);  // no checkpoint after a step that is not finite
            checkpointer->save(model, meta, done, train_accuracy);
            progress->restart();  // saving is not training either
        }
        if (stop_signal() == 0 || done == steps) return false;
        read_step_log(model);
        if (checkpointer->saved_step != done) checkpointer->save(model, meta, done, train_accuracy);
        return true;
    }

    // The exit of a run stopped by a signal after step `done`, with its line
    int stopped(int64_t done) const { return report_stop(done, paths.checkpoint); }

    // The end of the run: the final pictures, the checkpoint (holding metrics.json's content, so a
    // kill between the two loses nothing), metrics.json, the final table
    void finish(Model& model, const Task& task, const Evaluation& ev, const std::string& command) {
        const double seconds = now_seconds() - started;
        write_pictures(paths.folder, "final", model, ev, task);
        const std::string loss_name = model.cfg.readout == READOUT_REGRESSION ? opt.loss : "cross-entropy";
        nlohmann::ordered_json about = {{"task", opt.task}};
        if (task_in_family(opt.task, TASKS_BOOLEAN)) about.update(boolean_facts(opt, task));  // f, U, which G
        about.update(nlohmann::ordered_json{{"init", opt.init}, {"variant", init_variant(opt)}, {"seed", opt.seed},
             {"data_dir", opt.data_dir}, {"pe_scale", opt.pe_scale}, {"optimizer", opt.optimizer},
             {"weight_decay_on", weight_decay_on(model)},
             {"encoding", opt.encoding}, {"loss", loss_name},
             {"steps", steps}, {"seconds", seconds}, {"final_loss", loss}, {"train_examples", task.train_size()},
             {"eval_examples", task.eval_size()}});
        const nlohmann::ordered_json metrics = metrics_json(about, ev, model.dev, model.kernels, command);
        meta["metrics"] = metrics.dump();
        checkpointer->save(model, meta, steps, train_accuracy);
        write_metrics(paths.folder, metrics);
        print_final_table(model.cfg, ev, seconds);
        printf("wrote %s/metrics.json, %s/log.jsonl, %s\n", paths.folder.c_str(), paths.folder.c_str(),
               paths.checkpoint.c_str());
    }
};
