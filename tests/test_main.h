// test_main.h: the main of the doctest programs (tests/unit_tests, tests/emulated_tests): doctest's
// own, except that --version alone prints the program's commit and build settings (make gpu-check's
// preflight reads them off each binary carried to the GPU machine), then doctest's version, and
// that the tests work in a folder of their own (below).
#pragma once
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <cstring>
#include <filesystem>
#include "gpu/cuda.cuh"  // print_version
#include "temp_dir.h"    // tmp_path: the test run's own folder

// The tests' working folder: one in the test run's own folder (tests/temp_dir.h), whose entries
// are links to those of the folder the program started in (the tree), all but runs/. A run given
// no --out claims runs/<name> of its working folder, one run per folder, and make check runs
// several test programs in the tree at once (tests/run_all.sh's two lanes): so each has a runs/ of
// its own, which goes with its folder, and the tree gets none.
inline void work_in_own_folder() {
    namespace fs = std::filesystem;
    const fs::path tree = fs::current_path(), own = tmp_path("tree");
    fs::create_directory(own);
    for (const fs::directory_entry& entry : fs::directory_iterator(tree))
        if (entry.path().filename() != "runs") fs::create_symlink(entry.path(), own / entry.path().filename());
    fs::current_path(own);
}

int main(int argc, char** argv) {
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        print_version(argv[0]);
        printf("doctest %s\n", DOCTEST_VERSION_STR);
        return 0;
    }
    work_in_own_folder();
    return doctest::Context(argc, argv).run();
}
