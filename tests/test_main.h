// test_main.h: the main of the doctest programs (tests/unit_tests, tests/emulated_tests): doctest's
// own, except that --version alone prints the program's commit and build settings (make gpu-check's
// preflight reads them off each binary carried to the GPU machine), then doctest's version.
#pragma once
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <cstring>
#include "gpu/cuda.cuh"  // print_version

int main(int argc, char** argv) {
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        print_version(argv[0]);
        printf("doctest %s\n", DOCTEST_VERSION_STR);
        return 0;
    }
    return doctest::Context(argc, argv).run();
}
