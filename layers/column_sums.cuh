// layers/column_sums.cuh: sums down the columns of an (N, columns) matrix on the GPU, parallel
// over the rows, without atomics, in a fixed order: the second kernel version of every parameter
// gradient that sums over the batch (under --fast-kernels): the bias gradient (layers/matmul.cuh),
// LayerNorm's weight and bias (layers/layernorm.cuh), the position embedding and, over the rows
// of each token, the token embedding (layers/embedding.cuh), the ViT's CLS token and position
// embedding (layers/patch_embedding.cuh).
//
// What it teaches. A parameter's gradient sums over every row of the batch: dbias[o] =
// sum_n dout[n,o]. Kernel 1 gives each column one thread that walks all N rows: for a layer of
// 256 channels that is 256 threads on a GPU that runs over 100,000 at once, each walking
// thousands of rows in turn (--profile marks such a launch "serial"). Here the rows are cut into
// groups of COLUMN_GROUP_ROWS:
//   stage 1: a thread per (group, column) sums its group's rows in order into partials (a
//            layer's own kernel where what is summed differs: dout·xhat for LayerNorm);
//   stage 2: a warp per column: lane l adds the partials of groups l, l+32, l+64, ... in order,
//            then warp_sum's fixed butterfly (offsets 16, 8, 4, 2, 1) adds the 32 lane sums.
// No thread walks more than 32 rows, or groups/32 partials, and every addition happens in the
// same order at every run, so the sums are the same bits each time (atomicAdd into one total
// would make the order, and so the rounding, depend on which thread came first). The bits differ
// from kernel 1's single left-to-right chain within rounding.
#pragma once
#include <stdexcept>
#include <string>
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED

constexpr int COLUMN_GROUP_ROWS = 32;
constexpr int COLUMN_WARPS_PER_BLOCK = BLOCK / WARP;  // stage 2: a warp per column, 8 columns a block

__host__ __device__ inline int column_groups(int N) { return (N + COLUMN_GROUP_ROWS - 1) / COLUMN_GROUP_ROWS; }

// the last row (past the end) of group g's rows
__device__ inline int group_end(int g, int N) {
    return (g + 1) * COLUMN_GROUP_ROWS < N ? (g + 1) * COLUMN_GROUP_ROWS : N;
}

// Device memory for the partial sums between the two stages, at least n floats: one buffer for
// the process (the launches of one stream run in order, so the layers take turns with it). A
// model reserves what its layers need when it is built (column_scratch_reserve), so a training
// step never allocates: a graph capture could not hold a cudaMalloc. A layer called without a
// model (a test) grows it on first use; cudaFree waits for the kernels that used the old one.
inline float* column_scratch(size_t n, bool reserve = false) {
    static float* buffer = nullptr;
    static size_t floats = 0;
    if (n > floats) {
        cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
        cudaCheck(cudaStreamIsCapturing(gpu_stream(), &capture));
        if (capture != cudaStreamCaptureStatusNone)
            throw std::logic_error("column_scratch: " + std::to_string(n) + " floats asked during a graph capture, " +
                                   std::to_string(floats) + " reserved");
        if (buffer) cudaCheck(cudaFree(buffer));
        cudaCheck(cudaMalloc(&buffer, n * sizeof(float)));
        floats = n;
    }
    return reserve ? nullptr : buffer;
}

// at least n floats of column scratch, allocated now (model_build)
inline void column_scratch_reserve(size_t n) { column_scratch(n, true); }

// stage 1 of a plain column sum: thread (group g, column o) sums the group's rows of x
__global__ void column_partials_kernel2(float* __restrict__ partials, const float* __restrict__ x, int N,
                                        int columns, size_t row_stride) {
    // partials (groups, columns), x (N, columns), row n at x + n·row_stride
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)column_groups(N) * columns) return;
    const int o = idx % columns, g = idx / columns, n_end = group_end(g, N);
    float sum = 0;
    for (int n = g * COLUMN_GROUP_ROWS; n < n_end; n++) sum += x[(size_t)n * row_stride + o];
    partials[idx] = sum;
}

// Stage 2's sum, in every lane: sum over groups g in [first, last), in the order above, of
// partials[g·columns + o]; the calling warp's 32 lanes all call it (lane: this thread's)
__device__ inline float warp_column_sum(const float* partials, int first, int last, int columns, int o, int lane) {
    float sum = 0;
    for (int g = first + lane; g < last; g += WARP) sum += partials[(size_t)g * columns + o];
    return warp_sum(sum);
}

// stage 2: out[o] += the sum over every group of partials[g·columns + o]
__global__ void column_partials_sum_kernel2(float* __restrict__ out, const float* __restrict__ partials, int groups,
                                            int columns) {
    // out (columns), partials (groups, columns)
    const int o = (blockIdx.x * blockDim.x + threadIdx.x) / WARP, lane = threadIdx.x % WARP;
    if (o >= columns) return;  // the whole warp: o is the warp's
    const float sum = warp_column_sum(partials, 0, groups, columns, o, lane);
    if (lane == 0) out[o] += sum;
}

// the cost of stage 2 for --profile: each partial read once, each output read and written
inline LaunchCost column_partials_sum_cost(int groups, int columns) {
    return {4.0 * ((double)groups + 2) * columns, (double)groups * columns, (double)((groups + WARP - 1) / WARP)};
}

inline void column_partials_sum(float* out, const float* partials, int groups, int columns) {
    launch_kernel<column_partials_sum_kernel2>(column_partials_sum_cost(groups, columns),
                                               ceil_div(columns, COLUMN_WARPS_PER_BLOCK), BLOCK, 0, out, partials,
                                               groups, columns);
}

// out (columns) += the column sums of x (N, columns; row n at x + n·row_stride, 0: columns), on
// the GPU: both stages
inline void column_sums_gpu(float* out, const float* x, int N, int columns, size_t row_stride = 0) {
    const int groups = column_groups(N);
    float* partials = column_scratch((size_t)groups * columns);
    const LaunchCost cost{4.0 * ((double)N + groups) * columns, (double)N * columns, COLUMN_GROUP_ROWS};
    launch_kernel<column_partials_kernel2>(cost, ceil_div((size_t)groups * columns, BLOCK), BLOCK, 0, partials, x, N,
                                           columns, row_stride ? row_stride : (size_t)columns);
    column_partials_sum(out, partials, groups, columns);
}
