// run/schedule.h: the learning rate of each optimizer step (host only): a linear warmup, then a
// cosine decay, as Vision Transformers are trained. With W = warmup_steps, T = total_steps,
// lr_min = min_lr_fraction * base_lr and s the 0-based index of the step about to be taken:
//   s < W:       lr = base_lr * (s + 1) / W            (step 0 already moves; step W-1 is at base_lr)
//   W <= s < T:  lr = lr_min + (base_lr - lr_min) * (1 + cos(pi * (s - W) / (T - W))) / 2
//   s >= T:      lr = lr_min                           (the cosine reaches lr_min at T, one past the last step)
// warmup_steps = 0: no warmup. min_lr_fraction = 1: a constant learning rate (after any warmup),
// exactly base_lr at every step, so one function covers the constant and the cosine schedules.
#pragma once
#include <cmath>
#include <cstdint>

inline float learning_rate(int64_t step, int64_t total_steps, float base_lr, int64_t warmup_steps,
                           float min_lr_fraction) {
    if (step < warmup_steps) return (float)((double)base_lr * (double)(step + 1) / (double)warmup_steps);
    const double min_lr = (double)base_lr * min_lr_fraction;
    if (step >= total_steps) return (float)min_lr;
    const double progress = (double)(step - warmup_steps) / (double)(total_steps - warmup_steps);  // [0, 1)
    const double pi = 3.14159265358979323846;
    return (float)(min_lr + ((double)base_lr - min_lr) * 0.5 * (1 + std::cos(pi * progress)));
}
