// run/checkpointing.cuh: a run's checkpoints: where they go (checked writable before the first
// step), when they are written (--checkpoint-every), what they hold besides the model and
// the optimizer (run/checkpoint.h), and how a run continues from one (--resume FILE, --continue).
//
// The checkpoint is one file, the run folder's model.safetensors (or --save), written atomically
// over the last one (run/atomic_file.h). Besides the run's metadata (run_metadata) it records
//   step                       the optimizer steps taken: the data order, the learning rate and
//                              the random draws are functions of (seed, step), so this is all
//                              the loop needs to continue bit-exactly;
//   train_correct, train_seen  the training-accuracy counts since the last evaluation (image
//                              classification), so the next evaluation's train_acc is unchanged;
//   weight_decay_on            "matrices" (images, language: the weight matrices alone, as timm and
//                              nanoGPT decay) or "all" (every weight but the mask): the run goes on
//                              with the rule it started with; a checkpoint without the key is from
//                              before the rule existed, when every weight decayed: "all";
//   metrics                    in the last step's checkpoint only: metrics.json's content. It is
//                              written before metrics.json, so a run killed between the two
//                              rewrites metrics.json from here: the last batch's loss and
//                              gradient norms in it cannot be computed again from the parameters.
// A checkpoint is never written from non-finite parameters: a diverging run stops and names its
// last good checkpoint.
#pragma once
#include <sys/stat.h>
#include <cmath>
#include <cstdio>
#include <string>
#include "model.cuh"            // Model, model_upload, model_download
#include "run/atomic_file.h"    // check_writable
#include "run/checkpoint.h"     // checkpoint_save, checkpoint_load, Metadata, TrainingState
#include "run/evaluate.cuh"     // TrainAccuracy
#include "run/options.h"        // Options
#include "run/run_lock.h"       // lock_run_folder
#include "run/setup.cuh"        // run_metadata, run_folder
#include "run/step.cuh"         // weight_decay_on

// the default checkpoint interval, in minutes of the run's wall-clock time
static const double CHECKPOINT_MINUTES = 5;

// Where a training run writes: its folder (log.jsonl, metrics.json, pictures) and its checkpoint
struct RunPaths {
    std::string folder, checkpoint;
};

// The run folder (created, and locked for this process before anything is written into it:
// run/run_lock.h) and the checkpoint path, each checked writable now, before the data loads and
// anything trains: a bad --out or --save is one line at once, not after the run.
inline RunPaths run_paths(const Options& opt) {
    RunPaths paths;
    paths.folder = run_folder(opt);
    lock_run_folder(paths.folder);
    paths.checkpoint = opt.save.empty() ? paths.folder + "/model.safetensors" : opt.save;
    check_writable(paths.folder + "/log.jsonl");
    check_writable(paths.checkpoint);
    return paths;
}

// The checkpoint the run starts from: --resume FILE; with --continue the run's own checkpoint
// when there is one; else none ("").
inline std::string checkpoint_to_resume(const Options& opt, const RunPaths& paths) {
    if (!opt.continue_run) return opt.resume;
    struct stat st;
    return stat(paths.checkpoint.c_str(), &st) == 0 ? paths.checkpoint : "";
}

// Run keys added after the first checkpoints were written, and what a file without them means
static const Metadata RUN_METADATA_ADDED_LATER = {{"schedule", "constant"}, {"warmup", "-1"}, {"min_lr", "0"},
                                                  {"clip_grad", "0"},       {"label_smoothing", "0"},
                                                  {"freeze_mask", "0"},     {"pe_scale", "1"},
                                                  {"drop_path", "0"},       {"ema", "0"},
                                                  {"mixup", "0"},           {"cutmix", "0"},
                                                  {"mix_switch", "0.5"},    {"mix_prob", "1"},
                                                  {"randaugment", "0"},     {"randaugment_ops", "2"},
                                                  {"random_erase", "0"},    {"prior_noise", "0"},
                                                  {"prior_drop", "0"},      {"prior_seed", "none"},
                                                  {"mask_lr_scale", "1"},   {"g_from", "target"}};

// Run keys that run_metadata writes only when their flag is on (run/setup.cuh): a run without
// them asks for their value when absent, off, and so refuses a checkpoint of a run with them
static const char* RUN_METADATA_WHEN_ON[] = {"drop_path",   "ema",           "mixup",        "cutmix",
                                             "mix_switch",  "mix_prob",      "randaugment",  "randaugment_ops",
                                             "random_erase", "prior_noise",  "prior_drop",   "prior_seed",
                                             "mask_lr_scale", "g_from"};

// A run continued from a checkpoint: its step and its metadata (step 0 and empty when it starts afresh)
struct Resumed {
    int64_t step = 0;
    Metadata meta;
};

// Loads the checkpoint at path (none: "") into the model, refusing one of another run, and puts
// the training-accuracy counts it holds back into train_accuracy.
inline Resumed resume(Model& model, const Options& opt, const std::string& path, int64_t steps,
                      TrainAccuracy& train_accuracy) {
    Resumed resumed;
    if (path.empty()) return resumed;
    Metadata& meta = resumed.meta;
    TrainingState state = checkpoint_load(path, model.cfg, &meta);  // checks the config itself
    Metadata wanted = run_metadata(opt);
    for (const char* key : RUN_METADATA_WHEN_ON) wanted.insert({key, RUN_METADATA_ADDED_LATER.at(key)});  // off
    for (const auto& [key, want] : wanted) {
        auto later = RUN_METADATA_ADDED_LATER.find(key);
        if (!meta.count(key) && later != RUN_METADATA_ADDED_LATER.end()) meta[key] = later->second;
        if (meta[key] != want)
            fail("%s is a checkpoint of %s=%s; this run asks for %s=%s", path.c_str(), key.c_str(), meta[key].c_str(),
                 key.c_str(), want.c_str());
    }
    resumed.step = atoll(meta["step"].c_str());
    if (resumed.step > steps)
        fail("%s is at step %lld, past --steps %lld", path.c_str(), (long long)resumed.step, (long long)steps);
    model_upload(model, model.params_mem, state.params);
    model_upload(model, model.m_mem, state.m);
    model_upload(model, model.v_mem, state.v);
    if (model.ema.decay > 0 && state.ema.empty())
        fail("%s has no moving average of the weights (no ema.* tensors) for --ema", path.c_str());
    if (model.ema.decay > 0) model_upload(model, model.ema.weights, state.ema);
    model.adam_t = state.adam_t;
    const std::string decay = meta.count("weight_decay_on") ? meta["weight_decay_on"] : "all";  // absent: older
    if (decay != "all" && decay != "matrices")
        fail("%s: its metadata 'weight_decay_on' is '%s', not all or matrices", path.c_str(), decay.c_str());
    model.decay_matrices_only = decay == "matrices";
    train_accuracy.correct = atoll(meta["train_correct"].c_str());  // absent (older files): 0
    train_accuracy.seen = atoll(meta["train_seen"].c_str());
    return resumed;
}

// The state training starts from: the weights' moving average from the initial weights (--ema;
// recipe/ema.cuh), then, from a checkpoint (path; "" for none), the checkpoint's state (resume)
inline Resumed start_state(Model& model, const Options& opt, const std::string& path, int64_t steps,
                           TrainAccuracy& train_accuracy) {
    weight_average_start(model.ema, model.dev, model.params_mem, model.num_params, opt.ema);
    return resume(model, opt, path, steps, train_accuracy);
}

// The model's state as a checkpoint holds it
inline TrainingState training_state(const Model& model) {
    const std::vector<float> ema = model.ema.decay > 0 ? model_download(model, model.ema.weights)
                                                       : std::vector<float>();
    return {model_download(model, model.params_mem), model_download(model, model.m_mem),
            model_download(model, model.v_mem), ema, model.adam_t};
}

inline bool all_finite(const std::vector<float>& values) {
    for (float v : values)
        if (!std::isfinite(v)) return false;
    return true;
}

// When and where the run saves itself. every: --checkpoint-every (steps; -1: every
// CHECKPOINT_MINUTES of wall-clock time; 0: at the end only).
struct Checkpointer {
    std::string path;
    int64_t every;
    int64_t saved_step;  // the step of the last good checkpoint at path; -1: none
    double saved_time = now_seconds();

    // a periodic checkpoint after step `done` (the last step's is the final one, not periodic)
    bool due(int64_t done, int64_t steps) const {
        if (done == steps || every == 0) return false;
        return every > 0 ? done % every == 0 : now_seconds() - saved_time >= 60 * CHECKPOINT_MINUTES;
    }

    // Writes the checkpoint of step `step`: the model, the optimizer, meta (the run's metadata),
    // the step and the training-accuracy counts. Refuses non-finite parameters or moments. A
    // write that fails (a full disk) leaves the last checkpoint as it was and names it.
    void save(const Model& model, Metadata meta, int64_t step, const TrainAccuracy& train_accuracy) {
        const TrainingState state = training_state(model);
        if (!all_finite(state.params) || !all_finite(state.m) || !all_finite(state.v) || !all_finite(state.ema))
            fail("the parameters are not finite after step %lld: no checkpoint written; %s", (long long)step,
                 last_good().c_str());
        meta["step"] = std::to_string(step);
        meta["weight_decay_on"] = weight_decay_on(model);
        meta["kernels"] = kernels_text(model.dev, model.kernels);  // recorded, not matched: a run may go on with others
        meta["train_correct"] = std::to_string(train_accuracy.correct);
        meta["train_seen"] = std::to_string(train_accuracy.seen);
        try {
            checkpoint_save(path, model.cfg, state, meta);
        } catch (const InputError& e) {
            fail("%s; %s", e.what(), last_good().c_str());
        }
        saved_step = step;
        saved_time = now_seconds();
    }

    // what a run that stops now leaves to continue from, for its error line
    std::string last_good() const {
        if (saved_step < 0) return "no checkpoint was written";
        return "the last good checkpoint is " + path + " (step " + std::to_string(saved_step) + ")";
    }
};
