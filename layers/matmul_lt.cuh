// layers/matmul_lt.cuh: matmul version 2's library call, cublasLtMatmul, whose epilogues fuse into
// the product what version 1 runs as kernels of their own: the bias, the GELU and the bias gradient.
// The linear layer's launchers (layers/matmul.cuh) and the MLP's (layers/fused.cuh) call it.
//
// What it teaches: when a GEMM finishes a tile of its output, the tile is in registers; an
// epilogue applies a pointwise function, or a sum along the tile, there, before the tile's one
// write to memory. The pass that would read the output back (add the bias, apply GELU, sum the
// columns for the bias gradient) goes away, and so does its launch.
//
// The epilogues, in the row-major reasoning of layers/matmul.cuh (the comment above its GPU code):
// cuBLASLt describes each vector by the column-major D = op(A) op(B) it computes. The bias "length
// must match matrix D rows" and is "broadcasted to all columns"; a bias gradient sums along D's
// rows (DGELU_BGRAD), or over the GEMM's k for each row of D (BGRADA) or each column (BGRADB). Our
// D is a row-major buffer read column-major (rule 1), so D's rows are our buffer's columns:
//   out = inp W^T + b   D = out^T (OC,N): its rows are the output channels o, so BIAS adds bias[o]
//                       down every column n: out[n,o] += bias[o]. GELU_AUX_BIAS keeps the GELU's input
//                       (pre) as the aux matrix, D's shape: pre^T (OC,N), leading dimension OC.
//   dW += dout^T inp    D = dW^T (C,OC) = inp^T (C,N) dout (N,OC), k = N: BGRADB sums op(B) = dout over
//                       k for each column of D: dbias[o] = sum_n dout[n,o]. (BGRADA would sum op(A) =
//                       inp^T: sum_n inp[n,c], the gradient of no bias of ours.)
//   dg = dproj Wproj    the MLP's second layer's dinp: D = dg^T (MLP,N), rows the hidden channels j.
//                       DGELU_BGRAD multiplies it by gelu'(aux), aux = pre^T (MLP,N) with leading
//                       dimension MLP, so D becomes dpre^T, and sums each row over its N columns:
//                       dbfc[j] = sum_n dpre[n,j]. The GEMM whose output is the GELU's gradient is the
//                       next layer's, so this fusion spans the MLP's two layers (mlp_backward, fused.cuh).
// cublasLt.h asks an aux matrix's leading dimension to be "divisible by 8": the GELU fusions need
// OC (MLP) a multiple of 8, and their callers run the unfused layers otherwise.
//
// Accumulating: the products add into their outputs as version 1's do (beta = 1, C = D). The bias
// gradient is another matter: cublasLt.h says each BGRAD epilogue "stores" it at BIAS_POINTER, and
// beta scales C alone; so it is stored into a scratch vector and a kernel adds that into dbias
// (add_bias_gradient). The scratch starts as NaN (matmul_lt_setup): were the library to add into it
// rather than store, the first call would give NaN, which the GPU tests never let pass.
//
// Determinism: the cuBLAS Library documentation (docs.nvidia.com/cuda/cublas, section "Results
// Reproducibility") says that all cuBLAS API routines of a given toolkit version give the same bits
// at every run on GPUs of the same architecture and number of SMs, while a single CUDA stream is
// active (the program has one, gpu_stream()); among its ways to keep that with several streams it
// names cublasLtMatmul with a workspace the user owns. Not across toolkit versions. What picks a
// call's kernels is the algorithm, which the heuristic (cublasLtMatmulAlgoGetHeuristic) chooses from
// the shape, the epilogue, the preference (the workspace allowed, the pointers' alignments) and the
// math: here it is asked once per such key and its answer cached, and every call gets the same
// workspace, of the same size. Split-K, the k dimension cut into parts summed in parallel: cublasLt.h
// lists its reduction schemes (cublasLtReductionScheme_t): INPLACE, "using the output buffer ... and
// counters (in workspace) to guarantee the sequentiality", and COMPUTE_TYPE and OUTPUT_TYPE, parts
// "stored ... in the workspace and reduced in a separate step". None is said to use atomics or an
// unordered sum, so the preference allows all of them (CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK);
// the GPU tests hold two runs to the same bits, which is where a scheme that broke it would show.
//
// Graphs: nothing here allocates, frees or waits after matmul_lt_setup(), which creates the handle,
// the workspace and the scratch before training (run/setup.cuh calls it for --matmul-kernel 2). A
// key's descriptors and algorithm are made the first time the key is seen, on the host: a graph is
// captured only at the second use of its shape (gpu/graph.cuh), so every key of the work has
// been seen outside a capture. A capture records cublasLtMatmul's work with the pointers of its
// call, as it records a launch.
// A refusal can still come first during a capture (a library that refuses a plan it ran before).
// NOT_SUPPORTED refuses the configuration, before any work: the emulation's puts nothing on the
// stream, and the library's is taken to do the same. Version 1's calls for that product, which
// allocate nothing (cuBLAS's handle and workspace, and the column sums' scratch, are made at
// set-up) and wait for nothing, are then recorded where its work would have been: the graph is
// whole, every product in it once, by one path or the other, and it replays what a call-by-call
// run now computes. The emulated tests capture work whose every plan is refused only inside the
// capture, and hold the replay to version 1's bits (tests/test_gpu_matmul.cu).
#pragma once
#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED
#include "layers/kernels.h"      // Kernels

// the workspace every call gets: 32 MiB, what NVIDIA recommends for Hopper (cublasSetWorkspace)
constexpr size_t MATMUL_LT_WORKSPACE_BYTES = size_t(32) << 20;
// the widest bias gradient the scratch holds (4 MiB); a wider layer runs version 1's bias gradient
constexpr int MATMUL_LT_BIAS_GRADIENT_FLOATS = 1 << 20;

// A product's descriptors and the heuristic's algorithm for it (ok false: it has none)
struct MatmulLtPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // D is C
    cublasLtMatmulAlgo_t algo;
    bool ok = false;
};

// what makes two calls one key: sizes, ops, leading dimensions, epilogue, TF32 and alignments
using MatmulLtKey = std::array<int64_t, 16>;

// The process's cuBLASLt state, made once and kept for its life, as the cuBLAS handle is (the plans
// too: the map is never destroyed, so its descriptors outlive every call that may use them)
struct MatmulLt {
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;       // MATMUL_LT_WORKSPACE_BYTES
    float* bias_gradient = nullptr;  // the scratch the BGRAD epilogues store into
    std::map<MatmulLtKey, MatmulLtPlan>& plans = *new std::map<MatmulLtKey, MatmulLtPlan>();
    // the fallback notes printed: two keys that differ only in their pointers' alignments say one
    std::set<std::string>& notes = *new std::set<std::string>();
    size_t fallbacks = 0;  // the calls version 1 ran in version 2's place (the kernel lab marks its rows by it)
};

inline MatmulLt& matmul_lt() {
    static MatmulLt lt;
    return lt;
}

// Before training, once (more calls do nothing): the handle, the workspace and the bias-gradient
// scratch, filled with NaN (0xFF bytes). Call it where --matmul-kernel 2 is chosen, on a GPU run.
inline void matmul_lt_setup() {
    MatmulLt& lt = matmul_lt();
    if (lt.handle) return;
    cublasCheck(cublasLtCreate(&lt.handle));
    cudaCheck(cudaMalloc(&lt.workspace, MATMUL_LT_WORKSPACE_BYTES));
    cudaCheck(cudaMalloc(&lt.bias_gradient, MATMUL_LT_BIAS_GRADIENT_FLOATS * sizeof(float)));
    cudaCheck(cudaMemset(lt.bias_gradient, 0xFF, MATMUL_LT_BIAS_GRADIENT_FLOATS * sizeof(float)));
}

// the largest power of two, at most 256, that divides the address (256 for no pointer)
inline int64_t pointer_alignment(const void* p) {
    const uintptr_t a = (uintptr_t)p;
    return a == 0 ? 256 : std::min<int64_t>(256, (int64_t)(a & (~a + 1)));
}

// The key's descriptors, and the heuristic's best algorithm, asked with the call's pointers (it
// reads the bias and aux pointers for their alignment, as the cublasLt.h comments say).
inline MatmulLtPlan matmul_lt_plan(bool tf32, cublasLtEpilogue_t epilogue, cublasOperation_t op_a,
                                   cublasOperation_t op_b, int m, int n, int k, const float* A, int lda,
                                   const float* B, int ldb, const float* C, int ldc, const float* bias,
                                   const float* aux, int64_t aux_ld) {
    MatmulLt& lt = matmul_lt();
    MatmulLtPlan plan;
    cublasCheck(cublasLtMatmulDescCreate(&plan.desc, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                         CUDA_R_32F));
    const int32_t transa = op_a, transb = op_b;
    const void *bias_pointer = bias, *aux_pointer = aux;
    cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)));
    cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)));
    cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (bias)
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_pointer,
                                                   sizeof(bias_pointer)));
    if (aux) {
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux_pointer,
                                                   sizeof(aux_pointer)));
        cublasCheck(
            cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    }
    // the layouts describe the buffers as stored: op T's operand is stored transposed
    const bool a_n = op_a == CUBLAS_OP_N, b_n = op_b == CUBLAS_OP_N;
    cublasCheck(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_32F, a_n ? m : k, a_n ? k : m, lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_32F, b_n ? k : n, b_n ? n : k, ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&plan.c, CUDA_R_32F, m, n, ldc));
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t workspace = MATMUL_LT_WORKSPACE_BYTES;
    const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_MASK;  // every split-K scheme: none is atomic (above)
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                     sizeof(workspace)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                     sizeof(schemes)));
    const cublasLtMatmulPreferenceAttributes_t alignments[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const float* operands[] = {A, B, C, C};  // D is C
    for (int i = 0; i < 4; i++) {
        const uint32_t bytes = (uint32_t)pointer_alignment(operands[i]);
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, alignments[i], &bytes, sizeof(bytes)));
    }
    cublasLtMatmulHeuristicResult_t result;
    int returned = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt.handle, plan.desc, plan.a, plan.b, plan.c, plan.c,
                                                                 pref, 1, &result, &returned);
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    // The heuristic's answers (cublasLt.h): CUBLAS_STATUS_NOT_SUPPORTED, no heuristic for this
    // configuration, or SUCCESS with no result whose state is SUCCESS: no algorithm, and version 1
    // runs the product. Any other status is fatal: the header gives INVALID_VALUE for a request the
    // call got wrong (the emulation's, for descriptors that do not fit), a bug of this file that a
    // fallback would hide behind version 1's right answer, as it would an allocation or internal
    // failure of the library; cublasCheck names the status.
    if (status != CUBLAS_STATUS_NOT_SUPPORTED) cublasCheck(status);
    plan.ok = status == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS;
    if (plan.ok) plan.algo = result.algo;
    return plan;
}

// The line on stderr when cuBLASLt turns a product down (`why`) and version 1 runs it in its place,
// once per line (tools/bench_gpu.py refuses a version-2 timing that printed one)
inline void lt_fallback_note(const char* why, const char* what, int m, int n, int k) {
    char note[512];
    snprintf(note, sizeof note, "maskprior: note: cuBLASLt %s for %s at m %d, n %d, k %d: matmul version 1 runs it",
             why, what, m, n, k);
    if (matmul_lt().notes.insert(note).second) fprintf(stderr, "%s\n", note);
}

// One product through cublasLtMatmul on gpu_stream(): C = op(A) op(B) + beta C, alpha 1, then
// `epilogue`. Column-major, sizes, ops and leading dimensions as cublasSgemm's (layers/matmul.cuh):
// A (m,k) stored as op_a says, B (k,n) likewise, C (m,n); `bias` at BIAS_POINTER, the bias read or
// where a bias gradient is stored (m floats; n for BGRADB); `aux` (m,n), leading dimension aux_ld,
// at EPILOGUE_AUX_POINTER. `what` names the product and its epilogue in --profile's table.
// Returns false, having run nothing, where cuBLASLt has no algorithm for it, or where cublasLtMatmul
// refuses the plan with CUBLAS_STATUS_NOT_SUPPORTED (each said on stderr, and the key's plan marked
// so that later calls do not ask again): the caller then runs version 1's way. Any other status is
// a bug and stops the program (cublasCheck).
inline bool lt_matmul(const Kernels& kernels, const char* what, cublasLtEpilogue_t epilogue, cublasOperation_t op_a,
                      cublasOperation_t op_b, int m, int n, int k, const float* A, int lda, const float* B, int ldb,
                      float beta, float* C, int ldc, const float* bias = nullptr, const float* aux = nullptr,
                      int aux_ld = 0) {
    MatmulLt& lt = matmul_lt();
    if (!lt.handle) {
        fprintf(stderr, "maskprior: matmul kernel 2 before matmul_lt_setup() (run/setup.cuh calls it)\n");
        exit(1);
    }
    const MatmulLtKey key = {m, n, k, op_a, op_b, lda, ldb, ldc, epilogue, aux_ld, kernels.tf32,
                             pointer_alignment(A), pointer_alignment(B), pointer_alignment(C),
                             pointer_alignment(bias), pointer_alignment(aux)};
    auto found = lt.plans.find(key);
    if (found == lt.plans.end()) {
        found = lt.plans.emplace(key, matmul_lt_plan(kernels.tf32, epilogue, op_a, op_b, m, n, k, A, lda, B, ldb, C,
                                                     ldc, bias, aux, aux_ld)).first;
        if (!found->second.ok) lt_fallback_note("has no algorithm", what, m, n, k);
    }
    MatmulLtPlan& plan = found->second;
    if (!plan.ok) {
        lt.fallbacks++;
        return false;
    }
    // this call's pointers (the plan may have been made with another call's, of the same alignment)
    const void *bias_pointer = bias, *aux_pointer = aux;
    if (bias)
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_pointer,
                                                   sizeof(bias_pointer)));
    if (aux)
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux_pointer,
                                                   sizeof(aux_pointer)));
    const bool recording = profiler().recording;
    if (recording) {
        // bytes: A, B, C (read where beta reads it) and D, the bias or its gradient, the aux matrix;
        // FLOPs: 2mnk, the epilogue's few per element of D left out
        const double vector = !bias ? 0 : epilogue == CUBLASLT_EPILOGUE_BGRADB ? n : m;
        const double elements = (double)m * k + (double)k * n + (double)m * n * (beta != 0 ? 2 : 1) + vector +
                                (aux ? (double)m * n : 0);
        profiler().begin(std::string("cublasLtMatmul (") + what + ")", 0, 0, 0, {4.0 * elements, 2.0 * m * n * k, 0},
                         !GPU_EMULATED);
    }
    const float one = 1.0f;
    const cublasStatus_t status = cublasLtMatmul(lt.handle, plan.desc, &one, A, plan.a, B, plan.b, &beta, C, plan.c,
                                                 C, plan.c, &plan.algo, lt.workspace, MATMUL_LT_WORKSPACE_BYTES,
                                                 gpu_stream());
    if (recording) profiler().end();
    if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
        plan.ok = false;  // from now on this key runs version 1's way without asking
        lt.fallbacks++;
        lt_fallback_note("refused the plan (CUBLAS_STATUS_NOT_SUPPORTED)", what, m, n, k);
        if (recording) {  // the table keeps the call, which did nothing on the device
            profiler().calls.back().name += ": refused";
            profiler().calls.back().cost = LaunchCost{};
        }
        return false;
    }
    cublasCheck(status);
    return true;
}

// dbias[o] += the bias gradient cuBLASLt stored in the scratch (one thread per channel)
__global__ void add_bias_gradient_kernel2(float* __restrict__ dbias, const float* __restrict__ stored, int OC) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o < OC) dbias[o] += stored[o];
}

// dbias (OC) += the scratch's first OC floats, after a BGRAD epilogue stored them there
inline void add_bias_gradient(float* dbias, int OC) {
    launch_kernel<add_bias_gradient_kernel2>(pointwise_cost(OC, 2, 1), ceil_div(OC, BLOCK), BLOCK, 0, dbias,
                                             (const float*)matmul_lt().bias_gradient, OC);
}
