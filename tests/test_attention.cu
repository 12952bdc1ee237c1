// Finite-difference checks, in double precision, of masked attention: dqkv and the mask
// gradient dM, shared by heads or per head, causal or not, and the forward by hand.
#include "test_util.h"
#include "attention.cuh"
#include "prior/structure.h"

static void check_attention(AttentionShape s, uint64_t seed) {
    Rng rng(seed);
    const int row = 3 * s.NH * s.HS;
    auto qkv = random_vector<double>((size_t)s.B * s.T * row, rng, 1.5f);
    auto mask = random_vector<double>((size_t)std::max(1, s.mask_heads) * s.T * s.T, rng, 3.0f);
    auto w = random_vector<double>((size_t)s.B * s.T * s.NH * s.HS, rng);
    std::vector<double> out(w.size()), att((size_t)s.B * s.NH * s.T * s.T), dscores(att.size());
    std::vector<double> dqkv(qkv.size(), 0), dmask(mask.size(), 0), mask_term(mask.size());
    const double* m = s.mask_heads ? mask.data() : nullptr;
    auto loss = [&] {
        attention_forward_cpu(out.data(), att.data(), qkv.data(), m, mask_term.data(), s);
        return weighted_sum(out, w);
    };
    loss();
    attention_backward_cpu(dqkv.data(), dmask.data(), dscores.data(), w.data(), qkv.data(), att.data(), m, s);
    check_gradient("dqkv", qkv, dqkv, loss);
    if (s.mask_heads) check_gradient("dmask", mask, dmask, loss);
}

TEST_CASE("attention backward matches finite differences") {
    SUBCASE("no mask") { check_attention({2, 5, 2, 3, 0, false}, 1); }
    SUBCASE("mask shared by heads") { check_attention({2, 5, 3, 2, 1, false}, 2); }
    SUBCASE("mask per head") { check_attention({2, 4, 3, 3, 3, false}, 3); }
    SUBCASE("causal, shared mask") { check_attention({3, 6, 2, 4, 1, true}, 4); }
    SUBCASE("causal, per-head mask") { check_attention({2, 5, 2, 2, 2, true}, 5); }
}

TEST_CASE("log sigmoid is stable and its slope is sigmoid(-m)") {
    CHECK(log_sigmoid(0.0) == doctest::Approx(-std::log(2.0)));
    CHECK(log_sigmoid(-800.0) == doctest::Approx(-800.0));  // no overflow in exp
    CHECK(log_sigmoid(800.0) == 0.0);
    CHECK(std::isfinite(log_sigmoid(-1e30f)));
    for (double m : {-3.0, 0.5, 6.0})
        CHECK(sigmoid_of_minus(m) == doctest::Approx((log_sigmoid(m + 1e-6) - log_sigmoid(m - 1e-6)) / 2e-6));
}

TEST_CASE("attention forward by hand: one head, T = 2, the mask halves a weight") {
    // q = k = v = identity rows; scores q.k/sqrt(2) = [[0.707, 0], [0, 0.707]] and a mask
    AttentionShape s = {1, 2, 1, 2, 1, false};
    std::vector<double> qkv = {1, 0, 1, 0, 1, 0,   // token 0: q, k, v
                               0, 1, 0, 1, 0, 1};  // token 1
    std::vector<double> mask = {100, -100, 100, 100}, out(4), att(4), mask_term(4);
    attention_forward_cpu(out.data(), att.data(), qkv.data(), mask.data(), mask_term.data(), s);
    // query 0 cannot see key 1 (log σ(-100) = -100): all weight on key 0
    CHECK(att[0] == doctest::Approx(1.0));
    CHECK(att[1] == doctest::Approx(0.0));
    double e = std::exp(1 / std::sqrt(2.0));  // query 1: softmax(0, 0.707)
    CHECK(att[2] == doctest::Approx(1 / (1 + e)));
    CHECK(att[3] == doctest::Approx(e / (1 + e)));
    CHECK(out[2] == doctest::Approx(att[2]));
    CHECK(out[3] == doctest::Approx(att[3]));
}

TEST_CASE("causal attention puts no weight on later keys") {
    AttentionShape s = {2, 6, 2, 3, 0, true};
    Rng rng(9);
    auto qkv = random_vector<double>((size_t)s.B * s.T * 3 * s.NH * s.HS, rng);
    std::vector<double> out((size_t)s.B * s.T * s.NH * s.HS), att((size_t)s.B * s.NH * s.T * s.T);
    attention_forward_cpu(out.data(), att.data(), qkv.data(), (const double*)nullptr, (double*)nullptr, s);
    for (int r = 0; r < s.B * s.NH * s.T; r++) {
        int i = r % s.T;
        double sum = 0;
        for (int j = 0; j < s.T; j++) {
            if (j > i) CHECK(att[r * s.T + j] == 0.0);
            sum += att[r * s.T + j];
        }
        CHECK(sum == doctest::Approx(1.0));
    }
}

TEST_CASE("prior mass of a hand-made attention map") {
    // one row puts 0.75 on allowed keys, the other 0.5: mean 0.625
    std::vector<float> att = {0.75f, 0.25f, 0.5f, 0.5f};
    Structure G = {1, 2, {1, 0, 0, 1}};
    CHECK(attention_prior_mass(att.data(), G, 1, 1, 2) == doctest::Approx(0.625));
    // one G per head: head 1 allows the other keys, where it puts 0.25 and 0.5 (mean 0.375)
    std::vector<float> two_heads = {0.75f, 0.25f, 0.5f, 0.5f, 0.75f, 0.25f, 0.5f, 0.5f};
    Structure per_head = {2, 2, {1, 0, 0, 1, 0, 1, 1, 0}};
    CHECK(attention_prior_mass(two_heads.data(), per_head, 1, 2, 2) == doctest::Approx((0.625 + 0.375) / 2));
}
