// main.cu: the maskprior program, top to bottom: options, task, model, init, the training
// loop, the final report. Every step is a call into the file that owns it; no math lives
// here. README.md has the reading order of the files; docs/method.md explains the method.
#include <cmath>
#include <memory>
#include <new>
#include <stdexcept>
#include "model.cuh"             // Model, model_build, model_forward, model_zero_grad, model_backward
#include "run/checkpoint.h"      // dump_state
#include "run/checkpointing.cuh" // run_paths, checkpoint_to_resume, resume, Checkpointer
#include "run/evaluate.cuh"      // evaluate_run, write_pictures, write_structure_picture
#include "run/options.h"         // parse_options
#include "gpu/profile_report.cuh"       // record_profile, print_profile
#include "run/report.cuh"        // RunLog, Progress, metrics_json, write_metrics, print_final_table
#include "run/sample.cuh"        // generate
#include "run/signals.h"         // catch_stop_signals, stop_signal, report_stop
#include "run/setup.cuh"         // make_task, model_config, prior_structure, initialise, print_startup
#include "run/step.cuh"          // training_step, model_read_step_log, weight_decay_on
#include "tasks/batch.h"         // Batch, training_batch, loss_positions

static int train(int argc, char** argv) {
    const Options opt = parse_options(argc, argv);
    if (!opt.list.empty()) return print_list(opt.list);  // a table's names, then stop
    if (!opt.generate.empty()) return generate(opt, pick_device(opt));  // text from a checkpoint, then stop
    RunPaths paths;  // every output is checked writable first, not after the training
    if (!opt.dump_state.empty()) check_writable(opt.dump_state);
    else if (opt.profile == 0) paths = run_paths(opt);  // the run folder, locked for this process
    if (!paths.folder.empty()) catch_stop_signals();  // SIGTERM, SIGINT, SIGUSR1: stop after the step, saved
    const std::unique_ptr<Task> task = make_task(opt);
    const Device dev = pick_device(opt);
    if (opt.profile > 0 && dev != DEVICE_GPU) fail("--profile records GPU launches, and no GPU is in use");
    const Kernels kernels = choose_kernels(opt, opt.head_size, task->seq_len);  // how the GPU computes
    gpu_prepare(dev, kernels);
    printf("maskprior: training on the %s\n", device_line(dev, kernels).c_str());

    // the model, its prior and its initialisation
    const Config cfg = model_config(opt, *task);
    const int B = opt.batch;
    const int64_t steps = training_steps(opt, *task);
    Model model;
    ModelOwner owner{model};  // frees the buffers however train() ends
    model_build(model, cfg, dev, B);
    model.kernels = kernels;
    set_optimizer(model, opt);
    const Structure G = prior_structure(opt, *task, cfg);
    const Initialisation init = initialise(model, opt, *task, G);
    weight_average_start(model.ema, dev, model.params_mem, model.num_params, opt.ema);  // --ema: from step 0
    TrainAccuracy train_accuracy;  // classification: top-1 on the training batches between evaluations
    const std::string resume_path = checkpoint_to_resume(opt, paths);
    const Resumed resumed = resume(model, opt, resume_path, steps, train_accuracy);
    const int64_t start_step = resumed.step;
    Metadata run_meta = run_metadata(opt);

    // the data: the seeded order of the training examples, and one batch's room
    EpochOrder order(opt.seed, task->train_size());
    const std::vector<float> positions = loss_positions(*task, opt.loss_on);  // (T), or empty
    Batch batch;
    batch.shape(*task, B, positions);
    batch.mixing = mix_settings(opt);  // mixup, cutmix: training batches only (recipe/mix.h)

    if (!opt.dump_state.empty()) {  // one forward/backward on the first batch, written out, then stop
        training_batch(*task, order, start_step, batch);
        float loss = model_forward(model, batch_input(batch), batch.targets.data(), B, batch.mask());
        model_zero_grad(model);
        model_backward(model, B);
        run_meta["step"] = std::to_string(start_step);
        dump_state(opt.dump_state, cfg, model_download(model, model.params_mem), model_download(model, model.grads_mem),
                   {batch.tokens, batch.pixels, batch.targets, batch.loss_mask, B, loss}, run_meta);
        printf("wrote %s (loss %.6f)\n", opt.dump_state.c_str(), loss);
        return 0;
    }

    if (opt.profile > 0) {  // N recorded steps from the first batch on, the table, then stop
        record_profile(dev, opt.profile, [&](int64_t i) {
            training_batch(*task, order, start_step + i, batch);
            const int64_t step = std::min(start_step + i, steps - 1);
            training_step(model, batch_input(batch), batch.targets.data(), batch.mask(),
                          step_learning_rate(opt, step, steps), opt.clip_grad, step, batch.mix_targets());
        });
        print_profile(profiler(), opt.profile, kernels.tf32);
        return 0;
    }

    const std::string& out_dir = paths.folder;
    if (start_step == steps && resumed.meta.count("metrics")) {  // finished, killed before its metrics.json
        const auto metrics = nlohmann::ordered_json::parse(resumed.meta.at("metrics"), nullptr, false);
        if (metrics.is_discarded()) fail("%s: its metadata 'metrics' is not JSON", resume_path.c_str());
        write_metrics(out_dir, metrics);
        printf("the run was finished (step %lld): wrote %s/metrics.json from its checkpoint\n", (long long)steps,
               out_dir.c_str());
        return 0;
    }
    RunLog log(out_dir, !resumed.meta.empty(), start_step);
    const int64_t saved_step = resume_path == paths.checkpoint ? start_step : -1;  // the run folder's own checkpoint
    Checkpointer checkpointer{paths.checkpoint, opt.checkpoint_every, saved_step};
    print_startup(opt, *task, model, G, init, steps, start_step, out_dir);
    const int64_t log_every = opt.log_every > 0 ? opt.log_every : std::max<int64_t>(1, steps / 10);
    const int64_t eval_every = opt.eval_every > 0 ? opt.eval_every : steps;
    const double t_start = now_seconds();
    Evaluation ev;
    if (start_step == 0) {  // step 0: the first batch's gradient, so that step 0 reports gradient norms too
        training_batch(*task, order, 0, batch);
        model_forward(model, batch_input(batch), batch.targets.data(), B, batch.mask(), false, batch.mix_targets());
        model_zero_grad(model);
        model_backward(model, B);
        ev = evaluate_run(model, *task, G, init.reference, positions);
        log.evaluation(0, NAN, ev);
        write_pictures(out_dir, "step0", model, ev, *task);
        write_structure_picture(out_dir, G);
    }

    // the training loop
    const bool language = is_language_task(opt.task);
    Progress progress{log_every, steps, dev, task->image_input() ? B : language ? B * task->seq_len : 0,
                      task->image_input() ? "images" : "tokens"};
    float loss = 0;
    for (int64_t step = start_step; step < steps; step++) {
        const double batch_start = now_seconds();
        training_batch(*task, order, step, batch);
        progress.exclude(now_seconds() - batch_start);
        const float lr = step_learning_rate(opt, step, steps);
        training_step(model, batch_input(batch), batch.targets.data(), batch.mask(), lr, opt.clip_grad, step,
                      batch.mix_targets());
        const int64_t done = step + 1;
        const bool evaluating = done % eval_every == 0 || done == steps;
        // the step log, where the run reports or saves (the CPU's costs nothing: every step); the
        // GPU ran the steps since the last read without the host waiting for one
        bool read = false;
        auto read_step_log = [&] {
            if (read) return;
            read = true;
            const StepLog steps_log = model_read_step_log(model);
            if (steps_log.first_bad_step >= 0)
                fail("the loss became %f at step %lld: lower --lr? %s", steps_log.first_bad_loss,
                     (long long)steps_log.first_bad_step, checkpointer.last_good().c_str());
            loss = steps_log.loss;
            train_accuracy.add(steps_log);
        };
        if (dev == DEVICE_CPU || progress.due(done) || evaluating) read_step_log();
        fault_point("after-step");
        progress.step_done(done, loss);
        if (evaluating) {
            ev = evaluate_run(model, *task, G, init.reference, positions);
            train_accuracy.report(ev);
            log.evaluation(done, loss, ev);
            progress.restart();  // evaluation time is not training time
        }
        if (checkpointer.due(done, steps)) {
            read_step_log();  // no checkpoint after a step that is not finite
            checkpointer.save(model, run_meta, done, train_accuracy);
            progress.restart();  // nor is saving
        }
        if (stop_signal() != 0 && done < steps) {  // asked to stop: save this step, unless saved, then stop
            read_step_log();
            if (checkpointer.saved_step != done) checkpointer.save(model, run_meta, done, train_accuracy);
            return report_stop(done, paths.checkpoint);
        }
    }
    if (start_step == steps) {  // resumed a finished run: nothing trained, evaluate what is there
        ev = evaluate_run(model, *task, G, init.reference, positions);
        print_evaluation(steps, ev);
    }
    const double seconds = now_seconds() - t_start;

    // the final report: pictures, the checkpoint (holding metrics.json's content), metrics.json, the table
    write_pictures(out_dir, "final", model, ev, *task);
    const std::string loss_name = cfg.readout == READOUT_REGRESSION ? opt.loss : "cross-entropy";
    const nlohmann::ordered_json metrics = metrics_json(
        {{"task", opt.task}, {"init", opt.init}, {"variant", init_variant(opt)}, {"seed", opt.seed},
         {"data_dir", opt.data_dir}, {"pe_scale", opt.pe_scale}, {"optimizer", opt.optimizer},
         {"weight_decay_on", weight_decay_on(model)},
         {"encoding", opt.encoding}, {"loss", loss_name},
         {"steps", steps}, {"seconds", seconds}, {"final_loss", loss}, {"train_examples", task->train_size()},
         {"eval_examples", task->eval_size()}},
        ev, dev, kernels, command_line(argc, argv));
    run_meta["metrics"] = metrics.dump();
    checkpointer.save(model, run_meta, steps, train_accuracy);
    write_metrics(out_dir, metrics);
    print_final_table(cfg, ev, seconds);
    printf("wrote %s/metrics.json, %s/log.jsonl, %s\n", out_dir.c_str(), out_dir.c_str(), paths.checkpoint.c_str());
    return 0;
}

// Bad input (a flag, a file, a shape) throws InputError or, from the task's parsers,
// std::runtime_error: one line, exit code 2. A std::logic_error is a bug: exit code 1.
int main(int argc, char** argv) {
    try {
        return train(argc, argv);
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
