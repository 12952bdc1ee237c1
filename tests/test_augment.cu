// Data augmentation (tasks/augment.h): the crop and flip by hand, and what the keys draw.
#include <cstring>
#include <set>
#include <vector>
#include <doctest/doctest.h>
#include "tasks/augment.h"

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
