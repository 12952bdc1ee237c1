// cpu_fast/matmul.h: the CPU's linear layer, bit for bit layers/matmul.cuh's loops: the same three
// products through gemm_accumulate (cpu_fast/gemm.h), each operand read as the matrix the product
// needs (StridedMatrix: element (r,c) at r·row_stride + c·col_stride):
//   out  (N,OC)  = bias + inp (N,C) · W^T (C,OC)     W^T (c,o) = weight[o·C + c]
//   dinp (N,C)  += dout (N,OC) · W (OC,C)
//   dW   (OC,C) += dout^T (OC,N) · inp (N,C)         dout^T (o,n) = dout[n·OC + o]
//   dbias (OC)  += sum_n dout[n,:], each channel summed over n in order, the lanes across channels
#pragma once
#include <algorithm>
#include <vector>
#include "cpu_fast/gemm.h"  // gemm_accumulate, StridedMatrix

// channels a thread sums side by side, over all rows, where a layer sums its gradient over the rows
constexpr int COLUMN_BLOCK = 64;

template <typename F>
void matmul_forward_cpu_fast(F* out, const F* inp, const F* weight, const F* bias, int N, int C, int OC) {
    // out (N,OC), inp (N,C), weight (OC,C), bias (OC) or nullptr: each output's chain starts at its bias
    const std::vector<F> zeros(bias ? 0 : OC, F(0));
    gemm_accumulate<F>(out, OC, {inp, (size_t)C, 1}, {weight, 1, (size_t)C}, N, OC, C, bias ? bias : zeros.data());
}

template <typename F>
void matmul_backward_cpu_fast(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight, int N,
                              int C, int OC) {
    // dinp (N,C) or nullptr, dweight (OC,C), dbias (OC) or nullptr, dout (N,OC), inp (N,C), weight (OC,C)
    if (dinp) gemm_accumulate<F>(dinp, C, {dout, (size_t)OC, 1}, {weight, (size_t)C, 1}, N, C, OC);
    gemm_accumulate<F>(dweight, C, {dout, 1, (size_t)OC}, {inp, (size_t)C, 1}, OC, C, N);
    if (!dbias) return;
    // each channel's sum over n, in order, added once: the lanes across a block of channels, the
    // threads across blocks. A sum streams dout at about 0.25 ns an element, 8 multiply-adds' time
    // (worth_threads' measure), on a 2-core Xeon (family 6, model 207).
    #pragma omp parallel for if (worth_threads((size_t)N * OC * 8))
    for (int o0 = 0; o0 < OC; o0 += COLUMN_BLOCK) {
        const int count = std::min(COLUMN_BLOCK, OC - o0);
        F db[COLUMN_BLOCK] = {};
        for (size_t n = 0; n < (size_t)N; n++)
            for (int o = 0; o < count; o++) db[o] += dout[n * OC + o0 + o];
        for (int o = 0; o < count; o++) dbias[o0 + o] += db[o];
    }
}
