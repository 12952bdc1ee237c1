// dev/exercises/step7_mask_groups_solution.cuh: the kernel course, step 7, solved by the project's
// own code, not a copy: version 3's two mask kernels and their launcher (attention/flash.cuh) under
// the exercise's names, which make exercise checks as it checks yours:
//   make exercise EXERCISE=dev/exercises/step7_mask_groups_solution.cuh
#pragma once
#include "attention/flash.cuh"  // attention_mask_partials_kernel3, attention_mask_sum_kernel3, attention_mask_backward_gpu3

constexpr auto attention_mask_partials_exercise = attention_mask_partials_kernel3;
constexpr auto attention_mask_sum_exercise = attention_mask_sum_kernel3;
constexpr auto attention_mask_backward_exercise = attention_mask_backward_gpu3;
