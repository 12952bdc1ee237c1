// gpu_test_util.h: what the GPU tests share with the emulation's own tests (test_emulation.cu): a
// float buffer on the GPU, and the tolerances with which a kernel's output meets the CPU's.
#pragma once
#include <cmath>
#include <string>
#include <vector>
#include "test_util.h"

// A float buffer on the GPU, filled from the host, read back with get().
struct GpuBuffer {
    float* ptr = nullptr;
    size_t n;
    explicit GpuBuffer(const std::vector<float>& host) : n(host.size()) {
        ptr = buffer_alloc(DEVICE_GPU, n);
        buffer_copy(ptr, DEVICE_GPU, host.data(), DEVICE_CPU, n);
    }
    std::vector<float> get() const {
        std::vector<float> host(n);
        buffer_copy(host.data(), DEVICE_CPU, ptr, DEVICE_GPU, n);
        return host;
    }
    ~GpuBuffer() { buffer_free(DEVICE_GPU, ptr); }
};

// Elementwise kernels: 1e-5; reductions and matmuls: 1e-4 absolute + 1e-3 relative. NaN fails.
constexpr double ELEMENTWISE = 1e-5;
constexpr double REDUCTION = 1e-4;

inline void expect_close(const char* what, const std::vector<float>& gpu, const std::vector<float>& cpu, double atol) {
    REQUIRE(gpu.size() == cpu.size());
    const double rtol = atol == ELEMENTWISE ? 0 : 1e-3;
    for (size_t i = 0; i < cpu.size(); i++) {
        double err = std::fabs((double)gpu[i] - cpu[i]);
        if (!(err <= atol + rtol * std::fabs(cpu[i]))) {
            FAIL_CHECK(std::string(what) << "[" << i << "]: gpu " << gpu[i] << " vs cpu " << cpu[i]);
            return;
        }
    }
}
