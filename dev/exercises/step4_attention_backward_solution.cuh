// dev/exercises/step4_attention_backward_solution.cuh: the kernel course, step 4, solved by the
// project's own kernel 1, not a copy of it: its three backward kernels (attention.cuh) under the
// exercise's names, which make exercise checks as it checks yours:
//   make exercise EXERCISE=dev/exercises/step4_attention_backward_solution.cuh
// To read the answer, read attention.cuh's backward, where each of these kernels calls one function
// that sits under the math it computes, the same function the CPU's loop calls:
//   attention_backward_rows_kernel1     attention_row_backward: dA, then dS
//                                       (attention_row_softmax_backward), then dq (attention_row_dquery)
//   attention_backward_columns_kernel1  attention_column_backward: dk and dv
//   attention_backward_mask_kernel1     attention_mask_entry_backward: dM
#pragma once
#include "attention.cuh"  // attention_backward_rows_kernel1, _columns_kernel1, _mask_kernel1

constexpr auto attention_backward_rows_exercise = attention_backward_rows_kernel1;
constexpr auto attention_backward_columns_exercise = attention_backward_columns_kernel1;
constexpr auto attention_backward_mask_exercise = attention_backward_mask_kernel1;
