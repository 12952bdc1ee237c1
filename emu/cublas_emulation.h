// emu/cublas_emulation.h: the cuBLAS calls this program makes, on the CPU, for the CUDA
// emulation (emu/cuda_emulation.h). Written from cuBLAS's documented column-major semantics,
// not from the row-major reasoning in layers/matmul.cuh, so that the emulated GPU tests check
// that reasoning independently:
//   C = alpha op(A) op(B) + beta C        op(X) = X (CUBLAS_OP_N) or X^T (CUBLAS_OP_T)
//   op(A) is m x k, op(B) k x n, C m x n; element (i, j) of a matrix with leading dimension ld
//   sits at [i + j ld]; A is stored (op N) m x k with lda >= m, or (op T) k x m with lda >= k;
//   B likewise with ldb; ldc >= m. beta = 0 means C is not read (it may hold NaN).
// The strided-batched form repeats this batchCount times, A, B and C advancing by their
// strides. Bad sizes return CUBLAS_STATUS_INVALID_VALUE and an operand that is not device
// memory, or reaches past its cudaMalloc block, CUBLAS_STATUS_EXECUTION_FAILED, each with one
// line on stderr. Sums run over k in order, in float. The math mode (TF32) is recorded, not
// emulated: the products are fp32. A call is work on the handle's stream (cublasSetStream):
// queued, to run when the host waits, or recorded while that stream captures a graph
// (emu/streams.h); the operands are checked and the host scalars read at the call.
#pragma once
#include <string>
#include <vector>
#include "emu/device_memory.h"  // emu::is_device_memory
#include "emu/runtime.h"        // emu::hex, emu::say
#include "emu/streams.h"        // emu::stream_work: a call runs on its handle's stream

// cuBLAS's statuses, with the numbers of cublas_api.h; the emulation returns SUCCESS, NOT_INITIALIZED,
// INVALID_VALUE, EXECUTION_FAILED and (cuBLASLt's refusals, emu/cublaslt_emulation.h) NOT_SUPPORTED
enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
    CUBLAS_STATUS_LICENSE_ERROR = 16,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum cublasMath_t {
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_TENSOR_OP_MATH = 1,
    CUBLAS_PEDANTIC_MATH = 2,
    CUBLAS_TF32_TENSOR_OP_MATH = 3,
};

struct cublasContext {
    cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
    cudaStream_t stream = nullptr;  // where its calls run (cublasSetStream; null: the legacy default stream)
    void* workspace = nullptr;      // cublasSetWorkspace's (the emulation needs none: recorded, not used)
    size_t workspace_bytes = 0;
};
typedef cublasContext* cublasHandle_t;

// A status's name, and the words the library gives it (libcublas 13.0's cublasGetStatusString, read
// on this project's development machine), for gpu/cuda.cuh's error line
inline const char* cublasGetStatusName(cublasStatus_t status) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "unrecognized status";
}

inline const char* cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS: return "success";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
        case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
        case CUBLAS_STATUS_INVALID_VALUE: return "an unsupported value or parameter was passed to the function";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "the function requires an architectural feature absent from the device";
        case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "the function failed to launch on the GPU";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "the requested functionality is not supported";
        case CUBLAS_STATUS_LICENSE_ERROR: return "the license check failed";
    }
    return "unrecognized status";
}

inline cublasStatus_t cublasCreate(cublasHandle_t* handle) {
    *handle = new cublasContext();
    return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->math_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (bytes > 0 && !emu::is_device_memory(workspace, bytes)) return CUBLAS_STATUS_INVALID_VALUE;
    handle->workspace = workspace;
    handle->workspace_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

namespace emu {

inline cublasStatus_t cublas_failure(cublasStatus_t status, const std::string& what) {
    say("cublasSgemm: " + what);  // cuBLAS returns its status; cudaGetLastError does not see it
    return status;
}

// element (i, j) of op(X), X stored column-major with leading dimension ld
inline float op_element(const float* X, int ld, cublasOperation_t op, long long i, long long j) {
    return op == CUBLAS_OP_N ? X[i + j * ld] : X[j + i * ld];
}

}  // namespace emu

inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                                cublasOperation_t transb, int m, int n, int k, const float* alpha,
                                                const float* A, int lda, long long strideA, const float* B, int ldb,
                                                long long strideB, const float* beta, float* C, int ldc,
                                                long long strideC, int batchCount) {
    using emu::cublas_failure;
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (transa > CUBLAS_OP_C || transb > CUBLAS_OP_C || m < 0 || n < 0 || k < 0 || batchCount < 0)
        return cublas_failure(CUBLAS_STATUS_INVALID_VALUE, "a negative size or an unknown operation");
    const int a_rows = transa == CUBLAS_OP_N ? m : k, a_cols = transa == CUBLAS_OP_N ? k : m;
    const int b_rows = transb == CUBLAS_OP_N ? k : n, b_cols = transb == CUBLAS_OP_N ? n : k;
    if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m))
        return cublas_failure(CUBLAS_STATUS_INVALID_VALUE,
                              "lda " + std::to_string(lda) + ", ldb " + std::to_string(ldb) + ", ldc " +
                                  std::to_string(ldc) + " below the rows they hold (" + std::to_string(a_rows) +
                                  ", " + std::to_string(b_rows) + ", " + std::to_string(m) + ")");
    if (m == 0 || n == 0 || batchCount == 0) return CUBLAS_STATUS_SUCCESS;
    // each operand, all its batches, must lie in device memory
    auto reach = [](int rows, int cols, int ld, long long stride, int batches) {  // in floats
        return (rows == 0 || cols == 0) ? 0 : (batches - 1) * stride + (long long)(cols - 1) * ld + rows;
    };
    const struct { const char* name; const float* p; long long floats; } operands[] = {
        {"A", A, reach(a_rows, a_cols, lda, strideA, batchCount)},
        {"B", B, reach(b_rows, b_cols, ldb, strideB, batchCount)},
        {"C", C, reach(m, n, ldc, strideC, batchCount)}};
    for (const auto& o : operands)
        if (o.floats > 0 && !emu::is_device_memory(o.p, (size_t)o.floats * sizeof(float)))
            return cublas_failure(CUBLAS_STATUS_EXECUTION_FAILED,
                                  std::string(o.name) + " at " + emu::hex(o.p) + " is not device memory, or its " +
                                      std::to_string(o.floats) + " floats pass the end of its cudaMalloc block");
    // the product itself is work on the handle's stream: run now, or recorded by a capture, with
    // the scalars read now (host pointers, read at the call, as cuBLAS does)
    const float alpha_value = *alpha, beta_value = *beta;
    const cudaError_t queued = emu::stream_work(handle->stream, [=] {
        std::vector<float> column(m);  // one column of op(A) op(B), summed over k in order
        for (int batch = 0; batch < batchCount; batch++) {
            const float* a = A + batch * strideA;
            const float* b = B + batch * strideB;
            float* c = C + batch * strideC;
            for (int j = 0; j < n; j++) {
                std::fill(column.begin(), column.end(), 0.0f);
                for (int p = 0; p < k; p++) {
                    const float b_pj = emu::op_element(b, ldb, transb, p, j);
                    for (int i = 0; i < m; i++) column[i] += emu::op_element(a, lda, transa, i, p) * b_pj;
                }
                for (int i = 0; i < m; i++) {
                    float& out = c[i + (long long)j * ldc];
                    out = alpha_value * column[i] + (beta_value == 0.0f ? 0.0f : beta_value * out);
                }
            }
        }
    }, "cublasSgemm");
    return queued == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

inline cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                  int n, int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                                  const float* beta, float* C, int ldc) {
    return cublasSgemmStridedBatched(handle, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}
