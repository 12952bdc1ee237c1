// dev/matmul.cu: both versions of the GPU matmul (Kernels::matmul, --matmul-kernel), checked
// against the CPU and timed side by side, for each thing a training step asks of them
// (dev/README.md). Build and run:
//   make dev && ./dev/matmul [version] [--quick] [--shape N,C,OC]   (--version: its commit and build)
//   make dev-emulated && ./dev/matmul-emulated --quick   (no GPU: the CPU emulation, the checks only)
// The versions:
//   1  layers/matmul.cuh     cublasSgemm, then kernels of their own for the bias, the GELU and the
//                            bias gradient
//   2  layers/matmul_lt.cuh  cublasLtMatmul with those fused in as epilogues: BIAS, GELU_AUX_BIAS,
//                            BGRADB, and DGELU_BGRAD for the MLP's backward (layers/fused.cuh)
// The operations, each from the CPU loops' result (inp (N,C), weight (OC,C)):
//   forward           out = inp W^T + b                                 matmul_forward
//   bias + GELU       pre = inp W^T + b, out = gelu(pre)                matmul_bias_gelu_forward
//   backward          dinp, dW, db accumulated onto random gradients   matmul_backward
//   MLP backward      both layers of an MLP C -> OC -> C, from dproj    mlp_backward
// Checked: every output within 1e-4 + 1e-3·|cpu| (every forward output starts as NaN; the MLP's
// hidden gradients start at zero, as the model's do), two runs' bits equal. The MLP's dg is left
// out of the check: version 2 never writes it (layers/fused.cuh). A row of version 2 in which
// cuBLASLt turned a product down, so that version 1 ran it (layers/matmul_lt.cuh), says FELL BACK
// in its idea column, its time and error being version 1's; the program then exits 3 (1 on a miss).
// Napkin counts of one call: bytes = each operand read or written once (a gradient read and
// written), flops = 2·N·C·OC a product (the forward one, the backward two, the MLP four).
#include "dev/dev_common.h"  // DevBuffer, dev_random, dev_max_error, same_bits, dev_time_ms, dev_bound_ms
#include "layers/fused.cuh"    // matmul_forward, matmul_backward, matmul_bias_gelu_forward, mlp_backward

struct MatmulShape {
    const char* name;
    int N, C, OC;  // rows (B·T), inputs, outputs
};

// The model's matmuls at two sizes: the paper's (GOTU's model: B 256 x T 16 rows, C 256, 6 heads
// of 64, MLP 256) and make run's (B 64 x T 16, C 32, 2 heads of 16, MLP 32); and awkward ones (OC
// not a multiple of 8, where the GELU fusions give way to the unfused layers; OC 1)
static std::vector<MatmulShape> matmul_shapes(bool quick) {
    if (quick)  // the CPU emulation: make run's widths on fewer rows
        return {{"qkv C->3*NH*HS", 64, 32, 96}, {"mlp_fc C->MLP", 64, 32, 32},
                {"awkward (OC 29)", 21, 13, 29}, {"OC 1", 7, 5, 1}};
    return {{"paper qkv C->3*NH*HS", 4096, 256, 1152}, {"paper proj NH*HS->C", 4096, 384, 256},
            {"paper mlp_fc C->MLP", 4096, 256, 256},   {"paper mlp_proj MLP->C", 4096, 256, 256},
            {"make run qkv", 1024, 32, 96},            {"make run proj, mlp_fc, mlp_proj", 1024, 32, 32},
            {"awkward (OC 29)", 1000, 13, 29},         {"OC 1", 4096, 256, 1}};
}

static const char* IDEAS[2] = {"cublasSgemm, then bias / GELU / bias-gradient kernels",
                               "cublasLtMatmul, bias / GELU / bias gradient as epilogues"};
static const char* OPERATIONS[4] = {"forward", "bias + GELU", "backward", "MLP backward"};
static const char* FELL_BACK = "FELL BACK: cuBLASLt turned it down, version 1 ran it";

[[noreturn]] static void usage(const char* program) {
    fprintf(stderr, "usage: %s [version 1..%d] [--quick] [--shape N,C,OC] | --version\n", program, MATMUL_KERNEL_COUNT);
    exit(2);
}

static void table_header() {
    dev_table_intro("matmul");
    printf("| %-38s | %-12s | v | %-56s | %9s | %11s | %7s | %8s | %9s | %-9s |\n", "shape (N, C, OC)", "operation",
           "idea", "time ms", "bound", "GB/s", "TFLOP/s", "max error", "same bits");
    printf("|%s|%s|---|%s|%s|%s|%s|%s|%s|%s|\n", std::string(40, '-').c_str(), std::string(14, '-').c_str(),
           std::string(58, '-').c_str(), std::string(11, '-').c_str(), std::string(13, '-').c_str(),
           std::string(9, '-').c_str(), std::string(10, '-').c_str(), std::string(11, '-').c_str(),
           std::string(11, '-').c_str());
}

// The inputs and the CPU's results of every operation at one shape
struct MatmulCase {
    std::vector<float> inp, weight, bias, dout, start_dinp, start_dweight, start_dbias;  // the inputs
    std::vector<float> out, pre, gelu, dinp, dweight, dbias;                             // the CPU's results
    // the MLP C -> OC -> C: weight is Wfc (OC,C), projw (C,OC); dproj (N,C); gradients from start_mlp
    std::vector<float> projw, dproj, start_mlp[5], mlp[6];  // [dinp, dfcw, dfcb, dprojw, dprojb (, dpre)]
};

static MatmulCase matmul_case(const MatmulShape& s) {
    MatmulCase t;
    Rng rng(9);
    const size_t NC = (size_t)s.N * s.C, NO = (size_t)s.N * s.OC, OCC = (size_t)s.OC * s.C;
    t.inp = dev_random(NC, rng);
    t.weight = dev_random(OCC, rng);
    t.bias = dev_random(s.OC, rng);
    t.dout = dev_random(NO, rng);
    t.start_dinp = dev_random(NC, rng);
    t.start_dweight = dev_random(OCC, rng);
    t.start_dbias = dev_random(s.OC, rng);
    t.out.resize(NO);
    t.pre.resize(NO);
    t.gelu.resize(NO);
    matmul_forward_cpu(t.out.data(), t.inp.data(), t.weight.data(), t.bias.data(), s.N, s.C, s.OC);
    matmul_bias_gelu_forward(DEVICE_CPU, Kernels{}, t.pre.data(), t.gelu.data(), t.inp.data(), t.weight.data(),
                             t.bias.data(), s.N, s.C, s.OC);
    t.dinp = t.start_dinp;
    t.dweight = t.start_dweight;
    t.dbias = t.start_dbias;
    matmul_backward_cpu(t.dinp.data(), t.dweight.data(), t.dbias.data(), t.dout.data(), t.inp.data(),
                        t.weight.data(), s.N, s.C, s.OC);
    t.projw = dev_random(OCC, rng);
    t.dproj = dev_random(NC, rng);
    const size_t start_sizes[5] = {NC, OCC, (size_t)s.OC, OCC, (size_t)s.C};
    for (int i = 0; i < 5; i++) t.start_mlp[i] = dev_random(start_sizes[i], rng);
    for (int i = 0; i < 5; i++) t.mlp[i] = t.start_mlp[i];
    t.mlp[5].assign(NO, 0.0f);
    std::vector<float> dg(NO, 0.0f);
    mlp_backward(DEVICE_CPU, Kernels{}, t.mlp[0].data(), t.mlp[1].data(), t.mlp[2].data(), t.mlp[5].data(), dg.data(),
                 t.mlp[3].data(), t.mlp[4].data(), t.dproj.data(), t.inp.data(), t.pre.data(), t.gelu.data(),
                 t.weight.data(), t.projw.data(), s.N, s.C, s.OC);
    return t;
}

int main(int argc, char** argv) {
    int only = 0;  // 0: both versions
    bool quick = false;
    std::vector<MatmulShape> shapes;
    for (int i = 1; i < argc; i++) {
        const std::string arg = argv[i];
        MatmulShape given = {"given", 0, 0, 0};
        char tail;
        if (arg == "--version" && argc == 2) { print_version(argv[0]); exit(0); }
        if (arg == "--quick") quick = true;
        else if (arg == "--shape" && i + 1 < argc &&
                 sscanf(argv[++i], "%d,%d,%d%c", &given.N, &given.C, &given.OC, &tail) == 3 && given.N > 0 &&
                 given.C > 0 && given.OC > 0)
            shapes = {given};
        else if (arg.size() == 1 && arg[0] >= '1' && arg[0] < '1' + MATMUL_KERNEL_COUNT) only = arg[0] - '0';
        else usage(argv[0]);
    }
    if (shapes.empty()) shapes = matmul_shapes(quick);
    if (gpu_count() == 0) {
        fprintf(stderr, "%s: no CUDA GPU (make dev-emulated builds the CPU emulation's %s-emulated)\n", argv[0],
                argv[0]);
        exit(2);
    }
    matmul_lt_setup();
    table_header();
    bool all_ok = true;
    int fell_back_rows = 0;  // rows of version 2 in which version 1 ran a product (layers/matmul_lt.cuh)
    for (const MatmulShape& s : shapes) {
        const MatmulCase t = matmul_case(s);
        const size_t NC = (size_t)s.N * s.C, NO = (size_t)s.N * s.OC, OCC = (size_t)s.OC * s.C;
        DevBuffer inp(t.inp), weight(t.weight), bias(t.bias), dout(t.dout), projw(t.projw), dproj(t.dproj);
        DevBuffer pre_in(t.pre), gelu_in(t.gelu);  // the CPU's activations, which the MLP's backward reads
        DevBuffer out{std::vector<float>(NO)}, pre{std::vector<float>(NO)}, dinp(t.start_dinp);
        DevBuffer dweight(t.start_dweight), dbias(t.start_dbias);
        DevBuffer dpre{std::vector<float>(NO)}, dg{std::vector<float>(NO)};
        DevBuffer mlp[5] = {DevBuffer(t.start_mlp[0]), DevBuffer(t.start_mlp[1]), DevBuffer(t.start_mlp[2]),
                            DevBuffer(t.start_mlp[3]), DevBuffer(t.start_mlp[4])};
        const double product = 2.0 * s.N * s.C * s.OC;
        const double bytes[4] = {4.0 * (NC + OCC + s.OC + NO), 4.0 * (NC + OCC + s.OC + 2 * NO),
                                 4.0 * (NO + NC + OCC + 2 * NC + 2 * OCC + 2 * s.OC),
                                 4.0 * (NC + 3 * NO + NC + 2 * OCC + 2 * NC + 4 * OCC + 2 * s.OC + 2 * s.C)};
        const double flops[4] = {product, product, 2 * product, 4 * product};
        for (int version = 1; version <= MATMUL_KERNEL_COUNT; version++) {
            if (only && version != only) continue;
            Kernels kernels;
            kernels.matmul = version;
            for (int op = 0; op < 4; op++) {
                // the call, and what it starts from: NaN outputs, random gradients, zero hidden gradients
                auto reset = [&] {
                    out.set(std::vector<float>(NO, NAN));
                    pre.set(std::vector<float>(NO, NAN));
                    dinp.set(t.start_dinp);
                    dweight.set(t.start_dweight);
                    dbias.set(t.start_dbias);
                    dpre.set(std::vector<float>(NO, 0.0f));
                    dg.set(std::vector<float>(NO, 0.0f));
                    for (int i = 0; i < 5; i++) mlp[i].set(t.start_mlp[i]);
                };
                auto call = [&] {
                    if (op == 0)
                        matmul_forward(DEVICE_GPU, kernels, out.ptr, inp.ptr, weight.ptr, bias.ptr, s.N, s.C, s.OC);
                    if (op == 1)
                        matmul_bias_gelu_forward(DEVICE_GPU, kernels, pre.ptr, out.ptr, inp.ptr, weight.ptr, bias.ptr,
                                                 s.N, s.C, s.OC);
                    if (op == 2)
                        matmul_backward(DEVICE_GPU, kernels, dinp.ptr, dweight.ptr, dbias.ptr, dout.ptr, inp.ptr,
                                        weight.ptr, s.N, s.C, s.OC);
                    if (op == 3)
                        mlp_backward(DEVICE_GPU, kernels, mlp[0].ptr, mlp[1].ptr, mlp[2].ptr, dpre.ptr, dg.ptr,
                                     mlp[3].ptr, mlp[4].ptr, dproj.ptr, inp.ptr, pre_in.ptr, gelu_in.ptr, weight.ptr,
                                     projw.ptr, s.N, s.C, s.OC);
                };
                // what the operation writes, beside the CPU's
                auto results = [&] {
                    std::vector<std::pair<std::vector<float>, const std::vector<float>*>> r;
                    if (op == 0) r = {{out.get(), &t.out}};
                    if (op == 1) r = {{pre.get(), &t.pre}, {out.get(), &t.gelu}};
                    if (op == 2) r = {{dinp.get(), &t.dinp}, {dweight.get(), &t.dweight}, {dbias.get(), &t.dbias}};
                    if (op == 3) {
                        for (int i = 0; i < 5; i++) r.push_back({mlp[i].get(), &t.mlp[i]});
                        r.push_back({dpre.get(), &t.mlp[5]});
                    }
                    return r;
                };
                double error = 0;
                bool reproducible = true;
                const size_t fallbacks = matmul_lt().fallbacks;  // version 1 in version 2's place, so far
                reset();
                call();
                const auto first = results();
                reset();
                call();
                const auto second = results();
                for (size_t i = 0; i < first.size(); i++) {
                    error = dev_worst(error, dev_max_error(OPERATIONS[op], first[i].first, *first[i].second));
                    reproducible = reproducible && same_bits(first[i].first, second[i].first);
                }
                const double ms = dev_time_ms(quick ? 1 : 20, call);
                const double bound_ms = dev_bound_ms(call);
                const bool fell_back = matmul_lt().fallbacks != fallbacks;  // its row is version 1's
                fell_back_rows += fell_back;
                const std::string dims = std::string(s.name) + " " + std::to_string(s.N) + "," + std::to_string(s.C) +
                                         "," + std::to_string(s.OC);
                printf("| %-38s | %-12s | %d | %-56s | %9.4f | %8.4f ms | %7.1f | %8.3f | %9.2e | %-9s |\n",
                       dims.c_str(), OPERATIONS[op], version, fell_back ? FELL_BACK : IDEAS[version - 1], ms, bound_ms,
                       bytes[op] / (ms * 1e6),
                       flops[op] / (ms * 1e9), error, reproducible ? "yes" : "NO");
                all_ok = all_ok && !std::isnan(error) && reproducible;
            }
        }
    }
    printf(all_ok ? "every version matches the CPU\n" : "MISMATCH: a version above misses the CPU reference\n");
    if (fell_back_rows)
        printf("FELL BACK: cuBLASLt turned down the products of %d rows of version 2 and version 1 ran them: those "
               "rows' times and errors are version 1's (exit 3)\n", fell_back_rows);
    return !all_ok ? 1 : fell_back_rows ? 3 : 0;
}
