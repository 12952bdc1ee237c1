// dev/exercises/step8_layernorm_solution.cuh: the kernel course, step 8, solved by the project's own
// kernel 1, not a copy: its three LayerNorm kernels (layers/layernorm.cuh) under the exercise's
// names, which make exercise checks as it checks yours:
//   make exercise EXERCISE=dev/exercises/step8_layernorm_solution.cuh
// To read the answer, read layers/layernorm.cuh, where each kernel calls one function that sits
// under the math, the same the CPU's loop calls: layernorm_row_forward, layernorm_row_backward,
// layernorm_channel_backward.
#pragma once
#include "layers/layernorm.cuh"  // layernorm_forward_kernel1, layernorm_backward_dinp_kernel1, _params_kernel1

constexpr auto layernorm_forward_exercise = layernorm_forward_kernel1;
constexpr auto layernorm_backward_dinp_exercise = layernorm_backward_dinp_kernel1;
constexpr auto layernorm_backward_params_exercise = layernorm_backward_params_kernel1;
