// recipe/mix.h: mixup and cutmix, the batch-level augmentation of the Vision Transformer's recipe
// (timm's Mixup in its 'batch' mode; host only, no CUDA, nothing of the model). After each
// example's own augmentation (recipe/augment.h), the batch is mixed with itself flipped: row b
// with row B-1-b, under one weight λ ~ Beta(α, α) for the whole batch:
//   mixup:  x_b = λ x_b + (1 - λ) x_{B-1-b}
//   cutmix: a box of about (1 - λ) of the image, pasted from x_{B-1-b} into x_b; λ becomes
//           1 - box area / image area (the box is clipped to the image)
//   target: λ q(y_b) + (1 - λ) q(y_{B-1-b}), q the label-smoothed one-hot (layers/loss.cuh)
// With both on, a coin picks cutmix with probability switch_prob; a batch is mixed at all with
// probability prob, and one whose λ is 1 is left as it is (timm's rules).
//
// The draw of a step is a pure function of (seed, step), from the words of one key (splitmix64
// of the key plus a counter): no generator state lives between steps, so a run resumed at step
// s mixes as the uninterrupted run mixed at step s.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include "tasks/task.h"  // splitmix64, ImageShape

struct MixSettings {
    float mixup_alpha = 0, cutmix_alpha = 0;  // Beta(α, α)'s α of each; 0: off
    float switch_prob = 0.5f;                 // the chance of cutmix when both are on
    float prob = 1.0f;                        // the chance that a batch is mixed at all
    bool on() const { return mixup_alpha > 0 || cutmix_alpha > 0; }
};

// The key of step `step`'s mixing: a stream of its own, apart from the rows' draws (example_draw,
// whose last word is a row index below 2^31)
inline uint64_t mix_key(uint64_t seed, int64_t step) {
    const uint64_t MIX_STREAM = 0x6D69780000000000ull;  // "mix"
    return splitmix64(splitmix64(splitmix64(seed) ^ (uint64_t)step) ^ MIX_STREAM);
}

// Word i of key as a uniform draw in (0, 1): its top 53 bits, offset by half a step, so that a
// log of it is finite
inline double uniform_word(uint64_t key, uint64_t i) { return ((splitmix64(key + i) >> 11) + 0.5) * 0x1p-53; }

// log X for X ~ Gamma(α, 1), by Marsaglia and Tsang (2000). For α >= 1, with d = α - 1/3,
// c = 1 / sqrt(9 d): x ~ N(0, 1) (Box-Muller from two words), v = (1 + c x)^3, u uniform; accept
// d v where v > 0 and log u < x^2 / 2 + d - d v + d log v (95% of the tries or more), else try
// again with the next three words. For α < 1: Gamma(α) = Gamma(α + 1) · U^(1/α). As a log, so
// that a small α's draw cannot underflow to 0.
inline double log_gamma_draw(double alpha, uint64_t key) {
    if (alpha < 1) return log_gamma_draw(alpha + 1, splitmix64(key)) + std::log(uniform_word(key, 1)) / alpha;
    const double d = alpha - 1.0 / 3, c = 1 / std::sqrt(9 * d);
    for (uint64_t i = 0;; i += 3) {
        const double x = std::sqrt(-2 * std::log(uniform_word(key, i))) * std::cos(2 * M_PI * uniform_word(key, i + 1));
        const double v = (1 + c * x) * (1 + c * x) * (1 + c * x);
        if (v > 0 && std::log(uniform_word(key, i + 2)) < 0.5 * x * x + d - d * v + d * std::log(v))
            return std::log(d * v);
    }
}

// λ ~ Beta(α, α) = X / (X + Y), X, Y ~ Gamma(α, 1) independent: 1 / (1 + e^(log Y - log X))
inline double beta_draw(double alpha, uint64_t key) {
    const double log_x = log_gamma_draw(alpha, splitmix64(key)), log_y = log_gamma_draw(alpha, splitmix64(key + 1));
    return 1 / (1 + std::exp(log_y - log_x));
}

// What a step's key draws: whether the batch mixes, how, with which λ, and cutmix's box
struct MixDraw {
    bool mixed = false;   // false: the batch stays as it is
    bool cutmix = false;  // else mixup
    float lambda = 1;     // the weight of a row's own image and class (cutmix: after the box's correction)
    int top = 0, bottom = 0, left = 0, right = 0;  // cutmix's box: rows top .. bottom-1, columns left .. right-1
};

// cutmix's box for a draw λ on an H x W image (timm's rand_bbox): sides h = floor(H sqrt(1 - λ)),
// w = floor(W sqrt(1 - λ)), a centre (cy, cx) uniform over the pixels, the box
// [cy - h/2, cy + h/2) x [cx - w/2, cx + w/2) (h/2, w/2 rounded down) clipped to the image; then
// λ = 1 - box area / (H W), the image's share that is the row's own.
inline void cutmix_box(MixDraw& d, double lambda, int H, int W, uint64_t key) {
    const int h = (int)(H * std::sqrt(1 - lambda)), w = (int)(W * std::sqrt(1 - lambda));
    const int cy = (int)(splitmix64(key) % (uint64_t)H), cx = (int)(splitmix64(key + 1) % (uint64_t)W);
    d.top = std::max(cy - h / 2, 0);
    d.bottom = std::min(cy + h / 2, H);
    d.left = std::max(cx - w / 2, 0);
    d.right = std::min(cx + w / 2, W);
    d.lambda = (float)(1 - (double)(d.bottom - d.top) * (d.right - d.left) / ((double)H * W));
}

// The draw of step `step` under the run's seed, for H x W images: the key's words 0 and 1 are the
// coins of prob and of switch_prob (with both on), words 2 and 3 the keys of λ and of cutmix's centre.
inline MixDraw mix_draw(const MixSettings& s, uint64_t seed, int64_t step, int H, int W) {
    MixDraw d;
    const uint64_t key = mix_key(seed, step);
    if (!s.on() || uniform_word(key, 0) >= s.prob) return d;
    d.cutmix = s.mixup_alpha > 0 && s.cutmix_alpha > 0 ? uniform_word(key, 1) < s.switch_prob : s.cutmix_alpha > 0;
    const double lambda = beta_draw(d.cutmix ? s.cutmix_alpha : s.mixup_alpha, splitmix64(key + 2));
    if (d.cutmix) cutmix_box(d, lambda, H, W, splitmix64(key + 3));
    else d.lambda = (float)lambda;
    d.mixed = d.lambda != 1.0f;
    return d;
}

// Mixes a batch of `rows` images in place by the draw d, each pair (b, B-1-b) from the two images
// as they were, and writes each row's second class and weight: mix[b] = (y_{B-1-b}, λ). An odd
// batch's middle row is its own partner: it stays as it is, and its target is its own q(y).
// pixels (rows, channels, H, W), targets (rows) the classes, mix (rows, 2).
inline void mix_batch(const MixDraw& d, const ImageShape& shape, int rows, float* pixels, const float* targets,
                      float* mix) {
    const int H = shape.height, W = shape.width;
    const size_t floats = (size_t)shape.floats();
    for (int b = 0; b < rows; b++) {
        mix[2 * b] = targets[rows - 1 - b];
        mix[2 * b + 1] = d.lambda;
    }
    const float own = d.lambda, other = 1 - d.lambda;
    for (int b = 0; b < rows / 2; b++) {
        float* x = pixels + b * floats;                    // row b
        float* flipped = pixels + (rows - 1 - b) * floats;  // row B-1-b
        if (!d.cutmix) {
            for (size_t k = 0; k < floats; k++) {
                const float xb = x[k], xf = flipped[k];
                x[k] = own * xb + other * xf;
                flipped[k] = own * xf + other * xb;
            }
            continue;
        }
        for (int c = 0; c < shape.channels; c++)  // the two rows trade their boxes
            for (int y = d.top; y < d.bottom; y++)
                for (int i = d.left; i < d.right; i++) {
                    const size_t at = ((size_t)c * H + y) * W + i;
                    std::swap(x[at], flipped[at]);
                }
    }
}
