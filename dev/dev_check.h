// dev/dev_check.h: what the kernel lab (dev/dev_common.h) and the kernel course (dev/exercises/)
// check kernels with: the attention shapes, random inputs, a float buffer on the GPU, the
// tolerance, the first entry that misses it and its place.
#pragma once
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>
#include "attention.cuh"      // AttentionShape; layers/device.cuh: buffer_alloc, buffer_copy
#include "layers/rng.h"       // Rng: the random inputs

// The shapes a program runs: awkward ones (T not a multiple of the tiles; HS not of 32; a
// batch not of the mask gradient's groups), and real ones, named for the run that has them.
struct DevShape {
    const char* name;
    AttentionShape s;  // B, T, NH, HS, mask_heads, causal
};

inline std::vector<DevShape> dev_shapes(bool quick) {
    if (quick)  // the CPU emulation: small B and NH, every T of the full list
        return {{"T16, shared mask", {3, 16, 2, 16, 1, false}},
                {"T16, per head, causal", {2, 16, 2, 40, 2, true}},
                {"T65, shared, causal", {9, 65, 2, 8, 1, true}},
                {"T65, per head", {2, 65, 3, 33, 3, false}},
                {"T256, per head, causal", {1, 256, 2, 16, 2, true}},
                {"T256, no mask", {1, 256, 1, 8, 0, false}}};
    return {{"2parity paper size (T16, shared)", {256, 16, 6, 64, 1, false}},
            {"T16, per head, causal", {64, 16, 4, 40, 4, true}},
            {"ViT-Tiny CIFAR (T65, shared)", {128, 65, 3, 64, 1, false}},
            {"T65, per head, causal", {37, 65, 4, 100, 4, true}},
            {"LM ALiBi (T256, per head, causal)", {64, 256, 6, 64, 6, true}},
            {"T256, shared", {16, 256, 6, 64, 1, false}},
            {"T256, no mask", {16, 256, 6, 64, 0, false}}};
}

// --shape's value into *shape: six whole numbers B,T,NH,HS,MASK_HEADS,CAUSAL, mask heads 0, 1 or NH,
// causal 0 or 1; false for anything else
inline bool parse_shape(const char* text, DevShape* shape) {
    int v[6];
    char tail;
    if (sscanf(text, "%d,%d,%d,%d,%d,%d%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6 || v[0] < 1 ||
        v[1] < 1 || v[2] < 1 || v[3] < 1 || (v[4] != 0 && v[4] != 1 && v[4] != v[2]) || (v[5] != 0 && v[5] != 1))
        return false;
    *shape = {"given", {v[0], v[1], v[2], v[3], v[4], v[5] == 1}};
    return true;
}

// The floats of each buffer of the layer at a shape
struct DevSizes {
    size_t qkv, out, att, mask;  // (B,T,3·NH·HS), (B,T,NH·HS), (B,NH,T,T), (mask heads or 1,T,T)
    explicit DevSizes(const AttentionShape& s)
        : qkv((size_t)s.B * s.T * 3 * s.NH * s.HS), out((size_t)s.B * s.T * s.NH * s.HS),
          att((size_t)s.B * s.NH * s.T * s.T), mask((size_t)std::max(1, s.mask_heads) * s.T * s.T) {}
};

// Random values in [-scale, scale): never zeros, which would hide a missing term
inline std::vector<float> dev_random(size_t n, Rng& rng, float scale = 1.0f) {
    std::vector<float> v(n);
    for (auto& x : v) x = rng.uniform(-scale, scale);
    return v;
}

// A float buffer on the GPU, filled from the host; get() reads it back
struct DevBuffer {
    float* ptr = nullptr;
    size_t n = 0;
    explicit DevBuffer(const std::vector<float>& host) : n(host.size()) {
        ptr = buffer_alloc(DEVICE_GPU, n ? n : 1);
        if (n) buffer_copy(ptr, DEVICE_GPU, host.data(), DEVICE_CPU, n);
    }
    DevBuffer(const DevBuffer&) = delete;
    DevBuffer& operator=(const DevBuffer&) = delete;
    void set(const std::vector<float>& host) { buffer_copy(ptr, DEVICE_GPU, host.data(), DEVICE_CPU, n); }
    std::vector<float> get() const {
        std::vector<float> host(n);
        if (n) buffer_copy(host.data(), DEVICE_CPU, ptr, DEVICE_GPU, n);
        return host;
    }
    ~DevBuffer() { buffer_free(DEVICE_GPU, ptr); }
};

// Whether gpu is within 1e-4 + 1e-3·|cpu| of cpu, the tests' tolerance for reductions (TF32 off);
// never when either is NaN
inline bool dev_close(float gpu, float cpu) {
    return std::fabs((double)gpu - cpu) <= 1e-4 + 1e-3 * std::fabs(cpu);
}

// The first entry where gpu is not dev_close to cpu; cpu.size() when there is none
inline size_t dev_first_miss(const std::vector<float>& gpu, const std::vector<float>& cpu) {
    for (size_t i = 0; i < cpu.size(); i++)
        if (!dev_close(gpu[i], cpu[i])) return i;
    return cpu.size();
}

// Entry i of a row-major buffer of the given dims, each named by one letter: dev_place(61, "bthd",
// {2, 4, 2, 8}) is "(b, t, h, d) = (0, 3, 1, 5)"
inline std::string dev_place(size_t i, const std::string& letters, const std::vector<int>& dims) {
    std::string names, values;
    for (size_t k = dims.size(); k-- > 0;) {
        values = std::to_string(i % dims[k]) + (values.empty() ? "" : ", " + values);
        i /= dims[k];
    }
    for (char letter : letters) names += (names.empty() ? "" : ", ") + std::string(1, letter);
    return "(" + names + ") = (" + values + ")";
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// One shape's random inputs of the forward and the CPU's outputs from them (attention_forward_cpu),
// which every version, and the course's forward steps, are checked against
struct ForwardCase {
    AttentionShape s;
    std::vector<float> qkv, mask;            // (B,T,3·NH·HS), (mask heads or 1,T,T)
    std::vector<float> out, att, mask_term;  // the CPU's: y (B,T,NH·HS), A (B,NH,T,T), log σ(M) like the mask
    explicit ForwardCase(AttentionShape shape) : s(shape) {
        const DevSizes n(s);
        Rng rng(7);
        qkv = dev_random(n.qkv, rng);
        mask = dev_random(n.mask, rng, 4);
        out.resize(n.out);
        att.resize(n.att);
        mask_term.resize(n.mask);
        attention_forward_cpu(out.data(), att.data(), qkv.data(), s.mask_heads ? mask.data() : nullptr,
                              mask_term.data(), s);
    }
};

// One shape's random inputs of the backward and the CPU's outputs from them (attention_backward_cpu),
// which every version, and the course's backward steps, are checked against. The backward adds into dqkv and dM (+=), so both
// start from random values, which a missing term cannot hide behind.
struct BackwardCase {
    AttentionShape s;
    std::vector<float> qkv, mask, dout;          // (B,T,3·NH·HS), (mask heads or 1,T,T), dy (B,T,NH·HS)
    std::vector<float> att;                      // (B,NH,T,T) A, from the CPU's forward
    std::vector<float> dqkv_start, dmask_start;  // what the backward adds into: dqkv's shape, the mask's
    std::vector<float> dqkv, dmask, dscores;     // the CPU's: the starts plus the gradients, and dS (B,NH,T,T)
    explicit BackwardCase(AttentionShape shape) : s(shape) {
        const DevSizes n(s);
        Rng rng(8);
        qkv = dev_random(n.qkv, rng);
        mask = dev_random(n.mask, rng, 4);
        dout = dev_random(n.out, rng);
        dqkv_start = dev_random(n.qkv, rng);
        dmask_start = dev_random(n.mask, rng);
        const float* m = s.mask_heads ? mask.data() : nullptr;
        std::vector<float> out(n.out), mask_term(n.mask);
        att.resize(n.att);
        dscores.resize(n.att);
        attention_forward_cpu(out.data(), att.data(), qkv.data(), m, mask_term.data(), s);
        dqkv = dqkv_start;
        dmask = dmask_start;
        attention_backward_cpu(dqkv.data(), dmask.data(), dscores.data(), dout.data(), qkv.data(), att.data(), m, s);
    }
};

// dqkv's dq, dk or dv (part 0, 1 or 2) as a (B,T,NH,HS) buffer of its own, to be checked and named alone
inline std::vector<float> qkv_part(const std::vector<float>& dqkv, AttentionShape s, int part) {
    const size_t row = (size_t)s.NH * s.HS;  // one token's q (or k, or v) of every head
    std::vector<float> out((size_t)s.B * s.T * row);
    for (size_t bt = 0; bt < (size_t)s.B * s.T; bt++)
        std::copy_n(dqkv.begin() + (bt * 3 + part) * row, row, out.begin() + bt * row);
    return out;
}

inline const char* const QKV_GRADIENTS[3] = {"dq", "dk", "dv"};  // the names of qkv_part's parts
