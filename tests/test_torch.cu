// The cross-check against PyTorch: ./maskprior --dump-state writes one batch's parameters,
// loss and gradients; tests/torch_reference.py recomputes them with autograd in float64 and
// compares every tensor. Mask shared and per head, causal and not, scalar encoding, logistic
// loss, the causal decoder's next-token readout with its loss mask, the image model (patch
// embedding, CLS or mean pooling, label smoothing); c = 1.5 so that the mask
// gradient is large enough to be checked for real (at c = 6, σ(-6) shrinks it below 1e-4).
#include <sstream>
#include "test_util.h"
#include "text_fixture.h"

// Debian's python3 has python3-torch; elsewhere (the GPU machine) $MASKPRIOR_PYTHON names one with torch.
static const std::string PYTHON_BIN = getenv("MASKPRIOR_PYTHON") ? getenv("MASKPRIOR_PYTHON") : "/usr/bin/python3";
static const std::string PYTHON = PYTHON_BIN + " tests/torch_reference.py ";

// The cases: the flags of each dump (besides --device cpu --batch 16), checked in one Python
// process, which imports torch once
TEST_CASE("every gradient matches PyTorch autograd") {
    REQUIRE_MESSAGE(run_command(PYTHON_BIN + " -c 'import torch'").exit_code == 0,
                    "Debian's python3-torch is missing: make deps installs it");
    const std::string images = write_image_folder(TMP_PREFIX + "torch_images", 3, 6, 8, 5);
    const std::string walk = write_walk_folder(TMP_PREFIX + "torch_lm", 2000, 3000, 300);
    const std::vector<std::pair<const char*, std::string>> cases = {
        {"no mask", "--task maj3"},
        {"shared mask", "--task maj3 --init mask --mask-c 1.5"},
        {"per-head mask, 3 layers, head size != width / heads",
         "--task cyclic3 --init mask --mask-per-head --mask-c 1.5 --heads 3 --head-size 8 --width 24 --layers 3"},
        {"causal, shared mask", "--task 2parity --init mask --causal --mask-c 1.5"},
        {"mask in the first layer only", "--task maj3 --init mask --prior-layers first --mask-c 1.5"},
        {"qk-opt init", "--task 2parity --init qk-opt --qk-opt-steps 50"},
        {"causal, per-head mask", "--task maj3 --init mask --causal --mask-per-head --mask-c 1.5 --layers 1"},
        {"scalar encoding, shared mask", "--task 2parity --init mask --mask-c 1.5 --encoding scalar"},
        {"logistic loss", "--task maj3 --loss logistic"},
        {"next-token readout on add3: loss on the answer, shared mask", "--task add3 --init mask --mask-c 1.5"},
        {"next-token readout on mul2: loss on every position, per-head mask, no mask in layer 1",
         "--task mul2 --init mask --mask-per-head --prior-layers first --mask-c 1.5 --loss-on all"},
        {"image model (a ViT): patch embedding, CLS readout, shared mask, label smoothing",
         "--task images --data-dir " + images + " --patch 2 --init mask --mask-c 1.5 --label-smoothing 0.1"},
        {"image model: mean pooling, per-head mask, 2x2 window, no smoothing",
         "--task images --data-dir " + images + " --patch 4 --pool mean --init mask --mask-per-head --mask-c 1.5 "
         "--mask-window 1 --label-smoothing 0 --heads 3"},
        {"language model, V = 2000: window mask (c 1.5, w 3), every position's next token",
         "--task lm --data-dir " + walk + " --seq-len 12 --init mask --mask-window 3 --mask-c 1.5"},
        {"language model, V = 2000: the ALiBi-shaped mask, 3 heads",
         "--task lm --data-dir " + walk + " --seq-len 12 --heads 3 --init mask --mask-prior alibi --mask-c 1.5"},
        {"language model: a frozen mask has no gradient",
         "--task lm --data-dir " + walk + " --seq-len 12 --init mask --mask-c 1.5 --freeze-mask"},
        {"scalar encoding, logistic loss, causal, per-head mask",
         "--task 2parity --init mask --mask-per-head --mask-c 1.5 --causal --encoding scalar --loss logistic"},
    };
    std::string files;
    for (size_t k = 0; k < cases.size(); k++) {
        const std::string file = TMP_PREFIX + "x" + std::to_string(k) + ".safetensors";
        CommandResult dump = run_command(MASKPRIOR + " --device cpu --batch 16 " + cases[k].second + " --dump-state " +
                                         file);
        REQUIRE_MESSAGE(dump.exit_code == 0, cases[k].first, ": ", dump.out);
        files += " " + file;
    }
    CommandResult check = run_command(PYTHON + files);
    CHECK(check.exit_code == 0);
    for (size_t k = 0; k < cases.size(); k++) {
        CAPTURE(cases[k].first);
        CAPTURE(cases[k].second);
        CHECK(check.out.find("PASS: " + TMP_PREFIX + "x" + std::to_string(k) + ".safetensors") != std::string::npos);
    }
    if (check.exit_code != 0) MESSAGE(check.out);
}

// A dumped state and the tensors (comma-separated) to corrupt in it in turn: the check must fail each time
struct Corruptions {
    std::string file, names;
};

// Dumps one batch with `args` into `file`, for expect_corruptions_caught to corrupt `names` in it
static Corruptions dump_to_corrupt(const std::string& args, const std::string& file, const std::string& names) {
    REQUIRE(run_command(MASKPRIOR + " --device cpu --batch 16 " + args + " --dump-state " + file).exit_code == 0);
    return {file, names};
}

// The corruptions of every dump checked in one Python process, which imports torch once: each caught
static void expect_corruptions_caught(const std::vector<Corruptions>& dumps) {
    std::string arguments;
    for (const Corruptions& d : dumps) arguments += " " + d.file + " --corrupt " + d.names;
    CommandResult r = run_command(PYTHON + arguments);
    CAPTURE(r.out);
    CHECK(r.exit_code == 0);  // every corruption caught
    for (const Corruptions& d : dumps) {
        std::stringstream list(d.names);
        for (std::string name; std::getline(list, name, ',');)
            CHECK(r.out.find("caught: " + d.file + " with " + name + " corrupted") != std::string::npos);
    }
}

// One AdamW step from the dumped state: the run's checkpoint after its first step against
// torch.optim.AdamW with the weight-decay groups the checkpoint names (constant lr, no clipping);
// returns torch_reference.py's arguments that check it
static std::string adamw_step_check(const std::string& args, const std::string& tag, const std::string& rule) {
    const std::string run = MASKPRIOR + " --device cpu --batch 16 --schedule constant --warmup 0 --clip-grad 0 "
                            "--lr 1e-2 --wd 0.5 --eval-every 100 " + args;
    const std::string state = TMP_PREFIX + tag + ".safetensors", after = TMP_PREFIX + tag + "_after";
    REQUIRE(run_command(run + " --dump-state " + state).exit_code == 0);
    REQUIRE(run_command(run + " --steps 1 --out " + after).exit_code == 0);
    CHECK(safetensors_read(after + "/model.safetensors").metadata["weight_decay_on"] == rule);
    return " " + state + " --adamw-step " + after + "/model.safetensors 0.01 0.5";
}

TEST_CASE("one AdamW step matches torch.optim.AdamW: a ViT with timm's weight-decay groups, a Boolean model with "
          "every weight decayed") {
    // a ViT: the weight matrices alone decay
    const std::string dir = write_image_folder(TMP_PREFIX + "torch_adamw_images", 3, 6, 8, 5);
    const std::string vit = adamw_step_check("--task images --data-dir " + dir + " --patch 2 --init mask",
                                             "adamw_vit", "matrices");
    // maj3 with AdamW: every weight but the mask
    const std::string maj3 = adamw_step_check("--task maj3 --init mask --optimizer adamw", "adamw_maj3", "all");
    CommandResult check = run_command(PYTHON + vit + maj3);  // one Python process: torch imported once
    CAPTURE(check.out);
    CHECK(check.exit_code == 0);
    for (const char* rule : {"matrices", "all"})  // each state's step, named by its groups
        CHECK(check.out.find(std::string("PASS: one AdamW step (lr 0.01, weight decay 0.5 on ") + rule + ":") !=
              std::string::npos);
}

TEST_CASE("the PyTorch cross-check fails when a gradient is wrong") {
    const std::string dir = write_image_folder(TMP_PREFIX + "torch_images", 3, 6, 8, 5);
    expect_corruptions_caught(
        {dump_to_corrupt("--task maj3 --init mask --mask-c 1.5", TMP_PREFIX + "c1.safetensors",
                         "grad.h.1.attn.mask,grad.wte,loss"),
         dump_to_corrupt("--task maj3 --encoding scalar --loss logistic", TMP_PREFIX + "c2.safetensors",
                         "grad.wval,token_values,loss"),
         dump_to_corrupt("--task add3 --init mask --mask-c 1.5", TMP_PREFIX + "c3.safetensors",
                         "batch.loss_mask,grad.h.0.attn.mask,grad.head.weight"),
         dump_to_corrupt("--task images --data-dir " + dir + " --patch 2", TMP_PREFIX + "c4.safetensors",
                         "batch.inputs,grad.patch.weight,grad.cls")});
}

// The benchmark scripts build their PyTorch model from torch_reference.py, so a change there
// can break them; make test runs the small CPU check of the GPU benchmark (which drives
// tools/bench.py's helpers too) and asserts only that it runs, not how fast.
TEST_CASE("the benchmark scripts still run (tools/bench_gpu.py --device cpu --small)") {
    CommandResult r = run_command(PYTHON_BIN + " tools/bench_gpu.py --device cpu --small");
    CAPTURE(r.out);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("eager") != std::string::npos);
}

// make bench's peaks are trusted only after tools/bench.py has read tools/fma_peak's loops back
// from its disassembly: built as make builds it (AVX-512 here, and for any AVX2 CPU) the check
// passes; with its constants no longer volatile, the compiler works the add chains out and drops
// 11 of the 12 (1.0 + j + 1e-7 rounds back to 1.0 + j), which would count undone adds as done and
// make the ceiling twice too high: the check must say the peak is wrong.
TEST_CASE("make bench's peak: tools/fma_peak's loops as built pass the disassembly check, and dropped chains fail it") {
    const std::string dir = TMP_PREFIX + "fma_peak";
    std::filesystem::create_directories(dir);
    const std::string check = PYTHON_BIN + " -c 'import sys; sys.path.insert(0, \"tools\"); import bench; "
                              "print(bench.fma_peak_checked(sys.argv[1]))' ";
    for (const std::string march : {"native", "x86-64-v3"}) {
        CAPTURE(march);
        const std::string binary = dir + "/fma_peak_" + march;
        REQUIRE(run_command("gcc -O2 -march=" + march + " -fopenmp -o " + binary + " tools/fma_peak.c").exit_code == 0);
        const CommandResult ok = run_command(check + binary);
        CAPTURE(ok.out);
        CHECK(ok.exit_code == 0);
        CHECK(ok.out.find("vfmadd in fma_loop's") != std::string::npos);
    }
    const std::string folded = dir + "/fma_peak_folded";
    REQUIRE(run_command("sed 's/static volatile float/static float/' tools/fma_peak.c > " + folded + ".c && gcc -O2 "
                        "-march=x86-64-v3 -fopenmp -o " + folded + " " + folded + ".c").exit_code == 0);
    const CommandResult wrong = run_command(check + folded);
    CAPTURE(wrong.out);
    CHECK(wrong.exit_code == 1);
    CHECK(wrong.out.find("mul_add_loop: its loop holds 1 vaddps (0 reading memory), not 6 on registers; its peak "
                         "would be wrong") != std::string::npos);
    std::filesystem::remove_all(dir);
}

// make bench HOST_MARCH=x86-64-v3 on a CPU with AVX-512 holds PyTorch to AVX2 through three
// environment variables (tools/bench.py, AVX2_HOLD), set before torch loads: the ratio compares like
// with like only while this Python's torch, OpenBLAS and oneDNN honour them, which their own reports
// say. On a CPU without AVX-512 there is nothing to hold, and the header must say so instead.
TEST_CASE("make bench HOST_MARCH=x86-64-v3 holds PyTorch to AVX2, as its libraries report") {
    const CommandResult r = run_command(
        PYTHON_BIN + " -c 'import sys; sys.path.insert(0, \"tools\"); import bench; "
                     "print(bench.hold_pytorch(\"x86-64-v3\")); import torch; "
                     "print(bench.pytorch_kernels(torch, bench.torch_sgemm_library(torch)))'");
    CAPTURE(r.out);
    REQUIRE(r.exit_code == 0);
    if (r.out.find("no AVX-512") != std::string::npos) return;  // an AVX2 CPU: PyTorch's own choice
    CHECK(r.out.find("PyTorch held to AVX2 (OPENBLAS_CORETYPE=Haswell") != std::string::npos);
    CHECK(r.out.find("OpenBLAS core Haswell, ATen AVX2, oneDNN avx2") != std::string::npos);
}

// The attention benchmark with the kernel lab's emulated programs (dev/*-emulated, which make
// test builds) and the Python's torch, whatever it lacks (FlexAttention, torch.compile): it
// must run and read our kernels' times and bits.
TEST_CASE("the attention benchmark still runs (tools/bench_attention.py --device cpu --small)") {
    CommandResult r = run_command(PYTHON_BIN + " tools/bench_attention.py --device cpu --small");
    CAPTURE(r.out);
    CHECK(r.exit_code == 0);
    for (int version = 1; version <= 3; version++)
        CHECK(r.out.find("| maskprior kernel " + std::to_string(version) + "        |") != std::string::npos);
    CHECK(r.out.find("no dev/") == std::string::npos);
    CHECK(r.out.find("T16: kernel 3 ") != std::string::npos);
}
