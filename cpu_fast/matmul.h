// cpu_fast/matmul.h: the CPU's linear layer, bit for bit layers/matmul.cuh's loops: the same three
// products through gemm_accumulate (cpu_fast/gemm.h), each operand read as the matrix the product
// needs (StridedMatrix: element (r,c) at r·row_stride + c·col_stride):
//   out  (N,OC)  = bias + inp (N,C) · W^T (C,OC)     W^T (c,o) = weight[o·C + c]
//   dinp (N,C)  += dout (N,OC) · W (OC,C)
//   dW   (OC,C) += dout^T (OC,N) · inp (N,C)         dout^T (o,n) = dout[n·OC + o]
//   dbias (OC)  += sum_n dout[n,:], each channel summed over n in order, the lanes across channels
#pragma once
#include <vector>
#include "cpu_fast/gemm.h"  // gemm_accumulate, StridedMatrix

template <typename F>
void matmul_forward_cpu_fast(F* out, const F* inp, const F* weight, const F* bias, int N, int C, int OC) {
    // out (N,OC), inp (N,C), weight (OC,C), bias (OC) or nullptr
    for (size_t n = 0; n < (size_t)N; n++)
        for (int o = 0; o < OC; o++) out[n * OC + o] = bias ? bias[o] : F(0);
    gemm_accumulate<F>(out, OC, {inp, (size_t)C, 1}, {weight, 1, (size_t)C}, N, OC, C);
}

template <typename F>
void matmul_backward_cpu_fast(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight, int N,
                              int C, int OC) {
    // dinp (N,C) or nullptr, dweight (OC,C), dbias (OC) or nullptr, dout (N,OC), inp (N,C), weight (OC,C)
    if (dinp) gemm_accumulate<F>(dinp, C, {dout, (size_t)OC, 1}, {weight, (size_t)C, 1}, N, C, OC);
    gemm_accumulate<F>(dweight, C, {dout, 1, (size_t)OC}, {inp, (size_t)C, 1}, OC, C, N);
    if (!dbias) return;
    std::vector<F> db(OC, F(0));  // each channel's sum over n, in order (lanes across o), added once
    for (size_t n = 0; n < (size_t)N; n++)
        for (int o = 0; o < OC; o++) db[o] += dout[n * OC + o];
    for (int o = 0; o < OC; o++) dbias[o] += db[o];
}
