// The doctest runner: all tests in one translation unit (the layer headers define CUDA
// kernels, which may be defined once per program, as in llm.c), built as tests/unit_tests.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include "test_layers.cu"
#include "test_attention.cu"
#include "test_fast_paths.cu"
#include "test_model.cu"
#include "test_init.cu"
#include "test_tasks.cu"
#include "test_arithmetic.cu"
#include "test_parsers.cu"
#include "test_cli.cu"
#include "test_cli_vision.cu"
#include "test_torch.cu"
#include "test_gpu.cu"
#include "test_gpu_vision.cu"
#include "test_vision.cu"
#include "test_image_files.cu"
#include "test_impulse.cu"
#include "test_schedule.cu"
#include "test_augment.cu"
