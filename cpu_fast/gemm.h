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
//      contiguous floats, the last panel padded with zeros. One k step reads one such row. (B's
//      own rows, where they run along N, would do without the copy; but rows 512 B or 2 KB apart,
//      as the models' widths make them, fall into a few sets of the L1 cache and push each
//      other out: read so, the products ran a fifth to a third slower on a Zen 4 EPYC held to
//      AVX2.)
//   2. A micro-kernel holds an MR x NR tile of C in registers (MR·NR/lanes vector registers)
//      for a whole block of k (item 4): per k it loads one panel row, broadcasts MR values of
//      A, and does MR·NR multiplies and adds with no memory traffic for C.
//   3. Threads split the tiles, never k, so each output keeps its one chain.
//   4. The linear layers' products (gemm_accumulate) walk k in blocks of GEMM_KC. A tile's block
//      of A (MR x GEMM_KC floats, 12 KB) stays in the L1 cache while the tile meets every panel,
//      whose blocks (N x GEMM_KC floats together) come from L2 or L3, where a whole panel of a
//      weight gradient (K = B·T = 4096 rows, 512 KB at NR 32) came from memory for every tile.
//      A tile's outputs are stored after one block and loaded again for the next: each output's
//      chain still runs k = 0, 1, ..., K-1 in order.
//   5. A is read in place through two strides, so one routine serves the forward pass (A = inp)
//      and both gradients (A = dout for dinp, A = dout^T for dW) without copying the larger
//      operand. Where a tile's A runs across rows in memory (dout^T: each k step a different
//      cache line), its block is first packed into (GEMM_KC, MR), the MR values of a k step side
//      by side, once for all panels; and the blocks of GEMM_A_GROUP tiles at once (pack_a_blocks),
//      whose rows together span whole cache lines of dout.
//   6. While a tile computes, the next tile's rows of A and C are fetched from memory, a share
//      with each panel (prefetch_next_tile): without it, each new tile waited for them, up to a
//      fifth of the time of a product of 4096 rows on a Zen 4 EPYC held to AVX2.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>
#include "layers/device.cuh"     // worth_threads, team_size, team_thread: a thread's share of the tiles

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

// Two tiles, MR rows of C by NR columns, as the vector registers allow:
// - GEMM_MR x GEMM_NR for the linear layers (gemm_accumulate). With AVX-512's 32 registers, 12
//   rows by 32 columns (2 registers a row): 24 accumulators, the panel row's 2 registers, a
//   broadcast and a product. Per k step it loads 2 vectors and broadcasts 12 values for 24
//   multiplies and 24 adds: one broadcast for two multiplies, where 8 by 16 broadcast one for
//   each (docs/speed.md has the two timed). AVX2's 16 registers hold the same shape at half the
//   width, 6 rows by 16 columns: 12 accumulators, 2 for the panel row, 1 broadcast, 1 product;
//   per k step 2 loads and 6 broadcasts for 12 multiplies and 12 adds. (4 by 16, the tile
//   before, left 4 registers idle and fed 8 multiplies from the 2 loads: in the L1 cache it ran
//   at 104 GFLOP/s where 6 by 16 runs at 112, against a mul+add ceiling of about 114 by
//   tools/fma_peak's loop, all timed in CPU seconds on a Zen 4 EPYC held to AVX2.) 16-byte
//   vectors (SSE, NEON): 4 by 8.
// - GEMM_SMALL_MR x GEMM_SMALL_NR = 8 x 16 (AVX-512), 4 x 16 or 4 x 8 for the attention's
//   products of each batch row and head (gemm_accumulate_serial), whose N is T or HS (16 in
//   make run's model): a 32-column tile would compute half its lanes on padding there, and 4
//   rows divide T = 16 where 6 leave a third of a tile idle.
// 8 independent chains or more are enough to hide the latency of the adds.
constexpr int GEMM_NR = VECTOR_BYTES == 64 ? 32 : VECTOR_BYTES == 32 ? 16 : 8;
constexpr int GEMM_MR = VECTOR_BYTES == 64 ? 12 : VECTOR_BYTES == 32 ? 6 : 4;
constexpr int GEMM_SMALL_NR = VECTOR_BYTES >= 32 ? 16 : 8;
constexpr int GEMM_SMALL_MR = VECTOR_BYTES == 64 ? 8 : 4;
// k steps a block of the linear layers' products (item 4 above): a tile's block of A,
// GEMM_MR x GEMM_KC floats, is 12 KB with both AVX-512 (12 x 256) and AVX2 (6 x 512), inside the
// 32-48 KB L1 data cache of current x86 cores beside the panel rows streaming past it. With
// AVX2 a block holds every k of the forward products of the models of make bench (K <= 512):
// each tile's outputs are loaded and stored once, where 256 loaded them twice (the products with
// K = 512 ran a tenth slower, on a Zen 4 EPYC held to AVX2).
constexpr int GEMM_KC = VECTOR_BYTES == 32 ? 512 : 256;
// Tiles whose blocks of A are packed together where A runs across rows (item 5, dout^T): 48 rows,
// 8 tiles with AVX2, 4 with AVX-512, whose values at a k step are 3 whole cache lines of a row of
// dout. Packed a tile at a time, each line, shared by 2 or 3 tiles, was read 2 or 3 times from
// rows 1.5 or 2 KB apart (the wide model of make bench), which few sets of the caches hold: dW fc's
// packing alone (rows 2 KB apart) took 1.34 ms a tile at a time, 0.69 ms 8 at once. The weight
// gradients' products of qkv and fc ran 4-10% faster so at one thread, with AVX2 and with AVX-512
// (proj's, rows 512 B apart, 0-6%; 8 tiles as fast as 3, 16 or 32 slower), on a 2-core Intel Xeon
// of family 6, model 167 (docs/speed.md).
constexpr int GEMM_A_GROUP = 48 / GEMM_MR;

template <int NR>
inline int gemm_panel_count(int N) { return (N + NR - 1) / NR; }

// Packs B (K, N) into panels (ceil(N/NR), K, NR), zero-padded: `panels` holds
// gemm_panel_count<NR>(N)·K·NR floats. One panel per call, so threads can share the packing.
template <int NR, typename F>
void gemm_pack_panel(F* panels, StridedMatrix<F> B, int K, int N, int p) {
    F* panel = panels + (size_t)p * K * NR;
    for (int k = 0; k < K; k++)
        for (int j = 0; j < NR; j++) {
            size_t col = (size_t)p * NR + j;
            panel[(size_t)k * NR + j] = col < (size_t)N ? B(k, col) : F(0);
        }
}

// One vector register of F (GCC's vector extension): VECTOR_BYTES / sizeof(F) lanes; `unaligned`,
// the same vector at any F's address (as the x86 headers' __m256_u), read and written straight
// from and to a register. (A memcpy into the accumulators became, for x86-64-v3, 16-byte copies
// through the stack read back 32 bytes at a time: a stall at every tile.)
template <typename F>
struct VectorOf;
template <>
struct VectorOf<float> {
    typedef float type __attribute__((vector_size(VECTOR_BYTES)));
    typedef float unaligned __attribute__((vector_size(VECTOR_BYTES), aligned(alignof(float)), may_alias));
};
template <>
struct VectorOf<double> {  // the finite-difference tests run the layers in double
    typedef double type __attribute__((vector_size(VECTOR_BYTES)));
    typedef double unaligned __attribute__((vector_size(VECTOR_BYTES), aligned(alignof(double)), may_alias));
};

// The micro-kernel: c (MR, NR) with row stride ldc, c = c_in + A's rows a_rows[0..MR) times the
// panel (K, NR), where c_in (MR, NR) has row stride ldc_in: c itself to accumulate, or one row
// read MR times (ldc_in 0) to start every row from it. a_rows[i] + k·a_k is A[i, k]. The
// accumulators, MR rows of NR lanes in V registers each, stay in registers for all k; each lane
// is one output's chain along k. The compiler unrolls the k loop 4 steps a turn (the pragma): the
// loop's own count, compare and branch then come once for 4 steps' multiplies and adds, whose
// ports they share. With AVX2 on a 2-core Intel Xeon (family 6, model 167) the wide model's
// products ran 5-12% faster so, the AVX-512 tile (4 times a step's arithmetic) -1 to +3%. (Written
// out by hand, as a lambda called 4 times, the accumulators left the registers: a third slower.)
template <int MR, int NR, typename F>
inline void gemm_micro_kernel(F* c, size_t ldc, const F* c_in, size_t ldc_in, const F* const* a_rows, size_t a_k,
                              const F* panel, int K) {
    using Vec = typename VectorOf<F>::type;
    constexpr int LANES = VECTOR_BYTES / sizeof(F), V = NR / LANES;
    using Unaligned = typename VectorOf<F>::unaligned;
    Vec acc[MR][V];
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < V; v++) acc[i][v] = *(const Unaligned*)(c_in + i * ldc_in + v * LANES);
    #pragma GCC unroll 4
    for (int k = 0; k < K; k++) {
        Vec b[V];  // B[k, this panel's NR columns]
        for (int v = 0; v < V; v++) b[v] = *(const Unaligned*)(panel + (size_t)k * NR + v * LANES);
        for (int i = 0; i < MR; i++) {
            const F a = a_rows[i][k * a_k];
            for (int v = 0; v < V; v++) acc[i][v] += a * b[v];
        }
    }
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < V; v++) *(Unaligned*)(c + i * ldc + v * LANES) = acc[i][v];
}

// One tile of C (M, N): rows t·MR .. +MR, panel p's columns, += the tile's rows of A times panel
// p, over the k steps k0 .. k0+kc, where a_tile (MR, kc) is A's block: a_tile(i, k) = A[t·MR + i,
// k0 + k]. With start_row (N), the tile is first set to it (each row a copy).
template <int MR, int NR, typename F>
void gemm_tile(F* C, size_t ldc, StridedMatrix<F> a_tile, const F* panels, int M, int N, int K, int p, int t,
               int k0, int kc, const F* start_row = nullptr) {
    const int row0 = t * MR, col0 = p * NR;
    const int rows = std::min(MR, M - row0), cols = std::min(NR, N - col0);
    const F* a_rows[MR];  // a tile's missing rows repeat its last row: computed, never stored
    for (int i = 0; i < MR; i++) a_rows[i] = &a_tile(std::min(i, rows - 1), 0);
    const F* panel = panels + ((size_t)p * K + k0) * NR;
    F* c = C + (size_t)row0 * ldc + col0;
    const F* c_in = start_row ? start_row + col0 : c;
    const size_t ldc_in = start_row ? 0 : ldc;
    if (rows == MR && cols == NR)
        return gemm_micro_kernel<MR, NR>(c, ldc, c_in, ldc_in, a_rows, a_tile.col_stride, panel, kc);
    // An edge tile runs on a full-size copy of itself, its lanes past the edge 0. The copies run
    // over every lane of a row, the ones past the edge left out by a condition, which the compiler
    // turns into masked vector loads and stores. Copies of `cols` floats, as first written, became
    // string instructions (rep movs, rep stos), slow to start for so few bytes: at T 50 (the ViT,
    // where a third of the attention's tiles are edges) they held near half of this function's own
    // time, outside the micro-kernel, and the ViT's step ran 4-5% slower.
    F edge[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) edge[i][j] = i < rows && j < cols ? c_in[i * ldc_in + j] : F(0);
    gemm_micro_kernel<MR, NR>(&edge[0][0], NR, &edge[0][0], NR, a_rows, a_tile.col_stride, panel, kc);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < NR; j++)
            if (j < cols) c[i * ldc + j] = edge[i][j];
}

// Item 5: the blocks of A of `tiles` tiles from t on, k steps k0 .. k0+kc, packed into `room`
// (tiles, kc, MR): room[(j·kc + k)·MR + i] = A[(t+j)·MR + i, k0 + k], rows past M as the last one.
// Each k step reads the tiles' values together, side by side in memory where A is dout^T.
template <int MR, typename F>
void pack_a_blocks(StridedMatrix<F> A, int M, int t, int tiles, int k0, int kc, F* room) {
    for (int k = 0; k < kc; k++)
        for (int j = 0; j < tiles; j++) {
            const int row0 = (t + j) * MR, rows = std::min(MR, M - row0);
            F* step = room + ((size_t)j * kc + k) * MR;  // tile t+j's MR values of k step k0 + k
            if (rows == MR && A.row_stride == 1)        // side by side in A too (dout^T): one copy
                memcpy(step, &A((size_t)row0, (size_t)k0 + k), MR * sizeof(F));
            else
                for (int i = 0; i < MR; i++) step[i] = A((size_t)row0 + std::min(i, rows - 1), (size_t)k0 + k);
        }
}

// Tile t's block of A, k steps k0 .. k0+kc, as gemm_tile reads it: A itself where a row runs along
// k in memory; else the j-th block packed in `room` by pack_a_blocks.
template <int MR, typename F>
StridedMatrix<F> tile_a_block(StridedMatrix<F> A, int t, int k0, int kc, const F* room, int j) {
    if (A.col_stride == 1) return {&A((size_t)t * MR, (size_t)k0), A.row_stride, 1};
    return {room + (size_t)j * kc * MR, 1, MR};
}

// Item 6: asks the memory for the share `part` (of `parts`) of what tile t + 1 will read first,
// while tile t computes: its outputs in panel `part` (the tile's MR rows, NR columns) and, where
// A is read in place, every parts-th cache line of its block of A, k0 .. k0+kc. A prefetch is a
// hint: it never faults and changes no value.
template <int MR, int NR, typename F>
void prefetch_next_tile(const F* C, size_t ldc, StridedMatrix<F> A, int M, int N, int t, int k0, int kc, int part,
                        int parts) {
    constexpr int LINE = 64 / sizeof(F);  // elements in a 64-byte cache line
    const int row0 = (t + 1) * MR, rows = std::min(MR, M - row0);
    for (int i = 0; i < rows; i++)
        for (int j = part * NR; j < std::min(N, part * NR + NR); j += LINE)
            __builtin_prefetch(C + (size_t)(row0 + i) * ldc + j, 1);
    if (A.col_stride != 1) return;  // a packed block (dout^T, pack_a_blocks) is read by the packing
    for (int i = 0; i < rows; i++)    // a row's block runs along k: a line every LINE k steps
        for (int k = part * LINE; k < kc; k += parts * LINE) __builtin_prefetch(&A((size_t)row0 + i, (size_t)k0 + k));
}

// C (M, N), row stride ldc, += A (M, K) · B (K, N), every output summed along k in order; on
// the calling thread alone, in the small tiles, packing into `panels` (resized as needed): for
// callers that run many small products side by side (the attention of each batch row and head).
template <typename F>
void gemm_accumulate_serial(F* C, size_t ldc, StridedMatrix<F> A, StridedMatrix<F> B, int M, int N, int K,
                            std::vector<F>& panels) {
    constexpr int MR = GEMM_SMALL_MR, NR = GEMM_SMALL_NR;
    const int num_panels = gemm_panel_count<NR>(N), row_tiles = (M + MR - 1) / MR;
    panels.resize((size_t)num_panels * K * NR);
    for (int p = 0; p < num_panels; p++) gemm_pack_panel<NR>(panels.data(), B, K, N, p);
    for (int p = 0; p < num_panels; p++)
        for (int t = 0; t < row_tiles; t++) {
            const StridedMatrix<F> a_tile = {&A((size_t)t * MR, 0), A.row_stride, A.col_stride};
            gemm_tile<MR, NR>(C, ldc, a_tile, panels.data(), M, N, K, p, t, 0, K);
        }
}

// The same for the linear layers, in the large tiles: the OpenMP threads pack B's panels, then
// each takes a contiguous share of the rows of tiles and walks k in blocks of GEMM_KC, each block
// across its rows and every panel. A thread's outputs are its own for the whole sum, so nothing
// waits between blocks (a barrier wakes sleeping threads, tens of µs each) and every output's
// chain runs in k order, whatever the thread count. With start_row (N), C = start_row + A · B, each
// row's chains starting from it (the forward pass's bias), so C is written once, not filled first.
template <typename F>
void gemm_accumulate(F* C, size_t ldc, StridedMatrix<F> A, StridedMatrix<F> B, int M, int N, int K,
                     const F* start_row = nullptr) {
    constexpr int MR = GEMM_MR, NR = GEMM_NR;
    const int num_panels = gemm_panel_count<NR>(N), row_tiles = (M + MR - 1) / MR;
    // not cleared first (new F[], not a vector): the packing writes every float, the padding too.
    // (The clearing was 0.7% of the wide model's step at one thread, on an Intel Xeon 6/167: perf.)
    std::unique_ptr<F[]> panel_memory(new F[(size_t)num_panels * K * NR]);
    F* panels = panel_memory.get();
    #pragma omp parallel if (worth_threads((size_t)M * N * K))
    {
        #pragma omp for schedule(static)
        for (int p = 0; p < num_panels; p++) gemm_pack_panel<NR>(panels, B, K, N, p);
        const int threads = team_size(), me = team_thread();
        const int first = row_tiles * me / threads, end = row_tiles * (me + 1) / threads;
        const bool packs_a = A.col_stride != 1;  // item 5: A runs across rows (dout^T)
        // this thread's packed blocks of A, where A is packed; not cleared (pack_a_blocks writes them)
        std::unique_ptr<F[]> a_room(packs_a ? new F[(size_t)GEMM_A_GROUP * GEMM_KC * MR] : nullptr);
        for (int k0 = 0; k0 < K; k0 += GEMM_KC) {
            const int kc = std::min(GEMM_KC, K - k0);
            for (int t = first; t < end; t++) {
                const int j = (t - first) % GEMM_A_GROUP;  // t's place in its group of tiles
                if (packs_a && j == 0)
                    pack_a_blocks<MR>(A, M, t, std::min(GEMM_A_GROUP, end - t), k0, kc, a_room.get());
                const StridedMatrix<F> a_tile = tile_a_block<MR>(A, t, k0, kc, a_room.get(), j);
                for (int p = 0; p < num_panels; p++) {
                    if (t + 1 < end) prefetch_next_tile<MR, NR>(C, ldc, A, M, N, t, k0, kc, p, num_panels);
                    gemm_tile<MR, NR>(C, ldc, a_tile, (const F*)panels, M, N, K, p, t, k0, kc,
                                      k0 == 0 ? start_row : nullptr);
                }
            }
        }
    }
}
