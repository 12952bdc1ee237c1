// The learning-rate schedule (run/schedule.h): linear warmup, then cosine decay, by hand.
#include <doctest/doctest.h>
#include "run/schedule.h"

TEST_CASE("schedule: warmup from base_lr / W at step 0 to base_lr at step W - 1") {
    const float base = 1e-3f;
    CHECK(learning_rate(0, 1000, base, 100, 0.1f) == doctest::Approx(base / 100).epsilon(1e-6));
    CHECK(learning_rate(49, 1000, base, 100, 0.1f) == doctest::Approx(base / 2).epsilon(1e-6));
    CHECK(learning_rate(99, 1000, base, 100, 0.1f) == base);   // the end of warmup
    CHECK(learning_rate(100, 1000, base, 100, 0.1f) == base);  // the decay starts at its top
}

TEST_CASE("schedule: the cosine decay, halfway and at the end") {
    const float base = 1e-3f;
    // warmup 100, decay over steps 100 .. 1000: halfway at 550 the cosine term is 1/2
    CHECK(learning_rate(550, 1000, base, 100, 0.1f) == doctest::Approx(0.55 * base).epsilon(1e-6));
    // the last step taken, 999: one step of 900 before lr_min
    const double last = 0.1 * base + 0.9 * base * 0.5 * (1 + std::cos(3.14159265358979323846 * 899 / 900));
    CHECK(learning_rate(999, 1000, base, 100, 0.1f) == doctest::Approx(last).epsilon(1e-6));
    CHECK(learning_rate(999, 1000, base, 100, 0.1f) > 0.1f * base);
    CHECK(learning_rate(1000, 1000, base, 100, 0.1f) == doctest::Approx(0.1 * base).epsilon(1e-6));
    CHECK(learning_rate(5000, 1000, base, 100, 0.0f) == 0.0f);  // past the end: lr_min
}

TEST_CASE("schedule: after warmup the rate never rises, and stays within [lr_min, base_lr]") {
    const float base = 3e-4f;
    float previous = learning_rate(20, 500, base, 20, 0.05f);
    for (int64_t step = 21; step < 500; step++) {
        const float lr = learning_rate(step, 500, base, 20, 0.05f);
        CHECK(lr <= previous);
        CHECK(lr >= 0.05f * base * (1 - 1e-6f));
        previous = lr;
    }
    for (int64_t step = 1; step < 20; step++)  // and the warmup only rises
        CHECK(learning_rate(step, 500, base, 20, 0.05f) > learning_rate(step - 1, 500, base, 20, 0.05f));
}

TEST_CASE("schedule: warmup 0 starts at base_lr; min_lr_fraction 1 is a constant rate") {
    const float base = 1e-3f;
    CHECK(learning_rate(0, 1000, base, 0, 0.0f) == base);
    CHECK(learning_rate(500, 1000, base, 0, 0.0f) == doctest::Approx(base / 2).epsilon(1e-6));
    for (int64_t step : {0, 1, 37, 500, 999, 1000, 2000}) {
        CAPTURE(step);
        CHECK(learning_rate(step, 1000, base, 0, 1.0f) == base);
    }
    CHECK(learning_rate(4, 1000, base, 10, 1.0f) == doctest::Approx(base / 2).epsilon(1e-6));  // constant, warmed up
    CHECK(learning_rate(10, 1000, base, 10, 1.0f) == base);
}
