// layers/kernels.h: Kernels, which version of each layer runs: the value the model holds and
// hands to every layer call whose path depends on it.
#pragma once

// How the program computes: which CPU version runs, which GPU kernel versions run, whether the
// matmuls may use TF32, and whether the training step is launched as one CUDA graph. Chosen once
// at setup (--cpu-kernel, --attention-kernel, --matmul-kernel, --fast-kernels, --tf32,
// --cuda-graph; run/setup.cuh), held by the model, and passed to every layer whose path depends
// on it. The GPU defaults are the versions that have run on a GPU, in fp32, launched call by call.
struct Kernels {
    int cpu = 2;               // the CPU's version of the matmul, attention and LayerNorm: 1 the lesson's
                               // plain loops (<layer>_forward_cpu: attention.cuh, layers/), 2 their fast
                               // twins in cpu_fast/, which sum every output in the same order: the same bits
    int attention = 1;         // the attention kernels' version (attention/versions.cuh lists them)
    int matmul = 1;            // the matmuls' version: 1 cuBLAS and separate bias and GELU kernels,
                               // 2 cuBLASLt with the bias, GELU and bias gradient fused in (layers/matmul_lt.cuh)
    bool fast_layers = false;  // the other layers' second versions: a warp per LayerNorm and
                               // cross-entropy row, the fusions of layers/fused.cuh, the column sums of
                               // layers/column_sums.cuh for the bias and LayerNorm parameter gradients
    bool tf32 = false;         // cuBLAS may round the matmuls' inputs to TF32 (tensor cores)
    bool graph = false;        // the training step captured once as a CUDA graph and replayed (gpu/graph.cuh)
};

// The CPU versions (Kernels::cpu, --cpu-kernel)
inline constexpr int CPU_KERNEL_COUNT = 2;
