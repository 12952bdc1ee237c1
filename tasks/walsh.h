// tasks/walsh.h: Fourier analysis on the Boolean cube {-1,+1}^n, what the Boolean tasks read off a
// target f (docs/method.md, "Any target"): its coefficients, by a fast Walsh-Hadamard transform;
// its support, and the interaction structure G that a support gives. The held-out part and the
// interpolators it leaves free (the MDI, the sparsest one) are tasks/holdout.h's. Host only, in
// double.
//
// Cube point p (0 .. 2^n - 1) has x_i = +1 where bit i of p is set, -1 where it is not. A set A of
// bits is a bit mask too; its monomial is χ_A(x) = Π_{i∈A} x_i, and every f on the cube is
//     f(x) = Σ_A f̂(A) χ_A(x),     f̂(A) = 2^-n Σ_x f(x) χ_A(x).
// Since x_i = -(-1)^(bit i of p), χ_A(p) = (-1)^|A| (-1)^|A&p|: the coefficients are the plain
// Walsh-Hadamard transform H of f (H v(a) = Σ_p (-1)^|a&p| v(p)), signed by (-1)^|A| and scaled
// by 2^-n. The transform runs in n passes of 2^(n-1) butterflies; on values that are multiples of
// a power of two (±1 targets, integers, halves: every named task) every sum is exact, and so is
// the MDI.
#pragma once
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

inline int popcount(uint32_t v) { return __builtin_popcount(v); }

// χ_A at cube point p: -1 to the number of A's bits that are -1 at p
inline int chi(uint32_t A, uint32_t p) { return popcount(A & ~p) % 2 ? -1 : 1; }

// The Walsh-Hadamard transform in place, unnormalised: v(a) <- Σ_p (-1)^|a&p| v(p).
// values (2^bits). Its own inverse up to 2^bits.
inline void walsh_hadamard(std::vector<double>& values, int bits) {
    const size_t n = (size_t)1 << bits;
    if (values.size() != n) throw std::logic_error("walsh_hadamard: " + std::to_string(values.size()) +
                                                   " values for " + std::to_string(bits) + " bits");
    for (size_t half = 1; half < n; half *= 2)
        for (size_t block = 0; block < n; block += 2 * half)
            for (size_t k = block; k < block + half; k++) {
                const double a = values[k], b = values[k + half];
                values[k] = a + b;
                values[k + half] = a - b;
            }
}

// f̂ (2^bits), indexed by the set A as a bit mask, from f (2^bits), indexed by cube point
inline std::vector<double> fourier_coefficients(const std::vector<double>& f, int bits) {
    std::vector<double> c = f;
    walsh_hadamard(c, bits);
    const double scale = std::ldexp(1.0, -bits);  // 2^-n, exact
    for (size_t A = 0; A < c.size(); A++) c[A] *= (popcount((uint32_t)A) % 2 ? -scale : scale);
    return c;
}

// f (2^bits) at every cube point, from its coefficients (2^bits): Σ_A f̂(A) χ_A(p)
inline std::vector<double> from_fourier(const std::vector<double>& coefficients, int bits) {
    std::vector<double> f = coefficients;
    for (size_t A = 0; A < f.size(); A++)
        if (popcount((uint32_t)A) % 2) f[A] = -f[A];
    walsh_hadamard(f, bits);
    return f;
}

// The size below which a coefficient counts as 0. Coefficients computed from values with no exact
// binary form (0.1) carry rounding residues where they should be 0: about 1e-16 of the non-constant
// coefficients' size, and up to about n·2^-52 (3e-15 on 15 bits) of the constant's, which enters
// every value (1e12 + x0*x1). So: 1e-12 of the largest non-constant coefficient, plus 1e-14 of the
// constant; a constant alone does not make the others residues.
inline double coefficient_tolerance(const std::vector<double>& coefficients) {
    double largest = 0;
    for (size_t A = 1; A < coefficients.size(); A++) largest = std::fmax(largest, std::fabs(coefficients[A]));
    return 1e-12 * largest + 1e-14 * std::fabs(coefficients[0]);
}

// f's support: the sets A (ascending) whose coefficient is not zero (above coefficient_tolerance)
inline std::vector<uint32_t> fourier_support(const std::vector<double>& f_hat) {
    const double tolerance = coefficient_tolerance(f_hat);
    std::vector<uint32_t> support;
    for (uint32_t A = 0; A < (uint32_t)f_hat.size(); A++)
        if (std::fabs(f_hat[A]) > tolerance) support.push_back(A);
    return support;
}

// A set's monomial as text: x0*x1 ({0, 1}), 1 (the empty set)
inline std::string monomial_text(uint32_t A) {
    std::string text;
    for (int i = 0; i < 32; i++)
        if (A >> i & 1) text += (text.empty() ? "x" : "*x") + std::to_string(i);
    return text.empty() ? "1" : text;
}

// The bits a support reads: the union of its sets
inline uint32_t support_bits(const std::vector<uint32_t>& support) {
    uint32_t bits = 0;
    for (uint32_t A : support) bits |= A;
    return bits;
}

// G (T x T, T = bits + 1; position 0 is CLS, position i + 1 is bit x_i; row = query) read off a
// support: CLS and every bit it reads attend to each other, two bits that share a monomial of the
// support attend to each other, and every token attends to itself. All links go both ways.
inline std::vector<float> structure_from_support(const std::vector<uint32_t>& support, int bits) {
    const int T = bits + 1;
    std::vector<float> G((size_t)T * T, 0.0f);
    auto link = [&](int a, int b) { G[(size_t)a * T + b] = G[(size_t)b * T + a] = 1.0f; };
    for (int t = 0; t < T; t++) link(t, t);
    const uint32_t read = support_bits(support);
    for (int i = 0; i < bits; i++)
        if (read >> i & 1) link(0, 1 + i);
    for (uint32_t A : support)
        for (int i = 0; i < bits; i++)
            for (int j = i + 1; j < bits; j++)
                if ((A >> i & 1) && (A >> j & 1)) link(1 + i, 1 + j);
    return G;
}
