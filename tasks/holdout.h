// tasks/holdout.h: the part of the cube held out of training (--unseen COND), an affine subspace,
// and the interpolators it leaves free: the min-degree one (MDI), which a transformer tends to
// drift to, and the sparsest one, from which --g-from data reads G (docs/method.md, "Any target").
// Host only, in double.
//
// The hold-out is U = {x : χ_Tj(x) = s_j for j = 1..k}: products of bits T_j (bit masks,
// independent: none the product of others) taking signs s_j. A subcube is the case of single
// bits (x0=-1,x1=-1: T = {0}, {1}); GOTU's threesym holds out x0 x1 x2 = -1. Since
//     1_U(x) = Π_j (1 + s_j χ_Tj(x))/2 = 2^-k Σ_W s_W χ_TW(x)     (W ⊆ {1..k}, T_W the xor of its
//                                                                 T_j, s_W the product of its s_j),
// every function equal to f on the seen domain (outside U) is f + h·1_U, and h's coefficient
// ĥ(B) moves f's coefficients at B xor T_W by 2^-k s_W ĥ(B): it stays in B's coset
// B + span{T_j}. Within a coset A + span (2^k members A xor T_W; 2^(n-k) cosets) the members
// therefore move together, by one free number t per coset:
//     ĝ(A xor T_W) = f̂(A xor T_W) + t·s_W,     t = 2^-k Σ_V s_V ĥ(A xor T_V).
// The MDI (GOTU's: the least Fourier weight at the highest degree, then the next, ...) picks,
// in each coset, the t with the least weight on the coset's top-degree members: the t that zeroes
// the top member when there is one, else the least-squares t over the several of that degree,
//     t = -(1/m) Σ_{members M of top degree} s_M f̂(M).
// For a subcube (T_j the single bits of S) the coset of R ⊆ F (the free bits) is {R ∪ B : B ⊆ S},
// its one top is R ∪ S, and this is the zeroing formula ĝ(R ∪ B) = f̂(R ∪ B) - s_{S∖B} f̂(R ∪ S),
// in the same floating-point operations. The sparsest interpolator picks, in each coset, the t that
// zeroes the most members: docs/method.md derives both.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>
#include "tasks/walsh.h"  // popcount, chi, fourier_coefficients, from_fourier, coefficient_tolerance

// One constraint of a hold-out: χ_T(x) = s, the product of the bits of T is s
struct Parity {
    uint32_t product = 0;  // T, as a bit mask
    int sign = 1;          // s: -1 or +1
};

// The held-out part: the points where every constraint holds
struct HoldOut {
    std::vector<Parity> parities;  // independent (parse_unseen refuses a dependent one)

    bool holds(uint32_t p) const {
        for (const Parity& c : parities)
            if (chi(c.product, p) != c.sign) return false;
        return true;
    }
    int points(int bits) const { return 1 << (bits - (int)parities.size()); }  // |U| = 2^(n-k)

    // span{T_j} with the signs they take on U: entry W (a bit mask over the constraints) is
    // (T_W, s_W); entry 0 is (∅, +1). (2^k)
    std::vector<Parity> span() const {
        std::vector<Parity> all = {Parity{}};
        for (const Parity& c : parities) {
            const size_t half = all.size();
            for (size_t W = 0; W < half; W++) all.push_back({all[W].product ^ c.product, all[W].sign * c.sign});
        }
        return all;
    }

    // The subcube where the bits of `fixed` hold their values: +1 for those in `plus`, else -1
    static HoldOut subcube(uint32_t fixed, uint32_t plus) {
        HoldOut U;
        for (int i = 0; i < 32; i++)
            if (fixed >> i & 1) U.parities.push_back({1u << i, (plus >> i & 1) ? 1 : -1});
        return U;
    }
};

// Constraints in echelon form, for telling whether another follows from them: each row's highest
// bit (its pivot) is no other row's, and the rows go by pivot, highest first.
struct ParityBasis {
    std::vector<Parity> rows;
    uint32_t pivots = 0;

    static uint32_t highest_bit(uint32_t v) { return 1u << (31 - __builtin_clz(v)); }

    // c times the rows that clear its pivot bits (χ_T χ_R = χ_{T xor R}, the signs multiply):
    // (∅, +1) when c follows from the rows, (∅, -1) when it contradicts them
    Parity reduce(Parity c) const {
        for (const Parity& row : rows)
            if (c.product & highest_bit(row.product)) {
                c.product ^= row.product;
                c.sign *= row.sign;
            }
        return c;
    }
    // a constraint reduce() returned not empty
    void add(const Parity& reduced) {
        const uint32_t pivot = highest_bit(reduced.product);
        auto at = std::find_if(rows.begin(), rows.end(), [&](const Parity& r) { return highest_bit(r.product) < pivot; });
        rows.insert(at, reduced);
        pivots |= pivot;
    }
};

// Calls visit(members) once per coset A + span{T_j} of the 2^bits sets: members (2^k) holds
// (A xor T_W, s_W) at entry W. A is the coset's one set without a pivot bit: a nonzero member of
// the span holds the highest pivot among the rows it is made of, so two such sets never differ by one.
template <typename Visit>
inline void for_each_coset(const HoldOut& unseen, int bits, Visit visit) {
    ParityBasis basis;
    for (const Parity& c : unseen.parities) basis.add(basis.reduce(c));
    const std::vector<Parity> span = unseen.span();
    std::vector<Parity> members(span.size());
    for (uint32_t A = 0; A < (1u << bits); A++) {
        if (A & basis.pivots) continue;
        for (size_t W = 0; W < span.size(); W++) members[W] = {A ^ span[W].product, span[W].sign};
        visit(members);
    }
}

// The coefficients (2^bits) of the MDI of f for the hold-out, from f's coefficients: in each coset
// the t with the least weight at its top degree (the header's formula)
inline std::vector<double> mdi_coefficients(const std::vector<double>& f_hat, const HoldOut& unseen) {
    const int bits = __builtin_ctz((uint32_t)f_hat.size());
    std::vector<double> g_hat(f_hat.size());
    for_each_coset(unseen, bits, [&](const std::vector<Parity>& members) {
        int top = 0;
        for (const Parity& M : members) top = std::max(top, popcount(M.product));
        double moved = 0;  // Σ s_M f̂(M) over the top-degree members
        int count = 0;
        for (const Parity& M : members)
            if (popcount(M.product) == top) {
                moved += M.sign * f_hat[M.product];
                count++;
            }
        const double t = -moved / count;  // one top member: exactly the t that zeroes it
        for (const Parity& M : members) g_hat[M.product] = f_hat[M.product] + t * M.sign;
    });
    return g_hat;
}

// The MDI (2^bits) of f (2^bits) at every cube point
inline std::vector<double> min_degree_interpolator(const std::vector<double>& f, const HoldOut& unseen, int bits) {
    return from_fourier(mdi_coefficients(fourier_coefficients(f, bits), unseen), bits);
}

// The support (the sets, ascending) of the sparsest interpolator of f's values on the seen domain:
// in each coset the t that zeroes the most members; among those that zero as many, the one whose
// members left have the lowest top degree; where several still tie, the union of their supports
// (the data cannot tell them apart, so G keeps every bit any of them reads). It never reads f on
// U: it starts from f·1_seen (0 on U), an interpolator as good as f, and the family, the counts
// and the tolerance are those of the seen values alone.
inline std::vector<uint32_t> sparsest_support(const std::vector<double>& f, const HoldOut& unseen, int bits) {
    std::vector<double> seen_only = f;
    for (uint32_t p = 0; p < seen_only.size(); p++)
        if (unseen.holds(p)) seen_only[p] = 0;
    const std::vector<double> v_hat = fourier_coefficients(seen_only, bits);
    const double tolerance = coefficient_tolerance(v_hat);
    std::vector<bool> in_support(v_hat.size(), false);
    std::vector<std::pair<double, int>> zeroing;  // each member's own t, the one that zeroes it; the member
    for_each_coset(unseen, bits, [&](const std::vector<Parity>& members) {
        zeroing.clear();
        int degrees[33] = {};  // the members of each degree
        for (int i = 0; i < (int)members.size(); i++) {
            zeroing.push_back({-members[i].sign * v_hat[members[i].product], i});
            degrees[popcount(members[i].product)]++;
        }
        std::sort(zeroing.begin(), zeroing.end());
        // the candidates: runs of equal t (within the tolerance), each zeroing its run's members
        std::vector<std::pair<size_t, size_t>> best;  // the best runs, [begin, end) into zeroing
        size_t best_zeros = 0;
        int best_top = 33;
        for (size_t begin = 0, end; begin < zeroing.size(); begin = end) {
            for (end = begin + 1; end < zeroing.size() && zeroing[end].first - zeroing[begin].first <= tolerance;) end++;
            int left[33];  // the members of each degree that this t leaves nonzero
            std::copy(degrees, degrees + 33, left);
            for (size_t z = begin; z < end; z++) left[popcount(members[zeroing[z].second].product)]--;
            int top = 32;
            while (top >= 0 && left[top] == 0) top--;
            const size_t zeros = end - begin;
            if (zeros > best_zeros || (zeros == best_zeros && top < best_top)) best.clear();
            if (zeros > best_zeros || (zeros == best_zeros && top <= best_top)) {
                best.push_back({begin, end});
                best_zeros = zeros;
                best_top = top;
            }
        }
        for (const auto& [begin, end] : best)
            for (size_t z = 0; z < zeroing.size(); z++)
                if (z < begin || z >= end) in_support[members[zeroing[z].second].product] = true;
    });
    std::vector<uint32_t> support;
    for (uint32_t A = 0; A < in_support.size(); A++)
        if (in_support[A]) support.push_back(A);
    return support;
}
