// layers/rng.h: the program's random numbers, so that a seed fixes everything.
#pragma once
#include <cmath>
#include <cstdint>

// ----------------------------------------------------------------------------
// random numbers: xorshift64*, uniform in [0,1) from the top 24 bits, normal by Box-Muller

struct Rng {
    uint64_t state;
    explicit Rng(uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {
        if (state == 0) state = 1;
        for (int i = 0; i < 4; i++) next_u64();  // decorrelate nearby seeds
    }
    uint64_t next_u64() {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        return state * 0x2545F4914F6CDD1Dull;
    }
    float uniform() { return (float)(next_u64() >> 40) / 16777216.0f; }
    float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
    int below(int n) { return (int)(next_u64() % (uint64_t)n); }
    float normal() {
        float u1 = uniform(), u2 = uniform();
        if (u1 < 1e-12f) u1 = 1e-12f;
        return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
    }
};

