// emu/cuda_emulation.h: the subset of CUDA this program uses, run on the CPU, so that every
// kernel can be tested, and stepped through in gdb, on a machine without a GPU. The host
// compiler builds the project's .cuh files against this header in place of <cuda_runtime.h>
// when MASKPRIOR_CUDA_EMULATION is defined (make maskprior-emulated, make test-emulated).
//
// What it gives:
//   - the keywords (__global__, __device__, __host__, __shared__, __forceinline__) and the
//     built-in variables threadIdx, blockIdx, blockDim, gridDim, warpSize;
//   - execution with CUDA's meaning: the blocks of a launch run one after another; within a
//     block every CUDA thread is a fiber (Boost.Context) with a stack of its own, so
//     __syncthreads is a real barrier, a `__shared__` variable is one per block, and the warp
//     functions (__shfl_*_sync, __ballot_sync, __any_sync, __all_sync, __syncwarp) exchange
//     values among the 32 lanes of a warp. Between two waits, the threads of a block run one
//     at a time, in the order MASKPRIOR_EMU_SCHEDULE gives (index, reverse or a seeded
//     shuffle); built with -fsanitize=thread, each is a ThreadSanitizer fiber, so that a race
//     between two threads of a block is reported with both named (emu/threads.h);
//   - checks a GPU does not make, each one line on stderr and an error from
//     cudaGetLastError: the launch configuration, every pointer argument (null or inside a
//     cudaMalloc block: a host pointer handed to a kernel is caught), writes past either end
//     of a cudaMalloc block (64 guard bytes on each side, checked after every launch; they
//     hold signalling NaNs with a pattern of their block's own, so a read of them gives NaN
//     and no copy or arithmetic writes them back unchanged), a
//     __syncthreads or a warp function that not every thread it waits for reaches, and
//     cudaMemcpy / cudaMemset whose pointers do not match their direction;
//   - fresh cudaMalloc memory holds 0xFF bytes, a NaN as a float: a kernel that reads what
//     nobody wrote gets NaN, which the tests never let pass;
//   - the runtime calls: cudaMalloc, cudaFree, cudaMemcpy, cudaMemset, cudaGetLastError,
//     cudaPeekAtLastError, cudaDeviceSynchronize, cudaGetDeviceCount, cudaSetDevice,
//     cudaGetDeviceProperties, cudaGetErrorString, events (host wall-clock time), and streams,
//     pinned memory, asynchronous copies, stream capture and graphs (emu/streams.h: work runs in
//     the call unless its stream captures, which records it; what CUDA refuses during a capture
//     is refused);
//   - cuBLAS's and cuBLASLt's calls (emu/cublas_emulation.h, emu/cublaslt_emulation.h).
// What it cannot show: speed, coalescing, occupancy, bank conflicts, the GPU's weak memory
// ordering (here every write is seen at once by every later reader), atomics (the program
// uses none), the overlap of a stream's work with the host, and tensor-core instructions. A static `__shared__` array keeps its
// values from one block to the next (blocks share one copy, in turn) rather than starting
// undefined; memory from DYNAMIC_SHARED starts as NaN in every block. `make gpu-check` on a
// real GPU stays the final word.
#pragma once
#include "emu/runtime.h"  // the keywords, types, built-in variables, device memory and the runtime calls
#include "emu/streams.h"  // streams, stream capture and graphs
#include "emu/threads.h"  // blocks of fibers: the launch, __syncthreads, the warp functions
