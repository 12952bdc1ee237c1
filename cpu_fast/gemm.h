// cpu_fast/gemm.h: the CPU matrix product under the linear layer, C (M,N) += A (M,K) · B (K,N),
// fast, and with the very bits of the plain loop it replaces:
//   for each i, j:  for k = 0, 1, ..., K-1 in this order:  C[i,j] += A[i,k] * B[k,j]
//
// Why the bits cannot move. Every output C[i,j] is one chain of K multiply-then-add steps in k
// order, run by one thread. The vector lanes lie across outputs (j), never along k, so no
// partial sums are ever combined: the vector width (SSE, AVX2, AVX-512, NEON) and the thread count
// change which outputs run side by side, not how any one is summed. The build compiles host code
// with -ffp-contract=off (Makefile): a multiply and an add each round, as written, on every
// CPU; fused multiply-adds would round once and exist on some CPUs only.
//
// Why it is fast (the plain loop reaches a few GFLOP/s on these tiny layers):
//   1. B is packed into panels of NR columns: panel p is B[:, p·NR .. p·NR+NR) as K rows of NR
//      contiguous floats, the last panel padded with zeros. One k step reads one such row.
//   2. A micro-kernel holds an MR x NR tile of C in registers (MR·NR/lanes vector registers)
//      for the whole k loop: per k it loads one panel row, broadcasts MR values of A, and does
//      MR·NR multiplies and adds with no memory traffic for C.
//   3. Threads split the tiles, never k, so each output keeps its one chain.
// A is read in place through two strides, so one routine serves the forward pass (A = inp) and
// both gradients (A = dout for dinp, A = dout^T for dW) without copying the larger operand.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>
#include "layers/device.cuh"     // worth_threads

// A matrix read through strides: element (r, c) is data[r·row_stride + c·col_stride]. The three
// products of a linear layer read their operands as such views (cpu_fast/matmul.h).
template <typename F>
struct StridedMatrix {
    const F* data;
    size_t row_stride, col_stride;
    const F& operator()(size_t r, size_t c) const { return data[r * row_stride + c * col_stride]; }
};

// The machine's vector register, in bytes, as the build's -march gives it: the compiler maps the
// vector type below onto exactly one register (16 bytes: x86-64's SSE, or ARM64's NEON).
#if defined(__AVX512F__)
constexpr int VECTOR_BYTES = 64;
#elif defined(__AVX__)
constexpr int VECTOR_BYTES = 32;
#else
constexpr int VECTOR_BYTES = 16;
#endif

// The tile: MR rows of C by NR = 16 columns (one AVX-512 register of floats, two AVX2 ones).
// The accumulators take 8 vector registers, half of AVX2's 16 and a quarter of AVX-512's 32,
// which leaves room for the panel row and the broadcasts; 8 independent chains are enough to
// hide the latency of the adds. 16 columns also fit the attention's products (T and HS of 16).
constexpr int GEMM_NR = VECTOR_BYTES >= 32 ? 16 : 8;
constexpr int GEMM_MR = VECTOR_BYTES == 64 ? 8 : 4;

inline int gemm_panel_count(int N) { return (N + GEMM_NR - 1) / GEMM_NR; }

// Packs B (K, N) into panels (ceil(N/NR), K, NR), zero-padded: `panels` holds
// gemm_panel_count(N)·K·NR floats. One panel per call, so threads can share the packing.
template <typename F>
void gemm_pack_panel(F* panels, StridedMatrix<F> B, int K, int N, int p) {
    F* panel = panels + (size_t)p * K * GEMM_NR;
    for (int k = 0; k < K; k++)
        for (int j = 0; j < GEMM_NR; j++) {
            size_t col = (size_t)p * GEMM_NR + j;
            panel[(size_t)k * GEMM_NR + j] = col < (size_t)N ? B(k, col) : F(0);
        }
}

// One vector register of F (GCC's vector extension): VECTOR_BYTES / sizeof(F) lanes
template <typename F>
struct VectorOf;
template <>
struct VectorOf<float> {
    typedef float type __attribute__((vector_size(VECTOR_BYTES)));
};
template <>
struct VectorOf<double> {  // the finite-difference tests run the layers in double
    typedef double type __attribute__((vector_size(VECTOR_BYTES)));
};

// The micro-kernel: c (MR, NR) with row stride ldc, c += A's rows a_rows[0..MR) times the
// panel (K, NR). a_rows[i] + k·a_k is A[i, k]. The accumulators, MR rows of NR lanes in V
// registers each, stay in registers for all k; each lane is one output's chain along k.
template <typename F>
inline void gemm_micro_kernel(F* c, size_t ldc, const F* const* a_rows, size_t a_k, const F* panel, int K) {
    using Vec = typename VectorOf<F>::type;
    constexpr int LANES = VECTOR_BYTES / sizeof(F), V = GEMM_NR / LANES;
    Vec acc[GEMM_MR][V];
    for (int i = 0; i < GEMM_MR; i++)
        for (int v = 0; v < V; v++) memcpy(&acc[i][v], c + i * ldc + v * LANES, sizeof(Vec));
    for (int k = 0; k < K; k++) {
        Vec b[V];  // B[k, this panel's NR columns]
        for (int v = 0; v < V; v++) memcpy(&b[v], panel + (size_t)k * GEMM_NR + v * LANES, sizeof(Vec));
        for (int i = 0; i < GEMM_MR; i++) {
            const F a = a_rows[i][k * a_k];
            for (int v = 0; v < V; v++) acc[i][v] += a * b[v];
        }
    }
    for (int i = 0; i < GEMM_MR; i++)
        for (int v = 0; v < V; v++) memcpy(c + i * ldc + v * LANES, &acc[i][v], sizeof(Vec));
}

// One tile of C (M, N): rows t·MR .. +MR, panel p's columns, += A (M, K) · panel p.
template <typename F>
void gemm_tile(F* C, size_t ldc, StridedMatrix<F> A, const F* panels, int M, int N, int K, int p, int t) {
    const int row0 = t * GEMM_MR, col0 = p * GEMM_NR;
    const int rows = std::min(GEMM_MR, M - row0), cols = std::min(GEMM_NR, N - col0);
    const F* a_rows[GEMM_MR];  // a tile's missing rows repeat its last row: computed, never stored
    for (int i = 0; i < GEMM_MR; i++) a_rows[i] = &A((size_t)row0 + std::min(i, rows - 1), 0);
    const F* panel = panels + (size_t)p * K * GEMM_NR;
    F* c = C + (size_t)row0 * ldc + col0;
    if (rows == GEMM_MR && cols == GEMM_NR) return gemm_micro_kernel(c, ldc, a_rows, A.col_stride, panel, K);
    F edge[GEMM_MR][GEMM_NR] = {};  // an edge tile runs on a full-size copy of itself
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) edge[i][j] = c[i * ldc + j];
    gemm_micro_kernel(&edge[0][0], GEMM_NR, a_rows, A.col_stride, panel, K);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) c[i * ldc + j] = edge[i][j];
}

// C (M, N), row stride ldc, += A (M, K) · B (K, N), every output summed along k in order; on
// the calling thread alone, packing into `panels` (resized as needed): for callers that run
// many small products side by side (the attention of each batch row and head).
template <typename F>
void gemm_accumulate_serial(F* C, size_t ldc, StridedMatrix<F> A, StridedMatrix<F> B, int M, int N, int K,
                            std::vector<F>& panels) {
    const int num_panels = gemm_panel_count(N), row_tiles = (M + GEMM_MR - 1) / GEMM_MR;
    panels.resize((size_t)num_panels * K * GEMM_NR);
    for (int p = 0; p < num_panels; p++) gemm_pack_panel(panels.data(), B, K, N, p);
    for (int p = 0; p < num_panels; p++)
        for (int t = 0; t < row_tiles; t++) gemm_tile(C, ldc, A, panels.data(), M, N, K, p, t);
}

// The same, with the OpenMP threads splitting the panels, then the tiles.
template <typename F>
void gemm_accumulate(F* C, size_t ldc, StridedMatrix<F> A, StridedMatrix<F> B, int M, int N, int K) {
    const int num_panels = gemm_panel_count(N), row_tiles = (M + GEMM_MR - 1) / GEMM_MR;
    std::vector<F> panel_memory((size_t)num_panels * K * GEMM_NR);
    F* panels = panel_memory.data();
    #pragma omp parallel for if (worth_threads((size_t)K * N))
    for (int p = 0; p < num_panels; p++) gemm_pack_panel(panels, B, K, N, p);
    #pragma omp parallel for collapse(2) schedule(static) if (worth_threads((size_t)M * N * K))
    for (int p = 0; p < num_panels; p++)
        for (int t = 0; t < row_tiles; t++) gemm_tile(C, ldc, A, (const F*)panels, M, N, K, p, t);
}
