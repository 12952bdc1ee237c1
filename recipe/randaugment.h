// recipe/randaugment.h: RandAugment (Cubuk, Zoph, Shlens, Le 2020) on one 8-bit image before it is
// normalised (host only, no CUDA: data, like recipe/augment.h), as timm runs it in the Vision
// Transformer's recipe, "rand-m9-mstd0.5-inc1" (timm/data/auto_augment.py):
//   - N ops (--randaugment-ops, 2), each drawn uniformly from the 14 below, with replacement
//   - each applied with probability 1/2, at the magnitude m = clip(M + 0.5 z, 0, 10), z ~ N(0, 1),
//     M the flag's magnitude on timm's scale 0..10 (the authors' m9)
//   - the op's strength grows with m (inc1: the "increasing" versions of Solarize, Posterize and
//     the enhancers), and an op with a direction takes a random sign
// Each op computes what PIL (Pillow 9.4) computes for timm, rounding where PIL rounds and
// truncating where it truncates (checked against it pixel for pixel: equal, but for a few pixels
// in 10^5 of Rotate, off by 1 where a truncation meets the rounding of the coefficients). Where
// this file departs from timm:
//   - the paper's 14 ops, Identity among them; timm's list has no Identity but Invert and
//     SolarizeAdd (15)
//   - the geometric ops interpolate bilinearly; timm draws bilinear or bicubic at random for each
//     op (train.py's --train-interpolation random): one fixed filter can be checked by hand
//   - they fill with the caller's colour: VisionTask passes the data set's mean colour
//     round(255 mean_c), as timm's create_transform passes img_mean = round(255 x the
//     normalisation's mean) (timm's bare default, (128, 128, 128), is for no particular data);
//     normalised, that fill is about 0, the colour of the random crop's padding
//   - it runs before the random crop and flip, which timm applies first, on the raw image: here
//     the crop pads the normalised pixels (recipe/augment.h), so it follows the normalisation
// Images have 1 or 3 channels (the loaders give no others): 3 are R, G, B.
//
// The draw is a pure function of a 64-bit key (word k is splitmix64(key + k)): no generator
// state, so a resumed run draws what the uninterrupted one drew.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>
#include "recipe/augment.h"  // key_uniform, key_normal
#include "tasks/task.h"     // splitmix64

// An 8-bit image: pixels (channels, height, width), channel-first, 0..255
struct ByteImage {
    int channels = 0, height = 0, width = 0;
    std::vector<uint8_t> pixels;
    size_t plane() const { return (size_t)height * width; }
    uint8_t& at(int c, int y, int x) { return pixels[c * plane() + (size_t)y * width + x]; }
    uint8_t at(int c, int y, int x) const { return pixels[c * plane() + (size_t)y * width + x]; }
};

// ---------------------------------------------------------------------------------------------
// The colour ops: each a function of the pixel value, per channel, given the image's statistics

// Identity: out = v. (Nothing to write.)

// AutoContrast (PIL's ImageOps.autocontrast): each channel's range [lo, hi] stretched to [0, 255]:
//   out = clip(⌊v·s − lo·s⌋, 0, 255), s = 255 / (hi − lo)   (= ⌊255 (v − lo) / (hi − lo)⌋, in PIL's
//   order of operations); a channel of one value (hi = lo) stays as it is
inline void auto_contrast(ByteImage& image) {
    for (int c = 0; c < image.channels; c++) {
        uint8_t* p = image.pixels.data() + c * image.plane();
        const int lo = *std::min_element(p, p + image.plane()), hi = *std::max_element(p, p + image.plane());
        if (hi <= lo) continue;
        const double scale = 255.0 / (hi - lo), offset = -lo * scale;
        for (size_t k = 0; k < image.plane(); k++) p[k] = (uint8_t)std::clamp((int)(p[k] * scale + offset), 0, 255);
    }
}

// Equalize (PIL's ImageOps.equalize): each channel's histogram h (n pixels) flattened. With
// `last` the count of the largest value present and step = ⌊(n − last) / 255⌋:
//   out = min(255, ⌊(⌊step / 2⌋ + Σ_{u < v} h[u]) / step⌋);   step = 0 (few pixels): as it is
inline void equalize(ByteImage& image) {
    for (int c = 0; c < image.channels; c++) {
        uint8_t* p = image.pixels.data() + c * image.plane();
        int64_t histogram[256] = {0};
        for (size_t k = 0; k < image.plane(); k++) histogram[p[k]]++;
        const int largest = *std::max_element(p, p + image.plane());
        const int64_t step = ((int64_t)image.plane() - histogram[largest]) / 255;
        if (step == 0) continue;
        uint8_t table[256];
        int64_t below = 0;  // Σ_{u < v} h[u]
        for (int v = 0; v < 256; v++) {
            table[v] = (uint8_t)std::min<int64_t>(255, (step / 2 + below) / step);
            below += histogram[v];
        }
        for (size_t k = 0; k < image.plane(); k++) p[k] = table[p[k]];
    }
}

// Solarize: the values at or above the threshold t inverted: out = v < t ? v : 255 − v.
// Increasing with m: t = 256 − ⌊256 m / 10⌋ (m = 0: t = 256, nothing; m = 10: all inverted).
inline void solarize(ByteImage& image, int threshold) {
    for (uint8_t& v : image.pixels) v = v < threshold ? v : (uint8_t)(255 - v);
}

// Posterize: keep the b high bits: out = v & ~(2^(8−b) − 1).
// Increasing with m: b = 4 − ⌊4 m / 10⌋ (m = 0: 4 bits; m = 10: 0 bits, black).
inline void posterize(ByteImage& image, int bits) {
    const uint8_t keep = (uint8_t)(0xFF << (8 - bits));
    for (uint8_t& v : image.pixels) v &= keep;
}

// PIL's Image.blend, which each enhancer is: from a degenerate image d towards the image and
// beyond by the factor f, in float, clipped, truncated:
//   out = clip(⌊d + f (v − d)⌋, 0, 255)   (f = 0: d; f = 1: the image; f > 1: away from d)
inline void blend_from(ByteImage& image, const ByteImage& degenerate, double factor) {
    const float f = (float)factor;
    for (size_t k = 0; k < image.pixels.size(); k++) {
        const int d = degenerate.pixels[k];
        const float v = (float)d + f * (float)(image.pixels[k] - d);
        image.pixels[k] = v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
    }
}

// The grey of pixel (y, x): PIL's "L", the ITU-R 601 luma in 16-bit fixed point,
//   L = (19595 R + 38470 G + 7471 B + 2^15) >> 16;   a 1-channel image is its own grey
inline int grey(const ByteImage& image, int y, int x) {
    if (image.channels == 1) return image.at(0, y, x);
    return (19595 * image.at(0, y, x) + 38470 * image.at(1, y, x) + 7471 * image.at(2, y, x) + 32768) >> 16;
}

// Color (ImageEnhance.Color): blend from the image's grey (every channel L). A grey image has
// no colour to change: on 1 channel it is the identity.
inline void color(ByteImage& image, double factor) {
    ByteImage degenerate = image;
    for (int c = 0; c < image.channels; c++)
        for (int y = 0; y < image.height; y++)
            for (int x = 0; x < image.width; x++) degenerate.at(c, y, x) = (uint8_t)grey(image, y, x);
    blend_from(image, degenerate, factor);
}

// Contrast (ImageEnhance.Contrast): blend from a flat image of the mean grey, rounded:
//   d = ⌊mean L + 1/2⌋ = ⌊(2 Σ L + n) / 2n⌋ over the n pixels
inline void contrast(ByteImage& image, double factor) {
    int64_t sum = 0;
    for (int y = 0; y < image.height; y++)
        for (int x = 0; x < image.width; x++) sum += grey(image, y, x);
    const int64_t n = (int64_t)image.plane();
    ByteImage degenerate = image;
    std::fill(degenerate.pixels.begin(), degenerate.pixels.end(), (uint8_t)((2 * sum + n) / (2 * n)));
    blend_from(image, degenerate, factor);
}

// Brightness (ImageEnhance.Brightness): blend from black: out = clip(⌊f v⌋, 0, 255)
inline void brightness(ByteImage& image, double factor) {
    ByteImage black = image;
    std::fill(black.pixels.begin(), black.pixels.end(), (uint8_t)0);
    blend_from(image, black, factor);
}

// Sharpness (ImageEnhance.Sharpness): blend from PIL's SMOOTH filter of the image, the 3 x 3
// kernel [1 1 1; 1 5 1; 1 1 1] / 13 rounded to the nearest (no ties: 13 is odd), each channel;
// the border pixels, where the kernel does not fit, are left as they are (PIL's filter copies them)
inline void sharpness(ByteImage& image, double factor) {
    ByteImage smooth = image;
    for (int c = 0; c < image.channels; c++)
        for (int y = 1; y + 1 < image.height; y++)
            for (int x = 1; x + 1 < image.width; x++) {
                int sum = 4 * image.at(c, y, x);  // the centre's weight is 5: 4 here, 1 in the 3 x 3 sum
                for (int dy = -1; dy <= 1; dy++)
                    for (int dx = -1; dx <= 1; dx++) sum += image.at(c, y + dy, x + dx);
                smooth.at(c, y, x) = (uint8_t)((sum + 6) / 13);
            }
    blend_from(image, smooth, factor);
}

// ---------------------------------------------------------------------------------------------
// The geometric ops: an affine map from each output pixel to the point of the input it shows,
// as PIL's Image.transform(AFFINE) with coefficients (a, b, c, d, e, f): in pixel units whose
// pixel centres lie at (x + 1/2, y + 1/2),
//   (X, Y) = (a x' + b y' + c, d x' + e y' + f),   (x', y') = (x + 1/2, y + 1/2)
// and out(y, x) = the fill where (X, Y) falls outside [0, W) x [0, H); else bilinear: with
// u = X − 1/2, v = Y − 1/2, x0 = ⌊u⌋, y0 = ⌊v⌋ and the neighbours clamped to the edge,
//   top = p[y0][x0] + (p[y0][x0 + 1] − p[y0][x0]) (u − x0), bottom the same on row y0 + 1,
//   out = ⌊top + (bottom − top) (v − y0)⌋   (truncated, as PIL does)

struct Affine {
    double a, b, c, d, e, f;
};

// fill (channels): the colour of the pixels that come from outside the image
inline void affine_transform(ByteImage& image, const Affine& map, const uint8_t* fill) {
    const ByteImage in = image;
    const int W = image.width, H = image.height;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            const double xc = x + 0.5, yc = y + 0.5;
            const double X = map.a * xc + map.b * yc + map.c, Y = map.d * xc + map.e * yc + map.f;
            const bool outside = X < 0.0 || X >= W || Y < 0.0 || Y >= H;
            const double u = X - 0.5, v = Y - 0.5;
            const int x0 = (int)std::floor(u), y0 = (int)std::floor(v);
            const double dx = u - x0, dy = v - y0;
            const int left = std::clamp(x0, 0, W - 1), right = std::clamp(x0 + 1, 0, W - 1);
            const int upper = std::clamp(y0, 0, H - 1), lower = std::clamp(y0 + 1, 0, H - 1);
            for (int c = 0; c < image.channels; c++) {
                if (outside) {
                    image.at(c, y, x) = fill[c];
                    continue;
                }
                const double top = in.at(c, upper, left) + (in.at(c, upper, right) - in.at(c, upper, left)) * dx;
                const double bottom = in.at(c, lower, left) + (in.at(c, lower, right) - in.at(c, lower, left)) * dx;
                image.at(c, y, x) = (uint8_t)(top + (bottom - top) * dy);
            }
        }
}

// x rounded to 15 decimals, as PIL rounds the rotation's cosine and sine (so 90° is exact)
inline double round_15_decimals(double x) { return std::round(x * 1e15) / 1e15; }

// Rotate: θ degrees counter-clockwise about the centre (W/2, H/2), PIL's Image.rotate:
//   (X, Y) = R (x' − W/2, y' − H/2) + (W/2, H/2),   R = [cos θ, −sin θ; sin θ, cos θ]
// (y points down). θ = ±30 m / 10.
inline void rotate_image(ByteImage& image, double degrees, const uint8_t* fill) {
    const double angle = -degrees * M_PI / 180, cx = image.width / 2.0, cy = image.height / 2.0;
    const double cosine = round_15_decimals(std::cos(angle)), sine = round_15_decimals(std::sin(angle));
    const Affine map = {cosine, sine, cosine * -cx + sine * -cy + cx, -sine, cosine, -sine * -cx + cosine * -cy + cy};
    affine_transform(image, map, fill);
}

// ShearX: (X, Y) = (x' + s y', y'); ShearY: (X, Y) = (x', s x' + y'). s = ±0.3 m / 10.
inline void shear_x(ByteImage& image, double shear, const uint8_t* fill) {
    affine_transform(image, {1, shear, 0, 0, 1, 0}, fill);
}
inline void shear_y(ByteImage& image, double shear, const uint8_t* fill) {
    affine_transform(image, {1, 0, 0, shear, 1, 0}, fill);
}

// TranslateX: (X, Y) = (x' + t W, y'), the picture moving left by t W pixels for t > 0;
// TranslateY: (X, Y) = (x', y' + t H). t = ±0.45 m / 10, a fraction of the side (timm's
// TranslateXRel, TranslateYRel).
inline void translate_x(ByteImage& image, double fraction, const uint8_t* fill) {
    affine_transform(image, {1, 0, fraction * image.width, 0, 1, 0}, fill);
}
inline void translate_y(ByteImage& image, double fraction, const uint8_t* fill) {
    affine_transform(image, {1, 0, 0, 0, 1, fraction * image.height}, fill);
}

// ---------------------------------------------------------------------------------------------
// RandAugment: the draw and the ops at their magnitude

enum RandAugmentOp {
    RA_IDENTITY, RA_AUTO_CONTRAST, RA_EQUALIZE, RA_ROTATE, RA_SOLARIZE, RA_COLOR, RA_POSTERIZE,
    RA_CONTRAST, RA_BRIGHTNESS, RA_SHARPNESS, RA_SHEAR_X, RA_SHEAR_Y, RA_TRANSLATE_X, RA_TRANSLATE_Y
};
static const int RA_OP_COUNT = 14;

static const double RANDAUGMENT_MAGNITUDE_STD = 0.5;  // mstd0.5: the spread of each op's magnitude
static const double RANDAUGMENT_MAX_MAGNITUDE = 10;   // timm's scale: 0..10

// One of the N ops: which, whether it applies, at which magnitude m, with which sign. Op i of
// the N takes the words 5i .. 5i + 4 of the key: the op (uniform over 14, to within 2^-60), the
// coin (applies when u < 1/2), z for the magnitude (Box-Muller of two words), the sign (the
// top bit: negative when set).
struct RandAugmentDraw {
    RandAugmentOp op;
    bool applied;
    double magnitude;  // 0..10
    bool negative;
};

inline RandAugmentDraw randaugment_draw(int magnitude, int i, uint64_t key) {
    const uint64_t k = 5 * (uint64_t)i;
    const double m = magnitude + RANDAUGMENT_MAGNITUDE_STD * key_normal(key, k + 2);
    return {(RandAugmentOp)(splitmix64(key + k) % RA_OP_COUNT), key_uniform(key, k + 1) < 0.5,
            std::clamp(m, 0.0, RANDAUGMENT_MAX_MAGNITUDE), (splitmix64(key + k + 4) >> 63) != 0};
}

// op at magnitude m (0..10) with the sign's choice, timm's "increasing" ranges; fill (channels)
inline void randaugment_op(ByteImage& image, RandAugmentOp op, double m, bool negative, const uint8_t* fill) {
    const double level = m / RANDAUGMENT_MAX_MAGNITUDE, sign = negative ? -1 : 1;
    const double factor = std::max(0.1, 1 + sign * 0.9 * level);  // the enhancers': 1 ± 0.9 m / 10
    switch (op) {
    case RA_IDENTITY: break;
    case RA_AUTO_CONTRAST: auto_contrast(image); break;
    case RA_EQUALIZE: equalize(image); break;
    case RA_ROTATE: rotate_image(image, sign * 30 * level, fill); break;
    case RA_SOLARIZE: solarize(image, 256 - (int)(256 * level)); break;
    case RA_COLOR: color(image, factor); break;
    case RA_POSTERIZE: posterize(image, 4 - (int)(4 * level)); break;
    case RA_CONTRAST: contrast(image, factor); break;
    case RA_BRIGHTNESS: brightness(image, factor); break;
    case RA_SHARPNESS: sharpness(image, factor); break;
    case RA_SHEAR_X: shear_x(image, sign * 0.3 * level, fill); break;
    case RA_SHEAR_Y: shear_y(image, sign * 0.3 * level, fill); break;
    case RA_TRANSLATE_X: translate_x(image, sign * 0.45 * level, fill); break;
    case RA_TRANSLATE_Y: translate_y(image, sign * 0.45 * level, fill); break;
    }
}

// RandAugment of image in place: ops >= 1 draws, magnitude M in 1..10, fill (channels)
inline void randaugment(ByteImage& image, int magnitude, int ops, const uint8_t* fill, uint64_t key) {
    for (int i = 0; i < ops; i++) {
        const RandAugmentDraw d = randaugment_draw(magnitude, i, key);
        if (d.applied) randaugment_op(image, d.op, d.magnitude, d.negative, fill);
    }
}
