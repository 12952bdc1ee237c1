// layers/column_sums.cuh: sums down the columns of an (N, columns) matrix on the GPU, parallel
// over the rows, without atomics, in a fixed order: the second kernel version of the bias
// gradient (layers/matmul.cuh) and of LayerNorm's parameter gradients (layers/layernorm.cuh),
// under --fast-kernels.
//
// What it teaches. A parameter's gradient sums over every row of the batch: dbias[o] =
// sum_n dout[n,o]. Kernel 1 gives each column one thread that walks all N rows: for a layer of
// 256 channels that is 256 threads on a GPU that runs over 100,000 at once, each walking
// thousands of rows in turn. Here the rows are cut into groups of COLUMN_GROUP_ROWS:
//   stage 1: a thread per (group, column) sums its group's rows in order into partials (a
//            layer's own kernel, since what is summed differs: dout, or dout·xhat);
//   stage 2: a thread per column adds the groups' partial sums in group order (below).
// N/32 times as many threads work in stage 1, and every addition happens in the same order at
// every run, so the sums are the same bits each time (atomicAdd into one total would make the
// order, and so the rounding, depend on which thread came first). The bits differ from kernel
// 1's single left-to-right chain within rounding.
#pragma once
#include "layers/common.cuh"  // cudaCheck, ceil_div, BLOCK, launch_kernel

constexpr int COLUMN_GROUP_ROWS = 32;

__host__ __device__ inline int column_groups(int N) { return (N + COLUMN_GROUP_ROWS - 1) / COLUMN_GROUP_ROWS; }

// the last row (past the end) of group g's rows
__device__ inline int group_end(int g, int N) {
    return (g + 1) * COLUMN_GROUP_ROWS < N ? (g + 1) * COLUMN_GROUP_ROWS : N;
}

// Device memory for the partial sums between the two stages, at least n floats: one buffer for
// the process, grown when a call needs more (the launches of one stream run in order, so the
// layers can take turns with it; cudaFree waits for the kernels that used the old one).
inline float* column_scratch(size_t n) {
    static float* buffer = nullptr;
    static size_t floats = 0;
    if (n > floats) {
        if (buffer) cudaCheck(cudaFree(buffer));
        cudaCheck(cudaMalloc(&buffer, n * sizeof(float)));
        floats = n;
    }
    return buffer;
}

// stage 2: out[o] += sum over groups g, in order, of partials[g·columns + o]
__global__ void column_partials_sum_kernel2(float* out, const float* partials, int groups, int columns) {
    // out (columns), partials (groups, columns)
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= columns) return;
    float sum = 0;
    for (int g = 0; g < groups; g++) sum += partials[(size_t)g * columns + o];
    out[o] += sum;
}

inline void column_partials_sum(float* out, const float* partials, int groups, int columns) {
    launch_kernel<column_partials_sum_kernel2>(ceil_div(columns, BLOCK), BLOCK, 0, out, partials, groups, columns);
}
