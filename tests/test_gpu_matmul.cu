// Matmul version 2 (Kernels::matmul 2, --matmul-kernel 2: cuBLASLt with the bias, GELU and bias
// gradient fused in; layers/matmul_lt.cuh) against the CPU, against version 1, and against
// itself: the forward with and without bias, bias + GELU, the backward accumulating onto non-zero
// gradients, the MLP's fused backward, a run's bits twice, --profile's names, and training steps;
// and, on the emulation alone, the fallback to version 1 where cuBLASLt has no algorithm or refuses
// a plan. Every output starts as NaN, so an entry the library never writes fails. Included after
// test_gpu.cu, whose helpers it uses; make test runs it on the emulation, make gpu-check on a GPU.
#include <fcntl.h>   // open: the fallback cases send stderr to a file
#include <unistd.h>  // dup, dup2
#include <algorithm>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>

// The default kernels with matmul version v (set up for version 2)
static Kernels matmul_version(int v) {
    if (v == 2) matmul_lt_setup();
    Kernels kernels;
    kernels.matmul = v;
    return kernels;
}

static bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

static std::vector<float> nan_vector(size_t n) { return std::vector<float>(n, NAN); }

// a GPU buffer's floats from the host, again
static void refill(GpuBuffer& g, const std::vector<float>& host) {
    buffer_copy(g.ptr, DEVICE_GPU, host.data(), DEVICE_CPU, g.n);
}

// Awkward shapes (N, C and OC odd or prime, OC 1) and the model's: B, T, C, OC. OC 96 and 40 are
// multiples of 8, so the GELU fusions run there; 29 and 1 are not, so the unfused layers run.
static const Shape MATMUL_SHAPES[] = {{3, 7, 13, 29}, {1, 1, 1, 1}, {5, 3, 17, 1}, {2, 9, 24, 40}, {64, 16, 32, 96}};

TEST_CASE("GPU matmul version 2 (cuBLASLt, bias epilogue and BGRADB) matches the CPU and version 1, with and "
          "without bias; two runs give the same bits" * doctest::skip(NO_GPU)) {
    for (Shape s : MATMUL_SHAPES)
        for (bool with_bias : {true, false}) {
            CAPTURE(s.B); CAPTURE(s.T); CAPTURE(s.C); CAPTURE(s.OC); CAPTURE(with_bias);
            const int N = s.B * s.T;
            Rng rng(31);
            auto x = random_vector<float>((size_t)N * s.C, rng), W = random_vector<float>((size_t)s.OC * s.C, rng);
            auto bias = random_vector<float>(s.OC, rng), dout = random_vector<float>((size_t)N * s.OC, rng);
            const auto dx0 = random_vector<float>((size_t)N * s.C, rng);  // the gradients accumulate onto these
            const auto dW0 = random_vector<float>((size_t)s.OC * s.C, rng), db0 = random_vector<float>(s.OC, rng);
            std::vector<float> out((size_t)N * s.OC), dx = dx0, dW = dW0, db = db0;
            const float* b = with_bias ? bias.data() : nullptr;
            matmul_forward_cpu(out.data(), x.data(), W.data(), b, N, s.C, s.OC);
            matmul_backward_cpu(dx.data(), dW.data(), with_bias ? db.data() : nullptr, dout.data(), x.data(), W.data(),
                                N, s.C, s.OC);
            GpuBuffer g_x(x), g_W(W), g_bias(bias), g_dout(dout);
            std::vector<float> runs[3][4];  // [version 1, version 2, version 2 again][out, dinp, dweight, dbias]
            for (int r = 0; r < 3; r++) {
                const Kernels chosen = matmul_version(r == 0 ? 1 : 2);
                GpuBuffer g_out(nan_vector(out.size())), g_dx(dx0), g_dW(dW0), g_db(db0);
                matmul_forward(DEVICE_GPU, chosen, g_out.ptr, g_x.ptr, g_W.ptr, with_bias ? g_bias.ptr : nullptr, N,
                               s.C, s.OC);
                matmul_backward(DEVICE_GPU, chosen, g_dx.ptr, g_dW.ptr, with_bias ? g_db.ptr : nullptr, g_dout.ptr,
                                g_x.ptr, g_W.ptr, N, s.C, s.OC);
                runs[r][0] = g_out.get(); runs[r][1] = g_dx.get(); runs[r][2] = g_dW.get(); runs[r][3] = g_db.get();
            }
            const std::vector<float>* cpu[4] = {&out, &dx, &dW, &db};
            const char* names[4] = {"matmul out", "matmul dinp", "matmul dweight", "matmul dbias"};
            for (int i = 0; i < 4; i++) {
                expect_close(names[i], runs[1][i], *cpu[i], REDUCTION);
                expect_close(names[i], runs[1][i], runs[0][i], REDUCTION);  // version 2 within rounding of 1
                CHECK(bits_equal(runs[1][i], runs[2][i]));
            }
        }
}

TEST_CASE("GPU bias + GELU at matmul version 2 (the GELU_AUX_BIAS epilogue) and its backward match the CPU" *
          doctest::skip(NO_GPU)) {
    for (Shape s : MATMUL_SHAPES)
        for (bool fast : {false, true}) {  // --fast-kernels changes the unfused path only
            CAPTURE(s.B); CAPTURE(s.T); CAPTURE(s.C); CAPTURE(s.OC); CAPTURE(fast);
            const int N = s.B * s.T;
            Rng rng(32);
            auto inp = random_vector<float>((size_t)N * s.C, rng);
            auto weight = random_vector<float>((size_t)s.OC * s.C, rng);
            auto bias = random_vector<float>(s.OC, rng), dout = random_vector<float>((size_t)N * s.OC, rng);
            const auto dinp0 = random_vector<float>(inp.size(), rng);
            const auto dweight0 = random_vector<float>(weight.size(), rng);
            const auto dbias0 = random_vector<float>(s.OC, rng), dpre0 = random_vector<float>(dout.size(), rng);
            std::vector<float> pre((size_t)N * s.OC), gelu(pre.size());
            matmul_bias_gelu_forward(DEVICE_CPU, Kernels{}, pre.data(), gelu.data(), inp.data(), weight.data(),
                                     bias.data(), N, s.C, s.OC);
            std::vector<float> dinp = dinp0, dweight = dweight0, dbias = dbias0, dpre = dpre0;
            matmul_bias_gelu_backward(DEVICE_CPU, Kernels{}, dinp.data(), dweight.data(), dbias.data(), dpre.data(),
                                      dout.data(), pre.data(), inp.data(), weight.data(), N, s.C, s.OC);
            GpuBuffer g_inp(inp), g_weight(weight), g_bias(bias), g_dout(dout);
            Kernels chosen = matmul_version(2);
            chosen.fast_layers = fast;
            std::vector<float> runs[2][6];  // [run][pre, gelu, dinp, dweight, dbias, dpre]
            for (auto& run : runs) {
                GpuBuffer g_pre(nan_vector(pre.size())), g_gelu(nan_vector(pre.size()));
                GpuBuffer g_dinp(dinp0), g_dweight(dweight0), g_dbias(dbias0), g_dpre(dpre0);
                matmul_bias_gelu_forward(DEVICE_GPU, chosen, g_pre.ptr, g_gelu.ptr, g_inp.ptr, g_weight.ptr, g_bias.ptr,
                                         N, s.C, s.OC);
                // the backward reads the CPU's pre, so that it is checked on its own
                GpuBuffer g_cpu_pre(pre);
                matmul_bias_gelu_backward(DEVICE_GPU, chosen, g_dinp.ptr, g_dweight.ptr, g_dbias.ptr, g_dpre.ptr,
                                          g_dout.ptr, g_cpu_pre.ptr, g_inp.ptr, g_weight.ptr, N, s.C, s.OC);
                run[0] = g_pre.get(); run[1] = g_gelu.get(); run[2] = g_dinp.get();
                run[3] = g_dweight.get(); run[4] = g_dbias.get(); run[5] = g_dpre.get();
            }
            const std::vector<float>* cpu[6] = {&pre, &gelu, &dinp, &dweight, &dbias, &dpre};
            const char* names[6] = {"pre", "gelu", "dinp", "dweight", "dbias", "dpre"};
            for (int i = 0; i < 6; i++) {
                CAPTURE(names[i]);
                expect_close(names[i], runs[0][i], *cpu[i], REDUCTION);  // cuBLASLt's GELU: see layers/fused.cuh
                CHECK(bits_equal(runs[0][i], runs[1][i]));
            }
        }
}

// The MLP's two layers' backward (layers/fused.cuh): the hidden gradients dg and dpre start at
// zero, as the model's do; the parameter gradients and dinp accumulate onto random values
TEST_CASE("the MLP's backward at matmul version 2 (DGELU_BGRAD into the second layer's dinp) matches the CPU" *
          doctest::skip(NO_GPU)) {
    struct MlpShape { int N, C, MLP; };
    for (MlpShape s : {MlpShape{21, 13, 40}, MlpShape{1, 1, 8}, MlpShape{37, 24, 29}, MlpShape{256, 32, 96}}) {
        CAPTURE(s.N); CAPTURE(s.C); CAPTURE(s.MLP);
        const size_t hidden = (size_t)s.N * s.MLP;
        Rng rng(33);
        auto inp = random_vector<float>((size_t)s.N * s.C, rng), fcw = random_vector<float>((size_t)s.MLP * s.C, rng);
        auto projw = random_vector<float>((size_t)s.C * s.MLP, rng), pre = random_vector<float>(hidden, rng, 3);
        auto dproj = random_vector<float>((size_t)s.N * s.C, rng);
        std::vector<float> g(hidden);
        gelu_forward_cpu(g.data(), pre.data(), hidden);
        // [dinp, dfcw, dfcb, dprojw, dprojb]: random starts; dpre and dg: zeros
        const std::vector<float> start[5] = {random_vector<float>(inp.size(), rng),
                                             random_vector<float>(fcw.size(), rng), random_vector<float>(s.MLP, rng),
                                             random_vector<float>(projw.size(), rng), random_vector<float>(s.C, rng)};
        std::vector<float> cpu[7] = {start[0], start[1], start[2], start[3], start[4], std::vector<float>(hidden, 0.0f),
                                     std::vector<float>(hidden, 0.0f)};  // ..., dpre, dg
        matmul_backward_cpu(cpu[6].data(), cpu[3].data(), cpu[4].data(), dproj.data(), g.data(), projw.data(), s.N,
                            s.MLP, s.C);
        gelu_backward_cpu(cpu[5].data(), pre.data(), cpu[6].data(), hidden);
        matmul_backward_cpu(cpu[0].data(), cpu[1].data(), cpu[2].data(), cpu[5].data(), inp.data(), fcw.data(), s.N,
                            s.C, s.MLP);
        GpuBuffer g_inp(inp), g_fcw(fcw), g_projw(projw), g_pre(pre), g_dproj(dproj), g_g(g);
        const char* names[7] = {"dinp", "dfcw", "dfcb", "dprojw", "dprojb", "dpre", "dg"};
        std::vector<float> runs[3][7];  // [version 1, version 2, version 2 again][the seven gradients]
        for (int r = 0; r < 3; r++) {
            std::vector<std::unique_ptr<GpuBuffer>> b;
            for (int i = 0; i < 7; i++)
                b.push_back(std::make_unique<GpuBuffer>(i < 5 ? start[i] : std::vector<float>(hidden, 0.0f)));
            mlp_backward(DEVICE_GPU, matmul_version(r == 0 ? 1 : 2), b[0]->ptr, b[1]->ptr, b[2]->ptr, b[5]->ptr,
                         b[6]->ptr, b[3]->ptr, b[4]->ptr, g_dproj.ptr, g_inp.ptr, g_pre.ptr, g_g.ptr, g_fcw.ptr,
                         g_projw.ptr, s.N, s.C, s.MLP);
            for (int i = 0; i < 7; i++) runs[r][i] = b[i]->get();
        }
        const bool fused = s.MLP % 8 == 0;  // there version 2 leaves dg at zero (layers/fused.cuh)
        for (int i = 0; i < 7; i++) {
            CAPTURE(names[i]);
            expect_close(names[i], runs[0][i], cpu[i], REDUCTION);
            if (i == 6 && fused) CHECK(runs[1][6] == std::vector<float>(hidden, 0.0f));
            else expect_close(names[i], runs[1][i], cpu[i], REDUCTION);
            CHECK(bits_equal(runs[1][i], runs[2][i]));
        }
    }
}

TEST_CASE("--profile names each cuBLASLt call with its product and epilogue at matmul version 2" *
          doctest::skip(NO_GPU)) {
    const int N = 6, C = 8, OC = 16;
    Rng rng(34);
    GpuBuffer x(random_vector<float>(N * C, rng)), W(random_vector<float>(OC * C, rng));
    GpuBuffer b(random_vector<float>(OC, rng));
    GpuBuffer out(nan_vector(N * OC)), pre(nan_vector(N * OC)), dout(random_vector<float>(N * OC, rng));
    GpuBuffer dx(random_vector<float>(N * C, rng)), dW(random_vector<float>(OC * C, rng));
    GpuBuffer db(random_vector<float>(OC, rng));
    const Kernels chosen = matmul_version(2);
    Profiler& p = profiler();
    p.calls.clear();
    p.steps.assign(1, ProfiledStep{});
    p.events_used = 0;
    p.recording = true;
    matmul_forward(DEVICE_GPU, chosen, out.ptr, x.ptr, W.ptr, b.ptr, N, C, OC);
    matmul_bias_gelu_forward(DEVICE_GPU, chosen, pre.ptr, out.ptr, x.ptr, W.ptr, b.ptr, N, C, OC);
    matmul_backward(DEVICE_GPU, chosen, dx.ptr, dW.ptr, db.ptr, dout.ptr, x.ptr, W.ptr, N, C, OC);
    p.recording = false;
    std::vector<std::string> names;
    for (const ProfiledCall& call : p.calls) {
        CHECK(call.cost.bytes > 0);
        names.push_back(call.name);
    }
    const std::vector<std::string> want = {"cublasLtMatmul (out = inp W^T + b)",
                                           "cublasLtMatmul (pre = inp W^T + b, out = gelu(pre))",
                                           "cublasLtMatmul (dinp += dout W)",
                                           "cublasLtMatmul (dW += dout^T inp, db = sum_n dout)",
                                           "add_bias_gradient_kernel2"};
    CHECK(names == want);
}

// Three AdamW steps at matmul version 2 against the CPU, and twice on the GPU: the same bits
TEST_CASE("training steps at matmul version 2: GPU matches the CPU; two GPU runs are bit-identical" *
          doctest::skip(NO_GPU)) {
    BooleanTask task("cyclic3");
    Config c;
    c.V = 3; c.T = 16; c.C = 24; c.L = 2; c.NH = 3; c.HS = 8; c.MLP = 40; c.mask_heads = 3;
    for (bool fast : {false, true}) {
        CAPTURE(fast);
        Kernels chosen = matmul_version(2);
        chosen.fast_layers = fast;
        BothDevices run = expect_devices_agree(task, c, 5, chosen);
        std::vector<float> gpu_again;
        three_steps(c, DEVICE_GPU, chosen, run.init, run.tokens.data(), 32, run.y, gpu_again);
        CHECK(bits_equal(run.gpu, gpu_again));
    }
}

// A graph captures version 2's calls (each plan made by an uncaptured call first, as the program's
// first step does): its replay gives the bits of the same calls launched one by one
TEST_CASE("matmul version 2 in a captured CUDA graph replays with the bits of the uncaptured calls" *
          doctest::skip(NO_GPU)) {
    const int N = 48, C = 24, OC = 40;
    Rng rng(35);
    GpuBuffer x(random_vector<float>(N * C, rng)), W(random_vector<float>(OC * C, rng));
    GpuBuffer b(random_vector<float>(OC, rng)), dout(random_vector<float>(N * OC, rng));
    const std::vector<float> start[3] = {random_vector<float>(N * C, rng), random_vector<float>(OC * C, rng),
                                         random_vector<float>(OC, rng)};  // dinp, dweight, dbias
    GpuBuffer out(nan_vector(N * OC)), pre(nan_vector(N * OC)), gelu(nan_vector(N * OC));
    GpuBuffer dx(start[0]), dW(start[1]), db(start[2]);
    const Kernels chosen = matmul_version(2);
    auto step = [&] {
        matmul_forward(DEVICE_GPU, chosen, out.ptr, x.ptr, W.ptr, b.ptr, N, C, OC);
        matmul_bias_gelu_forward(DEVICE_GPU, chosen, pre.ptr, gelu.ptr, x.ptr, W.ptr, b.ptr, N, C, OC);
        matmul_backward(DEVICE_GPU, chosen, dx.ptr, dW.ptr, db.ptr, dout.ptr, x.ptr, W.ptr, N, C, OC);
    };
    auto results = [&] {
        return std::vector<std::vector<float>>{out.get(), pre.get(), gelu.get(), dx.get(), dW.get(), db.get()};
    };
    auto reset = [&] {  // outside the capture: a copy from the host is not captured work
        for (GpuBuffer* o : {&out, &pre, &gelu}) refill(*o, nan_vector(N * OC));
        refill(dx, start[0]);
        refill(dW, start[1]);
        refill(db, start[2]);
    };
    step();  // uncaptured: every plan made
    reset();
    step();
    const auto uncaptured = results();
    reset();
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    REQUIRE(cudaStreamBeginCapture(gpu_stream(), cudaStreamCaptureModeGlobal) == cudaSuccess);
    step();
    REQUIRE(cudaStreamEndCapture(gpu_stream(), &graph) == cudaSuccess);
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    for (int replay = 0; replay < 2; replay++) {
        reset();
        REQUIRE(cudaGraphLaunch(exec, gpu_stream()) == cudaSuccess);
        REQUIRE(cudaStreamSynchronize(gpu_stream()) == cudaSuccess);
        const auto replayed = results();
        for (size_t i = 0; i < replayed.size(); i++) CHECK(bits_equal(replayed[i], uncaptured[i]));
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
}

#ifdef MASKPRIOR_EMULATED_TESTS
// ---- cuBLASLt turning the program down: no algorithm, or a plan refused at cublasLtMatmul ----
// Only the emulation can be told to refuse (MASKPRIOR_EMU_CUBLASLT, emu/cublaslt_emulation.h), so
// these cases are built into tests/emulated_tests alone. Version 2 must then run version 1's calls,
// and give its bits.

// While alive: cuBLASLt refuses as `refusal` says, version 2's plans and its notes said start
// empty, and stderr goes to a file, whose lines notes() returns; at its end the plans made meanwhile
// (the refused ones among them) are destroyed and the earlier plans and notes come back, so that no
// other case meets a key marked refused, and stderr is itself again
struct LtRefusalScope {
    emu::LtRefusal saved_refusal = emu::lt_refusal();
    std::map<MatmulLtKey, MatmulLtPlan> saved_plans;
    std::set<std::string> saved_notes;
    const std::string stderr_path = TMP_PREFIX + "lt-refusal-stderr";
    int saved_stderr;
    explicit LtRefusalScope(emu::LtRefusal refusal) {
        matmul_lt_setup();
        emu::lt_refusal() = refusal;
        saved_plans.swap(matmul_lt().plans);
        saved_notes.swap(matmul_lt().notes);
        fflush(stderr);
        saved_stderr = dup(2);
        const int file = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(file, 2);
        close(file);
    }
    std::vector<std::string> notes() const {
        fflush(stderr);
        std::istringstream text(read_file(stderr_path));
        std::vector<std::string> lines;
        for (std::string line; std::getline(text, line);) lines.push_back(line);
        return lines;
    }
    ~LtRefusalScope() {
        fflush(stderr);
        dup2(saved_stderr, 2);
        close(saved_stderr);
        remove(stderr_path.c_str());
        for (auto& [key, plan] : matmul_lt().plans) {
            cublasLtMatmulDescDestroy(plan.desc);
            for (cublasLtMatrixLayout_t layout : {plan.a, plan.b, plan.c}) cublasLtMatrixLayoutDestroy(layout);
        }
        saved_plans.swap(matmul_lt().plans);
        saved_notes.swap(matmul_lt().notes);
        emu::lt_refusal() = saved_refusal;
    }
};

// Every line of `lines` is version 2's fallback note for `why`, and none comes twice
static void expect_notes(const std::vector<std::string>& lines, const std::string& why) {
    std::set<std::string> seen;
    for (const std::string& line : lines) {
        CAPTURE(line);
        CHECK(line.rfind("maskprior: note: cuBLASLt " + why + " for ", 0) == 0);
        CHECK(line.find(": matmul version 1 runs it") != std::string::npos);
        CHECK(seen.insert(line).second);
    }
}

// ... and there is one for each product refused (plans of the same product and sizes, whose pointers
// differ in alignment, share theirs)
static void expect_one_note_per_product(const std::vector<std::string>& lines, const std::string& why) {
    expect_notes(lines, why);
    CHECK(lines.size() == matmul_lt().notes.size());
    CHECK(!lines.empty());
    CHECK(lines.size() <= matmul_lt().plans.size());
}

static const std::string NO_ALGORITHM = "has no algorithm", REFUSED = "refused the plan (CUBLAS_STATUS_NOT_SUPPORTED)";

static bool every_plan_refused() {
    for (const auto& [key, plan] : matmul_lt().plans)
        if (plan.ok) return false;
    return !matmul_lt().plans.empty();
}

// Every call version 2 makes, on one layer's buffers (N 18, C 24, OC 40, a multiple of 8, so that the
// GELU fusions are tried): the forward with bias, bias + GELU, the backward onto random gradients, and
// the MLP's backward with the layer as its first (its hidden gradients from zero, as the model's)
struct LayerProducts {
    static constexpr int N = 18, C = 24, OC = 40;
    Rng rng{36};
    GpuBuffer x{random_vector<float>(N * C, rng)}, W{random_vector<float>(OC * C, rng)};
    GpuBuffer b{random_vector<float>(OC, rng)}, dout{random_vector<float>(N * OC, rng)};
    GpuBuffer projw{random_vector<float>(C * OC, rng)}, dproj{random_vector<float>(N * C, rng)};
    // the outputs' starts: o[0..2] out, pre, gelu (NaN); o[3..5] dx, dW, db and o[6..10] the MLP's
    // dinp, dfcw, dfcb, dprojw, dprojb (random); o[11] dpre (zeros), which dg starts from too
    const std::vector<float> start[12] = {
        nan_vector(N * OC), nan_vector(N * OC), nan_vector(N * OC), random_vector<float>(N * C, rng),
        random_vector<float>(OC * C, rng), random_vector<float>(OC, rng), random_vector<float>(N * C, rng),
        random_vector<float>(OC * C, rng), random_vector<float>(OC, rng), random_vector<float>(C * OC, rng),
        random_vector<float>(C, rng), std::vector<float>(N * OC, 0.0f)};
    std::vector<std::unique_ptr<GpuBuffer>> o;
    std::unique_ptr<GpuBuffer> dg = std::make_unique<GpuBuffer>(start[11]);
    LayerProducts() {
        for (const auto& s : start) o.push_back(std::make_unique<GpuBuffer>(s));
    }
    void reset() {  // outside a capture: a copy from the host is not captured work
        for (int i = 0; i < 12; i++) refill(*o[i], start[i]);
        refill(*dg, start[11]);
    }
    void run(const Kernels& k) {
        matmul_forward(DEVICE_GPU, k, o[0]->ptr, x.ptr, W.ptr, b.ptr, N, C, OC);
        matmul_bias_gelu_forward(DEVICE_GPU, k, o[1]->ptr, o[2]->ptr, x.ptr, W.ptr, b.ptr, N, C, OC);
        matmul_backward(DEVICE_GPU, k, o[3]->ptr, o[4]->ptr, o[5]->ptr, dout.ptr, x.ptr, W.ptr, N, C, OC);
        mlp_backward(DEVICE_GPU, k, o[6]->ptr, o[7]->ptr, o[8]->ptr, o[11]->ptr, dg->ptr, o[9]->ptr, o[10]->ptr,
                     dproj.ptr, x.ptr, o[1]->ptr, o[2]->ptr, W.ptr, projw.ptr, N, C, OC);
    }
    std::vector<std::vector<float>> results() const {
        std::vector<std::vector<float>> r;
        for (const auto& buffer : o) r.push_back(buffer->get());
        r.push_back(dg->get());
        return r;
    }
};

// the names --profile records for `work`
static std::vector<std::string> profiled_names(const std::function<void()>& work) {
    Profiler& p = profiler();
    p.calls.clear();
    p.steps.assign(1, ProfiledStep{});
    p.events_used = 0;
    p.recording = true;
    work();
    p.recording = false;
    std::vector<std::string> names;
    for (const ProfiledCall& call : p.calls) names.push_back(call.name);
    return names;
}

static int count_starting(const std::vector<std::string>& names, const std::string& prefix) {
    return (int)std::count_if(names.begin(), names.end(),
                              [&](const std::string& n) { return n.rfind(prefix, 0) == 0; });
}

TEST_CASE("GPU matmul version 2 where cuBLASLt has no algorithm, or refuses the plan at cublasLtMatmul: version 1 "
          "runs the product, with its bits, and the key is not asked again") {
    LayerProducts v1;
    v1.run(matmul_version(1));
    const auto want = v1.results();
    for (emu::LtRefusal refusal : {emu::LtRefusal::no_algorithm, emu::LtRefusal::not_supported}) {
        const bool at_matmul = refusal == emu::LtRefusal::not_supported;
        CAPTURE(at_matmul);
        LtRefusalScope scope(refusal);
        LayerProducts v2;
        const std::vector<std::string> first = profiled_names([&] { v2.run(matmul_version(2)); });
        CHECK(every_plan_refused());
        // each key asked for once: refused at its first call (kept in the table, at cost 0), or never called
        const int lt_calls = count_starting(first, "cublasLtMatmul");
        CHECK(lt_calls == (at_matmul ? (int)matmul_lt().plans.size() : 0));
        int refused = 0;
        for (const ProfiledCall& call : profiler().calls) {
            const size_t n = call.name.size();
            refused += n > 9 && call.name.compare(n - 9, 9, ": refused") == 0 && call.cost.bytes == 0;
        }
        CHECK(refused == lt_calls);
        CHECK(count_starting(first, "cublasSgemm") > 0);
        expect_one_note_per_product(scope.notes(), at_matmul ? REFUSED : NO_ALGORITHM);
        const auto got = v2.results();
        for (size_t i = 0; i < want.size(); i++) {
            CAPTURE(i);
            CHECK(bits_equal(got[i], want[i]));
        }
        v2.reset();
        const std::vector<std::string> again = profiled_names([&] { v2.run(matmul_version(2)); });
        CHECK(count_starting(again, "cublasLtMatmul") == 0);  // the marked keys go to version 1 at once
        CHECK(scope.notes().size() == matmul_lt().notes.size());  // and say nothing more
        CHECK(v2.results() == got);
    }
}

TEST_CASE("training steps at matmul version 2 with every plan turned down by cuBLASLt give version 1's bits") {
    BooleanTask task("cyclic3");
    Config c;
    c.V = 3; c.T = 16; c.C = 24; c.L = 2; c.NH = 3; c.HS = 8; c.MLP = 40; c.mask_heads = 3;
    std::vector<float> init(param_count(c)), y;
    Rng rng(37);
    init_default(c, init.data(), rng);
    std::vector<int> tokens;
    task_batch(task, 32, tokens, y);
    // the second versions of the other layers (--fast-kernels), whose bias + GELU kernel the unfused
    // path runs; the whole-run case below runs the first versions
    Kernels v1 = matmul_version(1), v2 = matmul_version(2);
    v1.fast_layers = v2.fast_layers = true;
    std::vector<float> want, got;
    const float loss = three_steps(c, DEVICE_GPU, v1, init, tokens.data(), 32, y, want);
    for (emu::LtRefusal refusal : {emu::LtRefusal::no_algorithm, emu::LtRefusal::not_supported}) {
        CAPTURE((int)refusal);
        LtRefusalScope scope(refusal);
        CHECK(three_steps(c, DEVICE_GPU, v2, init, tokens.data(), 32, y, got) == loss);
        CHECK(every_plan_refused());
        expect_one_note_per_product(scope.notes(), refusal == emu::LtRefusal::no_algorithm ? NO_ALGORITHM : REFUSED);
        CHECK(bits_equal(got, want));
    }
}

// What layers/matmul_lt.cuh's "Graphs" paragraph says: every key was seen, and given an algorithm,
// outside the capture, and cublasLtMatmul refuses each only inside it
TEST_CASE("a cuBLASLt refusal first met inside a graph capture: version 1's calls are recorded in its place, and "
          "the graph replays version 1's bits") {
    LayerProducts v1;
    v1.run(matmul_version(1));
    const auto want = v1.results();
    LtRefusalScope scope(emu::LtRefusal::none);
    const Kernels v2 = matmul_version(2);
    LayerProducts p;
    GraphCache graphs;
    graphs.run("layers", [&] { p.run(v2); });  // call by call: every plan made, cuBLASLt runs them
    REQUIRE(!matmul_lt().plans.empty());
    for (const auto& [key, plan] : matmul_lt().plans) CHECK(plan.ok);
    CHECK(scope.notes().empty());
    emu::lt_refusal() = emu::LtRefusal::not_supported;
    for (int use = 2; use <= 3; use++) {  // captured and launched; then replayed
        CAPTURE(use);
        p.reset();
        graphs.run("layers", [&] { p.run(v2); });
        REQUIRE(cudaStreamSynchronize(gpu_stream()) == cudaSuccess);
        REQUIRE(graphs.by_shape["layers"].exec != nullptr);
        CHECK(every_plan_refused());
        expect_one_note_per_product(scope.notes(), REFUSED);  // each said during the capture
        const auto got = p.results();
        for (size_t i = 0; i < want.size(); i++) {
            CAPTURE(i);
            CHECK(bits_equal(got[i], want[i]));
        }
    }
    graphs.clear();
}

TEST_CASE("MASKPRIOR_EMU_CUBLASLT: a --matmul-kernel 2 run that cuBLASLt turns down writes the log and checkpoint "
          "of --matmul-kernel 1, each product's note once; a heuristic's INVALID_VALUE stops it with the status's name, and "
          "a bad value with one line") {
    emu::LtRefusal parsed = emu::LtRefusal::not_supported;  // each parse below changes it
    CHECK((emu::parse_lt_refusal("ok", &parsed) && parsed == emu::LtRefusal::none));
    CHECK((emu::parse_lt_refusal("no-algorithm", &parsed) && parsed == emu::LtRefusal::no_algorithm));
    CHECK((emu::parse_lt_refusal("not-supported", &parsed) && parsed == emu::LtRefusal::not_supported));
    CHECK((emu::parse_lt_refusal("invalid-value", &parsed) && parsed == emu::LtRefusal::invalid_value));
    for (const char* bad : {"", "OK", "none", "not_supported", "no-algorithm "})
        CHECK_FALSE(emu::parse_lt_refusal(bad, &parsed));
    // add3 (MLP 16, a multiple of 8: the fused GELU products too), two evaluations of greedy decoding
    const std::string run = GPU_BINARY + " --device cuda --task add3 --max-test 32 --init mask --width 16 --layers 1 "
                            "--heads 2 --head-size 8 --mlp 16 --batch 32 --steps 4 --eval-every 2 ";
    const std::string dir = TMP_PREFIX + "lt-refused-";
    REQUIRE(run_command(run + "--matmul-kernel 1 --out " + dir + "v1").exit_code == 0);
    const std::string want = run_record(dir + "v1");
    struct Refused { const char* env; const char* flags; const std::string& why; };
    for (Refused r : {Refused{"no-algorithm", "", NO_ALGORITHM}, Refused{"not-supported", "", REFUSED},
                      Refused{"not-supported", "--cuda-graph ", REFUSED}}) {
        CAPTURE(r.env); CAPTURE(r.flags);
        const std::string out = dir + r.env + (*r.flags ? "-graph" : "");
        CommandResult c = run_command(std::string("MASKPRIOR_EMU_CUBLASLT=") + r.env + " " + run +
                                      "--matmul-kernel 2 " + r.flags + "--out " + out, true);
        REQUIRE_MESSAGE(c.exit_code == 0, c.out);
        CHECK(run_record(out) == want);
        // stderr holds the notes alone, one line per product, none twice
        std::istringstream text(c.out);
        std::vector<std::string> lines;
        for (std::string line; std::getline(text, line);) lines.push_back(line);
        expect_notes(lines, r.why);
        CHECK(lines.size() >= 4);  // at least the forward, the bias + GELU, and the backward's two products
    }
    // a heuristic's INVALID_VALUE is a bug, not a refusal: the run stops, naming the status in the library's words
    CommandResult invalid = run_command("MASKPRIOR_EMU_CUBLASLT=invalid-value " + run + "--matmul-kernel 2 --out " +
                                        dir + "invalid", true);
    CHECK(invalid.exit_code == 1);
    CHECK(invalid.out.rfind("maskprior: cuBLAS error at ", 0) == 0);
    CHECK(invalid.out.find("layers/matmul_lt.cuh:") != std::string::npos);
    CHECK(invalid.out.find(": CUBLAS_STATUS_INVALID_VALUE (an unsupported value or parameter was passed to the "
                           "function)\n") != std::string::npos);
    CommandResult bad = run_command("MASKPRIOR_EMU_CUBLASLT=sometimes " + run + "--matmul-kernel 2 --out " + dir +
                                    "bad", true);
    CHECK(bad.exit_code == 2);
    CHECK(bad.out == "CUDA emulation: MASKPRIOR_EMU_CUBLASLT=sometimes: expected ok, no-algorithm, not-supported or "
                     "invalid-value\n");
}

TEST_CASE("tools/bench.py stops a --matmul-kernel 2 timing at the note that version 1 ran a product, and times "
          "the same run where cuBLASLt runs every product") {
    // bench_maskprior (what tools/bench_gpu.py times with) on the emulated binary, a tiny add3 model
    // logging every 2 steps, once under each MASKPRIOR_EMU_CUBLASLT
    const std::string script = TMP_PREFIX + "bench-refuse.py";
    std::ofstream(script) << R"(import os, sys
sys.path.insert(0, "tools")
import bench
args = ("--task add3 --max-test 32 --device cuda --width 16 --layers 1 --heads 2 --head-size 8 --mlp 16 "
        "--batch 32 --matmul-kernel 2").split()
for refusal in ("ok", "no-algorithm", "not-supported"):
    os.environ["MASKPRIOR_EMU_CUBLASLT"] = refusal
    try:
        rates, _, _ = bench.bench_maskprior(args, 0.1, 2, refuse=bench.MATMUL_FALLBACK_NOTE, threads=1)
        print(refusal, "timed", len(rates) >= 3)
    except bench.Refused as note:
        print(refusal, "refused:", note)
)";
    CommandResult r = run_command("MASKPRIOR_BENCH_BINARY=" + GPU_BINARY + " ${MASKPRIOR_PYTHON:-python3} " + script);
    CHECK(r.exit_code == 0);
    std::istringstream text(r.out);
    std::vector<std::string> lines;
    for (std::string line; std::getline(text, line);) lines.push_back(line);
    REQUIRE(lines.size() == 3);
    CHECK(lines[0] == "ok timed True");
    CHECK(lines[1].rfind("no-algorithm refused: maskprior: note: cuBLASLt " + NO_ALGORITHM + " for ", 0) == 0);
    CHECK(lines[2].rfind("not-supported refused: maskprior: note: cuBLASLt " + REFUSED + " for ", 0) == 0);
    remove(script.c_str());
}
#endif
