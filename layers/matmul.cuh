// layers/matmul.cuh: the linear layer, PyTorch layout (weight is (OC, C)).
//   out[n,o] = sum_c inp[n,c] * weight[o,c] + bias[o]          out = inp W^T + b
// backward, quoting the forward line:
//   dinp[n,c]   += sum_o dout[n,o] * weight[o,c]                dinp += dout W
//   dweight[o,c] += sum_n dout[n,o] * inp[n,c]                  dW   += dout^T inp
//   dbias[o]    += sum_n dout[n,o]
// CPU: the plain loops below define the summation order: each output is its own chain along the
// summed index, in order, starting from the bias (0 without one) or from the gradient already
// there. The program runs the same products through gemm_accumulate (cpu_fast/matmul.h), which
// keeps that order and so gives the same bits, fast; the tests hold the two to exact equality.
// GPU, two versions (Kernels::matmul, --matmul-kernel): 1, cuBLAS (cublasSgemm), with the
// row-major reasoning written out once below, a kernel that adds the bias and one for the bias
// gradient; 2, cuBLASLt (layers/matmul_lt.cuh), the same products with the bias and the bias
// gradient fused into them as epilogues. Version 2 gives other bits than version 1 (its own
// kernels and summation order), within the GPU tests' tolerance of the CPU's.
// bias may be nullptr (no bias), and so may dbias; dinp may be nullptr where the input needs no
// gradient (the patch embedding's input is the image).
#pragma once
#include "cpu_fast/matmul.h"       // matmul_forward_cpu_fast, matmul_backward_cpu_fast
#include "layers/column_sums.cuh"  // column_sums_gpu: kernel 2 of the bias gradient
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED
#include "layers/kernels.h"      // Kernels
#include "layers/matmul_lt.cuh"    // lt_matmul, add_bias_gradient, matmul_lt: version 2's cuBLASLt call

constexpr int MATMUL_KERNEL_COUNT = 2;  // the versions of the GPU matmul (Kernels::matmul)

template <typename F>
void matmul_forward_cpu(F* out, const F* inp, const F* weight, const F* bias, int N, int C, int OC) {
    // out (N,OC), inp (N,C), weight (OC,C), bias (OC)
    #pragma omp parallel for if (worth_threads((size_t)N * C * OC))
    for (int n = 0; n < N; n++) {
        const F* x = inp + (size_t)n * C;
        for (int o = 0; o < OC; o++) {
            const F* w = weight + (size_t)o * C;
            F sum = bias ? bias[o] : F(0);
            for (int c = 0; c < C; c++) sum += x[c] * w[c];
            out[(size_t)n * OC + o] = sum;
        }
    }
}

template <typename F>
void matmul_backward_cpu(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight, int N, int C,
                         int OC) {
    // dinp (N,C), dweight (OC,C), dbias (OC), dout (N,OC), inp (N,C), weight (OC,C)
    if (dinp) {
        #pragma omp parallel for if (worth_threads((size_t)N * C * OC))
        for (int n = 0; n < N; n++) {
            F* dx = dinp + (size_t)n * C;
            for (int o = 0; o < OC; o++) {
                F g = dout[(size_t)n * OC + o];
                const F* w = weight + (size_t)o * C;
                for (int c = 0; c < C; c++) dx[c] += g * w[c];
            }
        }
    }
    // each thread owns whole rows of dweight and sums over n in order
    #pragma omp parallel for if (worth_threads((size_t)N * C * OC))
    for (int o = 0; o < OC; o++) {
        F* dw = dweight + (size_t)o * C;
        F db = 0;
        for (int n = 0; n < N; n++) {
            F g = dout[(size_t)n * OC + o];
            const F* x = inp + (size_t)n * C;
            db += g;
            for (int c = 0; c < C; c++) dw[c] += g * x[c];
        }
        if (dbias) dbias[o] += db;
    }
}

// ---- GPU ----
// cuBLAS is column-major; our buffers are row-major. The rule the three calls follow:
//   1. A row-major (R, K) buffer, read column-major with leading dimension K, is its
//      transpose (K, R). So the row-major result P (R, K) is written by asking cuBLAS for the
//      column-major P^T (K, R): a row-major product P = X Y becomes P^T = Y^T X^T.
//   2. For each operand of that column-major product, look at what the buffer reads as
//      (rule 1). Where the buffer already reads as the operand needed, pass CUBLAS_OP_N;
//      where it reads as the operand's transpose, pass CUBLAS_OP_T and cuBLAS transposes it.
//      The leading dimension is always the buffer's row length, whatever the op.
// The three products, with what each buffer reads as:
//   out = inp W^T    ->  out^T (OC,N) = W (OC,C) · inp^T (C,N)
//                        weight (OC,C) reads as W^T, but W is needed: OP_T;  inp reads as inp^T: OP_N
//                        gemm(T, N, m=OC, n=N, k=C, weight, ld C, inp, ld C, out, ld OC)
//   dinp = dout W    ->  dinp^T (C,N) = W^T (C,OC) · dout^T (OC,N)
//                        weight reads as W^T: OP_N;  dout (N,OC) reads as dout^T: OP_N
//                        gemm(N, N, m=C, n=N, k=OC, weight, ld C, dout, ld OC, dinp, ld C)
//   dW = dout^T inp  ->  dW^T (C,OC) = inp^T (C,N) · dout (N,OC)
//                        inp reads as inp^T: OP_N;  dout reads as dout^T, but dout is needed: OP_T
//                        gemm(N, T, m=C, n=OC, k=N, inp, ld C, dout, ld OC, dweight, ld C)

__global__ void add_bias_kernel1(float* __restrict__ out, const float* __restrict__ bias, int N, int OC) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over N*OC
    if (idx < (size_t)N * OC) out[idx] += bias[idx % OC];
}

// One thread per output channel, rows summed in order (deterministic, no atomics): a serial walk
// over the N rows on only OC threads, which --profile marks; kernel 2 (column_sums_gpu) is the parallel one.
__global__ void bias_backward_kernel1(float* __restrict__ dbias, const float* __restrict__ dout, int N, int OC) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OC) return;
    float sum = 0;
    for (int n = 0; n < N; n++) sum += dout[(size_t)n * OC + o];
    dbias[o] += sum;
}

// dbias (OC) += the column sums of dout (N, OC), on the GPU: kernel 1, or (Kernels::fast_layers)
// the two stages of layers/column_sums.cuh
inline void bias_backward_gpu(const Kernels& kernels, float* dbias, const float* dout, int N, int OC) {
    if (kernels.fast_layers) return column_sums_gpu(dbias, dout, N, OC);
    const LaunchCost cost{4.0 * ((double)N * OC + 2.0 * OC), (double)N * OC, (double)N};  // walk: all N rows
    launch_kernel<bias_backward_kernel1>(cost, ceil_div(OC, 64), 64, 0, dbias, dout, N, OC);
}

// C = alpha op(A) op(B) + beta C through cublasSgemm (column-major, as above), alpha 1; `what`
// names the product in --profile's table
inline void sgemm(const Kernels& kernels, const char* what, cublasOperation_t op_a, cublasOperation_t op_b, int m,
                  int n, int k, const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
    const float one = 1.0f;
    const bool recording = profiler().recording;
    if (recording) {
        const double elements = (double)m * k + (double)k * n + (double)m * n * (beta != 0 ? 2 : 1);
        profiler().begin(std::string("cublasSgemm (") + what + ")", 0, 0, 0, {4.0 * elements, 2.0 * m * n * k, 0},
                         !GPU_EMULATED);
    }
    cublasCheck(cublasSgemm(cublas_handle(kernels.tf32), op_a, op_b, m, n, k, &one, A, lda, B, ldb, &beta, C, ldc));
    if (recording) profiler().end();
}

// ---- version 1: cublasSgemm, then the bias kernel ----

inline void matmul_forward_gpu1(const Kernels& kernels, float* out, const float* inp, const float* weight,
                                const float* bias, int N, int C, int OC) {
    sgemm(kernels, "out = inp W^T", CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, weight, C, inp, C, 0.0f, out, OC);
    if (bias)
        launch_kernel<add_bias_kernel1>(pointwise_cost((size_t)N * OC, 2, 1), ceil_div((size_t)N * OC, BLOCK), BLOCK, 0,
                                        out, bias, N, OC);
}

// beta = 1: the products accumulate into the gradients
inline void matmul_backward_gpu1(const Kernels& kernels, float* dinp, float* dweight, float* dbias, const float* dout,
                                 const float* inp, const float* weight, int N, int C, int OC) {
    if (dinp) sgemm(kernels, "dinp += dout W", CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, weight, C, dout, OC, 1.0f, dinp, C);
    sgemm(kernels, "dW += dout^T inp", CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, C, dout, OC, 1.0f, dweight, C);
    if (dbias) bias_backward_gpu(kernels, dbias, dout, N, OC);
}

// ---- version 2: cublasLtMatmul with the bias (BIAS) and the bias gradient (BGRADB) fused in ----
// The same three products, ops and leading dimensions as version 1 (layers/matmul_lt.cuh says
// which of D's dimensions each vector runs along). A product cuBLASLt has no algorithm for runs
// as version 1 runs it.

inline void matmul_forward_gpu2(const Kernels& kernels, float* out, const float* inp, const float* weight,
                                const float* bias, int N, int C, int OC) {
    if (lt_matmul(kernels, bias ? "out = inp W^T + b" : "out = inp W^T",
                  bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, weight,
                  C, inp, C, 0.0f, out, OC, bias))
        return;
    matmul_forward_gpu1(kernels, out, inp, weight, bias, N, C, OC);
}

// dbias: BGRADB stores sum_n dout[n,o] into the scratch, and add_bias_gradient adds it in
inline void matmul_backward_gpu2(const Kernels& kernels, float* dinp, float* dweight, float* dbias, const float* dout,
                                 const float* inp, const float* weight, int N, int C, int OC) {
    if (dinp && !lt_matmul(kernels, "dinp += dout W", CUBLASLT_EPILOGUE_DEFAULT, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC,
                           weight, C, dout, OC, 1.0f, dinp, C))
        sgemm(kernels, "dinp += dout W", CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, weight, C, dout, OC, 1.0f, dinp, C);
    if (dbias && OC <= MATMUL_LT_BIAS_GRADIENT_FLOATS &&
        lt_matmul(kernels, "dW += dout^T inp, db = sum_n dout", CUBLASLT_EPILOGUE_BGRADB, CUBLAS_OP_N, CUBLAS_OP_T, C,
                  OC, N, inp, C, dout, OC, 1.0f, dweight, C, matmul_lt().bias_gradient))
        return add_bias_gradient(dbias, OC);
    if (!lt_matmul(kernels, "dW += dout^T inp", CUBLASLT_EPILOGUE_DEFAULT, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, C,
                   dout, OC, 1.0f, dweight, C))
        sgemm(kernels, "dW += dout^T inp", CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, C, dout, OC, 1.0f, dweight, C);
    if (dbias) bias_backward_gpu(kernels, dbias, dout, N, OC);
}

// ---- the version Kernels::matmul names ----

inline void matmul_forward_gpu(const Kernels& kernels, float* out, const float* inp, const float* weight,
                               const float* bias, int N, int C, int OC) {
    if (kernels.matmul == 2) return matmul_forward_gpu2(kernels, out, inp, weight, bias, N, C, OC);
    matmul_forward_gpu1(kernels, out, inp, weight, bias, N, C, OC);
}

inline void matmul_backward_gpu(const Kernels& kernels, float* dinp, float* dweight, float* dbias, const float* dout,
                                const float* inp, const float* weight, int N, int C, int OC) {
    if (kernels.matmul == 2) return matmul_backward_gpu2(kernels, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    matmul_backward_gpu1(kernels, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

inline void matmul_forward(Device dev, const Kernels& kernels, float* out, const float* inp, const float* weight,
                           const float* bias, int N, int C, int OC) {
    if (dev == DEVICE_CPU)
        return kernels.cpu == 1 ? matmul_forward_cpu(out, inp, weight, bias, N, C, OC)
                                : matmul_forward_cpu_fast(out, inp, weight, bias, N, C, OC);
    matmul_forward_gpu(kernels, out, inp, weight, bias, N, C, OC);
}

inline void matmul_backward(Device dev, const Kernels& kernels, float* dinp, float* dweight, float* dbias,
                            const float* dout, const float* inp, const float* weight, int N, int C, int OC) {
    if (dev == DEVICE_CPU)
        return kernels.cpu == 1 ? matmul_backward_cpu(dinp, dweight, dbias, dout, inp, weight, N, C, OC)
                                : matmul_backward_cpu_fast(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    matmul_backward_gpu(kernels, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}
