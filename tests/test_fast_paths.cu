// The CPU fast paths (matmul, attention, LayerNorm) against the plain loops they replace: the
// same bits, not merely close values, for every shape (tiles cut off at the edges, one row,
// one column), with and without bias or mask, and at 1 and 3 threads; and vexp against exp.
// The plain loops are the reference the finite-difference and PyTorch checks hold to; these
// tests carry that to the fast paths the program runs.
#include <cstring>
#include "test_util.h"
#include "attention.cuh"
#include "cpu_fast/attention.h"
#include "layers/layernorm.cuh"
#include "layers/matmul.cuh"

// the same bits: memcmp, which also tells -0 from +0 and one NaN from another
template <typename F>
static void expect_same_bits(const char* what, const std::vector<F>& got, const std::vector<F>& want) {
    REQUIRE(got.size() == want.size());
    size_t first = got.size();
    for (size_t i = 0; i < got.size() && first == got.size(); i++)
        if (std::memcmp(&got[i], &want[i], sizeof(F)) != 0) first = i;
    size_t not_finite = 0;
    for (const F& x : got) not_finite += !std::isfinite(x);
    CHECK_MESSAGE(not_finite == 0, std::string(what) << ": " << not_finite << " entries are not finite");
    if (first < got.size()) {
        char line[160];
        snprintf(line, sizeof line, "%s: entry %zu is %.17g, the reference %.17g", what, first, (double)got[first],
                 (double)want[first]);
        FAIL_CHECK(std::string(line));
    }
}

// Runs body at 1 and at 3 OpenMP threads (what the program uses is restored after).
template <typename Body>
static void at_thread_counts(Body body) {
#ifdef _OPENMP
    const int keep = omp_get_max_threads();
    for (int threads : {1, 3}) {
        CAPTURE(threads);
        omp_set_num_threads(threads);
        body();
    }
    omp_set_num_threads(keep);
#else
    body();
#endif
}

template <typename F>
static void check_matmul_fast_path() {
    struct Shape { int N, C, OC; };
    const Shape shapes[] = {{1, 1, 1},    {5, 3, 7},     {64, 32, 1},  {1024, 32, 96}, {1024, 32, 32},
                            {37, 65, 33}, {6, 17, 129},  {3840, 128, 512}, {300, 512, 128}};  // the last two pass
                                                                                              // worth_threads
    for (Shape s : shapes) {
        for (bool with_bias : {true, false}) {
            CAPTURE(s.N); CAPTURE(s.C); CAPTURE(s.OC); CAPTURE(with_bias);
            Rng rng(7);
            auto inp = random_vector<F>((size_t)s.N * s.C, rng), weight = random_vector<F>((size_t)s.OC * s.C, rng);
            auto bias = random_vector<F>(s.OC, rng), dout = random_vector<F>((size_t)s.N * s.OC, rng);
            // gradients start from values already there: both paths must add onto them in order
            auto dinp0 = random_vector<F>(inp.size(), rng), dweight0 = random_vector<F>(weight.size(), rng);
            auto dbias0 = random_vector<F>(s.OC, rng);
            const F* b = with_bias ? bias.data() : nullptr;
            std::vector<F> out_ref((size_t)s.N * s.OC), dinp_ref = dinp0, dweight_ref = dweight0, dbias_ref = dbias0;
            matmul_forward_cpu(out_ref.data(), inp.data(), weight.data(), b, s.N, s.C, s.OC);
            matmul_backward_cpu(dinp_ref.data(), dweight_ref.data(), with_bias ? dbias_ref.data() : nullptr,
                                dout.data(), inp.data(), weight.data(), s.N, s.C, s.OC);
            at_thread_counts([&] {
                std::vector<F> out(out_ref.size()), dinp = dinp0, dweight = dweight0, dbias = dbias0;
                matmul_forward_cpu_fast(out.data(), inp.data(), weight.data(), b, s.N, s.C, s.OC);
                matmul_backward_cpu_fast(dinp.data(), dweight.data(), with_bias ? dbias.data() : nullptr, dout.data(),
                                         inp.data(), weight.data(), s.N, s.C, s.OC);
                expect_same_bits("out", out, out_ref);
                expect_same_bits("dinp", dinp, dinp_ref);
                expect_same_bits("dweight", dweight, dweight_ref);
                expect_same_bits("dbias", dbias, dbias_ref);
            });
        }
    }
}

TEST_CASE("fast CPU matmul: the reference loops' bits, forward and backward, float and double") {
    check_matmul_fast_path<float>();
    check_matmul_fast_path<double>();
}

TEST_CASE("fast CPU attention: the reference loops' bits, forward and backward") {
    const AttentionShape shapes[] = {{64, 16, 2, 16, 1, false}, {3, 7, 3, 5, 0, false}, {2, 9, 2, 4, 2, true},
                                     {1, 1, 1, 1, 1, false},    {4, 33, 4, 8, 4, true},  {8, 65, 2, 32, 1, false},
                                     {64, 64, 4, 32, 1, true}};  // the last passes worth_threads
    for (AttentionShape s : shapes) {
        for (bool with_dout : {true, false}) {  // dout = nullptr: dS given (the qk-opt fit)
            CAPTURE(s.B); CAPTURE(s.T); CAPTURE(s.NH); CAPTURE(s.HS); CAPTURE(s.mask_heads); CAPTURE(s.causal);
            CAPTURE(with_dout);
            Rng rng(11);
            const size_t rows = (size_t)s.B * s.T, att_n = (size_t)s.B * s.NH * s.T * s.T;
            auto qkv = random_vector<float>(rows * 3 * s.NH * s.HS, rng, 2.0f);
            auto mask = random_vector<float>((size_t)std::max(1, s.mask_heads) * s.T * s.T, rng, 4.0f);
            auto dout = random_vector<float>(rows * s.NH * s.HS, rng);
            auto dqkv0 = random_vector<float>(qkv.size(), rng), dmask0 = random_vector<float>(mask.size(), rng);
            auto given_dscores = random_vector<float>(att_n, rng);
            const float* m = s.mask_heads ? mask.data() : nullptr;
            const float* dy = with_dout ? dout.data() : nullptr;
            std::vector<float> out_ref(rows * s.NH * s.HS), att_ref(att_n), term(mask.size());
            std::vector<float> dqkv_ref = dqkv0, dmask_ref = dmask0, dscores_ref = given_dscores;
            attention_forward_cpu(out_ref.data(), att_ref.data(), qkv.data(), m, term.data(), s);
            attention_backward_cpu(dqkv_ref.data(), dmask_ref.data(), dscores_ref.data(), dy, qkv.data(),
                                   att_ref.data(), m, s);
            at_thread_counts([&] {
                std::vector<float> out(out_ref.size()), att(att_n), dqkv = dqkv0, dmask = dmask0;
                std::vector<float> dscores = given_dscores;
                attention_forward_cpu_fast(out.data(), att.data(), qkv.data(), m, term.data(), s);
                attention_backward_cpu_fast(dqkv.data(), dmask.data(), dscores.data(), dy, qkv.data(), att.data(), m,
                                            s);
                expect_same_bits("out", out, out_ref);
                expect_same_bits("att", att, att_ref);
                expect_same_bits("dscores", dscores, dscores_ref);
                expect_same_bits("dqkv", dqkv, dqkv_ref);
                expect_same_bits("dmask", dmask, dmask_ref);
            });
        }
    }
}

TEST_CASE("fast CPU layernorm: the reference loops' bits, forward and backward") {
    struct Shape { int N, C; };
    // the last passes worth_threads
    for (Shape s : {Shape{1, 1}, Shape{1024, 32}, Shape{37, 5}, Shape{16, 128}, Shape{300, 33}, Shape{16400, 128}}) {
        CAPTURE(s.N); CAPTURE(s.C);
        Rng rng(3);
        auto inp = random_vector<float>((size_t)s.N * s.C, rng, 3.0f), dout = random_vector<float>(inp.size(), rng);
        auto weight = random_vector<float>(s.C, rng), bias = random_vector<float>(s.C, rng);
        auto dinp0 = random_vector<float>(inp.size(), rng), dweight0 = random_vector<float>(s.C, rng);
        auto dbias0 = random_vector<float>(s.C, rng);
        std::vector<float> out_ref(inp.size()), mean_ref(s.N), rstd_ref(s.N);
        std::vector<float> dinp_ref = dinp0, dweight_ref = dweight0, dbias_ref = dbias0;
        layernorm_forward_cpu(out_ref.data(), mean_ref.data(), rstd_ref.data(), inp.data(), weight.data(), bias.data(),
                              s.N, s.C);
        layernorm_backward_cpu(dinp_ref.data(), dweight_ref.data(), dbias_ref.data(), dout.data(), inp.data(),
                               weight.data(), mean_ref.data(), rstd_ref.data(), s.N, s.C);
        at_thread_counts([&] {
            std::vector<float> out(inp.size()), mean(s.N), rstd(s.N), dinp = dinp0, dweight = dweight0, dbias = dbias0;
            layernorm_forward_cpu_fast(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(),
                                       s.N, s.C, LN_EPS);
            layernorm_backward_cpu_fast(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                                        weight.data(), mean.data(), rstd.data(), s.N, s.C);
            expect_same_bits("out", out, out_ref);
            expect_same_bits("mean", mean, mean_ref);
            expect_same_bits("rstd", rstd, rstd_ref);
            expect_same_bits("dinp", dinp, dinp_ref);
            expect_same_bits("dweight", dweight, dweight_ref);
            expect_same_bits("dbias", dbias, dbias_ref);
        });
    }
}

TEST_CASE("vexp is e^x within 2 ulp, 0 and inf past its range, NaN for NaN") {
    double worst_ulp = 0;
    float worst_x = 0;
    for (double xd = -87.0; xd <= 88.0; xd += 1.0 / 1024) {  // 180 thousand points, all in range
        const float x = (float)xd, got = vexp(x);
        const double want = std::exp((double)x);
        const float want_f = (float)want;
        const double ulp = std::fabs(got - want) / (std::nextafter(want_f, INFINITY) - want_f);
        if (!(ulp <= worst_ulp)) { worst_ulp = ulp; worst_x = x; }  // NaN would stick here
    }
    CAPTURE(worst_x);
    CHECK(worst_ulp <= 2.0);
    CHECK(vexp(0.0f) == 1.0f);
    CHECK(vexp(-200.0f) == 0.0f);
    CHECK(vexp(-INFINITY) == 0.0f);
    CHECK(vexp(100.0f) == INFINITY);
    CHECK(vexp(INFINITY) == INFINITY);
    CHECK(std::isnan(vexp(NAN)));
    CHECK(vexp(-100.0f) > 0.0f);  // e^-100 is a denormal: rounded, not flushed
    CHECK(vexp(-100.0f) == doctest::Approx(std::exp(-100.0)).epsilon(0.02));
    CHECK(vexp(1.0) == std::exp(1.0));  // double: the library's exp
}
