// layers/kernels.h: Kernels, which version of each layer runs: the value the model holds and
// hands to every layer call whose path depends on it.
#pragma once

// How the GPU computes: which kernel versions run, whether the matmuls may use TF32, and whether
// the training step is launched as one CUDA graph. Chosen once at setup (--attention-kernel,
// --matmul-kernel, --fast-kernels, --tf32, --cuda-graph; run/setup.cuh), held by the model, and
// passed to every layer whose GPU path depends on it. The CPU computes the same whatever it holds.
// The defaults are the versions that have run on a GPU, in fp32, launched call by call.
struct Kernels {
    int attention = 1;         // the attention kernels' version (attention/versions.cuh lists them)
    int matmul = 1;            // the matmuls' version: 1 cuBLAS and separate bias and GELU kernels,
                               // 2 cuBLASLt with the bias, GELU and bias gradient fused in (layers/matmul_lt.cuh)
    bool fast_layers = false;  // the other layers' second versions: a warp per LayerNorm and
                               // cross-entropy row, the fusions of layers/fused.cuh, the column sums of
                               // layers/column_sums.cuh for the bias and LayerNorm parameter gradients
    bool tf32 = false;         // cuBLAS may round the matmuls' inputs to TF32 (tensor cores)
    bool graph = false;        // the training step captured once as a CUDA graph and replayed (gpu/graph.cuh)
};

// ----------------------------------------------------------------------------
// CPU paths: the fast ones, or (make CPU_REFERENCE=1) the plain reference loops

// The matmul, attention and LayerNorm have a plain CPU loop, the reference, and a fast path
// that sums every output in the same order (cpu_fast/). A build with
// -DMASKPRIOR_CPU_REFERENCE runs the reference loops everywhere: the same bits, slower; for
// learners who want to see what the fast paths buy, and for tests/march_check.sh.
#ifdef MASKPRIOR_CPU_REFERENCE
constexpr bool CPU_REFERENCE = true;
#else
constexpr bool CPU_REFERENCE = false;
#endif

