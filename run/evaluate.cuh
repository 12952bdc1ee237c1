// run/evaluate.cuh: one evaluation of the model on the task's evaluation set: the task's own
// metrics, the loss, and what measures the prior: the prior mass of every layer (the mean
// attention weight on G's keys; with a G made wrong on purpose, also on the true G's), the mean
// attention maps, and the persistence metrics
// (prior/persistence.cuh); with --ema also the moving average's loss and metrics (evaluate_run).
// Also the pictures drawn from an evaluation.
#pragma once
#include <algorithm>
#include <string>
#include <vector>
#include "model.cuh"                // Model, model_forward, model_activations, log_sigmoid
#include "prior/persistence.cuh"    // Persistence, PersistenceReference, persistence_metrics
#include "prior/structure.h"        // Structure, attention_prior_mass
#include "run/pictures.h"           // Heatmap, write_heatmap
#include "run/step.cuh"             // batch_input
#include "tasks/batch.h"            // Batch
#include "tasks/decode.h"           // greedy_decode
#include "tasks/task.h"             // Task, Metrics

struct Evaluation {
    Metrics metrics;
    std::vector<double> prior_mass;      // (L)
    std::vector<double> prior_mass_true;  // (L) on the true G when G was made wrong (prior/wrong_prior.h); else empty
    std::vector<float> mean_attention;   // (L,NH,T,T) A averaged over the evaluation examples
    Persistence persistence;
    double loss = 0;
};

// Runs the whole evaluation set through the model, B rows at a time, handing the outputs to the
// task's Scorer batch by batch. Next-token tasks with decode positions (arithmetic) are
// scored on their greedy decoding (tasks/decode.h): the model writes its answer token by token
// from the prompt alone; loss and attention come from the teacher-forced pass on the true
// sequence, as in training. A language model (next token, nothing to decode) is scored on the
// loss of every position: its Scorer gets the per-token losses (rows, T). The loss is the plain
// one: label smoothing is a training device. positions (T): the loss mask of one example, or empty.
inline Evaluation evaluate(Model& model, const Task& task, const Structure& G, const PersistenceReference& ref,
                           const std::vector<float>& positions) {
    const Config& c = model.cfg;
    const int n = task.eval_size();
    const size_t TT = (size_t)c.T * c.T;
    const std::vector<int> decode_at = task.decode_positions();
    const bool token_losses = task.next_token && decode_at.empty();
    const int per_example = token_losses ? c.T : task.next_token ? (int)decode_at.size() : c.OUT;
    const float smoothing = model.label_smoothing;
    model.label_smoothing = 0;
    std::vector<float> outputs((size_t)model.B * per_example);  // (rows, per_example): the readout, or decoded tokens
    const std::unique_ptr<Scorer> scorer = task.scorer();
    std::vector<float> att((size_t)model.B * c.NH * TT);  // (rows,NH,T,T) one layer's A
    Evaluation ev;
    ev.prior_mass.assign(c.L, 0.0);
    const Structure truth = G.true_structure();  // empty (and unused) when G was not made wrong
    if (G.made_wrong()) ev.prior_mass_true.assign(c.L, 0.0);
    std::vector<double> attention_sum(c.L * c.NH * TT, 0.0);  // (L,NH,T,T)
    Batch batch;
    batch.shape(task, model.B, positions);
    for (int start = 0; start < n; start += model.B) {
        int rows = std::min(model.B, n - start);
        for (int r = 0; r < rows; r++) task.eval_example(start + r, batch.slot(task, r));
        ev.loss += model_forward(model, batch_input(batch), batch.targets.data(), rows, batch.mask(), true) * rows;
        Activations a = model_activations(model, rows);
        if (!task.next_token) buffer_copy(outputs.data(), DEVICE_CPU, a.logits, model.dev, (size_t)rows * c.OUT);
        if (token_losses) buffer_copy(outputs.data(), DEVICE_CPU, a.losses, model.dev, (size_t)rows * c.T);
        for (int l = 0; l < c.L; l++) {
            size_t per_layer = (size_t)rows * c.NH * TT;
            buffer_copy(att.data(), DEVICE_CPU, a.att + l * per_layer, model.dev, per_layer);
            ev.prior_mass[l] += attention_prior_mass(att.data(), G, rows, c.NH, c.T) * rows;
            if (G.made_wrong())
                ev.prior_mass_true[l] += attention_prior_mass(att.data(), truth, rows, c.NH, c.T) * rows;
            double* sum = &attention_sum[l * c.NH * TT];  // (NH,T,T), each entry summed over rows in order
            for (int r = 0; r < rows; r++)
                for (size_t k = 0; k < c.NH * TT; k++) sum[k] += att[r * c.NH * TT + k];
        }
        if (task.next_token && !token_losses) {
            auto next_logits = [&](const int* tokens, int r, std::vector<float>& logits) {
                model_forward(model, tokens, nullptr, r);
                logits.resize((size_t)r * c.T * c.V);
                buffer_copy(logits.data(), DEVICE_CPU, model_activations(model, r).logits, model.dev, logits.size());
            };
            std::vector<int> decoded;
            // blank token 0: under causal attention an input is decoded before any position reads it
            greedy_decode(next_logits, batch.tokens.data(), rows, c.T, c.V, decode_at, 0, decoded);
            for (size_t k = 0; k < decoded.size(); k++) outputs[k] = (float)decoded[k];
        }
        scorer->add(start, rows, outputs.data());
    }
    model.label_smoothing = smoothing;
    for (double& m : ev.prior_mass) m /= n;
    for (double& m : ev.prior_mass_true) m /= n;
    for (double sum : attention_sum) ev.mean_attention.push_back((float)(sum / n));
    ev.loss /= n;
    ev.metrics = scorer->metrics();
    ev.persistence = persistence_metrics(model, ref);
    return ev;
}

// A run's evaluation: evaluate, and with --ema the same evaluation of the weights' moving average,
// whose loss and metrics join the first's as "ema_loss" and "ema_<metric>" (ema_acc): the trained
// parameters are set aside on the host, the average copied into their place, evaluated, and the
// parameters put back, bit for bit.
inline Evaluation evaluate_run(Model& model, const Task& task, const Structure& G, const PersistenceReference& ref,
                               const std::vector<float>& positions) {
    Evaluation ev = evaluate(model, task, G, ref, positions);
    if (model.ema.decay == 0) return ev;
    const std::vector<float> trained = model_download(model, model.params_mem);
    buffer_copy(model.params_mem, model.dev, model.ema.weights, model.dev, model.num_params);
    const Evaluation averaged = evaluate(model, task, G, ref, positions);
    model_upload(model, model.params_mem, trained);
    ev.metrics.push_back({"ema_loss", averaged.loss});
    for (const auto& [key, value] : averaged.metrics) ev.metrics.push_back({"ema_" + key, value});
    return ev;
}

// The evaluation before training (step 0), with the gradient norms of the first training batch
// (the persistence metrics' grad_norm_*), as every later evaluation has those of its last step
inline Evaluation evaluate_before_training(Model& model, const Task& task, EpochOrder& order, Batch& batch,
                                           const Structure& G, const PersistenceReference& ref,
                                           const std::vector<float>& positions) {
    training_batch(task, order, 0, batch);
    model_forward(model, batch_input(batch), batch.targets.data(), batch.rows, batch.mask(), false,
                  batch.mix_targets());
    model_zero_grad(model);
    model_backward(model, batch.rows);
    return evaluate_run(model, task, G, ref, positions);
}

// Top-1 accuracy on the training batches since the last evaluation, for a classification readout
// (on the augmented images the model trained on, as ViT training logs report it), from the hits
// the step log counts (on the GPU on the device: gpu/device_step.cuh).
struct TrainAccuracy {
    int64_t correct = 0, seen = 0;
    void add(const StepLog& log) {
        correct += log.correct;
        seen += log.seen;
    }
    // adds "train_acc" to the evaluation's metrics (when a batch was seen since the last), and
    // starts counting again
    void report(Evaluation& ev) {
        if (seen > 0) ev.metrics.push_back({"train_acc", (double)correct / seen});
        correct = seen = 0;
    }
};

// For an image task: evaluation image 0 beside, in each layer, the attention (mean over heads)
// of the CLS token and of the centre patch over the patch grid: attention_image_<tag>.png.
inline void write_image_attention_picture(const std::string& dir, const std::string& tag, Model& model,
                                          const Task& task) {
    const Config& c = model.cfg;
    const int T = c.T, rows = c.patch_rows(), cols = c.patch_cols();
    Batch one;
    one.shape(task, 1, {});
    task.eval_example(0, one.slot(task, 0));
    model_forward(model, batch_input(one), nullptr, 1);  // the attention only, no loss
    std::vector<float> att((size_t)c.L * c.NH * T * T);  // (L,1,NH,T,T) every layer's A for the one image
    buffer_copy(att.data(), DEVICE_CPU, model_activations(model, 1).att, model.dev, att.size());
    ImageAttention p;
    p.channels = c.channels;
    p.height = c.height;
    p.width = c.width;
    p.grid_rows = rows;
    p.grid_cols = cols;
    p.layers = c.L;
    p.maps_per_layer = 2;
    const int queries[2] = {0, 1 + (rows / 2) * cols + cols / 2};  // CLS, and the patch at the centre
    for (int l = 0; l < c.L; l++)
        for (int query : queries)
            for (int key = 1; key < T; key++) {
                double mean = 0;
                for (int h = 0; h < c.NH; h++) mean += att[(((size_t)l * c.NH + h) * T + query) * T + key] / c.NH;
                p.maps.push_back((float)mean);
            }
    // the normalised image, stretched back into [0, 1] per channel for the eye
    const size_t plane = (size_t)c.height * c.width;
    for (int ch = 0; ch < c.channels; ch++) {
        const float* x = one.pixels.data() + ch * plane;
        const float lo = *std::min_element(x, x + plane), hi = *std::max_element(x, x + plane);
        for (size_t k = 0; k < plane; k++) p.image.push_back(hi > lo ? (x[k] - lo) / (hi - lo) : 0.5f);
    }
    write_image_attention(dir + "/attention_image_" + tag + ".png", p);
    printf("wrote %s/attention_image_%s.png (test image 0; per layer, the attention of CLS and of the centre patch)\n",
           dir.c_str(), tag.c_str());
}

// The pictures of one moment of the run (tag: step0 or final): each layer's mean attention
// map and, where there is a mask, log σ(M); rows are layers, columns heads. Image tasks also
// get write_image_attention_picture.
inline void write_pictures(const std::string& dir, const std::string& tag, Model& model, const Evaluation& ev,
                           const Task& task) {
    if (task.image_input()) write_image_attention_picture(dir, tag, model, task);
    const Config& c = model.cfg;
    Heatmap att;
    att.T = c.T;
    att.grid_rows = c.L;
    att.grid_cols = c.NH;
    att.values = ev.mean_attention;
    att.hi = *std::max_element(att.values.begin(), att.values.end());
    write_heatmap(dir + "/attention_" + tag + ".png", att);
    printf("wrote %s/attention_%s.png (mean attention, layers down, heads across; scale 0 .. %.3f)\n", dir.c_str(),
           tag.c_str(), att.hi);
    if (c.mask_heads == 0) return;
    Heatmap mask;
    mask.T = c.T;
    mask.grid_rows = c.prior_layer_count();
    mask.grid_cols = c.mask_heads;
    mask.values.resize((size_t)mask.grid_rows * mask.grid_cols * c.T * c.T);
    buffer_copy(mask.values.data(), DEVICE_CPU, model.params.mask, model.dev, mask.values.size());
    for (float& m : mask.values) m = log_sigmoid(m);
    mask.lo = *std::min_element(mask.values.begin(), mask.values.end());
    mask.hi = 0;
    write_heatmap(dir + "/mask_" + tag + ".png", mask);
    printf("wrote %s/mask_%s.png (log σ(M), layers down, heads across; scale %.2f .. 0)\n", dir.c_str(), tag.c_str(),
           mask.lo);
}

// G itself, one panel per head
inline void write_structure_picture(const std::string& dir, const Structure& G) {
    Heatmap structure;
    structure.T = G.T;
    structure.grid_rows = 1;
    structure.grid_cols = G.heads;
    structure.values = G.g;
    write_heatmap(dir + "/structure.png", structure);
    printf("wrote %s/structure.png (G: 1 where a query may attend to a key, heads across)\n", dir.c_str());
}
