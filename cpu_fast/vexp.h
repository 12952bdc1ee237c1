// cpu_fast/vexp.h: vexp(x) = e^x for the hot loops (softmax, GELU), written in plain arithmetic so
// that a compiler turns a loop of it into vector code. The C library's expf is a function call
// per element, which no loop around it can vectorise; on the CPU it was a tenth of a training
// step. The same code runs on the GPU: on the CUDA emulation (the host compiler, -ffp-contract=off)
// it gives the CPU's bits; nvcc fuses its a·b + c into fused multiply-adds (one rounding, not
// two), so a GPU's e^x may differ from the CPU's in its last bits.
//
// The method (Cody and Waite's range reduction, a polynomial, a scale by a power of two):
//   n = round(x / ln 2),  r = x - n ln 2  (|r| <= ln 2 / 2; ln 2 in two parts, so n·ln2_hi is exact)
//   e^r ~ 1 + r + r^2 p(r), p of degree 5 with minimax coefficients (relative error below 2e-7)
//   e^x = e^r · 2^n, the power of two built from its exponent bits, in two halves 2^(n/2) so that
//         n from -150 to 128 neither overflows nor underflows before the last multiply
// Within 2 ulp of e^x for x from -87 to 88 (denormal results near -104 are rounded once);
// 0 below -104 and +inf above 89, as e^x rounds to; NaN gives NaN. Every lane of a vector
// computes exactly this, so vexp gives the same bits at every vector width.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include "gpu/cuda.cuh"  // __host__ __device__ (or the emulation's)

// x's bits as an integer and back: what a GPU register holds either way
__host__ __device__ inline int32_t float_bits(float x) {
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return i;
}
__host__ __device__ inline float float_from_bits(int32_t i) {
    float x;
    memcpy(&x, &i, sizeof x);
    return x;
}

template <typename F>
__host__ __device__ inline F vexp(F x) {  // double (the finite-difference tests): the library's exp
    return exp(x);
}

template <>
__host__ __device__ inline float vexp(float x) {
    const float lo = -104.0f, hi = 89.0f;
    float xc = x < lo ? lo : x;  // in range for the arithmetic; NaN stays NaN
    xc = xc > hi ? hi : xc;
    // adding 1.5·2^23 rounds to an integer, held in the low bits of the sum: n = round(x / ln 2)
    const float round_magic = 12582912.0f;
    const float shifted = xc * 1.44269504088896341f + round_magic;
    const float n = shifted - round_magic;
    const int32_t n_int = float_bits(shifted) - float_bits(round_magic);
    const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;  // x - n ln 2, ln 2 = 0.693359375 - 2.12e-4
    float p = 1.9875691500e-4f;  // e^r = 1 + r + r^2 p(r): minimax coefficients on |r| <= ln 2 / 2
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float e_r = p * (r * r) + r + 1.0f;
    // 2^n = 2^half · 2^(n - half), each a normal float: its exponent field e + 127 shifted into
    // place, as an unsigned shift (a NaN x gives a garbage n, whose signed shift would be undefined)
    const int32_t half = n_int >> 1;
    const float scale1 = float_from_bits((int32_t)((uint32_t)(half + 127) << 23));
    const float scale2 = float_from_bits((int32_t)((uint32_t)(n_int - half + 127) << 23));
    float y = e_r * scale1 * scale2;
    y = x < lo ? 0.0f : y;
    y = x > hi ? INFINITY : y;
    return y;
}
