// Matmul version 2 (Kernels::matmul 2, --matmul-kernel 2: cuBLASLt with the bias, GELU and bias
// gradient fused in; layers/matmul_lt.cuh) against the CPU, against version 1, and against
// itself: the forward with and without bias, bias + GELU, the backward accumulating onto non-zero
// gradients, the MLP's fused backward, a run's bits twice, --profile's names, and training steps.
// Every output starts as NaN, so an entry the library never writes fails. Included after
// test_gpu.cu, whose helpers it uses; make test runs it on the emulation, make gpu-check on a GPU.
#include <memory>

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
