// test_util.h: what the tests share: random inputs, a finite-difference gradient check in
// double precision, and running the maskprior binary to see how it answers.
#pragma once
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <cmath>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>
#include <filesystem>
#include <fstream>
#include <iterator>
#include "layers/kernels.h"  // Kernels
#include "layers/launch.cuh"  // launch_kernel, buffers, Device, gpu_count, cudaCheck
#include "layers/rng.h"      // Rng
#include "run/pictures.h"  // stb_image_write: stbi_write_png
#include "temp_dir.h"

// Random values in [-1, 1): never zeros, which would hide a missing term.
template <typename F>
inline std::vector<F> random_vector(size_t n, Rng& rng, float scale = 1.0f) {
    std::vector<F> v(n);
    for (auto& x : v) x = F(rng.uniform(-scale, scale));
    return v;
}

// Checks d loss / d x[i] == analytic[i] by central differences, for every i.
// loss() recomputes the scalar loss from the current x. In double, h = 1e-6 leaves a
// truncation and rounding error far below the tolerance.
inline void check_gradient(const char* what, std::vector<double>& x, const std::vector<double>& analytic,
                           const std::function<double()>& loss, double tol = 1e-6) {
    REQUIRE(x.size() == analytic.size());
    const double h = 1e-6;
    for (size_t i = 0; i < x.size(); i++) {
        double keep = x[i];
        x[i] = keep + h;
        double up = loss();
        x[i] = keep - h;
        double down = loss();
        x[i] = keep;
        double numeric = (up - down) / (2 * h);
        double err = std::fabs(numeric - analytic[i]) / (1 + std::fabs(numeric));
        REQUIRE_MESSAGE(std::isfinite(analytic[i]), std::string(what) << "[" << i << "] is not finite");
        if (!(err <= tol)) {  // also catches NaN
            FAIL_CHECK(std::string(what) << "[" << i << "]: analytic " << analytic[i] << " vs numeric " << numeric);
            return;
        }
    }
}

// sum_i w_i out_i: the scalar whose gradient with respect to out is w
inline double weighted_sum(const std::vector<double>& out, const std::vector<double>& w) {
    double s = 0;
    for (size_t i = 0; i < out.size(); i++) s += out[i] * w[i];
    return s;
}

struct CommandResult {
    int exit_code;
    std::string out;  // stdout and stderr together
};

// Runs a shell command (from the repository root, where make test runs) and captures its
// stdout and stderr together, or only stderr.
inline CommandResult run_command(const std::string& cmd, bool stderr_only = false) {
    CommandResult r{-1, ""};
    FILE* p = popen((cmd + (stderr_only ? " 2>&1 >/dev/null" : " 2>&1")).c_str(), "r");
    if (!p) return r;
    char buf[4096];
    while (fgets(buf, sizeof buf, p)) r.out += buf;
    int status = pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

// A small image folder for --task images: dir/train/c<k>/<i>.png (per_class each) and dir/test/c<k>/
// (per_class / 2 + 1 each), RGB size x size: seeded noise plus a colour of the class, so there is
// something to learn. Returns dir.
inline std::string write_image_folder(const std::string& dir, int classes, int per_class, int size, uint64_t seed) {
    Rng rng(seed);
    for (const char* split : {"train", "test"})
        for (int k = 0; k < classes; k++) {
            const std::string folder = dir + "/" + split + "/c" + std::to_string(k);
            std::filesystem::create_directories(folder);
            const int n = split[1] == 'r' ? per_class : per_class / 2 + 1;
            for (int i = 0; i < n; i++) {
                std::vector<unsigned char> rgb((size_t)size * size * 3);
                for (size_t j = 0; j < rgb.size(); j++)
                    rgb[j] = (unsigned char)(rng.below(128) + (j % 3 == (size_t)k % 3 ? 127 : 0));
                const std::string path = folder + "/" + std::to_string(i) + ".png";
                REQUIRE(stbi_write_png(path.c_str(), size, size, 3, rgb.data(), size * 3));
            }
        }
    return dir;
}

// Whether the GPU cases run: a GPU is there, and MASKPRIOR_TESTS_WITHOUT_GPU is unset. Set, the
// GPU cases skip themselves as on a machine without one (tests/gpu_tests_isolated.sh --gpu-cases
// lists the cases so, to tell the GPU cases apart); the programs the tests start still see the GPU.
inline bool gpu_available() { return gpu_count() > 0 && !getenv("MASKPRIOR_TESTS_WITHOUT_GPU"); }

// A file's whole content ("" when it cannot be read)
inline std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// The program the command-line tests run: ./maskprior, or $MASKPRIOR_BINARY (make test-sanitize
// runs them on ./maskprior-sanitize, built with the sanitizers).
inline std::string maskprior_binary() {
    const char* binary = getenv("MASKPRIOR_BINARY");
    return binary ? binary : "./maskprior";
}
static const std::string MASKPRIOR = maskprior_binary();

// The binary the GPU tests run: under the CUDA emulation (emu/) the one built against it.
#ifdef MASKPRIOR_CUDA_EMULATION
static const std::string GPU_BINARY = "./maskprior-emulated";
#else
static const std::string GPU_BINARY = MASKPRIOR;
#endif
