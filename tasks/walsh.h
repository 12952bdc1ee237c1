// tasks/walsh.h: Fourier analysis on the Boolean cube {-1,+1}^n, what the Boolean tasks read off a
// target f (docs/method.md, "Any target"): its coefficients, by a fast Walsh-Hadamard transform;
// its min-degree interpolator (MDI) for a held-out subcube; its support, and the interaction
// structure G that the support gives. Host only, in double.
//
// Cube point p (0 .. 2^n - 1) has x_i = +1 where bit i of p is set, -1 where it is not. A set A of
// bits is a bit mask too; its monomial is χ_A(x) = Π_{i∈A} x_i, and every f on the cube is
//     f(x) = Σ_A f̂(A) χ_A(x),     f̂(A) = 2^-n Σ_x f(x) χ_A(x).
// Since x_i = -(-1)^(bit i of p), χ_A(p) = (-1)^|A| (-1)^|A&p|: the coefficients are the plain
// Walsh-Hadamard transform H of f (H v(a) = Σ_p (-1)^|a&p| v(p)), signed by (-1)^|A| and scaled
// by 2^-n. The transform runs in n passes of 2^(n-1) butterflies; on values that are multiples of
// a power of two (±1 targets, integers, halves: every named task) every sum is exact, and so is
// the MDI.
//
// The MDI for a held-out subcube U = {x : x_i = s_i for i in S}: every function equal to f on the
// seen domain (outside U) is f + h·1_U with h a function of the free bits F (those not in S), and
//     1_U(x) = Π_{i∈S} (1 + s_i x_i)/2 = 2^-|S| Σ_{B⊆S} s_B χ_B(x),    s_B = Π_{i∈B} s_i,
// so h's coefficient ĥ(R), R ⊆ F, moves exactly the group {R ∪ B : B ⊆ S} of f's coefficients,
// each by 2^-|S| s_B ĥ(R). The group's top monomial R ∪ S is its only one of degree |R| + |S|;
// the MDI zeroes it, which fixes ĥ(R) = -2^|S| s_S f̂(R ∪ S), and so moves the rest of the group:
//     ĝ(R ∪ S) = 0,     ĝ(R ∪ B) = f̂(R ∪ B) - s_{S∖B} f̂(R ∪ S)   for B ⊊ S.
// Zeroing every top is the unique choice with the least weight Σ_{|A|=d} ĝ(A)² at the highest
// degree d, then the next (GOTU's degree profile): docs/method.md derives it.
#pragma once
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

// A subcube of {-1,+1}^n: the bits in `fixed` hold a value, +1 for those also in `plus`, -1 for
// the others; the other bits are free.
struct Subcube {
    uint32_t fixed = 0;  // bit mask of the fixed bits (S)
    uint32_t plus = 0;   // bit mask of those fixed to +1 (a subset of fixed)
    bool holds(uint32_t p) const { return (p & fixed) == plus; }
    int fixed_count() const { return __builtin_popcount(fixed); }
};

inline int popcount(uint32_t v) { return __builtin_popcount(v); }

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

// The coefficients (2^bits) of the min-degree interpolator of f for the held-out subcube `unseen`,
// from f's coefficients: each group's top zeroed, the rest moved (the header's formula)
inline std::vector<double> mdi_coefficients(const std::vector<double>& f_hat, const Subcube& unseen) {
    const uint32_t S = unseen.fixed;
    std::vector<double> g_hat(f_hat.size());
    for (uint32_t A = 0; A < (uint32_t)f_hat.size(); A++) {
        const uint32_t R = A & ~S, B = A & S;
        if (B == S) { g_hat[A] = 0; continue; }  // the top of R's group
        const uint32_t minus_in_rest = (S & ~B) & ~unseen.plus;  // the bits of S∖B whose s_i is -1
        const double s_rest = popcount(minus_in_rest) % 2 ? -1.0 : 1.0;
        g_hat[A] = f_hat[A] - s_rest * f_hat[R | S];
    }
    return g_hat;
}

// The MDI (2^bits) of f (2^bits) at every cube point
inline std::vector<double> min_degree_interpolator(const std::vector<double>& f, const Subcube& unseen, int bits) {
    return from_fourier(mdi_coefficients(fourier_coefficients(f, bits), unseen), bits);
}

// f's support: the sets A (ascending) whose coefficient is not zero. Coefficients computed from
// values with no exact binary form (0.1) carry rounding residues of about 1e-16 of the largest
// one where they should be 0; a coefficient counts when it is above 1e-12 of the largest.
inline std::vector<uint32_t> fourier_support(const std::vector<double>& f_hat) {
    double largest = 0;
    for (double c : f_hat) largest = std::fmax(largest, std::fabs(c));
    std::vector<uint32_t> support;
    for (uint32_t A = 0; A < (uint32_t)f_hat.size(); A++)
        if (std::fabs(f_hat[A]) > 1e-12 * largest) support.push_back(A);
    return support;
}

// The bits f reads: the union of its support's sets
inline uint32_t support_bits(const std::vector<uint32_t>& support) {
    uint32_t bits = 0;
    for (uint32_t A : support) bits |= A;
    return bits;
}

// G (T x T, T = bits + 1; position 0 is CLS, position i + 1 is bit x_i; row = query) read off f's
// support: CLS and every bit f reads attend to each other, two bits that share a monomial of the
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
