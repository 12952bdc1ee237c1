// dev/exercises/check/step6.cu: the kernel course's step 6 (make exercise STEP=6): the file EXERCISE's
// attention_backward_columns_tiled_exercise, launched as version 3's columns kernel is
// (attention_backward_gpu3), against the CPU's attention_backward_cpu (attention.cuh) on the kernel
// lab's --quick shapes (or --shape, HS <= 128): dk and dv, from the CPU's dS; dq untouched.
// check.h says what is checked and how.
#include "attention/flash.cuh"              // the launch's sizes; attention_backward_columns_kernel3's signature
#include "dev/exercises/check/check.h"
#include EXERCISE  // attention_backward_columns_tiled_exercise

COURSE_SAME_SIGNATURE(attention_backward_columns_tiled_exercise, attention_backward_columns_kernel3);

int main(int argc, char** argv) {
    const CourseOptions opt = course_options(argc, argv, "B,T,NH,HS,MASK_HEADS,CAUSAL");
    course_begin("step 6, dk and dv from tiles in shared memory", EXERCISE, "attention_backward_cpu, attention.cuh");
    for (const DevShape& shape : course_attention_shapes(opt, argv[0])) {
        const AttentionShape s = shape.s;
        if (s.HS > FLASH_MAX_HS) {
            fprintf(stderr, "%s: HS %d: version 3's tiles hold at most %d dims a head\n", argv[0], s.HS, FLASH_MAX_HS);
            return 2;
        }
        const BackwardCase c(s);
        const std::vector<int> dims = {s.B, s.T, s.NH, s.HS};
        const std::vector<Output> outputs = {{"dk", qkv_part(c.dqkv, s, 1), qkv_part(c.dqkv_start, s, 1), "bthd", dims},
                                             {"dv", qkv_part(c.dqkv, s, 2), qkv_part(c.dqkv_start, s, 2), "bthd", dims},
                                             {"dq", qkv_part(c.dqkv_start, s, 0), qkv_part(c.dqkv_start, s, 0), "bthd",
                                              dims}};  // the rows kernel's: this one leaves it as it was
        const bool ok = check_case(attention_label(shape), outputs, [&] {
            DevBuffer qkv(c.qkv), att(c.att), dout(c.dout), dscores(c.dscores), dqkv(c.dqkv_start);
            launch_kernel<attention_backward_columns_tiled_exercise>(
                ceil_div(s.T, FLASH_QUERY_TILE) * s.B * s.NH, ATTENTION_THREADS, flash_columns_shared_bytes(s.HS),
                dqkv.ptr, dscores.ptr, dout.ptr, qkv.ptr, att.ptr, s);
            const std::vector<float> got = dqkv.get();
            return Outputs{qkv_part(got, s, 1), qkv_part(got, s, 2), qkv_part(got, s, 0)};
        });
        if (!ok)
            course_failed("bh = blockIdx.x / tiles, col0 = (blockIdx.x % tiles) * 16; per query tile: __syncthreads(), "
                          "stage_tile the q and dy rows, copy the dS and A entries (rows i, columns col0..col0+15), "
                          "__syncthreads(), then each warp's 4 columns over the tile's 32 rows");
    }
    return course_passed("dk and dv match the CPU's on every shape, dq untouched, in every thread order");
}
