// dev/exercises/step6_shared_tiles_exercise.cuh: the kernel course, step 6 of 9, blank: tiles in
// shared memory and the barriers around them, in version 3's backward columns kernel (dk and dv,
// attention/flash.cuh) (dev/exercises/README.md says it in full). Work in a copy, and check it on
// the CUDA emulation (no GPU needed):
//   cp dev/exercises/step6_shared_tiles_exercise.cuh $HOME/step6.cuh
//   make exercise EXERCISE=$HOME/step6.cuh
// (make exercise finds the step in the file's name or, in a copy, in this first line: keep it.)
//
// Step 4's columns kernel: a thread per key column j,
//   dk_j += sum_i dS_ij q_i / sqrt(HS)        dv_j += sum_i A_ij dy_i
// reads every q_i and dy_i from global memory, and so does every other column's thread: T times
// each. Here a block of 128 threads (4 warps) owns 16 neighbouring key columns of one (b, h) and
// walks the queries in tiles of 32: the block copies the tile's q and dy rows (32 x HS each) and
// its dS and A entries (32 rows x the block's 16 columns) into shared memory once, and its 16
// columns all read them from there. Two barriers make that safe, each loop:
//   __syncthreads();   every warp is done reading the last tile: it may be written over
//   (copy the tile: every thread some of it)
//   __syncthreads();   the whole tile is copied: it may be read
//   (each warp reads the tile for its columns)
// Leave out either and some warp reads a tile half old, half new. Warp w owns the block's columns
// 4w .. 4w+3, and lane l their dims d = l, l+32, l+64, l+96 (those < HS), summing in registers;
// dk_j and dv_j are added into dqkv once, after the last tile. When causal, A_ij = dS_ij = 0 for
// i < j: the walk may start at the block's first column.
//
// The launch (the check's, version 3's): a block per 16 key columns of each (b, h), block x =
// (b·NH + h)·tiles + tile (tiles = ceil(T / 16)), ATTENTION_THREADS (128) threads, and
// flash_columns_shared_bytes(HS) of dynamic shared memory: 2·32·HS + 2·32·17 floats, room for the
// q tile (32,HS), the dy tile (32,HS), the dS tile and the A tile (32, 16+1: a row one float longer
// than the 16 it holds, so that the columns of a warp's reads fall on different banks).
// From the project, which this file includes:
//   DYNAMIC_SHARED(float, shared);   float* shared: the block's dynamic shared memory
//   stage_tile(tile, tile_stride, first, stride, rows, valid, HS)   the block's threads copy `rows`
//       vectors of HS floats (vector r at first + r·stride, zeros for r >= valid) into tile, row r
//       at r·tile_stride; every thread of the block calls it
//   FLASH_QUERY_TILE (16), FLASH_KEY_TILE (32), FLASH_ROWS_PER_WARP (4), FLASH_DIMS_PER_LANE (4), WARP
//   head_vector(qkv, s, part, b, t, h) and the rest of step 3's helpers
#pragma once
#include "attention/flash.cuh"  // stage_tile, the FLASH_ constants (attention_backward_columns_kernel3: the answer)

__global__ void attention_backward_columns_tiled_exercise(float* __restrict__ dqkv, const float* __restrict__ dscores,
                                                          const float* __restrict__ dout,
                                                          const float* __restrict__ qkv,
                                                          const float* __restrict__ att, AttentionShape s) {
    // dqkv (B,T,3·NH·HS) dk, dv added (dq untouched); dscores (B,NH,T,T) dS; dout (B,T,NH·HS) dy;
    // qkv (B,T,3·NH·HS); att (B,NH,T,T) A
    // YOUR CODE HERE
}
