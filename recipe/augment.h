// recipe/augment.h: the data augmentation of image training (host only, no CUDA, nothing of the
// model): a random crop with zero padding and a random horizontal flip of one image, as in the
// standard CIFAR / ImageNet recipes, and random erasing, on channel-first float images (C, H, W).
//   crop:  dst[c][y][x] = src[c][y + dy][x + dx], or 0 where that falls outside the image;
//          dy, dx each uniform over the integers -pad .. pad (as padding by `pad` and cropping back)
//   flip:  with probability 1/2, x -> W - 1 - x after the crop
//   erase: with probability p, one rectangle replaced by standard normal noise (random_erase)
// (RandAugment, on the 8-bit image before the normalisation, is recipe/randaugment.h.)
// The caller passes NORMALISED pixels ((raw - mean) / std per channel), so the padding, 0, is
// the data set's mean colour. (torchvision pads raw pixels with black instead; augment the raw
// pixels and normalise after to get that.)
//
// The draw is a pure function of a 64-bit key, the example's draw (tasks/task.h: example_draw
// of the seed, the step and the row): no generator state lives between steps, so a run resumed
// at step s draws the very pixels the uninterrupted run drew at step s.
#pragma once
#include <cmath>
#include <cstdint>
#include "tasks/task.h"  // splitmix64

// The crop at offset (dy, dx), then the mirror if flip. src, dst (channels, height, width), distinct.
inline void crop_flip(const float* src, float* dst, int channels, int height, int width, int dy, int dx, bool flip) {
    for (int c = 0; c < channels; c++)
        for (int y = 0; y < height; y++)
            for (int x = 0; x < width; x++) {
                const int sy = y + dy, sx = (flip ? width - 1 - x : x) + dx;
                const bool inside = sy >= 0 && sy < height && sx >= 0 && sx < width;
                dst[((size_t)c * height + y) * width + x] = inside ? src[((size_t)c * height + sy) * width + sx] : 0.0f;
            }
}

// What key draws: dy and dx (each of the 2 pad + 1 values equally likely, to within 2^-64)
// and the coin of the flip, from three words of the key.
struct AugmentDraw {
    int dy, dx;
    bool flip;
};

inline AugmentDraw augment_draw(int pad, bool flip, uint64_t key) {
    const uint64_t offsets = 2 * (uint64_t)pad + 1;
    return {(int)(splitmix64(key) % offsets) - pad, (int)(splitmix64(key + 1) % offsets) - pad,
            flip && (splitmix64(key + 2) >> 63)};
}

// src, dst (channels, height, width), distinct; pad >= 0; flip: whether to draw the flip at all
inline void augment_image(const float* src, float* dst, int channels, int height, int width, int pad, bool flip,
                          uint64_t key) {
    const AugmentDraw d = augment_draw(pad, flip, key);
    crop_flip(src, dst, channels, height, width, d.dy, d.dx, d.flip);
}

// Word k of key as a uniform number in [0, 1): the top 53 bits of splitmix64(key + k)
inline double key_uniform(uint64_t key, uint64_t k) { return (double)(splitmix64(key + k) >> 11) * 0x1p-53; }

// A standard normal number from the words k and k + 1 of key (Box-Muller):
//   z = sqrt(-2 ln(1 - u1)) cos(2π u2),   1 - u1 in (0, 1], so the log is finite
inline double key_normal(uint64_t key, uint64_t k) {
    return std::sqrt(-2 * std::log(1 - key_uniform(key, k))) * std::cos(2 * M_PI * key_uniform(key, k + 1));
}

// Random erasing (Zhong et al. 2020) as timm's RandomErasing in its mode 'pixel', on NORMALISED
// pixels (after the crop and flip): with probability p, one rectangle of h x w pixels, in every
// channel, becomes independent N(0, 1) noise. Up to 10 tries t to draw a rectangle that fits:
//   area A = U(0.02, 1/3) H W,  aspect r = exp(U(ln 0.3, ln(1/0.3))),
//   h = round(sqrt(A r)), w = round(sqrt(A / r)),  kept when h < H and w < W,
//   top uniform over 0 .. H - h, left over 0 .. W - w;
// after 10 misfits nothing is erased. The words of the key: 0 the coin (erase when u < p),
// 1 + 4t .. 4 + 4t try t's area, aspect, top and left, and 41 + 2i, 42 + 2i value i of the noise.
static const double ERASE_MIN_AREA = 0.02, ERASE_MAX_AREA = 1.0 / 3, ERASE_MIN_ASPECT = 0.3;
static const int ERASE_TRIES = 10;
static const uint64_t ERASE_NOISE_WORD = 1 + 4 * ERASE_TRIES;

// The rectangle a key draws: rows top .. top + height - 1, columns left .. left + width - 1;
// height 0: nothing erased
struct EraseBox {
    int top = 0, left = 0, height = 0, width = 0;
};

inline EraseBox erase_draw(double probability, int height, int width, uint64_t key) {
    EraseBox box;
    if (!(key_uniform(key, 0) < probability)) return box;
    const double log_aspect = std::log(1 / ERASE_MIN_ASPECT);  // ln r is uniform over ±log_aspect
    for (uint64_t t = 0; t < ERASE_TRIES; t++) {
        const uint64_t k = 1 + 4 * t;
        const double area =
            (ERASE_MIN_AREA + (ERASE_MAX_AREA - ERASE_MIN_AREA) * key_uniform(key, k)) * height * width;
        const double aspect = std::exp(-log_aspect + 2 * log_aspect * key_uniform(key, k + 1));
        const int h = (int)std::round(std::sqrt(area * aspect)), w = (int)std::round(std::sqrt(area / aspect));
        if (h < height && w < width) {
            box.height = h;
            box.width = w;
            box.top = (int)(splitmix64(key + k + 2) % (uint64_t)(height - h + 1));
            box.left = (int)(splitmix64(key + k + 3) % (uint64_t)(width - w + 1));
            return box;
        }
    }
    return box;
}

// image (channels, height, width), erased in place as the key draws (probability p in 0..1)
inline void random_erase(float* image, int channels, int height, int width, double probability, uint64_t key) {
    const EraseBox box = erase_draw(probability, height, width, key);
    uint64_t k = ERASE_NOISE_WORD;
    for (int c = 0; c < channels; c++)
        for (int y = box.top; y < box.top + box.height; y++)
            for (int x = box.left; x < box.left + box.width; x++, k += 2)
                image[((size_t)c * height + y) * width + x] = (float)key_normal(key, k);
}
