// tasks/batch.h: one batch of examples in host memory, as the model takes it, and the
// training batch of a step. Host only, like the tasks.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>
#include "recipe/mix.h"   // MixSettings, mix_draw, mix_batch
#include "tasks/task.h"  // Task, EpochOrder

struct Batch {
    std::vector<int> tokens;       // (rows, T) token tasks
    std::vector<float> pixels;     // (rows, channels·height·width) image tasks
    std::vector<float> targets;    // (rows, targets_per_example): one, or the next token at every position
    std::vector<float> loss_mask;  // (rows, T) next-token tasks: 1 where the loss counts; empty otherwise
    std::vector<float> mix;        // (rows, 2) a mixed training batch: each row's second class and λ; else empty
    int rows = 0;
    bool image_input = false;      // whether the examples are pixels (else tokens)
    MixSettings mixing;            // mixup and cutmix of an image task's training batches (recipe/mix.h): off unless set
    double making_seconds = 0;     // how long training_batch took to make it (the run leaves it out of the model's speed)

    // room for B rows; `positions` (T) is the loss mask of one example (empty: no mask)
    void shape(const Task& task, int B, const std::vector<float>& positions) {
        rows = B;
        image_input = task.image_input();
        tokens.assign(image_input ? 0 : (size_t)B * task.seq_len, 0);
        pixels.assign((size_t)B * task.image.floats(), 0.0f);
        targets.resize((size_t)B * task.targets_per_example());
        loss_mask.clear();
        for (int b = 0; b < B && !positions.empty(); b++)
            loss_mask.insert(loss_mask.end(), positions.begin(), positions.end());
    }
    const float* mask() const { return loss_mask.empty() ? nullptr : loss_mask.data(); }
    const float* mix_targets() const { return mix.empty() ? nullptr : mix.data(); }
    // where row b's example goes
    ExampleSlot slot(const Task& task, int b) {
        return {image_input ? nullptr : &tokens[(size_t)b * task.seq_len],
                image_input ? &pixels[(size_t)b * task.image.floats()] : nullptr,
                &targets[(size_t)b * task.targets_per_example()]};
    }
};

// The training batch of step `step`: examples step*B .. step*B+B-1 of the seeded epoch order.
// Row b's draw is example_draw(seed, step, b). With batch.mixing on, the batch is then mixed with
// itself flipped, as mix_draw(seed, step) draws (recipe/mix.h), unless that draw leaves it as it is.
inline void training_batch(const Task& task, EpochOrder& order, int64_t step, Batch& batch) {
    const auto start = std::chrono::steady_clock::now();
    for (int b = 0; b < batch.rows; b++)
        task.train_example(order.example(step * batch.rows + b), example_draw(order.seed, step, b),
                           batch.slot(task, b));
    batch.mix.clear();
    const MixDraw draw = batch.mixing.on() ? mix_draw(batch.mixing, order.seed, step, task.image.height,
                                                      task.image.width)
                                           : MixDraw{};
    if (draw.mixed) {
        batch.mix.resize((size_t)batch.rows * 2);
        mix_batch(draw, task.image, batch.rows, batch.pixels.data(), batch.targets.data(), batch.mix.data());
    }
    batch.making_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The loss mask of one example: the task's answer positions, or every position (--loss-on all).
inline std::vector<float> loss_positions(const Task& task, const std::string& loss_on) {
    if (!task.next_token) return {};
    if (loss_on == "all") return std::vector<float>(task.seq_len, 1.0f);
    return task.loss_positions();
}
