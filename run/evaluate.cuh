// run/evaluate.cuh: one evaluation of the model on the task's evaluation set: the task's own
// metrics, the loss, and what measures the prior: the prior mass of every layer (the mean
// attention weight on G's keys), the mean attention maps, and the persistence metrics
// (prior/persistence.cuh). Also the pictures drawn from an evaluation.
#pragma once
#include <algorithm>
#include <string>
#include <vector>
#include "model.cuh"                // Model, model_forward, model_activations, log_sigmoid
#include "prior/persistence.cuh"    // Persistence, PersistenceReference, persistence_metrics
#include "prior/structure.h"        // Structure, attention_prior_mass
#include "run/pictures.h"           // Heatmap, write_heatmap
#include "tasks/batch.h"            // Batch
#include "tasks/decode.h"           // greedy_decode
#include "tasks/task.h"             // Task, Metrics

struct Evaluation {
    Metrics metrics;
    std::vector<double> prior_mass;      // (L)
    std::vector<float> mean_attention;   // (L,NH,T,T) A averaged over the evaluation examples
    Persistence persistence;
    double loss = 0;
};

// Runs the whole evaluation set through the model, B rows at a time. Next-token tasks are
// scored on their greedy decoding (tasks/decode.h): the model writes its answer token by token
// from the prompt alone; loss and attention come from the teacher-forced pass on the true
// sequence, as in training. positions (T): the loss mask of one example, or empty.
inline Evaluation evaluate(Model& model, const Task& task, const Structure& G, const PersistenceReference& ref,
                           const std::vector<float>& positions) {
    const Config& c = model.cfg;
    const int n = task.eval_size(), P = task.targets_per_example();
    const size_t TT = (size_t)c.T * c.T;
    const std::vector<int> decode_at = task.decode_positions();
    const int per_example = task.next_token ? (int)decode_at.size() : c.OUT;
    std::vector<float> outputs((size_t)n * per_example);  // (n, per_example): the head, or the decoded tokens
    std::vector<float> att((size_t)model.B * c.NH * TT);  // (rows,NH,T,T) one layer's A
    Evaluation ev;
    ev.prior_mass.assign(c.L, 0.0);
    std::vector<double> attention_sum(c.L * c.NH * TT, 0.0);  // (L,NH,T,T)
    Batch batch;
    batch.shape(task, model.B, positions);
    for (int start = 0; start < n; start += model.B) {
        int rows = std::min(model.B, n - start);
        for (int r = 0; r < rows; r++)
            task.eval_example(start + r, &batch.tokens[(size_t)r * c.T], &batch.targets[(size_t)r * P]);
        ev.loss += model_forward(model, batch.tokens.data(), batch.targets.data(), rows, batch.mask(), true) * rows;
        Activations a = model_activations(model, rows);
        if (!task.next_token)
            buffer_copy(outputs.data() + (size_t)start * c.OUT, DEVICE_CPU, a.logits, model.dev, (size_t)rows * c.OUT);
        for (int l = 0; l < c.L; l++) {
            size_t per_layer = (size_t)rows * c.NH * TT;
            buffer_copy(att.data(), DEVICE_CPU, a.att + l * per_layer, model.dev, per_layer);
            ev.prior_mass[l] += attention_prior_mass(att.data(), G, rows, c.NH, c.T) * rows;
            double* sum = &attention_sum[l * c.NH * TT];  // (NH,T,T), each entry summed over rows in order
            for (int r = 0; r < rows; r++)
                for (size_t k = 0; k < c.NH * TT; k++) sum[k] += att[r * c.NH * TT + k];
        }
        if (task.next_token) {
            auto next_logits = [&](const int* tokens, int r, std::vector<float>& logits) {
                model_forward(model, tokens, nullptr, r);
                logits.resize((size_t)r * c.T * c.V);
                buffer_copy(logits.data(), DEVICE_CPU, model_activations(model, r).logits, model.dev, logits.size());
            };
            std::vector<int> decoded;
            // blank token 0: under causal attention an input is decoded before any position reads it
            greedy_decode(next_logits, batch.tokens.data(), rows, c.T, c.V, decode_at, 0, decoded);
            for (size_t k = 0; k < decoded.size(); k++) outputs[(size_t)start * per_example + k] = (float)decoded[k];
        }
    }
    for (double& m : ev.prior_mass) m /= n;
    for (double sum : attention_sum) ev.mean_attention.push_back((float)(sum / n));
    ev.loss /= n;
    ev.metrics = task.evaluate(outputs);
    ev.persistence = persistence_metrics(model, ref);
    return ev;
}

// The pictures of one moment of the run (tag: step0 or final): each layer's mean attention
// map and, where there is a mask, log σ(M); rows are layers, columns heads.
inline void write_pictures(const std::string& dir, const std::string& tag, const Model& model, const Evaluation& ev) {
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
