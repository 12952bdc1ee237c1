// emu/cublaslt_emulation.h: the cuBLASLt calls this program makes (matmul version 2,
// layers/matmul_lt.cuh), on the CPU, for the CUDA emulation (emu/cuda_emulation.h). Written from
// NVIDIA's documented semantics (the cuBLAS Library documentation's cuBLASLt API and the comments
// of cublasLt.h), not from the row-major reasoning in layers/matmul_lt.cuh, so that the emulated
// GPU tests check that reasoning independently:
//   D = epilogue(alpha op(A) op(B) + beta C)     op(X) = X (CUBLAS_OP_N) or X^T (CUBLAS_OP_T)
//   every matrix column-major, described by its layout as stored: rows, cols, leading dimension
//   ld >= rows, element (i, j) at [i + j ld]. D and C are m x n (the same rows and cols); A is
//   stored m x k (op N) or k x m (op T), B k x n or n x k. beta = 0: C is not read.
// The epilogues emulated, the ones the program uses (cublasLtEpilogue_t in cublasLt.h):
//   DEFAULT        D = alpha AB + beta C
//   BIAS           + bias[i]: "bias vector length must match matrix D rows ... broadcasted to all
//                  columns and added before applying final postprocessing"
//   GELU_AUX_BIAS  t = alpha AB + beta C + bias[i]; aux = t (the GELU's input, "useful for
//                  training"); D = gelu(t)
//   DGELU_BGRAD    D = (alpha AB + beta C) gelu'(aux); the bias gradient, the sum of D's row i
//                  over its columns, stored (not added) at BIAS_POINTER (m floats)
//   BGRADA         D as DEFAULT; bias[i] = sum over k of op(A)[i, p]: "the number of rows of D,
//                  the reduction happens over the GEMM's k dimension", stored
//   BGRADB         D as DEFAULT; bias[j] = sum over k of op(B)[p, j]: the columns of D, stored
// The aux matrix is m x n with EPILOGUE_AUX_LD, which "must be divisible by 8 and be no less than
// the number of rows in the output matrix". The documentation names the GELU without a formula;
// the emulation computes the tanh approximation, gelu(x) = 0.5 x (1 + tanh(k (x + 0.044715 x^3))),
// k = sqrt(2/pi), with tanhf, and its exact derivative, the form that the frameworks fusing this
// epilogue take it to be (PyTorch's addmm GELU fusion applies gelu(approximate="tanh") wherever it
// cannot use the epilogue).
// Sums run over k in order, in float, the epilogue after; the bias gradients sum in order too.
// The compute type (TF32 or not) is recorded, not emulated: the products are fp32. So is the
// preference (workspace, reduction schemes, alignments): the heuristic returns one algorithm for
// any product the emulation can run, which needs no workspace, unless told otherwise:
//   MASKPRIOR_EMU_CUBLASLT (read once, at the first heuristic call) plays a library that turns
//   the program down, so that its fallback to matmul version 1 (layers/matmul_lt.cuh) runs:
//     ok             (or unset) every product gets an algorithm, and every call runs
//     no-algorithm   the heuristic has none for any product: CUBLAS_STATUS_NOT_SUPPORTED,
//                    returnedAlgoCount 0 ("no heuristic function available for current configuration")
//     not-supported  the heuristic answers, but cublasLtMatmul refuses every call whose descriptor,
//                    layouts, scalars and algorithm are valid with CUBLAS_STATUS_NOT_SUPPORTED ("the
//                    current implementation on the selected device doesn't support the configured
//                    operation"), having run nothing and, during a capture, recorded nothing
//     invalid-value  the heuristic answers CUBLAS_STATUS_INVALID_VALUE, as for a request it takes to
//                    be wrong: not a refusal the program falls back from, but a bug that stops it,
//                    with the status's name (layers/matmul_lt.cuh)
//   None of these says a line: the library says nothing either, and the program's note does.
//   Anything else stops the program with one line on stderr. The GPU tests set it in-process
//   (emu::lt_refusal()).
// A call is work on the stream it is given: queued, to run when the host waits, or recorded while
// that stream captures a graph (emu/streams.h), with the descriptors' values and the host scalars
// read at the call. Bad arguments return CUBLAS_STATUS_INVALID_VALUE and an
// operand that is not device memory, or reaches past its cudaMalloc block,
// CUBLAS_STATUS_EXECUTION_FAILED, each with one line on stderr.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "emu/cublas_emulation.h"  // cublasStatus_t, cublasOperation_t, emu::op_element
#include "emu/device_memory.h"     // emu::is_device_memory
#include "emu/runtime.h"           // emu::hex, emu::say
#include "emu/streams.h"           // emu::stream_work: a call runs on its stream

// ----------------------------------------------------------------------------
// the types (library_types.h and cublasLt.h), with NVIDIA's values

enum cudaDataType_t { CUDA_R_32F = 0 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };

enum cublasLtMatmulDescAttributes_t {
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
};

enum cublasLtEpilogue_t {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 32 | 128 | 4,
    CUBLASLT_EPILOGUE_DGELU_BGRAD = 64 | 128 | 16,
    CUBLASLT_EPILOGUE_BGRADA = 256,
    CUBLASLT_EPILOGUE_BGRADB = 512,
};

enum cublasLtMatmulPreferenceAttributes_t {
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};

enum cublasLtReductionScheme_t {
    CUBLASLT_REDUCTION_SCHEME_NONE = 0,
    CUBLASLT_REDUCTION_SCHEME_INPLACE = 1,
    CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE = 2,
    CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE = 4,
    CUBLASLT_REDUCTION_SCHEME_MASK = 7,
};

struct cublasLtContext {
    int algorithms_given = 0;  // heuristic answers, to number them
};
typedef cublasLtContext* cublasLtHandle_t;

struct cublasLtMatmulDescOpaque_t {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
    uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    void* bias = nullptr;  // the bias (input) or the bias gradient (output)
    void* aux = nullptr;   // the GELU's input: written by GELU_AUX_BIAS, read by DGELU_BGRAD
    int64_t aux_ld = 0;
};
typedef cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;

struct cublasLtMatrixLayoutOpaque_t {
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
};
typedef cublasLtMatrixLayoutOpaque_t* cublasLtMatrixLayout_t;

struct cublasLtMatmulPreferenceOpaque_t {
    uint64_t max_workspace_bytes = 0;
    uint32_t reduction_scheme_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
    uint32_t min_alignment[4] = {256, 256, 256, 256};  // A, B, C, D
};
typedef cublasLtMatmulPreferenceOpaque_t* cublasLtMatmulPreference_t;

struct cublasLtMatmulAlgo_t {
    uint64_t data[8];
};

struct cublasLtMatmulHeuristicResult_t {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
};

// ----------------------------------------------------------------------------
// the handle, the descriptors, the preference

inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
    *handle = new cublasLtContext();
    return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

namespace emu {

inline cublasStatus_t lt_failure(const char* call, cublasStatus_t status, const std::string& what) {
    say(std::string(call) + ": " + what);  // cuBLASLt returns its status; cudaGetLastError does not see it
    return status;
}

// An attribute's value from (buf, size): the documentation's "sizeInBytes doesn't match size of
// internal storage for selected attribute" is CUBLAS_STATUS_INVALID_VALUE
template <typename T>
inline bool lt_read(T* value, const void* buf, size_t size) {
    if (!buf || size != sizeof(T)) return false;
    memcpy(value, buf, sizeof(T));
    return true;
}

}  // namespace emu

inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                               cudaDataType_t scale) {
    if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32 || scale != CUDA_R_32F)
        return emu::lt_failure("cublasLtMatmulDescCreate", CUBLAS_STATUS_INVALID_VALUE,
                               "only fp32 (compute 32F or 32F_FAST_TF32, scale R_32F) is emulated");
    *desc = new cublasLtMatmulDescOpaque_t();
    (*desc)->compute = compute;
    (*desc)->scale = scale;
    return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    delete desc;
    return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                                     const void* buf, size_t size) {
    if (!desc) return CUBLAS_STATUS_NOT_INITIALIZED;
    bool read = false;
    switch (attr) {
        case CUBLASLT_MATMUL_DESC_TRANSA: read = emu::lt_read(&desc->transa, buf, size); break;
        case CUBLASLT_MATMUL_DESC_TRANSB: read = emu::lt_read(&desc->transb, buf, size); break;
        case CUBLASLT_MATMUL_DESC_EPILOGUE: read = emu::lt_read(&desc->epilogue, buf, size); break;
        case CUBLASLT_MATMUL_DESC_BIAS_POINTER: read = emu::lt_read(&desc->bias, buf, size); break;
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: read = emu::lt_read(&desc->aux, buf, size); break;
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: read = emu::lt_read(&desc->aux_ld, buf, size); break;
    }
    if (!read)
        return emu::lt_failure("cublasLtMatmulDescSetAttribute", CUBLAS_STATUS_INVALID_VALUE,
                               "attribute " + std::to_string((int)attr) + ": not emulated, no buffer, or " +
                                   std::to_string(size) + " bytes, not its type's size");
    return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type, uint64_t rows,
                                                 uint64_t cols, int64_t ld) {
    if (type != CUDA_R_32F)
        return emu::lt_failure("cublasLtMatrixLayoutCreate", CUBLAS_STATUS_INVALID_VALUE, "only R_32F is emulated");
    *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    delete layout;
    return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
    *pref = new cublasLtMatmulPreferenceOpaque_t();
    return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    delete pref;
    return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                           cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                           size_t size) {
    if (!pref) return CUBLAS_STATUS_NOT_INITIALIZED;
    bool read = false;
    switch (attr) {
        case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
            read = emu::lt_read(&pref->max_workspace_bytes, buf, size);
            break;
        case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
            read = emu::lt_read(&pref->reduction_scheme_mask, buf, size);
            break;
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
            read = emu::lt_read(&pref->min_alignment[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, size);
            break;
    }
    if (!read)
        return emu::lt_failure("cublasLtMatmulPreferenceSetAttribute", CUBLAS_STATUS_INVALID_VALUE,
                               "attribute " + std::to_string((int)attr) + ": not emulated, no buffer, or " +
                                   std::to_string(size) + " bytes, not its type's size");
    return CUBLAS_STATUS_SUCCESS;
}

// ----------------------------------------------------------------------------
// the product's checks, shared by the heuristic and the matmul

namespace emu {

// what one call multiplies: the sizes from the layouts, and whether they agree
struct LtShape {
    long long m, n, k;
};

inline bool lt_epilogue_known(uint32_t e) {
    return e == CUBLASLT_EPILOGUE_DEFAULT || e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
           e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB;
}
inline bool lt_has_aux(uint32_t e) {
    return e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}
inline bool lt_has_bias(uint32_t e) { return e != CUBLASLT_EPILOGUE_DEFAULT; }

// The sizes of desc's product over these layouts, or "" replaced by why they do not fit
inline std::string lt_shape(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                            cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, LtShape* shape) {
    if (!desc || !a || !b || !c || !d) return "a descriptor or a layout is null";
    if ((desc->transa != CUBLAS_OP_N && desc->transa != CUBLAS_OP_T) ||
        (desc->transb != CUBLAS_OP_N && desc->transb != CUBLAS_OP_T))
        return "an operation other than N or T";
    if (!lt_epilogue_known(desc->epilogue)) return "epilogue " + std::to_string(desc->epilogue) + " is not emulated";
    const long long m = (long long)d->rows, n = (long long)d->cols;
    const long long k = desc->transa == CUBLAS_OP_N ? (long long)a->cols : (long long)a->rows;
    const long long a_m = desc->transa == CUBLAS_OP_N ? (long long)a->rows : (long long)a->cols;
    const long long b_k = desc->transb == CUBLAS_OP_N ? (long long)b->rows : (long long)b->cols;
    const long long b_n = desc->transb == CUBLAS_OP_N ? (long long)b->cols : (long long)b->rows;
    if (a_m != m || b_k != k || b_n != n || (long long)c->rows != m || (long long)c->cols != n)
        return "the layouts do not fit: D " + std::to_string(m) + "x" + std::to_string(n) + ", op(A) " +
               std::to_string(a_m) + "x" + std::to_string(k) + ", op(B) " + std::to_string(b_k) + "x" +
               std::to_string(b_n) + ", C " + std::to_string(c->rows) + "x" + std::to_string(c->cols);
    for (cublasLtMatrixLayout_t l : {a, b, c, d})
        if (l->ld < std::max<long long>(1, (long long)l->rows))
            return "a leading dimension " + std::to_string(l->ld) + " below its rows " + std::to_string(l->rows);
    if (lt_has_aux(desc->epilogue) && (desc->aux_ld % 8 != 0 || desc->aux_ld < m))
        return "EPILOGUE_AUX_LD " + std::to_string(desc->aux_ld) +
               " must be divisible by 8 and at least the rows of D, " + std::to_string(m);
    *shape = {m, n, k};
    return "";
}

// element (i, j) of op(X), X stored column-major with leading dimension ld
inline float lt_element(const float* X, int64_t ld, int32_t op, long long i, long long j) {
    return op_element(X, (int)ld, (cublasOperation_t)op, i, j);
}

// the tanh approximation of GELU and its derivative (see the header)
inline float lt_gelu(float x) {
    const float k = 0.7978845608028654f;
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
inline float lt_gelu_derivative(float x) {
    const float k = 0.7978845608028654f;
    const float t = tanhf(k * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * x * x);
}

}  // namespace emu

namespace emu {

// How cuBLASLt turns the program down (the header: MASKPRIOR_EMU_CUBLASLT)
enum class LtRefusal { none, no_algorithm, not_supported, invalid_value };

// text as MASKPRIOR_EMU_CUBLASLT: ok, no-algorithm, not-supported or invalid-value; false for anything else
inline bool parse_lt_refusal(const std::string& text, LtRefusal* refusal) {
    if (text == "ok") *refusal = LtRefusal::none;
    else if (text == "no-algorithm") *refusal = LtRefusal::no_algorithm;
    else if (text == "not-supported") *refusal = LtRefusal::not_supported;
    else if (text == "invalid-value") *refusal = LtRefusal::invalid_value;
    else return false;
    return true;
}

// The refusal of every heuristic and matmul call: MASKPRIOR_EMU_CUBLASLT, read once, none when
// unset; a bad value stops the program with one line on stderr. The GPU tests set it in turn.
inline LtRefusal& lt_refusal() {
    static LtRefusal chosen = [] {
        LtRefusal r = LtRefusal::none;
        const char* text = getenv("MASKPRIOR_EMU_CUBLASLT");
        if (text && !parse_lt_refusal(text, &r)) {
            fprintf(stderr, "CUDA emulation: MASKPRIOR_EMU_CUBLASLT=%s: expected ok, no-algorithm, not-supported or "
                    "invalid-value\n", text);
            exit(2);
        }
        return r;
    }();
    return chosen;
}

}  // namespace emu

// One algorithm for any product the emulation can run (it needs no workspace), or
// CUBLAS_STATUS_INVALID_VALUE with a line when the arguments do not fit; none under
// MASKPRIOR_EMU_CUBLASLT=no-algorithm (CUBLAS_STATUS_NOT_SUPPORTED, no result returned); the status
// INVALID_VALUE, without a line, under MASKPRIOR_EMU_CUBLASLT=invalid-value.
inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                                     cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                     cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                                     cublasLtMatmulPreference_t pref, int requested,
                                                     cublasLtMatmulHeuristicResult_t results[], int* returned) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (requested <= 0 || !pref || !results || !returned)
        return emu::lt_failure("cublasLtMatmulAlgoGetHeuristic", CUBLAS_STATUS_INVALID_VALUE,
                               "no preference, no room for a result, or requestedAlgoCount <= 0");
    emu::LtShape shape;
    const std::string why = emu::lt_shape(desc, a, b, c, d, &shape);
    if (!why.empty()) return emu::lt_failure("cublasLtMatmulAlgoGetHeuristic", CUBLAS_STATUS_INVALID_VALUE, why);
    *returned = 0;
    if (emu::lt_refusal() == emu::LtRefusal::no_algorithm) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (emu::lt_refusal() == emu::LtRefusal::invalid_value) return CUBLAS_STATUS_INVALID_VALUE;
    results[0] = cublasLtMatmulHeuristicResult_t{};
    results[0].algo.data[0] = (uint64_t)++handle->algorithms_given;
    results[0].workspaceSize = 0;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                                     const void* A, cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b,
                                     const void* beta, const void* C, cublasLtMatrixLayout_t c, void* D,
                                     cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t* algo, void* workspace,
                                     size_t workspace_bytes, cudaStream_t stream) {
    const char* call = "cublasLtMatmul";
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    emu::LtShape s;
    const std::string why = emu::lt_shape(desc, a, b, c, d, &s);
    if (!why.empty()) return emu::lt_failure(call, CUBLAS_STATUS_INVALID_VALUE, why);
    if (!alpha || !beta || !algo)
        return emu::lt_failure(call, CUBLAS_STATUS_INVALID_VALUE, "no alpha, no beta or no algorithm");
    if (emu::lt_refusal() == emu::LtRefusal::not_supported) return CUBLAS_STATUS_NOT_SUPPORTED;  // nothing run
    if (s.m == 0 || s.n == 0) return CUBLAS_STATUS_SUCCESS;
    const float alpha_value = *(const float*)alpha, beta_value = *(const float*)beta;
    const uint32_t epilogue = desc->epilogue;
    const long long bias_floats = !emu::lt_has_bias(epilogue)                ? 0
                                  : epilogue == CUBLASLT_EPILOGUE_BGRADB ? s.n
                                                                             : s.m;
    // each operand must lie in device memory; C only where beta reads it
    auto reach = [](cublasLtMatrixLayout_t l) { return (long long)(l->cols - 1) * l->ld + (long long)l->rows; };
    const struct { const char* name; const void* p; long long floats; } operands[] = {
        {"A", A, s.k ? reach(a) : 0},
        {"B", B, s.k ? reach(b) : 0},
        {"C", C, beta_value != 0.0f ? reach(c) : 0},
        {"D", D, reach(d)},
        {"the bias", desc->bias, bias_floats},
        {"the aux matrix", desc->aux, emu::lt_has_aux(epilogue) ? (s.n - 1) * desc->aux_ld + s.m : 0}};
    for (const auto& o : operands)
        if (o.floats > 0 && !emu::is_device_memory(o.p, (size_t)o.floats * sizeof(float)))
            return emu::lt_failure(call, CUBLAS_STATUS_EXECUTION_FAILED,
                                   std::string(o.name) + " at " + emu::hex(o.p) + " is not device memory, or its " +
                                       std::to_string(o.floats) + " floats pass the end of its cudaMalloc block");
    if (workspace_bytes > 0 && !emu::is_device_memory(workspace, workspace_bytes))
        return emu::lt_failure(call, CUBLAS_STATUS_INVALID_VALUE, "the workspace is not device memory of its size");
    // the product is work on the stream: run now, or recorded by a capture, with every value read now
    const cublasLtMatmulDescOpaque_t op = *desc;
    const int64_t lda = a->ld, ldb = b->ld, ldc = c->ld, ldd = d->ld;
    const float* a_ptr = (const float*)A;
    const float* b_ptr = (const float*)B;
    const float* c_ptr = (const float*)C;
    float* d_ptr = (float*)D;
    const cudaError_t queued = emu::stream_work(stream, [=] {
        float* bias = (float*)op.bias;
        float* aux = (float*)op.aux;
        std::vector<float> column(s.m), bias_gradient(bias_floats, 0.0f);
        for (long long j = 0; j < s.n; j++) {
            std::fill(column.begin(), column.end(), 0.0f);  // column j of op(A) op(B), summed over k in order
            for (long long p = 0; p < s.k; p++) {
                const float b_pj = emu::lt_element(b_ptr, ldb, op.transb, p, j);
                for (long long i = 0; i < s.m; i++) column[i] += emu::lt_element(a_ptr, lda, op.transa, i, p) * b_pj;
                if (epilogue == CUBLASLT_EPILOGUE_BGRADB) bias_gradient[j] += b_pj;
            }
            for (long long i = 0; i < s.m; i++) {
                float t = alpha_value * column[i] + (beta_value == 0.0f ? 0.0f : beta_value * c_ptr[i + j * ldc]);
                if (epilogue == CUBLASLT_EPILOGUE_BIAS) t += bias[i];
                if (epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
                    t += bias[i];
                    aux[i + j * op.aux_ld] = t;
                    t = emu::lt_gelu(t);
                }
                if (epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
                    t *= emu::lt_gelu_derivative(aux[i + j * op.aux_ld]);
                    bias_gradient[i] += t;
                }
                d_ptr[i + j * ldd] = t;
            }
        }
        if (epilogue == CUBLASLT_EPILOGUE_BGRADA)
            for (long long i = 0; i < s.m; i++)
                for (long long p = 0; p < s.k; p++) bias_gradient[i] += emu::lt_element(a_ptr, lda, op.transa, i, p);
        const bool gradient = epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD || epilogue == CUBLASLT_EPILOGUE_BGRADA ||
                              epilogue == CUBLASLT_EPILOGUE_BGRADB;
        if (gradient)
            for (long long i = 0; i < bias_floats; i++) bias[i] = bias_gradient[i];  // stored, not added
    }, call);
    return queued == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
