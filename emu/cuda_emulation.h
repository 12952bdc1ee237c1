// emu/cuda_emulation.h: the subset of CUDA this program uses, run on the CPU, so that every
// kernel can be tested, and stepped through in gdb, on a machine without a GPU. The host
// compiler builds the project's .cuh files against this header in place of <cuda_runtime.h>
// when MASKPRIOR_CUDA_EMULATION is defined (make maskprior-emulated, make test-emulated).
//
// It refuses what a GPU refuses, or a program that would fail on a GPU passes here:
//   - device memory out of the host's reach (emu/device_memory.h): cudaMalloc's blocks live in
//     an arena the host cannot read or write, opened only while the emulation runs a kernel, a
//     copy, a memset or a cuBLAS call; a host line that reads or writes device memory through
//     its pointer stops the program with one line naming the address and the block;
//   - work that runs later (emu/streams.h): a launch, an asynchronous copy, a memset, a cuBLAS
//     call is queued and runs only when the host waits for it, so a result read without a wait,
//     or a pinned buffer refilled before its copy ran, shows; copies and memsets wait, or not,
//     as CUDA's documentation says (emu/memory_calls.h); events are queue items;
//   - what CUDA refuses while a stream captures a graph (a synchronous call, an allocation, work
//     on the legacy default stream) invalidates the capture.
// What it gives:
//   - the keywords (__global__, __device__, __host__, __shared__, __forceinline__) and the
//     built-in variables threadIdx, blockIdx, blockDim, gridDim, warpSize;
//   - execution with CUDA's meaning: the blocks of a launch run one after another; within a
//     block every CUDA thread is a fiber (Boost.Context) with a stack of its own, so
//     __syncthreads is a real barrier, a `__shared__` variable is one per block, and the warp
//     functions (__shfl_*_sync, __ballot_sync, __any_sync, __all_sync, __syncwarp) exchange
//     values among the 32 lanes of a warp (emu/warp_functions.h). Between two waits, the
//     threads of a block run one at a time, in the order MASKPRIOR_EMU_SCHEDULE gives (index,
//     reverse or a seeded shuffle); built with -fsanitize=thread, each is a ThreadSanitizer
//     fiber, so that a race between two threads of a block is reported with both named
//     (emu/threads.h);
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
//   - the runtime calls: errors and the device (emu/runtime.h), memory (emu/memory_calls.h),
//     streams, events, capture and graphs (emu/streams.h);
//   - cuBLAS's and cuBLASLt's calls (emu/cublas_emulation.h, emu/cublaslt_emulation.h).
// What it cannot show (docs/emulation.md lists each with what on a GPU would catch it): speed,
// coalescing, occupancy, bank conflicts, races between blocks and the GPU's weak memory ordering
// (here blocks run one after another and every write is seen at once by every later reader),
// atomics (the program uses none), the device's own math (FMA contraction, its expf and log1pf),
// registers and launch bounds, and tensor-core instructions. A static `__shared__` array keeps
// its values from one block to the next (blocks share one copy, in turn) rather than starting
// undefined; memory from DYNAMIC_SHARED starts as NaN in every block. `make gpu-check` on a real
// GPU stays the final word.
#pragma once
#include "emu/runtime.h"        // the keywords, types, built-in variables, errors, the device
#include "emu/device_memory.h"  // device memory: the arena out of the host's reach, guards, the fault handler
#include "emu/streams.h"        // streams and events (work that runs later), capture and graphs
#include "emu/memory_calls.h"   // cudaMalloc, cudaFree, cudaMallocHost, copies and memsets
#include "emu/threads.h"        // blocks of fibers: the launch, a thread waiting for others
#include "emu/warp_functions.h" // what kernels call: __syncthreads, the warp functions, math
