// The GPU tests on the CPU: built by the host compiler against the CUDA emulation (emu/,
// MASKPRIOR_CUDA_EMULATION), as tests/emulated_tests, by make test-emulated (and make test).
// test_gpu.cu is the very file make gpu-check runs on a GPU; test_emulation.cu checks the
// emulation itself: that it runs CUDA's meaning, and that it reports what a GPU would not;
// test_emulation_strict.cu that it refuses what a GPU refuses.
// MASKPRIOR_EMULATED_TESTS: this program, not tests/unit_tests (which the build without CUDA also
// compiles against the emulation): the files below leave out the CPU cases that unit_tests runs.
#define MASKPRIOR_EMULATED_TESTS
#include "test_main.h"  // doctest's main, and --version
#include "test_gpu.cu"
#include "test_gpu_vision.cu"
#include "test_gpu_language.cu"
#include "test_gpu_fused.cu"
#include "test_gpu_matmul.cu"
#include "test_gpu_profile.cu"
#include "test_gpu_graph.cu"
#include "test_gpu_mix.cu"
#include "test_drop_path.cu"
#include "test_ema.cu"
#include "test_wrong_prior.cu"
#include "test_emulation.cu"
#include "test_emulation_strict.cu"
