// main.cu: the maskprior program, top to bottom: options, task, model, init, the training
// loop, the final report. Every step is a call into the file that owns it; no math lives
// here. README.md has the reading order of the files; docs/method.md explains the method.
#include <cmath>
#include <memory>
#include <new>
#include <stdexcept>
#include "model.cuh"           // Model, model_build, model_forward, model_zero_grad, model_backward, model_update
#include "run/checkpoint.h"    // checkpoint_save, dump_state
#include "run/evaluate.cuh"    // evaluate, write_pictures, write_structure_picture
#include "run/options.h"       // parse_options
#include "run/report.cuh"      // RunLog, Progress, write_metrics, print_final_table
#include "run/sample.cuh"      // generate
#include "run/setup.cuh"       // make_task, model_config, prior_structure, initialise, resume, print_startup
#include "tasks/batch.h"       // Batch, training_batch, loss_positions

static int train(int argc, char** argv) {
    const Options opt = parse_options(argc, argv);
    if (!opt.generate.empty()) return generate(opt, pick_device(opt));  // text from a checkpoint, then stop
    const std::unique_ptr<Task> task = make_task(opt);
    const Device dev = pick_device(opt);
    printf("maskprior: training on the %s: %s\n", dev == DEVICE_GPU ? "GPU" : "CPU (no GPU in use)",
           device_name(dev).c_str());

    // the model, its prior and its initialisation
    const Config cfg = model_config(opt, *task);
    const int B = opt.batch;
    const int64_t steps = training_steps(opt, *task);
    Model model;
    model_build(model, cfg, dev, B);
    set_optimizer(model, opt);
    const Structure G = prior_structure(opt, *task, cfg);
    const Initialisation init = initialise(model, opt, *task, G);
    const int64_t start_step = resume(model, opt, steps);
    Metadata run_meta = run_metadata(opt);

    // the data: the seeded order of the training examples, and one batch's room
    EpochOrder order(opt.seed, task->train_size());
    const std::vector<float> positions = loss_positions(*task, opt.loss_on);  // (T), or empty
    Batch batch;
    batch.shape(*task, B, positions);

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

    const std::string out_dir = run_folder(opt);
    const std::string save_path = opt.save.empty() ? out_dir + "/model.safetensors" : opt.save;
    RunLog log(out_dir, start_step > 0);
    print_startup(opt, *task, model, G, init, steps, start_step, out_dir);
    const int64_t log_every = opt.log_every > 0 ? opt.log_every : std::max<int64_t>(1, steps / 10);
    const int64_t eval_every = opt.eval_every > 0 ? opt.eval_every : steps;
    const double t_start = now_seconds();
    Evaluation ev;
    if (start_step == 0) {  // step 0: the first batch's gradient, so that step 0 reports gradient norms too
        training_batch(*task, order, 0, batch);
        model_forward(model, batch_input(batch), batch.targets.data(), B, batch.mask());
        model_zero_grad(model);
        model_backward(model, B);
        ev = evaluate(model, *task, G, init.reference, positions);
        log.evaluation(0, NAN, ev);
        write_pictures(out_dir, "step0", model, ev, *task);
        write_structure_picture(out_dir, G);
    }

    // the training loop
    const bool language = is_language_task(opt.task);
    Progress progress{log_every, steps, dev, task->image_input() ? B : language ? B * task->seq_len : 0,
                      task->image_input() ? "images" : "tokens"};
    TrainAccuracy train_accuracy;  // classification: top-1 on the training batches between evaluations
    float loss = 0;
    for (int64_t step = start_step; step < steps; step++) {
        const double batch_start = now_seconds();
        training_batch(*task, order, step, batch);
        progress.exclude(now_seconds() - batch_start);
        loss = model_forward(model, batch_input(batch), batch.targets.data(), B, batch.mask());
        if (!std::isfinite(loss)) fail("the loss became %f at step %lld: lower --lr?", loss, (long long)step);
        train_accuracy.add(model, batch);
        model_zero_grad(model);
        model_backward(model, B);
        if (opt.clip_grad > 0) model_clip_gradients(model, opt.clip_grad);
        model.adam.lr = step_learning_rate(opt, step, steps);
        model_update(model);
        const int64_t done = step + 1;
        progress.step_done(done, loss);
        if (done % eval_every == 0 || done == steps) {
            ev = evaluate(model, *task, G, init.reference, positions);
            train_accuracy.report(ev);
            log.evaluation(done, loss, ev);
            progress.restart();  // evaluation time is not training time
        }
    }
    if (start_step == steps) {  // resumed a finished run: nothing trained, evaluate what is there
        ev = evaluate(model, *task, G, init.reference, positions);
        print_evaluation(steps, ev);
    }
    const double seconds = now_seconds() - t_start;

    // the final report: pictures, checkpoint, metrics.json, the table
    write_pictures(out_dir, "final", model, ev, *task);
    run_meta["step"] = std::to_string(steps);
    checkpoint_save(save_path, cfg, training_state(model), run_meta);
    const std::string loss_name = cfg.head == HEAD_REGRESSION ? opt.loss : "cross-entropy";
    write_metrics(out_dir,
                  {{"task", opt.task}, {"init", opt.init}, {"variant", init_variant(opt)}, {"seed", opt.seed},
                   {"data_dir", opt.data_dir}, {"optimizer", opt.optimizer},
                   {"encoding", opt.encoding}, {"loss", loss_name}, {"steps", steps}, {"seconds", seconds},
                   {"final_loss", loss}, {"train_examples", task->train_size()}, {"eval_examples", task->eval_size()}},
                  ev, dev, command_line(argc, argv));
    print_final_table(cfg, ev, seconds);
    printf("wrote %s/metrics.json, %s/log.jsonl, %s\n", out_dir.c_str(), out_dir.c_str(), save_path.c_str());
    model_free(model);
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
