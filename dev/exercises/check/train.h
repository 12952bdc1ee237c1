// dev/exercises/check/train.h: the kernel course's step 9 as the program sees it, the learner's
// attention as one more version, the last line of ATTENTION_KERNELS. attention/versions.cuh includes
// this file only when ATTENTION_EXERCISE is defined, which only make exercise's build of the trainer
// does (build/exercises/train-main.o); the learner's file defines the two launchers declared here,
// and is compiled on its own (dev/exercises/check/train.cu) and linked in.
#pragma once
#include "attention.cuh"  // AttentionShape

// The launchers of the learner's file (step 9), with every version's signatures (AttentionKernel)
void attention_forward_exercise_gpu(float* out, float* att, const float* qkv, const float* mask_term,
                                    AttentionShape s);
void attention_backward_exercise_gpu(float* dqkv, float* dmask, float* dscores, const float* dout, const float* qkv,
                                     const float* att, const float* mask, AttentionShape s);

// Its line of ATTENTION_KERNELS: any head size and sequence length
#define ATTENTION_EXERCISE_VERSION \
    {"the kernel course's step 9: the learner's kernels", 0, attention_forward_exercise_gpu, \
     attention_backward_exercise_gpu}
