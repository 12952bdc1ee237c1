// Data augmentation: the crop and flip by hand, and what the keys draw (recipe/augment.h); each
// RandAugment op by hand on small images, with PIL's rounding, and the op, coin, magnitude and
// sign that the keys draw (recipe/randaugment.h); random erasing's rectangle and noise; and the
// vision task's pipeline, which with both off gives the pixels it gave before they existed.
#include <cmath>
#include <cstring>
#include <set>
#include <vector>
#include <doctest/doctest.h>
#include "recipe/augment.h"
#include "recipe/randaugment.h"
#include "tasks/vision.h"
#include "thrown.h"

TEST_CASE("augment: crop and flip of a 1-channel 3x4 image, by hand") {
    const std::vector<float> src = {1, 2, 3, 4,
                                    5, 6, 7, 8,
                                    9, 10, 11, 12};
    std::vector<float> dst(12, -1.0f);
    crop_flip(src.data(), dst.data(), 1, 3, 4, 0, 0, false);
    CHECK(dst == src);
    // dy = 1, dx = -1: dst[y][x] = src[y + 1][x - 1]; column 0 and the last row fall outside
    crop_flip(src.data(), dst.data(), 1, 3, 4, 1, -1, false);
    CHECK(dst == std::vector<float>{0, 5, 6, 7,
                                    0, 9, 10, 11,
                                    0, 0, 0, 0});
    // the same crop, mirrored
    crop_flip(src.data(), dst.data(), 1, 3, 4, 1, -1, true);
    CHECK(dst == std::vector<float>{7, 6, 5, 0,
                                    11, 10, 9, 0,
                                    0, 0, 0, 0});
    // flip alone, and dy = -2, dx = 2
    crop_flip(src.data(), dst.data(), 1, 3, 4, 0, 0, true);
    CHECK(dst == std::vector<float>{4, 3, 2, 1,
                                    8, 7, 6, 5,
                                    12, 11, 10, 9});
    crop_flip(src.data(), dst.data(), 1, 3, 4, -2, 2, false);
    CHECK(dst == std::vector<float>{0, 0, 0, 0,
                                    0, 0, 0, 0,
                                    3, 4, 0, 0});
}

TEST_CASE("augment: every channel gets the same crop and flip") {
    std::vector<float> src(2 * 3 * 4), dst(src.size());
    for (size_t i = 0; i < src.size(); i++) src[i] = (float)i + 1;
    crop_flip(src.data(), dst.data(), 2, 3, 4, 1, -1, true);
    for (int i = 0; i < 12; i++) CHECK(dst[12 + i] == (dst[i] == 0 ? 0 : dst[i] + 12));
}

TEST_CASE("augment: over many keys the offsets cover -pad .. pad and about half the images flip") {
    const int pad = 4, draws = 10000;
    std::vector<int> dy_count(2 * pad + 1, 0), dx_count(2 * pad + 1, 0);
    int flips = 0;
    for (int i = 0; i < draws; i++) {
        const AugmentDraw d = augment_draw(pad, true, example_draw(7, i / 64, i % 64));
        REQUIRE(d.dy >= -pad);
        REQUIRE(d.dy <= pad);
        REQUIRE(d.dx >= -pad);
        REQUIRE(d.dx <= pad);
        dy_count[d.dy + pad]++;
        dx_count[d.dx + pad]++;
        flips += d.flip;
        CHECK(!augment_draw(pad, false, example_draw(7, i / 64, i % 64)).flip);  // flip off: never
    }
    for (int o = 0; o <= 2 * pad; o++) {  // each value 1/9 of the draws, 1111 expected (sd 31)
        CAPTURE(o - pad);
        CHECK(dy_count[o] > 950);
        CHECK(dx_count[o] > 950);
    }
    CHECK(flips >= 4500);
    CHECK(flips <= 5500);
    CHECK(augment_draw(0, false, 12345).dy == 0);  // pad 0: no crop
}

TEST_CASE("augment: the same key gives the same pixels; other steps and rows give other draws") {
    const int C = 3, H = 8, W = 8, pad = 2;
    std::vector<float> src(C * H * W), a(src.size()), b(src.size());
    for (size_t i = 0; i < src.size(); i++) src[i] = 0.25f * (float)i - 7;
    augment_image(src.data(), a.data(), C, H, W, pad, true, example_draw(3, 41, 5));
    augment_image(src.data(), b.data(), C, H, W, pad, true, example_draw(3, 41, 5));  // as a resumed run
    CHECK(memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    // row 5 across 100 steps, and step 41 across 64 rows: many distinct draws each
    std::set<int> by_step, by_row;
    for (int step = 0; step < 100; step++) {
        const AugmentDraw d = augment_draw(pad, true, example_draw(3, step, 5));
        by_step.insert((d.dy + pad) * 100 + (d.dx + pad) * 10 + d.flip);
    }
    for (int row = 0; row < 64; row++) {
        const AugmentDraw d = augment_draw(pad, true, example_draw(3, 41, row));
        by_row.insert((d.dy + pad) * 100 + (d.dx + pad) * 10 + d.flip);
    }
    CHECK(by_step.size() >= 30);  // of 5 * 5 * 2 = 50 possible (about 43 expected)
    CHECK(by_row.size() >= 25);   // (about 36 expected)
    CHECK(example_draw(3, 41, 5) != example_draw(4, 41, 5));  // and the seed changes the key
    // augment_image is crop_flip at the drawn offsets
    const AugmentDraw d = augment_draw(pad, true, example_draw(3, 41, 5));
    crop_flip(src.data(), b.data(), C, H, W, d.dy, d.dx, d.flip);
    CHECK(memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// A (channels, height, width) image of the given values, row by row, channel by channel
static ByteImage byte_image(int channels, int height, int width, const std::vector<int>& values) {
    REQUIRE(values.size() == (size_t)channels * height * width);
    return {channels, height, width, std::vector<uint8_t>(values.begin(), values.end())};
}
static std::vector<int> values_of(const ByteImage& image) {
    return std::vector<int>(image.pixels.begin(), image.pixels.end());
}

TEST_CASE("randaugment: Identity, AutoContrast and Equalize by hand, per channel as PIL's ImageOps") {
    const uint8_t fill[3] = {7, 7, 7};
    ByteImage image = byte_image(3, 1, 4, {1, 2, 3, 8,  0, 0, 255, 255,  7, 7, 7, 7});
    const ByteImage before = image;
    randaugment_op(image, RA_IDENTITY, 9, false, fill);
    CHECK(image.pixels == before.pixels);
    // R: lo 1, hi 8, s = 255/7: ⌊36.43 (v - 1)⌋ = 0, 36, 72, 255; G spans 0..255 already; B is one value
    auto_contrast(image);
    CHECK(values_of(image) == std::vector<int>{0, 36, 72, 255,  0, 0, 255, 255,  7, 7, 7, 7});
    image = byte_image(1, 1, 4, {10, 20, 30, 40});  // s = 8.5
    auto_contrast(image);
    CHECK(values_of(image) == std::vector<int>{0, 85, 170, 255});

    // 32 x 32 = 1024 pixels: 512 of 10, 256 of 50, 256 of 200. The largest value's count is 256,
    // step = ⌊768 / 255⌋ = 3: 10 -> ⌊1 / 3⌋ = 0, 50 -> ⌊(1 + 512) / 3⌋ = 171,
    // 200 -> ⌊769 / 3⌋ = 256, so 255
    std::vector<int> values(1024);
    for (int k = 0; k < 1024; k++) values[k] = k < 512 ? 10 : k % 2 ? 50 : 200;
    image = byte_image(1, 32, 32, values);
    equalize(image);
    for (int k = 0; k < 1024; k++) REQUIRE(image.pixels[k] == (k < 512 ? 0 : k % 2 ? 171 : 255));
    // too few pixels for a step (n - 256 < 255): as it is; and each channel on its own
    values.assign(2 * 16 * 16, 0);
    for (int k = 0; k < 512; k++) values[k] = k % 5 * 9;
    image = byte_image(2, 16, 16, values);
    equalize(image);
    CHECK(values_of(image) == values);
}

TEST_CASE("randaugment: Solarize and Posterize by hand, at the thresholds and bits that m gives") {
    const uint8_t fill[1] = {0};
    ByteImage image = byte_image(1, 1, 5, {0, 127, 128, 200, 255});
    solarize(image, 128);  // v >= 128 -> 255 - v
    CHECK(values_of(image) == std::vector<int>{0, 127, 127, 55, 0});
    const ByteImage original = byte_image(1, 1, 5, {0, 127, 128, 200, 255});
    image = original;
    randaugment_op(image, RA_SOLARIZE, 0, false, fill);  // t = 256: nothing
    CHECK(image.pixels == original.pixels);
    randaugment_op(image, RA_SOLARIZE, 10, false, fill);  // t = 0: every value inverted
    CHECK(values_of(image) == std::vector<int>{255, 128, 127, 55, 0});
    image = original;
    randaugment_op(image, RA_SOLARIZE, 5, true, fill);  // t = 128 (no sign)
    CHECK(values_of(image) == std::vector<int>{0, 127, 127, 55, 0});

    image = byte_image(1, 1, 5, {0, 15, 16, 200, 255});
    posterize(image, 4);  // & 0xF0
    CHECK(values_of(image) == std::vector<int>{0, 0, 16, 192, 240});
    image = original;
    randaugment_op(image, RA_POSTERIZE, 9, false, fill);  // b = 4 - ⌊3.6⌋ = 1 bit: & 0x80
    CHECK(values_of(image) == std::vector<int>{0, 0, 128, 128, 128});
    image = original;
    randaugment_op(image, RA_POSTERIZE, 10, false, fill);  // 0 bits: black
    CHECK(values_of(image) == std::vector<int>{0, 0, 0, 0, 0});
    image = original;
    randaugment_op(image, RA_POSTERIZE, 2.4, false, fill);  // b = 4 - ⌊0.96⌋ = 4: & 0xF0
    CHECK(values_of(image) == std::vector<int>{0, 112, 128, 192, 240});
}

TEST_CASE("randaugment: Color, Contrast, Brightness and Sharpness by hand, blended and truncated as PIL") {
    // two RGB pixels, (255, 0, 0) and (10, 20, 30): greys L = ⌊(19595·255 + 2^15) / 2^16⌋ = 76 and
    // ⌊(19595·10 + 38470·20 + 7471·30 + 2^15) / 2^16⌋ = 18
    const ByteImage rgb = byte_image(3, 1, 2, {255, 10,  0, 20,  0, 30});
    ByteImage image = rgb;
    color(image, 0.5);  // L + 0.5 (v - L): 165.5, 38, 38 and 14, 19, 24
    CHECK(values_of(image) == std::vector<int>{165, 14,  38, 19,  38, 24});
    image = rgb;
    color(image, 1.9);  // 416.1 -> 255, -68.4 -> 0; 18 - 15.2 = 2.8, 18 + 3.8 = 21.8, 18 + 22.8 = 40.8
    CHECK(values_of(image) == std::vector<int>{255, 2,  0, 21,  0, 40});
    ByteImage grey_image = byte_image(1, 1, 3, {0, 90, 255});
    color(grey_image, 1.9);  // a grey image has no colour: the identity
    CHECK(values_of(grey_image) == std::vector<int>{0, 90, 255});

    // Contrast: the mean grey, rounded: (10 + 20 + 30 + 42) / 4 = 25.5 -> 26; 26 + 0.5 (v - 26)
    image = byte_image(1, 1, 4, {10, 20, 30, 42});
    contrast(image, 0.5);
    CHECK(values_of(image) == std::vector<int>{18, 23, 28, 34});
    image = byte_image(1, 1, 4, {10, 20, 30, 40});  // mean 25: 25 + 1.5 (v - 25) = 2.5, 17.5, 32.5, 47.5
    contrast(image, 1.5);
    CHECK(values_of(image) == std::vector<int>{2, 17, 32, 47});
    // RGB: greys 76, 150, 29, 18 of red, green, blue, (10, 20, 30): mean 68.25 -> 68
    image = byte_image(3, 1, 4, {255, 0, 0, 10,  0, 255, 0, 20,  0, 0, 255, 30});
    contrast(image, 1.5);  // 68 + 1.5 (30 - 68) = 11, the rest clipped to 0 or 255
    CHECK(values_of(image) == std::vector<int>{255, 0, 0, 0,  0, 255, 0, 0,  0, 0, 255, 11});

    // Brightness: ⌊f v⌋ clipped; 0.55 in float is a little above 0.55 (255 -> 140.25)
    image = byte_image(1, 1, 4, {10, 100, 200, 255});
    brightness(image, 1.5);
    CHECK(values_of(image) == std::vector<int>{15, 150, 255, 255});
    image = byte_image(1, 1, 4, {10, 100, 200, 255});
    brightness(image, 0.55);
    CHECK(values_of(image) == std::vector<int>{5, 55, 110, 140});

    // Sharpness: the 3 x 3 smoothing [1 1 1; 1 5 1; 1 1 1] / 13 at the two interior pixels:
    //   (1,1): (0+1+10 + 3+5·7+200 + 9+9+9) / 13 = 276 / 13 -> 21;  (1,2): 1320 / 13 -> 102
    // then d + 0.5 (v - d): 21 - 7 = 14, 102 + 49 = 151; the border as it is
    image = byte_image(1, 3, 4, {0, 1, 10, 20,  3, 7, 200, 255,  9, 9, 9, 9});
    sharpness(image, 0.5);
    CHECK(values_of(image) == std::vector<int>{0, 1, 10, 20,  3, 14, 151, 255,  9, 9, 9, 9});
    image = byte_image(1, 3, 4, {0, 1, 10, 20,  3, 7, 200, 255,  9, 9, 9, 9});
    sharpness(image, 1.9);  // 21 - 26.6 -> 0, 102 + 186.2 -> 255
    CHECK(values_of(image) == std::vector<int>{0, 1, 10, 20,  3, 0, 255, 255,  9, 9, 9, 9});
}

TEST_CASE("randaugment: Rotate by hand: 90 degrees counter-clockwise exactly, 30 degrees fills the corners") {
    const uint8_t fill[1] = {7};
    ByteImage image = byte_image(1, 3, 3, {0, 10, 20,  30, 40, 50,  60, 70, 80});
    rotate_image(image, 90, fill);  // the right column becomes the top row
    CHECK(values_of(image) == std::vector<int>{20, 50, 80,  10, 40, 70,  0, 30, 60});
    image = byte_image(1, 3, 3, {0, 10, 20,  30, 40, 50,  60, 70, 80});
    rotate_image(image, -90, fill);  // clockwise: the left column becomes the top row
    CHECK(values_of(image) == std::vector<int>{60, 30, 0,  70, 40, 10,  80, 50, 20});
    image = byte_image(1, 3, 3, {0, 10, 20,  30, 40, 50,  60, 70, 80});
    rotate_image(image, 0, fill);
    CHECK(values_of(image) == std::vector<int>{0, 10, 20,  30, 40, 50,  60, 70, 80});
    // a flat 5 x 5 image turned by 30°: a corner's centre, 2√2 from the middle, lands outside
    // (the top left one at Y = 2.5 - 2 sin 30° - 2 cos 30° = -0.23); every other pixel inside
    // shows the flat value exactly
    const ByteImage flat = byte_image(1, 5, 5, std::vector<int>(25, 100));
    for (double degrees : {30.0, -30.0}) {
        image = flat;
        rotate_image(image, degrees, fill);
        for (int y = 0; y < 5; y++)
            for (int x = 0; x < 5; x++) {
                CAPTURE(y);
                CAPTURE(x);
                const bool corner = (y == 0 || y == 4) && (x == 0 || x == 4);
                CHECK(image.at(0, y, x) == (corner ? 7 : 100));
            }
    }
    // what m and the sign give: ±30 m / 10 degrees
    ByteImage by_op = byte_image(1, 3, 3, {0, 10, 20,  30, 40, 50,  60, 70, 80}), by_hand = by_op;
    randaugment_op(by_op, RA_ROTATE, 3, true, fill);
    rotate_image(by_hand, -9, fill);
    CHECK(by_op.pixels == by_hand.pixels);
    CHECK(by_op.pixels != byte_image(1, 3, 3, {0, 10, 20,  30, 40, 50,  60, 70, 80}).pixels);
}

TEST_CASE("randaugment: ShearX, ShearY, TranslateX and TranslateY by hand: bilinear, truncated, filled") {
    const uint8_t fill[1] = {7};
    // ShearX 0.5: X = x' + 0.5 y'; row 0 reads a quarter pixel to the right, row 1 three quarters
    //   row 0: 0 + 40/4 = 10, 50, 90, and the last clamped to its own 120
    //   row 1: 200 - 40·3/4 = 170, 130, 90, and X = 4.25 is outside: the fill
    const ByteImage rows = byte_image(1, 2, 4, {0, 40, 80, 120,  200, 160, 120, 80});
    ByteImage image = rows;
    shear_x(image, 0.5, fill);
    CHECK(values_of(image) == std::vector<int>{10, 50, 90, 120,  170, 130, 90, 7});
    image = rows;
    shear_x(image, -0.5, fill);  // a quarter pixel left (the first clamped), three quarters (X < 0: fill)
    CHECK(values_of(image) == std::vector<int>{0, 30, 70, 110,  7, 190, 150, 110});
    // ShearY is ShearX with the axes swapped: the same numbers down the columns
    image = byte_image(1, 4, 2, {0, 200,  40, 160,  80, 120,  120, 80});
    shear_y(image, 0.5, fill);
    CHECK(values_of(image) == std::vector<int>{10, 170,  50, 130,  90, 90,  120, 7});

    // TranslateX by 1/8 of 4 pixels, half a pixel: the mean of two neighbours, truncated as PIL
    // does (0.5 -> 0, 5.5 -> 5, 103.5 -> 103, 227.5 -> 227); X = 4 in the last column: the fill
    image = byte_image(1, 3, 4, {0, 1, 10, 20,  3, 7, 200, 255,  9, 9, 9, 9});
    translate_x(image, 0.125, fill);
    CHECK(values_of(image) == std::vector<int>{0, 5, 15, 7,  5, 103, 227, 7,  9, 9, 9, 7});
    image = rows;
    translate_x(image, 0.25, fill);  // one whole pixel: the picture moves left
    CHECK(values_of(image) == std::vector<int>{40, 80, 120, 7,  160, 120, 80, 7});
    image = rows;
    translate_x(image, -0.125, fill);  // half a pixel right; X = 0 is still inside, clamped
    CHECK(values_of(image) == std::vector<int>{0, 20, 60, 100,  200, 180, 140, 100});
    image = byte_image(1, 4, 2, {0, 200,  40, 160,  80, 120,  120, 80});
    translate_y(image, 0.25, fill);  // one row up
    CHECK(values_of(image) == std::vector<int>{40, 160,  80, 120,  120, 80,  7, 7});
    // each channel takes its own fill
    const uint8_t fills[3] = {1, 2, 3};
    image = byte_image(3, 1, 2, {10, 20,  30, 40,  50, 60});
    translate_x(image, 0.5, fills);
    CHECK(values_of(image) == std::vector<int>{20, 1,  40, 2,  60, 3});

    // what m and the sign give: shear ±0.3 m / 10, translation ±0.45 m / 10 of the side
    ByteImage by_op = byte_image(1, 4, 2, {0, 200,  40, 160,  80, 120,  120, 80}), by_hand = by_op;
    randaugment_op(by_op, RA_TRANSLATE_Y, 10, true, fill);
    translate_y(by_hand, -0.45, fill);
    CHECK(by_op.pixels == by_hand.pixels);
    by_op = by_hand = rows;
    randaugment_op(by_op, RA_SHEAR_X, 5, false, fill);
    shear_x(by_hand, 0.15, fill);
    CHECK(by_op.pixels == by_hand.pixels);
}

TEST_CASE("randaugment: the enhancers' factor is 1 ± 0.9 m / 10, at least 0.1") {
    const uint8_t fill[1] = {0};
    const ByteImage original = byte_image(1, 1, 4, {10, 100, 200, 255});
    ByteImage by_op = original, by_hand = original;
    randaugment_op(by_op, RA_BRIGHTNESS, 5, true, fill);  // 0.55
    CHECK(values_of(by_op) == std::vector<int>{5, 55, 110, 140});
    by_op = original;
    randaugment_op(by_op, RA_BRIGHTNESS, 10, true, fill);  // 0.1
    brightness(by_hand, 0.1);
    CHECK(by_op.pixels == by_hand.pixels);
    CHECK(values_of(by_op) == std::vector<int>{1, 10, 20, 25});
    by_op = original;
    randaugment_op(by_op, RA_BRIGHTNESS, 0, false, fill);  // 1: the image
    CHECK(by_op.pixels == original.pixels);
    for (RandAugmentOp op : {RA_COLOR, RA_CONTRAST, RA_SHARPNESS}) {
        const ByteImage rgb = byte_image(3, 3, 3, {0, 9, 200, 30, 40, 50, 255, 1, 77,  5, 6, 7, 8, 9, 10, 11, 12, 13,
                                                   90, 80, 70, 60, 50, 40, 30, 20, 10});
        by_op = by_hand = rgb;
        randaugment_op(by_op, op, 10, false, fill);  // 1.9
        if (op == RA_COLOR) color(by_hand, 1.9);
        if (op == RA_CONTRAST) contrast(by_hand, 1.9);
        if (op == RA_SHARPNESS) sharpness(by_hand, 1.9);
        CHECK(by_op.pixels == by_hand.pixels);
        CHECK(by_op.pixels != rgb.pixels);
    }
}

TEST_CASE("randaugment: over many keys each op is drawn 1/14 of the time, applied half the time, at M ± 0.5") {
    const int draws = 28000;
    std::vector<int> chosen(RA_OP_COUNT, 0);
    int applied = 0, negative = 0, at_top = 0;
    double sum = 0, sum_sq = 0;
    for (int i = 0; i < draws; i++) {
        const uint64_t key = splitmix64(example_draw(5, i / 64, i % 64) + 3);
        const RandAugmentDraw d = randaugment_draw(5, i % 2, key);  // both of N = 2's draws
        REQUIRE(d.op >= 0);
        REQUIRE(d.op < RA_OP_COUNT);
        chosen[d.op]++;
        applied += d.applied;
        negative += d.negative;
        sum += d.magnitude;
        sum_sq += d.magnitude * d.magnitude;
        at_top += randaugment_draw(10, 0, key).magnitude == 10;  // M = 10: clipped about half the time
        const double m = randaugment_draw(0, 0, key).magnitude;  // M = 0: |z| / 2 clipped from below
        REQUIRE(m >= 0);
        REQUIRE(m <= 10);
    }
    for (int op = 0; op < RA_OP_COUNT; op++) {  // 2000 expected each (sd 43)
        CAPTURE(op);
        CHECK(chosen[op] > 1800);
        CHECK(chosen[op] < 2200);
    }
    CHECK(std::abs(applied - draws / 2) < 600);  // sd 84
    CHECK(std::abs(negative - draws / 2) < 600);
    CHECK(std::abs(at_top - draws / 2) < 600);
    const double mean = sum / draws, sd = std::sqrt(sum_sq / draws - mean * mean);
    CHECK(mean == doctest::Approx(5).epsilon(0.004));  // the mean's sd: 0.003
    CHECK(sd == doctest::Approx(0.5).epsilon(0.03));
    // the two draws of one image are independent of each other: the ops differ often
    int same = 0;
    for (int i = 0; i < 1400; i++) same += randaugment_draw(9, 0, i).op == randaugment_draw(9, 1, i).op;
    CHECK(same < 200);  // 100 expected
}

TEST_CASE("randaugment: a pure function of the key; other keys give other images") {
    std::vector<int> values(3 * 8 * 8);
    for (size_t k = 0; k < values.size(); k++) values[k] = (int)(k * 37 % 256);
    const ByteImage original = byte_image(3, 8, 8, values);
    const uint8_t fill[3] = {128, 128, 128};
    ByteImage a = original, b = original;
    randaugment(a, 9, 2, fill, 424242);
    randaugment(b, 9, 2, fill, 424242);  // as a resumed run
    CHECK(a.pixels == b.pixels);
    // keys as the task makes them, splitmix64 of a draw (keys a few apart would share words)
    int changed = 0;
    std::set<std::vector<uint8_t>> distinct;
    for (uint64_t i = 0; i < 200; i++) {
        ByteImage c = original;
        randaugment(c, 9, 2, fill, splitmix64(i));
        changed += c.pixels != original.pixels;
        distinct.insert(c.pixels);
    }
    // an op leaves the image when it is not applied (1/2), or is Identity or Equalize (too few
    // pixels in a channel of 8 x 8 for a step): (1/2 + 1/14)^2 = 0.33 of the keys change nothing,
    // so about 135 of 200 change (sd 7); fewer differ from each other (Posterize at m ≈ 9 keeps 1 bit)
    CHECK(changed > 110);
    CHECK(changed < 160);
    CHECK(distinct.size() > 90);
    // randaugment is the ops that randaugment_draw names, in turn
    for (uint64_t key = 0; key < 50; key++) {
        ByteImage by_draw = original, whole = original;
        for (int i = 0; i < 3; i++) {
            const RandAugmentDraw d = randaugment_draw(7, i, key);
            if (d.applied) randaugment_op(by_draw, d.op, d.magnitude, d.negative, fill);
        }
        randaugment(whole, 7, 3, fill, key);
        CHECK(whole.pixels == by_draw.pixels);
    }
}

TEST_CASE("random erasing: the rectangle's area and aspect ranges, its place, and about p of the images") {
    const int H = 64, W = 48, draws = 4000;
    int erased = 0;
    double min_area = 1, max_area = 0, min_aspect = 10, max_aspect = 0;
    for (int i = 0; i < draws; i++) {
        const EraseBox box = erase_draw(1.0, H, W, example_draw(9, i, 3));
        REQUIRE(box.height > 0);  // p = 1: always (a 64 x 48 image fits within the 10 tries)
        REQUIRE(box.top >= 0);
        REQUIRE(box.left >= 0);
        REQUIRE(box.top + box.height <= H);
        REQUIRE(box.left + box.width <= W);
        const double area = (double)box.height * box.width / (H * W), aspect = (double)box.height / box.width;
        min_area = std::min(min_area, area), max_area = std::max(max_area, area);
        min_aspect = std::min(min_aspect, aspect), max_aspect = std::max(max_aspect, aspect);
        erased += erase_draw(0.25, H, W, example_draw(9, i, 3)).height > 0;
        CHECK(erase_draw(0.0, H, W, example_draw(9, i, 3)).height == 0);
    }
    // area in 0.02 .. 1/3 and aspect in 0.3 .. 3.33, to within the rounding of h and w
    CHECK(min_area > 0.017);
    CHECK(min_area < 0.025);
    CHECK(max_area < 0.36);
    CHECK(max_area > 0.30);
    CHECK(min_aspect > 0.26);
    CHECK(min_aspect < 0.34);
    CHECK(max_aspect < 3.9);
    CHECK(max_aspect > 2.9);
    CHECK(std::abs(erased - draws / 4) < 150);  // sd 27
    // a 2 x 2 image: h, w < 2 must hold, so the rectangle is at most 1 x 1 (or empty, as timm's
    // can be), and it stays inside
    for (int i = 0; i < 200; i++) {
        const EraseBox box = erase_draw(1.0, 2, 2, i);
        CHECK(box.top + box.height <= 2);
        CHECK(box.left + box.width <= 2);
    }
}

TEST_CASE("random erasing: standard normal noise inside the rectangle, in every channel; nothing outside") {
    const int C = 3, H = 32, W = 32;
    std::vector<float> image(C * H * W);
    double sum = 0, sum_sq = 0, fourth = 0, neighbours = 0;  // neighbours: Σ z² z'² of x, x + 1 in the box
    int64_t n = 0, pairs = 0, images = 0;
    for (uint64_t i = 0; i < 300; i++) {
        const uint64_t key = splitmix64(i);  // as the task makes them (keys a few apart share words)
        for (size_t k = 0; k < image.size(); k++) image[k] = 100.0f + (float)k;  // far from any noise
        random_erase(image.data(), C, H, W, 1.0, key);
        const EraseBox box = erase_draw(1.0, H, W, key);
        images += box.height > 0;
        for (int c = 0; c < C; c++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    const size_t k = ((size_t)c * H + y) * W + x;
                    const bool inside = y >= box.top && y < box.top + box.height && x >= box.left &&
                                        x < box.left + box.width;
                    if (!inside) {
                        REQUIRE(image[k] == 100.0f + (float)k);
                        continue;
                    }
                    REQUIRE(std::isfinite(image[k]));
                    sum += image[k], sum_sq += image[k] * image[k], fourth += std::pow(image[k], 4);
                    n++;
                    if (x + 1 < box.left + box.width) {
                        neighbours += (double)image[k] * image[k] * image[k + 1] * image[k + 1];
                        pairs++;
                    }
                }
    }
    CHECK(images == 300);
    REQUIRE(n > 30000);
    const double mean = sum / n, variance = sum_sq / n - mean * mean;
    CHECK(std::abs(mean) < 0.02);
    CHECK(variance == doctest::Approx(1).epsilon(0.03));
    CHECK(fourth / n == doctest::Approx(3).epsilon(0.1));  // a normal's fourth moment
    // independent neighbours: E z² z'² = 1 (sd of the estimate about 0.007; values that shared a
    // word of the key would give 1.12)
    CHECK(neighbours / pairs == doctest::Approx(1).epsilon(0.05));
    // the same key: the same noise (a resumed run); the channels' noise differs
    std::vector<float> a(C * H * W, 0.0f), b(C * H * W, 0.0f);
    random_erase(a.data(), C, H, W, 1.0, 77);
    random_erase(b.data(), C, H, W, 1.0, 77);
    CHECK(a == b);
    const EraseBox box = erase_draw(1.0, H, W, 77);
    const size_t first = (size_t)box.top * W + box.left;
    CHECK(a[first] != a[first + (size_t)H * W]);
}

// A 3-channel 8 x 8 data set of 4 training and 2 test images with varied pixels
static ImageData rgb_images() {
    ImageData data;
    data.classes = 2;
    data.class_names = {"a", "b"};
    for (ImageSet* set : {&data.train, &data.test}) {
        set->channels = 3;
        set->height = set->width = 8;
        const int n = set == &data.train ? 4 : 2;
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < 192; k++) set->pixels.push_back((uint8_t)((i * 53 + k * 29 + k * k) % 256));
            set->labels.push_back(i % 2);
        }
    }
    return data;
}

TEST_CASE("vision task: with RandAugment and erasing off an image is what it was before they existed; "
          "on, they run in timm's order on their own words of the draw") {
    VisionSettings s;
    s.patch = 4;
    s.pad = 2;
    const VisionTask plain("rgb", rgb_images(), s);
    float y;
    std::vector<float> out(192), expected(192), normalised(192);
    for (uint64_t draw = 0; draw < 40; draw++) {
        const int index = (int)(draw % 4);
        plain.train_example(index, draw, {nullptr, out.data(), &y});
        // the pipeline of before: (pixel / 255 - mean) / std, then the crop and flip of the draw's words 0..2
        const uint8_t* p = plain.data.train.image(index);
        for (int k = 0; k < 192; k++)
            normalised[k] = (float)((p[k] / 255.0 - plain.channel_mean[k / 64]) / plain.channel_std[k / 64]);
        const AugmentDraw d = augment_draw(2, true, draw);
        crop_flip(normalised.data(), expected.data(), 3, 8, 8, d.dy, d.dx, d.flip);
        REQUIRE(memcmp(out.data(), expected.data(), sizeof(float) * 192) == 0);
    }
    // on: RandAugment on the bytes, then the same crop and flip, then erasing
    s.randaugment = 9;
    s.erase = 0.5;
    const VisionTask augmented("rgb", rgb_images(), s);
    REQUIRE(augmented.mean_colour.size() == 3);
    for (int c = 0; c < 3; c++) CHECK(augmented.mean_colour[c] == std::lround(255 * augmented.channel_mean[c]));
    int randaugmented = 0, erased = 0;
    for (uint64_t draw = 0; draw < 40; draw++) {
        const int index = (int)(draw % 4);
        augmented.train_example(index, draw, {nullptr, out.data(), &y});
        const uint8_t* p = augmented.data.train.image(index);
        ByteImage bytes{3, 8, 8, std::vector<uint8_t>(p, p + 192)};
        randaugment(bytes, 9, 2, augmented.mean_colour.data(), splitmix64(draw + 3));
        randaugmented += memcmp(bytes.pixels.data(), p, 192) != 0;
        augmented.normalise(bytes.pixels.data(), normalised.data());
        const AugmentDraw d = augment_draw(2, true, draw);
        crop_flip(normalised.data(), expected.data(), 3, 8, 8, d.dy, d.dx, d.flip);
        std::vector<float> before_erasing = expected;
        random_erase(expected.data(), 3, 8, 8, 0.5, splitmix64(draw + 4));
        erased += expected != before_erasing;
        REQUIRE(memcmp(out.data(), expected.data(), sizeof(float) * 192) == 0);
    }
    CHECK(randaugmented > 15);  // about 29 of 40
    CHECK(erased > 8);          // about 20 of 40
    // evaluation images are never augmented
    augmented.eval_example(1, {nullptr, out.data(), &y});
    plain.eval_example(1, {nullptr, expected.data(), &y});
    CHECK(out == expected);
    // RandAugment needs grey or RGB
    ImageData two_channels = rgb_images();
    for (ImageSet* set : {&two_channels.train, &two_channels.test}) {
        set->channels = 2;  // the same bytes as 2 x 8 x 12
        set->width = 12;
    }
    CHECK(message_of<std::runtime_error>([&] { VisionTask("two", two_channels, s); })
              .find("RandAugment needs grey or RGB images, these have 2 channels") != std::string::npos);
}

// On the command line (test_cli.cu's and test_cli_vision.cu's helpers: one translation unit)
TEST_CASE("image tasks: --randaugment, --randaugment-ops and --random-erase are checked, for images alone, "
          "recorded when on, and a run with them resumes bit-exactly") {
    const std::string images = "--task images --data-dir " + tiny_image_folder() + " --patch 2 ";
    expect_error("--task maj3 --randaugment 9", "--randaugment is for the image tasks, not maj3");
    expect_error("--task lm --random-erase 0.25", "--random-erase is for the image tasks, not lm");
    expect_error(images + "--randaugment 11", "--randaugment is a magnitude on timm's scale 0..10, got 11");
    expect_error(images + "--randaugment -1", "--randaugment must be at least 0, got -1");
    expect_error(images + "--randaugment 9 --randaugment-ops 0", "--randaugment-ops must be at least 1");
    expect_error(images + "--randaugment-ops 3", "--randaugment-ops needs --randaugment M above 0");
    expect_error(images + "--random-erase 1.5", "--random-erase is a probability, at most 1, got 1.5");
    expect_error(images + "--random-erase nan", "--random-erase expects a number");
    CommandResult help = run_command(MASKPRIOR + " --help");
    CHECK(help.out.find("rand-mM-mstd0.5-inc1") != std::string::npos);

    const std::string run = TINY + images + "--warmup 2 --eval-every 100 ";  // the first 3 steps: any --steps
    StFile resumed = expect_resume_bit_exact(run + "--randaugment 9 --randaugment-ops 3 --random-erase 0.5 ",
                                             3, 7, "randaugment");
    CHECK(resumed.metadata["randaugment"] == "9");
    CHECK(resumed.metadata["randaugment_ops"] == "3");
    CHECK(resumed.metadata["random_erase"] == "0.5");
    // a resume that asks for other values, or for none, is refused
    const std::string out = " --out " + TMP_PREFIX + "randaugment_refused";
    const std::string checkpoint = out + " --steps 9 --resume " + TMP_PREFIX + "randaugment_half/model.safetensors";
    expect_error(images + "--randaugment 5 --randaugment-ops 3 --random-erase 0.5" + checkpoint,
                 "is a checkpoint of randaugment=9; this run asks for randaugment=5");
    expect_error(images + checkpoint, "is a checkpoint of randaugment=9; this run asks for randaugment=0");
    expect_error(images + "--randaugment 9 --randaugment-ops 3" + checkpoint,
                 "is a checkpoint of random_erase=0.5; this run asks for random_erase=0");

    // off: the checkpoint records none of them, as before they existed, and resumes without them;
    // a run that asks for them refuses it. On, the weights come out otherwise.
    const std::string off = TMP_PREFIX + "randaugment_off";
    REQUIRE(run_command(run + "--steps 7 --out " + off).exit_code == 0);
    const StFile plain = safetensors_read(off + "/model.safetensors");
    for (const char* key : {"randaugment", "randaugment_ops", "random_erase"}) CHECK(plain.metadata.count(key) == 0);
    expect_error(images + "--random-erase 0.25 --steps 9 --resume " + off + "/model.safetensors" + out,
                 "is a checkpoint of random_erase=0; this run asks for random_erase=0.25");
    CHECK(run_command(run + "--steps 9 --out " + off + " --resume " + off + "/model.safetensors").exit_code == 0);
    const StFile whole = safetensors_read(TMP_PREFIX + "randaugment_whole/model.safetensors");
    const StTensor *a = plain.find("wpe"), *b = whole.find("wpe");
    REQUIRE((a && b));
    CHECK(memcmp(a->data.data(), b->data.data(), a->data.size() * sizeof(float)) != 0);
}
