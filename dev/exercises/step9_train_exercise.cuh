// dev/exercises/step9_train_exercise.cuh: the kernel course, step 9 of 9, blank: train the model with
// your kernels (dev/exercises/README.md says it in full). Work in a copy, name your steps 3 and 4 in
// it, and check it on the CUDA emulation (no GPU needed):
//   cp dev/exercises/step9_train_exercise.cuh $HOME/step9.cuh
//   make exercise EXERCISE=$HOME/step9.cuh
// (make exercise finds the step in the file's name or, in a copy, in this first line: keep it.)
//
// Your forward (step 3) and backward (step 4) kernels become the model's attention: the two host
// functions below launch them, with the signatures of every GPU version of the project
// (AttentionKernel, attention/versions.cuh), and make exercise builds the trainer (main.cu) with
// them as one more version, the table's last. The check first runs these two functions on the
// shapes of steps 3 and 4 against the CPU; then it trains make run's model (maj3, the mask init,
// seed 1) on the emulation for 50 steps with your version, and compares its log.jsonl with kernel
// 1's, line by line.
//
// The model calls them once a layer each pass:
//   forward: the mask term log σ(M) is computed already (step 1's kernel, in attention_forward);
//     launch your forward kernel: a thread per (b, h, i), ceil(B·NH·T / 128) blocks of 128 threads
//   backward: the rows pass, then the columns pass (the same grid), then, when there is a mask
//     (s.mask_heads > 0), the mask pass: ceil(mask_heads·T·T / 128) blocks of 128. dout is never
//     nullptr in this run (kernel 1 takes that case too: --init qk-opt hands dS in dscores).
//   launch_kernel<kernel>(blocks, threads, shared_bytes, args...)   (layers/launch.cuh):
//     kernel<<<blocks, threads, shared_bytes, the program's stream>>>(args...), checked
//   ceil_div(n, block)   the blocks of `block` threads that cover n
// This is host code: the pointers are the GPU's (the emulation stops a host line that reads or
// writes through one, and names the buffer); s is a host value.
#pragma once
#include "dev/exercises/step3_attention_forward_exercise.cuh"   // your forward kernel: name your copy of step 3
#include "dev/exercises/step4_attention_backward_exercise.cuh"  // your backward kernels: name your copy of step 4

void attention_forward_exercise_gpu(float* out, float* att, const float* qkv, const float* mask_term,
                                    AttentionShape s) {
    // out (B,T,NH·HS), att (B,NH,T,T) written; qkv (B,T,3·NH·HS); mask_term (mask_heads,T,T) or nullptr
    // YOUR CODE HERE
}

void attention_backward_exercise_gpu(float* dqkv, float* dmask, float* dscores, const float* dout, const float* qkv,
                                     const float* att, const float* mask, AttentionShape s) {
    // dqkv (B,T,3·NH·HS) and dmask (mask_heads,T,T) added; dscores (B,NH,T,T) written; dout (B,T,NH·HS);
    // qkv; att (B,NH,T,T); mask (mask_heads,T,T) or nullptr
    // YOUR CODE HERE
}
