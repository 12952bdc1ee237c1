// tasks/augment.h: the data augmentation of image training (host only, no CUDA, nothing of the
// model): a random crop with zero padding and a random horizontal flip of one image, as in the
// standard CIFAR / ImageNet recipes, on channel-first float images (C, H, W).
//   crop:  dst[c][y][x] = src[c][y + dy][x + dx], or 0 where that falls outside the image;
//          dy, dx each uniform over the integers -pad .. pad (as padding by `pad` and cropping back)
//   flip:  with probability 1/2, x -> W - 1 - x after the crop
// The caller passes NORMALISED pixels ((raw - mean) / std per channel), so the padding, 0, is
// the data set's mean colour. (torchvision pads raw pixels with black instead; augment the raw
// pixels and normalise after to get that.)
//
// The draw is a pure function of a 64-bit key, the example's draw (tasks/task.h: example_draw
// of the seed, the step and the row): no generator state lives between steps, so a run resumed
// at step s draws the very pixels the uninterrupted run drew at step s.
#pragma once
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
