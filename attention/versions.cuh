// attention/versions.cuh: the GPU versions of attention in one table, and attention_forward and
// attention_backward, the calls the model makes: on the CPU the loops of attention.cuh (Kernels::cpu
// 1) or their fast twin in cpu_fast/ (2, the default: the same bits), on the GPU the version that
// the caller's Kernels name.
//
// Each version adds one idea to the one before, in a file of its own whose header says what it
// teaches; dev/ checks and times them side by side (dev/README.md). To add version N+1: write
// attention/<idea>.cuh with launchers of the signatures below, include it here and add its line to
// ATTENTION_KERNELS. --attention-kernel, dev/ and the GPU tests take the versions from the table.
#pragma once
#include <iterator>
#include <stdexcept>
#include <string>
#include "attention.cuh"         // version 1, the row functions and the CPU loops
#include "attention/flash.cuh"   // version 3
#include "attention/short.cuh"   // version 4
#include "attention/warp.cuh"    // version 2
#include "cpu_fast/attention.h"  // attention_forward_cpu_fast, attention_backward_cpu_fast
#include "layers/launch.cuh"     // launch_kernel, ceil_div, BLOCK, warp sums, UNROLL, DYNAMIC_SHARED
#include "layers/kernels.h"      // Kernels
#ifdef ATTENTION_EXERCISE  // the kernel course's step 9 only (make exercise STEP=9), never a normal build:
#include "dev/exercises/check/train.h"  // ATTENTION_EXERCISE_VERSION, the learner's kernels, the table's last line
#endif

struct AttentionKernel {
    const char* idea;   // what the version adds, in a few words
    int max_head_size;  // the largest HS it can run; 0: any
    // out, att from qkv and the mask term log σ(M) (computed before: mask_term_kernel1)
    void (*forward)(float* out, float* att, const float* qkv, const float* mask_term, AttentionShape s);
    // dqkv and dmask (+=), dscores (written) from dout; dout = nullptr: dscores holds dS already
    void (*backward)(float* dqkv, float* dmask, float* dscores, const float* dout, const float* qkv, const float* att,
                     const float* mask, AttentionShape s);
    int max_seq_len = 0;                              // the largest T it can run; 0: any
    size_t (*shared_bytes)(int T, int HS) = nullptr;  // the dynamic shared memory a block asks, when it grows with T
};

// The dynamic shared memory a launch may ask without opting in (cudaFuncSetAttribute): 48 KB
inline constexpr size_t ATTENTION_SHARED_LIMIT = 48 * 1024;

// Version v is line v.
inline constexpr AttentionKernel ATTENTION_KERNELS[] = {
    {"a thread per row, column, mask entry: the CPU's loops", 0, attention_forward_gpu1, attention_backward_gpu1},
    {"a warp per row: lanes over keys, shuffles for max, sum", 0, attention_forward_gpu2, attention_backward_gpu2},
    {"shared k/v tiles, online softmax; dM in batch groups", FLASH_MAX_HS, attention_forward_gpu3,
     attention_backward_gpu3},
    {"a block holds a head (T <= 64); dM stage 1 inside it", SHORT_MAX_HS, attention_forward_gpu4,
     attention_backward_gpu4, SHORT_MAX_T, short_shared_bytes},
#ifdef ATTENTION_EXERCISE
    ATTENTION_EXERCISE_VERSION,
#endif
};
inline constexpr int ATTENTION_KERNEL_COUNT = (int)std::size(ATTENTION_KERNELS);

// Whether version v exists and can run heads of HS dims over T tokens
inline bool attention_kernel_runs(int version, int HS, int T) {
    if (version < 1 || version > ATTENTION_KERNEL_COUNT) return false;
    const AttentionKernel& k = ATTENTION_KERNELS[version - 1];
    if (k.max_head_size != 0 && HS > k.max_head_size) return false;
    return (k.max_seq_len == 0 || T <= k.max_seq_len) &&
           (!k.shared_bytes || k.shared_bytes(T, HS) <= ATTENTION_SHARED_LIMIT);
}

// Why version v cannot run heads of HS dims over T tokens, or "" when it can
inline std::string attention_kernel_refusal(int version, int HS, int T) {
    if (attention_kernel_runs(version, HS, T)) return "";
    const std::string name = "attention kernel " + std::to_string(version);
    if (version < 1 || version > ATTENTION_KERNEL_COUNT)
        return name + " does not exist (1 to " + std::to_string(ATTENTION_KERNEL_COUNT) + ")";
    const AttentionKernel& k = ATTENTION_KERNELS[version - 1];
    if (k.max_head_size != 0 && HS > k.max_head_size)
        return name + " holds at most " + std::to_string(k.max_head_size) + " dims a head (--head-size " +
               std::to_string(HS) + ")";
    if (k.max_seq_len != 0 && T > k.max_seq_len)
        return name + " holds at most " + std::to_string(k.max_seq_len) + " tokens (T " + std::to_string(T) + ")";
    return name + " needs " + std::to_string(k.shared_bytes(T, HS)) + " bytes of shared memory at T " +
           std::to_string(T) + ", HS " + std::to_string(HS) + " (48 KB at most)";
}

// The version a GPU call runs; setup refused one that cannot run these heads (choose_kernels), so
// a refusal here is a caller's bug. A plain predicate on the hot path: the refusal's text is
// built only to throw.
inline const AttentionKernel& attention_kernel(const Kernels& kernels, AttentionShape s) {
    if (!attention_kernel_runs(kernels.attention, s.HS, s.T))
        throw std::logic_error("attention: " + attention_kernel_refusal(kernels.attention, s.HS, s.T));
    return ATTENTION_KERNELS[kernels.attention - 1];
}

// mask_term: (mask_heads,T,T) on dev, room for log σ(M); unused (may be nullptr) without a mask.
// Shapes as in attention_forward_cpu.
inline void attention_forward(Device dev, const Kernels& kernels, float* out, float* att, const float* qkv,
                              const float* mask, float* mask_term, AttentionShape s) {
    if (dev == DEVICE_CPU)
        return kernels.cpu == 1 ? attention_forward_cpu(out, att, qkv, mask, mask_term, s)
                                : attention_forward_cpu_fast(out, att, qkv, mask, mask_term, s);
    const AttentionKernel& version = attention_kernel(kernels, s);
    if (s.mask_heads) {
        const int count = s.mask_heads * s.T * s.T;
        launch_kernel<mask_term_kernel1>(pointwise_cost(count, 1, 1, 4), ceil_div(count, 128), 128, 0, mask_term, mask,
                                         count);
    }
    version.forward(out, att, qkv, mask_term, s);
}

// Shapes as in attention_backward_cpu.
inline void attention_backward(Device dev, const Kernels& kernels, float* dqkv, float* dmask, float* dscores,
                               const float* dout, const float* qkv, const float* att, const float* mask,
                               AttentionShape s) {
    if (dev == DEVICE_CPU)
        return kernels.cpu == 1 ? attention_backward_cpu(dqkv, dmask, dscores, dout, qkv, att, mask, s)
                                : attention_backward_cpu_fast(dqkv, dmask, dscores, dout, qkv, att, mask, s);
    attention_kernel(kernels, s).backward(dqkv, dmask, dscores, dout, qkv, att, mask, s);
}
