// dev/exercises/step1_mask_term_solution.cuh: the kernel course, step 1, solved by the project's own
// kernel, not a copy: mask_term_kernel1 (attention.cuh, where log_sigmoid holds the stable form) under
// the exercise's name, which make exercise checks as it checks yours:
//   make exercise EXERCISE=dev/exercises/step1_mask_term_solution.cuh
#pragma once
#include "attention.cuh"  // mask_term_kernel1

constexpr auto mask_term_exercise = mask_term_kernel1;
