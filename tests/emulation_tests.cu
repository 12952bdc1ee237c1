// The CUDA emulation's own tests alone (test_emulation.cu, test_emulation_strict.cu, which
// tests/emulated_tests runs too): a program small enough to build under ThreadSanitizer in
// seconds, as tests/emulation_tests_tsan, which make check runs (each CUDA thread a fiber of its
// own: a race between two threads of a block is reported with both named).
#define MASKPRIOR_EMULATED_TESTS
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include "test_emulation.cu"
#include "test_emulation_strict.cu"
