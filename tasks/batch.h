// tasks/batch.h: one batch of examples in host memory, as the model takes it, and the
// training batch of a step. Host only, like the tasks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "tasks/task.h"  // Task, EpochOrder

struct Batch {
    std::vector<int> tokens;       // (rows, T)
    std::vector<float> targets;    // (rows, targets_per_example): one, or the next token at every position
    std::vector<float> loss_mask;  // (rows, T) next-token tasks: 1 where the loss counts; empty otherwise
    int rows = 0;

    // room for B rows; `positions` (T) is the loss mask of one example (empty: no mask)
    void shape(const Task& task, int B, const std::vector<float>& positions) {
        rows = B;
        tokens.resize((size_t)B * task.seq_len);
        targets.resize((size_t)B * task.targets_per_example());
        loss_mask.clear();
        for (int b = 0; b < B && !positions.empty(); b++)
            loss_mask.insert(loss_mask.end(), positions.begin(), positions.end());
    }
    const float* mask() const { return loss_mask.empty() ? nullptr : loss_mask.data(); }
};

// The training batch of step `step`: examples step*B .. step*B+B-1 of the seeded epoch order.
inline void training_batch(const Task& task, EpochOrder& order, int64_t step, Batch& batch) {
    const int P = task.targets_per_example();
    for (int b = 0; b < batch.rows; b++)
        task.train_example(order.example(step * batch.rows + b), &batch.tokens[(size_t)b * task.seq_len],
                           &batch.targets[(size_t)b * P]);
}

// The loss mask of one example: the task's answer positions, or every position (--loss-on all).
inline std::vector<float> loss_positions(const Task& task, const std::string& loss_on) {
    if (!task.next_token) return {};
    if (loss_on == "all") return std::vector<float>(task.seq_len, 1.0f);
    return task.loss_positions();
}
