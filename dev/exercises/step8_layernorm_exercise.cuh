// dev/exercises/step8_layernorm_exercise.cuh: the kernel course, step 8 of 9, blank: LayerNorm,
// forward and backward, as kernel 1 (layers/layernorm.cuh) runs it: a thread per row, and a thread
// per channel for the parameters' gradients (dev/exercises/README.md says it in full). Work in a
// copy, and check it on the CUDA emulation (no GPU needed):
//   cp dev/exercises/step8_layernorm_exercise.cuh $HOME/step8.cuh
//   make exercise EXERCISE=$HOME/step8.cuh
// (make exercise finds the step in the file's name or, in a copy, in this first line: keep it.)
//
// Every block of the model normalises each of its N = B·T rows of C channels twice. Per row n:
//   mean = sum_c x_c / C,   rstd = 1 / sqrt(sum_c (x_c - mean)^2 / C + eps)     eps = LN_EPS (1e-5)
//   xhat_c = (x_c - mean) · rstd,   out_c = xhat_c · weight_c + bias_c
// The backward, from dout (the loss's gradient in out), g_c = dout_c · weight_c:
//   dx_c      += rstd · (g_c - mean_c'(g_c') - xhat_c · mean_c'(g_c' · xhat_c'))   per row
//   dweight_c += sum_n dout_nc · xhat_nc,   dbias_c += sum_n dout_nc             per channel
// The forward writes (=) out, mean and rstd (the backward reads these two back); the backward adds
// (+=) into dinp, dweight and dbias, as every backward here does. A row is one thread's; a
// channel's sums over the rows are one thread's too, in row order: no two threads add into one
// number. float arithmetic throughout (sqrtf, 1.0f / ...): the CPU's loops compute in float.
//
// The launches (the check's, kernel 1's): ceil(N / 256) blocks of 256 threads for the forward and
// for dinp (thread n: row n), ceil(C / 64) blocks of 64 for dweight and dbias (thread c: channel c).
#pragma once
#include "layers/layernorm.cuh"  // LN_EPS (layernorm_*_kernel1 there: this step's answer)

__global__ void layernorm_forward_exercise(float* out, float* mean, float* rstd, const float* inp,
                                           const float* weight, const float* bias, int N, int C) {
    // out (N,C), mean (N), rstd (N) written; inp (N,C); weight (C), bias (C)
    // YOUR CODE HERE
}

__global__ void layernorm_backward_dinp_exercise(float* dinp, const float* dout, const float* inp,
                                                 const float* weight, const float* mean, const float* rstd,
                                                 int N, int C) {
    // dinp (N,C) added; dout (N,C); inp (N,C); weight (C); mean, rstd (N): the forward's
    // YOUR CODE HERE
}

__global__ void layernorm_backward_params_exercise(float* dweight, float* dbias, const float* dout,
                                                   const float* inp, const float* mean, const float* rstd,
                                                   int N, int C) {
    // dweight (C), dbias (C) added; dout (N,C); inp (N,C); mean, rstd (N)
    // YOUR CODE HERE
}
