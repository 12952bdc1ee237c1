// gpu/stream.cuh: the program's one stream and its one cuBLAS handle, made once per process
// (GPU runs only), so that every launch, copy, memset and cuBLAS call is in order on one stream
// and a training step can be captured as one CUDA graph (gpu/graph.cuh).
#pragma once
#include "gpu/cuda.cuh"  // cudaStream_t, cublasHandle_t, cudaCheck, cublasCheck

// The one stream of the process (GPU runs only), created on first use: every launch, copy,
// memset and cuBLAS call goes on it, in order, so that the host never waits for the GPU except
// where it reads a result, and a whole training step can be captured as one CUDA graph
// (gpu/graph.cuh). A plain cudaStreamCreate stream, so a synchronous call on the legacy
// default stream still waits for it.
inline cudaStream_t gpu_stream() {
    static cudaStream_t stream = nullptr;
    if (!stream) cudaCheck(cudaStreamCreate(&stream));
    return stream;
}

// cuBLAS's workspace, given to it once: a handle without one allocates its own on first use,
// which a graph capture cannot hold. 32 MiB, what NVIDIA recommends for Hopper.
constexpr size_t CUBLAS_WORKSPACE_BYTES = size_t(32) << 20;

// The one cuBLAS handle of the process, created on first use (GPU runs only) with the stream and
// the workspace above, set to the math of the call about to use it: plain fp32 sgemm, or TF32
// tensor cores where the caller's Kernels say tf32 (--tf32).
inline cublasHandle_t cublas_handle(bool tf32) {
    static cublasHandle_t handle = nullptr;
    if (!handle) {
        void* workspace = nullptr;
        cudaCheck(cudaMalloc(&workspace, CUBLAS_WORKSPACE_BYTES));
        cublasCheck(cublasCreate(&handle));
        cublasCheck(cublasSetStream(handle, gpu_stream()));
        cublasCheck(cublasSetWorkspace(handle, workspace, CUBLAS_WORKSPACE_BYTES));
    }
    cublasCheck(cublasSetMathMode(handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    return handle;
}

// Creates the stream and the cuBLAS handle with its workspace now, at set-up: a graph capture
// cannot hold their allocations (the first use of each would otherwise make them).
inline void gpu_setup() {
    gpu_stream();
    cublas_handle(false);
}

