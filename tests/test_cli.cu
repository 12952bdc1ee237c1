// The program as a user meets it: its answers to bad input (one line, exit code 2), the
// files a run leaves, checkpoint round trips, and bit-exact resume. Runs ./maskprior.
#include <fstream>
#include "test_util.h"
#include "prior/inits.cuh"    // INITS: every init runs
#include "run/safetensors.h"  // safetensors_read
#include "tasks/registry.h"   // TASKS

static const std::string TINY = MASKPRIOR + " --device cpu --width 8 --layers 1 --heads 2 --head-size 4 --mlp 8 ";

// A bad command must answer with exactly one line on stderr, "maskprior: error: ...", exit 2.
static void expect_error(const std::string& args, const std::string& words) {
    CommandResult r = run_command(TINY + args, true);
    CAPTURE(args);
    CAPTURE(r.out);
    CHECK(r.exit_code == 2);
    CHECK(r.out.rfind("maskprior: error: ", 0) == 0);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK(r.out.find(words) != std::string::npos);
}

TEST_CASE("bad command lines get one clear line and exit code 2") {
    expect_error("--frobnicate 3", "unknown flag --frobnicate");
    expect_error("--steps", "--steps needs a value");
    expect_error("--width abc", "--width expects a whole number");
    expect_error("--width 12x", "--width expects a whole number");
    expect_error("--width 0", "--width must be at least 1");
    expect_error("--heads -2", "--heads must be at least 1");
    expect_error("--batch 0", "--batch must be at least 1");
    expect_error("--lr 0", "--lr must be greater than 0");
    expect_error("--lr nan", "--lr expects a number");
    expect_error("--task parity9", "--task must be one of");
    expect_error("--init qk-magic", "--init must be one of");
    expect_error("--device tpu", "--device must be one of");
    expect_error("--optimizer sgd", "--optimizer must be one of");
    expect_error("--encoding onehot", "--encoding must be one of token, scalar");
    expect_error("--loss hinge", "--loss must be one of mse, logistic");
    expect_error("--task cyclic3 --loss logistic", "--loss logistic needs ±1 targets");
    expect_error("--steps 10 --epochs 2", "not both");
    expect_error("--mask-per-head", "--mask-per-head needs --init mask");
    expect_error("--batch 100000000 --width 4096", "too large");
    // the logits (B·T·V) may pass 2^31: they are indexed in 64 bits (tests/test_gpu_language.cu, make test-large)
    expect_error("stray", "unexpected argument");
    expect_error("--prior-layers some", "--prior-layers must be one of");
    expect_error("--qk-opt-steps 0", "--qk-opt-steps must be at least 1");
    expect_error("--attention-kernel 5", "--attention-kernel: attention kernel 5 does not exist (1 to 4)");
    expect_error("--attention-kernel 0", "--attention-kernel must be at least 1");
    expect_error("--attention-kernel 3 --head-size 200", "holds at most 128 dims a head");
    expect_error("--attention-kernel 4 --head-size 200", "attention kernel 4 holds at most 128 dims a head");
    expect_error("--cpu-kernel 3", "--cpu-kernel must be 1 to 2, got 3");
    expect_error("--cpu-kernel 0", "--cpu-kernel must be at least 1");
    expect_error("--profile 0", "--profile must be at least 1");
    expect_error("--profile 2 --device cpu", "--profile records GPU launches: it needs --device cuda");
    expect_error("--profile 2 --continue", "--profile times a few steps and writes nothing");
    if (!gpu_available() && !BUILT_WITHOUT_CUDA) expect_error("--device cuda", "no CUDA GPU");
}

TEST_CASE("the build without CUDA trains on the CPU by default, and --device cuda on the emulation with one warning" *
          doctest::skip(!BUILT_WITHOUT_CUDA)) {
    const std::string run = MASKPRIOR + " --width 8 --layers 1 --heads 2 --head-size 4 --mlp 8 --task maj3 --steps 2 "
                                        "--eval-every 2 --out " + TMP_PREFIX;
    CommandResult automatic = run_command(run + "auto");
    REQUIRE(automatic.exit_code == 0);
    CHECK(automatic.out.rfind("maskprior: training on the CPU (a build without CUDA): ", 0) == 0);
    CHECK(automatic.out.find(build_text()) != std::string::npos);  // the start-up table's "build" row
    CommandResult emulated = run_command(run + "emulated --device cuda", true);  // stderr alone
    REQUIRE(emulated.exit_code == 0);
    CHECK(emulated.out == "maskprior: warning: built without CUDA, --device cuda runs the CUDA code on its CPU "
                          "emulation (emu/), for checking it: far slower than --device cpu\n");
    CHECK(read_file(TMP_PREFIX + "emulated/metrics.json").find("(CUDA)") != std::string::npos);
}

TEST_CASE("--cpu-kernel 1 trains with the lesson's loops and writes the bits of version 2, the default") {
    const std::string run = TINY + "--task maj3 --init mask --steps 20 --eval-every 10 --seed 2 --out " + TMP_PREFIX;
    CommandResult lesson = run_command(run + "cpu1 --cpu-kernel 1"), fast = run_command(run + "cpu2");
    REQUIRE(lesson.exit_code == 0);
    REQUIRE(fast.exit_code == 0);
    CHECK(lesson.out.find("CPU kernel 1 (the lesson's loops)") != std::string::npos);
    CHECK(fast.out.find("CPU kernel 2 (cpu_fast/)") != std::string::npos);
    CHECK(read_file(TMP_PREFIX + "cpu1/log.jsonl") == read_file(TMP_PREFIX + "cpu2/log.jsonl"));
    CHECK(read_file(TMP_PREFIX + "cpu1/metrics.json").find("\"cpu_kernel\": 1") != std::string::npos);
}

TEST_CASE("--flag=value is --flag value; --version and --list answer from the build and the tables") {
    const std::string run = TINY + "--task maj3 --steps 3 --eval-every 3 --seed 4 --out " + TMP_PREFIX;
    REQUIRE(run_command(run + "spaced").exit_code == 0);
    const std::string equals = TINY + "--task=maj3 --steps=3 --eval-every=3 --seed=4 --out=" + TMP_PREFIX + "equals";
    REQUIRE(run_command(equals).exit_code == 0);
    CHECK(read_file(TMP_PREFIX + "spaced/log.jsonl") == read_file(TMP_PREFIX + "equals/log.jsonl"));
    expect_error("--causal=1", "--causal takes no value");
    expect_error("--steps=", "--steps expects a whole number, got ''");
    CommandResult version = run_command(MASKPRIOR + " --version");
    CHECK(version.exit_code == 0);
    // the commit maskprior was built at, which it also records in a run's metrics.json (not
    // necessarily this test binary's: make rebuilds a binary only when its sources change)
    std::ifstream metrics_file(TMP_PREFIX + "spaced/metrics.json");
    const std::string commit = nlohmann::json::parse(metrics_file)["git_commit"].get<std::string>();
    CHECK(!commit.empty());
    CHECK(version.out.rfind("maskprior " + commit + "\n", 0) == 0);
    CHECK(version.out.find(MASKPRIOR_BUILD_SETTINGS) != std::string::npos);
    CHECK(version.out.find("built by " + build_text() + ": ") != std::string::npos);  // "g++ 12.2.0 without CUDA ..."
    // --list: the first word of each line, in the table's order
    auto first_words = [](const std::string& what) {
        CommandResult r = run_command(MASKPRIOR + " --list " + what);
        CHECK(r.exit_code == 0);
        std::vector<std::string> words;
        std::istringstream lines(r.out);
        for (std::string line; std::getline(lines, line);) words.push_back(line.substr(0, line.find(' ')));
        return words;
    };
    std::vector<std::string> tasks, inits, kernels;
    for (const TaskKind& kind : TASKS) tasks.push_back(kind.name);
    for (const InitKind& kind : INITS) inits.push_back(kind.name);
    for (int v = 1; v <= ATTENTION_KERNEL_COUNT; v++) kernels.push_back(std::to_string(v));
    CHECK(first_words("tasks") == tasks);
    CHECK(first_words("inits") == inits);
    CHECK(first_words("attention-kernels") == kernels);
    const std::vector<std::string> variants = first_words("variants");
    CHECK(std::find(variants.begin(), variants.end(), "mask-alibi-frozen") != variants.end());
    CHECK(variants.size() == inits.size() + 3);  // the mask's -frozen, -alibi, -alibi-frozen
    expect_error("--list flags", "--list must be one of tasks, inits, variants, attention-kernels");
}

TEST_CASE("a GPU of another architecture than the build's: an error for an older one, a note for a newer") {
    bool is_error = true;
    CHECK(gpu_arch_mismatch(90, 90, &is_error).empty());
    CHECK(!is_error);
    CHECK(gpu_arch_mismatch(90, 80, &is_error) == "built for sm_90, this GPU is sm_80: make ARCH=80");
    CHECK(is_error);
    CHECK(gpu_arch_mismatch(90, 100, &is_error).rfind("built for sm_90, this GPU is sm_100: its PTX is compiled", 0) == 0);
    CHECK(!is_error);
}

TEST_CASE("bad --mask-structure files get one clear line and exit code 2") {
    expect_error("--init mask --mask-structure /nonexistent/G.txt", "cannot read --mask-structure file");
    expect_error("--init default --mask-structure /tmp/any.txt",
                 "--mask-structure needs --init qk-svd, qk-opt or mask");
    { std::ofstream(TMP_PREFIX + "G_short.txt") << "1 0 1\n0 1 0\n"; }
    expect_error("--task maj3 --init mask --mask-structure " + TMP_PREFIX + "G_short.txt", "has 6 entries");
    { std::ofstream(TMP_PREFIX + "G_bad.txt") << "# a comment\n1 0\n0 2\n"; }
    expect_error("--task maj3 --init mask --mask-structure " + TMP_PREFIX + "G_bad.txt", "line 3: '2' is not 0 or 1");
    {   // one G per head (2 heads) needs --mask-per-head for the mask init
        std::ofstream f(TMP_PREFIX + "G_heads.txt");
        for (int k = 0; k < 2 * 16 * 16; k++) f << (k % 17 == 0 ? "1 " : "0 ");
    }
    expect_error("--task maj3 --init mask --mask-structure " + TMP_PREFIX + "G_heads.txt", "add --mask-per-head");
}

TEST_CASE("bad checkpoints get one clear line and exit code 2") {
    expect_error("--resume /nonexistent/model.safetensors", "cannot open");
    { std::ofstream(TMP_PREFIX + "garbage.safetensors") << "not a checkpoint at all, no no"; }
    expect_error("--resume " + TMP_PREFIX + "garbage.safetensors", "not a safetensors file");
    {   // a valid length followed by broken JSON
        std::ofstream f(TMP_PREFIX + "badjson.safetensors", std::ios::binary);
        uint64_t n = 10;
        f.write((const char*)&n, 8);
        f << "{\"a\": [1, ";
    }
    expect_error("--resume " + TMP_PREFIX + "badjson.safetensors", "corrupt header");

    // a real checkpoint, then the same file cut short, and a run of another shape
    REQUIRE(run_command(TINY + "--task maj3 --steps 2 --out " + TMP_PREFIX + "ck").exit_code == 0);
    std::ifstream in(TMP_PREFIX + "ck/model.safetensors", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(TMP_PREFIX + "cut.safetensors", std::ios::binary) << bytes.substr(0, bytes.size() - 100);
    expect_error("--task maj3 --steps 4 --resume " + TMP_PREFIX + "cut.safetensors", "outside the file");
    CommandResult r = run_command(MASKPRIOR + " --device cpu --width 16 --layers 1 --heads 2 --head-size 4 --mlp 8 "
                                  "--steps 4 --resume " + TMP_PREFIX + "ck/model.safetensors", true);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("width=8, but this run has width=16") != std::string::npos);
    expect_error("--task 2parity --steps 4 --resume " + TMP_PREFIX + "ck/model.safetensors", "task=maj3");
    expect_error("--task maj3 --optimizer adam --steps 4 --resume " + TMP_PREFIX + "ck/model.safetensors",
                 "optimizer=adamw");
    expect_error("--task maj3 --encoding scalar --steps 4 --resume " + TMP_PREFIX + "ck/model.safetensors",
                 "encoding=token, but this run has encoding=scalar");
    expect_error("--task maj3 --loss logistic --steps 4 --resume " + TMP_PREFIX + "ck/model.safetensors",
                 "loss=mse, but this run has loss=logistic");
}

TEST_CASE("a run leaves metrics.json, log.jsonl and a checkpoint with the documented tensors") {
    CommandResult r = run_command(TINY + "--task 2parity --init mask --mask-per-head --steps 4 --eval-every 2 "
                                         "--out " + TMP_PREFIX + "files");
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("training on the CPU") != std::string::npos);
    std::ifstream metrics_file(TMP_PREFIX + "files/metrics.json");
    nlohmann::json metrics = nlohmann::json::parse(metrics_file);
    for (const char* key : {"task", "init", "seed", "encoding", "loss", "steps", "device", "seconds", "acc_cube",
                            "acc_unseen", "exact_cube", "mse_cube", "mse_unseen", "mdi_agreement", "prior_mass"})
        CHECK_MESSAGE(metrics.contains(key), key);
    // how the run was made: the command line, the commit, the device, the CPU's vector width and threads
    CHECK(metrics["command"].get<std::string>().find("--task 2parity --init mask") != std::string::npos);
    CHECK(!metrics["git_commit"].get<std::string>().empty());
    CHECK(metrics["device"].get<std::string>().find("(CPU)") != std::string::npos);
    CHECK(metrics["cpu_vector_bits"].get<int>() >= 128);
    CHECK(metrics["threads"].get<int>() >= 1);
    CHECK(metrics["prior_mass"].size() == 1);
    std::ifstream log(TMP_PREFIX + "files/log.jsonl");
    int lines = 0;
    for (std::string line; std::getline(log, line); lines++) CHECK(nlohmann::json::parse(line).contains("step"));
    CHECK(lines == 3);  // steps 0, 2, 4

    StFile ck = safetensors_read(TMP_PREFIX + "files/model.safetensors");
    CHECK(ck.metadata["mask"] == "head");
    CHECK(ck.metadata["step"] == "4");
    CHECK(ck.metadata["head_type"] == "regression");
    const std::pair<const char*, std::vector<int64_t>> expected[] = {
        {"wte", {3, 8}}, {"wpe", {16, 8}}, {"h.0.ln1.weight", {8}}, {"h.0.attn.qkv.weight", {24, 8}},
        {"h.0.attn.qkv.bias", {24}}, {"h.0.attn.mask", {2, 16, 16}}, {"h.0.attn.proj.weight", {8, 8}},
        {"h.0.mlp.fc.weight", {8, 8}}, {"h.0.mlp.proj.bias", {8}}, {"ln_f.bias", {8}}, {"head.weight", {1, 8}},
        {"opt.m.head.bias", {1}}, {"opt.v.h.0.attn.mask", {2, 16, 16}}};
    for (const auto& entry : expected) {
        const char* name = entry.first;
        const std::vector<int64_t>& shape = entry.second;
        const StTensor* t = ck.find(name);
        REQUIRE_MESSAGE(t, name);
        CHECK(t->shape == shape);
    }
}

TEST_CASE("every init runs, reports its step-0 match and leaves the persistence metrics and pictures") {
    {   // G: every position with itself, and CLS with x0 (one G shared by both heads)
        std::ofstream f(TMP_PREFIX + "G.txt");
        for (int i = 0; i < 16; i++) {
            for (int j = 0; j < 16; j++) f << (i == j || (i < 2 && j < 2) ? "1 " : "0 ");
            f << "\n";
        }
    }
    for (const InitKind& kind : INITS) {  // every init of the table but the image tasks' (test_cli_vision.cu)
        if (kind.uses & INIT_IMAGES_ONLY) continue;
        const char* init = kind.name;
        const std::string structure = " --mask-structure " + TMP_PREFIX + "G.txt --prior-layers first";
        const std::string extra = kind.uses & INIT_USES_STRUCTURE ? structure : "";
        // evaluated at steps 0 and 4: the checks read the log's first row (step 0) and metrics.json (the end)
        CommandResult r = run_command(TINY + "--task 2parity --steps 4 --eval-every 4 --qk-opt-steps 20 --layers 2 "
                                             "--init " + init + extra + " --out " + TMP_PREFIX + "init_" + init);
        CAPTURE(init);
        CAPTURE(r.out);
        REQUIRE(r.exit_code == 0);
        CHECK(r.out.find("step-0 check") != std::string::npos);
        const std::string dir = std::string(TMP_PREFIX + "init_") + init;
        std::ifstream log(dir + "/log.jsonl");
        std::string first;
        std::getline(log, first);
        nlohmann::json j = nlohmann::json::parse(first);
        for (const char* key : {"prior_mass", "qk_cosine", "grad_norm_qk"}) {
            REQUIRE_MESSAGE(j[key].is_array(), key);
            CHECK(j[key].size() == 2);  // one entry per layer
        }
        CHECK(j["qk_cosine"][0] == 1.0);  // step 0 against itself
        CHECK(j["grad_norm_qk"][0].get<double>() > 0);  // the first batch's gradient
        if (kind.uses & INIT_USES_MASK) {  // the mask lives in layer 0 only
            CHECK(j["mask_drift"][0] == 0.0);
            CHECK(j["mask_drift"][1].is_null());
            CHECK(j["grad_norm_mask"][0].get<double>() > 0);
            CHECK(std::ifstream(dir + "/mask_final.png").good());
        } else {
            CHECK(j["mask_drift"].is_null());
        }
        for (const char* png : {"attention_step0.png", "attention_final.png", "structure.png"})
            CHECK_MESSAGE(std::ifstream(dir + "/" + png).good(), png);
        std::ifstream metrics_file(dir + "/metrics.json");
        nlohmann::json metrics = nlohmann::json::parse(metrics_file);
        CHECK(metrics["qk_cosine"].size() == 2);
    }
}

// Runs `run` for `total` steps straight (into TMP_PREFIX + tag + "_whole"), and for `half` steps and
// then resumed to `total`: the two checkpoints must be identical, bit for bit. Returns the resumed
// one, and the straight run's output in *straight when given.
static StFile expect_resume_bit_exact(const std::string& run, int half, int total, const std::string& tag,
                                      CommandResult* straight = nullptr) {
    const std::string whole_dir = TMP_PREFIX + tag + "_whole", half_dir = TMP_PREFIX + tag + "_half";
    const CommandResult whole_run = run_command(run + "--steps " + std::to_string(total) + " --out " + whole_dir);
    REQUIRE(whole_run.exit_code == 0);
    if (straight) *straight = whole_run;
    REQUIRE(run_command(run + "--steps " + std::to_string(half) + " --out " + half_dir).exit_code == 0);
    REQUIRE(run_command(run + "--steps " + std::to_string(total) + " --out " + half_dir + " --resume " + half_dir +
                        "/model.safetensors").exit_code == 0);
    StFile whole = safetensors_read(whole_dir + "/model.safetensors");
    StFile resumed = safetensors_read(half_dir + "/model.safetensors");
    REQUIRE(whole.tensors.size() == resumed.tensors.size());
    for (const StTensor& t : whole.tensors) {
        const StTensor* u = resumed.find(t.name);
        REQUIRE(u);
        CHECK_MESSAGE(memcmp(t.data.data(), u->data.data(), t.data.size() * sizeof(float)) == 0, t.name);
    }
    return resumed;
}

TEST_CASE("--resume continues a run bit-exactly") {
    StFile resumed = expect_resume_bit_exact(
        TINY + "--task cyclic3 --init mask --seed 3 --optimizer adam --eval-every 100 ", 5, 12, "mask");
    CHECK(resumed.metadata["adam_t"] == "12");
}

TEST_CASE("--resume: scalar encoding and logistic loss continue bit-exactly; older checkpoints mean token, mse") {
    const std::string run = TINY + "--task maj3 --seed 2 --eval-every 100 ";
    StFile resumed = expect_resume_bit_exact(run + "--encoding scalar --loss logistic ", 3, 8, "scalar");
    REQUIRE(resumed.find("wval"));

    // a checkpoint written before "mask_layers", "encoding" and "loss" existed resumes as all
    // layers, token encoding, MSE
    REQUIRE(run_command(run + "--steps 3 --out " + TMP_PREFIX + "old").exit_code == 0);
    StFile old = safetensors_read(TMP_PREFIX + "old/model.safetensors");
    old.metadata.erase("mask_layers");
    old.metadata.erase("encoding");
    old.metadata.erase("loss");
    safetensors_write(TMP_PREFIX + "old/model.safetensors", old);
    CHECK(run_command(run + "--steps 5 --out " + TMP_PREFIX + "old --resume " + TMP_PREFIX + "old/model.safetensors")
              .exit_code == 0);
    expect_error("--task maj3 --seed 2 --encoding scalar --steps 5 --resume " + TMP_PREFIX + "old/model.safetensors",
                 "encoding=token, but this run has encoding=scalar");
}

TEST_CASE("--dump-state writes the batch, the loss and a gradient for every parameter") {
    REQUIRE(run_command(TINY + "--task maj3 --init mask --batch 5 --dump-state " + TMP_PREFIX + "dump.safetensors")
                .exit_code == 0);
    StFile dump = safetensors_read(TMP_PREFIX + "dump.safetensors");
    CHECK(dump.find("batch.inputs")->shape == std::vector<int64_t>{5, 16});
    CHECK(dump.find("batch.targets")->shape == std::vector<int64_t>{5});
    REQUIRE(dump.find("loss"));
    CHECK(std::isfinite(dump.find("loss")->data[0]));
    int params = 0;
    for (const StTensor& t : dump.tensors)
        if (t.name == "wte" || t.name == "wpe" || t.name.rfind("h.", 0) == 0 || t.name.rfind("ln_f", 0) == 0 ||
            t.name.rfind("head", 0) == 0) {
            params++;
            CHECK_MESSAGE(dump.find("grad." + t.name), t.name);
        }
    CHECK(params == 2 + 13 + 4);  // wte wpe, 13 per layer (mask included), ln_f and the readout (head.*)
    CHECK(!dump.find("wval"));
    CHECK(!dump.find("token_values"));
    CHECK(dump.metadata["encoding"] == "token");
    CHECK(dump.metadata["loss"] == "mse");
}

TEST_CASE("--encoding scalar and --loss logistic: the dump has wval, its gradient and the value table") {
    REQUIRE(run_command(TINY + "--task 2parity --encoding scalar --loss logistic --batch 5 "
                               "--dump-state " + TMP_PREFIX + "dump_scalar.safetensors").exit_code == 0);
    StFile dump = safetensors_read(TMP_PREFIX + "dump_scalar.safetensors");
    CHECK(dump.metadata["encoding"] == "scalar");
    CHECK(dump.metadata["loss"] == "logistic");
    REQUIRE(dump.find("wval"));
    CHECK(dump.find("wval")->shape == std::vector<int64_t>{8});
    REQUIRE(dump.find("grad.wval"));
    REQUIRE(dump.find("token_values"));
    CHECK(dump.find("token_values")->data == std::vector<float>{-1, 1, 0});
    const StTensor* wte = dump.find("wte");
    for (int i = 0; i < 2 * 8; i++) CHECK(wte->data[i] == 0.0f);  // the bit tokens' rows
    for (float y : dump.find("batch.targets")->data) CHECK((y == 1.0f || y == -1.0f));
}

TEST_CASE("one seed, one result: two CPU runs of the program write identical checkpoints") {
    const std::string run = TINY + "--task maj3 --init mask --steps 6 --eval-every 100 ";
    REQUIRE(run_command(run + "--out " + TMP_PREFIX + "rep1").exit_code == 0);
    REQUIRE(run_command("OMP_NUM_THREADS=1 " + run + "--out " + TMP_PREFIX + "rep2").exit_code == 0);
    StFile a = safetensors_read(TMP_PREFIX + "rep1/model.safetensors");
    StFile b = safetensors_read(TMP_PREFIX + "rep2/model.safetensors");
    for (const StTensor& t : a.tensors)
        CHECK_MESSAGE(memcmp(t.data.data(), b.find(t.name)->data.data(), t.data.size() * 4) == 0, t.name);
}

TEST_CASE("arithmetic: bad flags and bad data files get one clear line and exit code 2") {
    expect_error("--task maj3 --data-frac 0.1", "--data-frac is for the arithmetic tasks");
    expect_error("--task maj3 --max-test 100", "--max-test is for the arithmetic tasks");
    expect_error("--task add3 --data-frac 1.5", "--data-frac must be below 1");
    expect_error("--task add3 --data-frac 0.1 --train-file /tmp/x.txt", "not both");
    expect_error("--task add3 --loss-on some", "--loss-on must be one of answer, all");
    expect_error("--task add3 --loss logistic", "--loss logistic needs a regression readout");
    expect_error("--task mul2 --data-frac 0.00001", "is no training pair");
    expect_error("--task add3 --train-file /nonexistent/train.txt", "cannot open arithmetic data file");
    { std::ofstream(TMP_PREFIX + "add_bad.txt") << "$123+456=9750$\n$12+34=99$\n"; }
    expect_error("--task add3 --train-file " + TMP_PREFIX + "add_bad.txt", "maskprior_add_bad.txt line 2");
    { std::ofstream(TMP_PREFIX + "mul_train.txt") << "$12*34=8040$\n7*8=65\n"; }
    { std::ofstream(TMP_PREFIX + "mul_test.txt") << "$07*08=6500$\n"; }
    expect_error("--task mul2 --train-file " + TMP_PREFIX + "mul_train.txt --test-file " + TMP_PREFIX + "mul_test.txt",
                 "is in both the training file");
}

TEST_CASE("arithmetic end to end: the causal decoder trains, decodes and reports seq_acc, digit_acc and G") {
    CommandResult r = run_command(TINY + "--task mul2 --init mask --data-frac 0.05 --max-test 50 --steps 6 "
                                         "--eval-every 3 --out " + TMP_PREFIX + "mul2");
    CAPTURE(r.out);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("train 500 of 10^4 pairs (0.05), test 50 held out") != std::string::npos);
    // G printed once, labelled with a sample row: '=' (emits c0) keys a0, b0 and itself
    CHECK(r.out.find("G on a sample row") != std::string::npos);
    std::ifstream metrics_file(TMP_PREFIX + "mul2/metrics.json");
    nlohmann::json metrics = nlohmann::json::parse(metrics_file);
    for (const char* key : {"seq_acc", "digit_acc", "prior_mass", "mask_drift", "train_examples", "eval_examples"})
        CHECK_MESSAGE(metrics.contains(key), key);
    CHECK(metrics["train_examples"] == 500);
    CHECK(metrics["eval_examples"] == 50);
    CHECK(metrics["loss"] == "cross-entropy");
    StFile ck = safetensors_read(TMP_PREFIX + "mul2/model.safetensors");
    CHECK(ck.metadata["head_type"] == "next_token");
    CHECK(ck.metadata["causal"] == "1");
    CHECK(ck.find("head.weight")->shape == std::vector<int64_t>{14, 8});
    for (const char* png : {"structure.png", "attention_final.png", "mask_final.png"})
        CHECK_MESSAGE(std::ifstream(TMP_PREFIX + "mul2/" + std::string(png)).good(), png);
    // a next-token run resumes bit-exactly like the others
    expect_resume_bit_exact(TINY + "--task mul2 --init mask --data-frac 0.05 --max-test 20 --eval-every 100 ", 3, 7,
                            "mul2");
}

TEST_CASE("--dump-state of the causal decoder: targets and loss mask are (B,T)") {
    CommandResult r = run_command(TINY + "--task add3 --batch 4 --dump-state " + TMP_PREFIX + "add3_dump.safetensors");
    REQUIRE_MESSAGE(r.exit_code == 0, r.out);
    StFile dump = safetensors_read(TMP_PREFIX + "add3_dump.safetensors");
    CHECK(dump.find("batch.targets")->shape == std::vector<int64_t>{4, 13});
    const StTensor* mask = dump.find("batch.loss_mask");
    REQUIRE(mask);
    CHECK(mask->shape == std::vector<int64_t>{4, 13});
    std::vector<float> row(mask->data.begin(), mask->data.begin() + 13);  // positions 8..12 emit the answer
    CHECK(row == std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1});
}
