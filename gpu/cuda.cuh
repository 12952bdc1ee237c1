// gpu/cuda.cuh: CUDA itself, for the rest of the program: the CUDA and cuBLAS headers (or, built
// by the host compiler with MASKPRIOR_CUDA_EMULATION, the emulation of emu/ in their place),
// whether the GPU is emulated, which build this is (nvcc's, or the host compiler's with or without
// CUDA) and by which compiler, the error checks (CUDA errors are bugs, not input: cudaCheck and
// cublasCheck stop the program with file:line), how many GPUs there are, and whether the GPU is
// the one the code was built for.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>
#ifdef MASKPRIOR_CUDA_EMULATION  // the host compiler, without a GPU: emu/ runs the kernels on the CPU
#include "emu/cuda_emulation.h"
#include "emu/cublas_emulation.h"
#include "emu/cublaslt_emulation.h"
constexpr bool GPU_EMULATED = true;
#else
#include <cublas_v2.h>
#include <cublasLt.h>
#include <cuda_runtime.h>
constexpr bool GPU_EMULATED = false;
#endif
// The build without a CUDA toolkit (make CUDA=0, or no nvcc found): ./maskprior and the unit tests
// by the host compiler, the emulation in CUDA's place. Its emulated GPU is there to check the CUDA
// code, not to train on: --device auto takes the CPU, and only --device cuda the emulation.
#ifdef MASKPRIOR_WITHOUT_CUDA
#ifndef MASKPRIOR_CUDA_EMULATION
#error "MASKPRIOR_WITHOUT_CUDA builds the CUDA code on the emulation: define MASKPRIOR_CUDA_EMULATION too"
#endif
constexpr bool BUILT_WITHOUT_CUDA = true;
#else
constexpr bool BUILT_WITHOUT_CUDA = false;
#endif
#include "layers/errors.h"  // fail: a GPU older than the build is bad input

// ----------------------------------------------------------------------------
// errors: CUDA errors are bugs, and stop the program with file:line
//
// A kernel's fault (an illegal address, a trap) is asynchronous: the launch returns before the
// kernel runs, and CUDA reports the fault at the next call that checks, which may be another
// layer's, in another file. So every CUDA error's line says how to have the fault reported where
// it happens: CUDA_LAUNCH_BLOCKING=1 makes each launch wait for its kernel, and the check after the
// launch (launch_kernel's, which names the kernel) then reports it. The emulation does the same.

inline bool launches_blocking() {
    const char* blocking = getenv("CUDA_LAUNCH_BLOCKING");
    return blocking && std::string(blocking) == "1";
}

// The line of a CUDA error found `where` ("at file:line", "after the launch of a kernel")
inline std::string cuda_error_line(cudaError_t err, const std::string& where) {
    std::string line = "maskprior: CUDA error " + where + ": " + cudaGetErrorString(err);
    if (launches_blocking())
        return line + " (CUDA_LAUNCH_BLOCKING=1: each launch waited for its kernel, so a kernel's fault is reported "
                      "after its own launch)";
    return line + " (a kernel's fault is reported at the next check, which may be a later call's: "
                  "CUDA_LAUNCH_BLOCKING=1 runs it again with the fault reported at its launch)";
}

[[noreturn]] inline void cuda_fail(cudaError_t err, const std::string& where) {
    fprintf(stderr, "%s\n", cuda_error_line(err, where).c_str());
    exit(1);
}

inline void cuda_check(cudaError_t err, const char* file, int line) {
    if (err != cudaSuccess) cuda_fail(err, std::string("at ") + file + ":" + std::to_string(line));
}
#define cudaCheck(err) cuda_check((err), __FILE__, __LINE__)

// The line of a failed cuBLAS or cuBLASLt call: the status's name and the library's words for it
inline std::string cublas_error_line(cublasStatus_t status, const char* file, int line) {
    return std::string("maskprior: cuBLAS error at ") + file + ":" + std::to_string(line) + ": " +
           cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")";
}

inline void cublas_check(cublasStatus_t status, const char* file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "%s\n", cublas_error_line(status, file, line).c_str());
        exit(1);
    }
}
#define cublasCheck(status) cublas_check((status), __FILE__, __LINE__)

// Number of CUDA GPUs to train on; 0 when there is no driver or no GPU (never an error), and in the
// build without CUDA, whose emulated GPU only --device cuda asks for (run/setup.cuh's pick_device)
inline int gpu_count() {
    if (BUILT_WITHOUT_CUDA) return 0;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no device" error
        return 0;
    }
    return n;
}

// The compiler of the host code: "g++ 12.2.0" or "clang++ 14.0.6" (under nvcc, the one it hands
// the host code to)
inline std::string host_compiler() {
#if defined(__clang__)
    return "clang++ " + std::to_string(__clang_major__) + "." + std::to_string(__clang_minor__) + "." +
           std::to_string(__clang_patchlevel__);
#else
    return "g++ " __VERSION__;
#endif
}

// Which build this is, in a few words: for --version and the start-up table
inline std::string build_text() {
#if defined(MASKPRIOR_WITHOUT_CUDA)
    return host_compiler() + " without CUDA (CUDA code on emu/)";
#elif defined(MASKPRIOR_CUDA_EMULATION)
    return host_compiler() + " with the CUDA emulation (emu/)";
#else
    return "nvcc " + std::to_string(__CUDACC_VER_MAJOR__) + "." + std::to_string(__CUDACC_VER_MINOR__) + " with " +
           host_compiler();
#endif
}

// The commit and the settings the Makefile compiles in (`git describe --always --dirty`; CUDA, CXX,
// HOST_MARCH and ARCH as .build-settings has them)
#ifndef MASKPRIOR_GIT_COMMIT
#define MASKPRIOR_GIT_COMMIT "unknown"
#endif
#ifndef MASKPRIOR_BUILD_SETTINGS
#define MASKPRIOR_BUILD_SETTINGS "unknown"
#endif

// What --version prints, for every program built from these sources (./maskprior, the unit tests,
// the kernel lab): its name, its commit, the compilers and the settings it was built with. make
// gpu-check's preflight reads it off each binary carried to the GPU machine, where there is no .git.
inline void print_version(const char* program) {
    printf("%s %s\nbuilt by %s: %s\n", program, MASKPRIOR_GIT_COMMIT, build_text().c_str(), MASKPRIOR_BUILD_SETTINGS);
}

// The compute capability the GPU code was built for (make ARCH=...; 0 under the emulation)
#ifndef MASKPRIOR_CUDA_ARCH
#define MASKPRIOR_CUDA_ARCH 0
#endif

// What to say when the GPU (compute capability `present`, 80 for sm_80) is not the one the code
// was built for (`built`): "" when it is; for an older GPU, which cannot run the code at all, an
// error; for a newer one, which compiles the binary's PTX at start-up, a note (is_error false).
inline std::string gpu_arch_mismatch(int built, int present, bool* is_error) {
    *is_error = present < built;
    if (present == built) return "";
    const std::string line = "built for sm_" + std::to_string(built) + ", this GPU is sm_" + std::to_string(present);
    if (*is_error) return line + ": make ARCH=" + std::to_string(present);
    return line + ": its PTX is compiled at start-up (make ARCH=" + std::to_string(present) + " builds for it)";
}

// The line above, at start-up on a GPU: an error fails, a note goes to stderr
inline void check_gpu_arch() {
    if (MASKPRIOR_CUDA_ARCH == 0) return;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    bool is_error = false;
    const std::string line = gpu_arch_mismatch(MASKPRIOR_CUDA_ARCH, prop.major * 10 + prop.minor, &is_error);
    if (is_error) fail("%s", line.c_str());
    if (!line.empty()) fprintf(stderr, "maskprior: note: %s\n", line.c_str());
}

