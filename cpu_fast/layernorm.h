// cpu_fast/layernorm.h: the CPU's LayerNorm, bit for bit layers/layernorm.cuh's loops. A row's sums
// (its mean, its variance, the two means of the backward) are chains along c, which one row at a
// time leaves the vector lanes idle. Here LN_LANES rows run side by side, one per lane, from a
// transposed copy of their block, (C, LN_LANES): each lane sums its own row along c in the loops'
// order, so the bits are the loops' (tests/test_fast_paths.cu). The parameter gradients sum over
// the rows in order with the lanes across channels. eps is the loops' LN_EPS.
#pragma once
#include <algorithm>
#include <vector>
#include "layers/device.cuh"     // worth_threads

constexpr int LN_LANES = 16;
// channels a thread sums side by side for the parameter gradients
constexpr int LN_CHANNEL_BLOCK = 32;
// worth_threads' measure of one element's work in a pass: a LayerNorm pass over a row block
// (transposed, summed twice, normalised) takes about 1 ns an element on a 2-core Xeon (family 6,
// model 207), some 30 multiply-adds' time; so the wide model's LayerNorms (4096 x 128) use the
// threads, make run's (1024 x 32) run on the calling thread
constexpr size_t LN_WORK = 30;

// rows n0 .. n0+LN_LANES of x (N,C) into block (C, LN_LANES), rows past N as 0
template <typename F>
void transpose_rows(F* block, const F* x, int N, int C, int n0) {
    for (int c = 0; c < C; c++)
        for (int l = 0; l < LN_LANES; l++)
            block[(size_t)c * LN_LANES + l] = n0 + l < N ? x[(size_t)(n0 + l) * C + c] : F(0);
}

template <typename F>
void layernorm_forward_cpu_fast(F* out, F* mean, F* rstd, const F* inp, const F* weight, const F* bias, int N, int C,
                                float eps) {
    // out (N,C), mean (N), rstd (N), inp (N,C), weight (C), bias (C)
    #pragma omp parallel if (worth_threads((size_t)N * C * LN_WORK))
    {
        std::vector<F> x_t((size_t)C * LN_LANES);  // this thread's block of rows, transposed
        #pragma omp for
        for (int n0 = 0; n0 < N; n0 += LN_LANES) {
            transpose_rows(x_t.data(), inp, N, C, n0);
            F m[LN_LANES] = {}, v[LN_LANES] = {};
            for (int c = 0; c < C; c++)
                for (int l = 0; l < LN_LANES; l++) m[l] += x_t[(size_t)c * LN_LANES + l];
            for (int l = 0; l < LN_LANES; l++) m[l] /= C;
            for (int c = 0; c < C; c++)
                for (int l = 0; l < LN_LANES; l++) {
                    F d = x_t[(size_t)c * LN_LANES + l] - m[l];
                    v[l] += d * d;
                }
            for (int l = 0; l < LN_LANES && n0 + l < N; l++) {
                const int n = n0 + l;
                const F s = F(1) / F(sqrt(v[l] / C + F(eps)));
                const F* x = inp + (size_t)n * C;
                for (int c = 0; c < C; c++) out[(size_t)n * C + c] = (x[c] - m[l]) * s * weight[c] + bias[c];
                mean[n] = m[l];
                rstd[n] = s;
            }
        }
    }
}

template <typename F>
void layernorm_backward_cpu_fast(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight,
                                 const F* mean, const F* rstd, int N, int C) {
    // dinp (N,C), dweight (C), dbias (C), dout (N,C), inp (N,C), mean/rstd (N)
    #pragma omp parallel if (worth_threads((size_t)N * C * LN_WORK))
    {
        std::vector<F> x_t((size_t)C * LN_LANES), g_t((size_t)C * LN_LANES);  // this thread's blocks
        #pragma omp for
        for (int n0 = 0; n0 < N; n0 += LN_LANES) {
            transpose_rows(x_t.data(), inp, N, C, n0);
            transpose_rows(g_t.data(), dout, N, C, n0);
            F m[LN_LANES], s[LN_LANES], g_mean[LN_LANES] = {}, gx_mean[LN_LANES] = {};
            for (int l = 0; l < LN_LANES; l++) {
                m[l] = n0 + l < N ? mean[n0 + l] : F(0);
                s[l] = n0 + l < N ? rstd[n0 + l] : F(0);
            }
            for (int c = 0; c < C; c++)
                for (int l = 0; l < LN_LANES; l++) {
                    const size_t e = (size_t)c * LN_LANES + l;
                    F xhat = (x_t[e] - m[l]) * s[l];
                    g_mean[l] += g_t[e] * weight[c];
                    gx_mean[l] += g_t[e] * weight[c] * xhat;
                }
            for (int l = 0; l < LN_LANES && n0 + l < N; l++) {
                const int n = n0 + l;
                const F gm = g_mean[l] / C, gxm = gx_mean[l] / C;
                const F* x = inp + (size_t)n * C;
                const F* g = dout + (size_t)n * C;
                for (int c = 0; c < C; c++) {
                    F xhat = (x[c] - m[l]) * s[l];
                    dinp[(size_t)n * C + c] += s[l] * (g[c] * weight[c] - gm - xhat * gxm);
                }
            }
        }
    }
    // each channel's sums over n, in order, added once: lanes across a block of channels, threads
    // across blocks
    #pragma omp parallel for if (worth_threads((size_t)N * C * LN_WORK))
    for (int c0 = 0; c0 < C; c0 += LN_CHANNEL_BLOCK) {
        const int count = std::min(LN_CHANNEL_BLOCK, C - c0);
        F dw[LN_CHANNEL_BLOCK] = {}, db[LN_CHANNEL_BLOCK] = {};
        for (int n = 0; n < N; n++)
            for (int c = 0; c < count; c++) {
                const F g = dout[(size_t)n * C + c0 + c];
                F xhat = (inp[(size_t)n * C + c0 + c] - mean[n]) * rstd[n];
                db[c] += g;
                dw[c] += g * xhat;
            }
        for (int c = 0; c < count; c++) {
            dweight[c0 + c] += dw[c];
            dbias[c0 + c] += db[c];
        }
    }
}
