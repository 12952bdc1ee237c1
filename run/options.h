// run/options.h: the command line. Every flag, its default and its check live here; anything
// wrong (an unknown flag, a missing or malformed value, an impossible shape) is one line on
// stderr and exit code 2, through fail(), which throws to main. A valued flag takes its value
// as the next word or after '=' (--steps 100, --steps=100). The tasks' and inits' names come from
// their tables (tasks/registry.h, prior/inits.cuh).
#pragma once
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "gpu/cuda.cuh"      // print_version: the commit and the build settings
#include "layers/errors.h"   // fail()
#include "prior/inits.cuh"   // INITS, find_init, init_names
#include "tasks/boolean.h"   // BOOL_BITS, parse_boolean_target: --task boolean's flags are checked here
#include "tasks/registry.h"  // TASKS, find_task, is_image_task, is_language_task, is_arithmetic_task
#include "run/usage.h"       // usage_text: the --help text

struct Options {
    std::string task = "maj3";
    std::string target, unseen;  // --task boolean: the target EXPR and the held-out part COND
    std::string g_from = "target";  // the Boolean tasks' G: off f's support (or the named task's own), or the seen data
    std::string init = "default";
    std::string device = "auto";
    std::string optimizer = "adamw";
    std::string encoding = "token", loss = "mse";
    double data_frac = 0;  // arithmetic: 0 means the task's reference point (add3 0.004, mul2 0.03)
    std::string train_file, test_file, loss_on = "answer";
    int max_test = 0;  // arithmetic: 0 means the task's default (10000)
    uint64_t seed = 1;
    int64_t steps = 1500;
    double epochs = 0;  // > 0: overrides --steps with ceil(epochs * train_size / batch)
    int batch = 64;
    float lr = 1e-3f, wd = 1e-3f, mask_wd = 0.0f;
    int width = 32, layers = 2, heads = 2, head_size = 16, mlp = 32;
    float mask_c = 6.0f;
    bool mask_per_head = false, causal = false, tf32 = false;
    int cpu_kernel = 0;        // the CPU's version: 1 the lesson's loops, 2 cpu_fast/; 0: the default (Kernels)
    int attention_kernel = 0;  // the GPU's attention kernel version; 0: the default (layers/kernels.h, Kernels)
    int matmul_kernel = 0;     // the GPU's matmul version; 0: the default (layers/kernels.h, Kernels)
    bool cuda_graph = false;   // the training step as one CUDA graph (gpu/graph.cuh)
    bool fast_kernels = false;  // the GPU's second kernel versions of the other layers (layers/kernels.h)
    std::string mask_structure, prior_layers = "all";
    double prior_noise = 0;    // a wrong prior (prior/wrong_prior.h): the fraction of G's entries flipped
    int prior_drop = 0;        // ... and the edges the target needs that are removed
    int64_t prior_seed = -1;   // the seed of those draws; -1: the run's --seed
    float mask_lr_scale = 1;   // the mask's learning rate is mask_lr_scale x lr
    int64_t qk_opt_steps = 2000;
    float pe_scale = 0;  // wpe's factor before the init; 0: the init's own (InitKind::pe_scale: impulse 18, else 1)
    int64_t eval_every = 500, log_every = 0;
    std::string out, save, resume, dump_state;
    int profile = 0;  // --profile N: N recorded GPU training steps, then the table (gpu/profile_report.cuh); 0: off
    int64_t checkpoint_every = -1;  // steps between checkpoints; -1: every CHECKPOINT_MINUTES; 0: at the end only
    bool continue_run = false;      // --continue: resume from the run's own checkpoint when it has one
    // images
    std::string data_dir;
    int patch = 4, mask_window = -1, resize = 0;  // mask_window -1: the task's default
    int crop_pad = -1, flip = -1;                 // -1: the task's recipe (tasks/registry.h, IMAGE_RECIPES)
    bool coarse_labels = false;
    float mixup = 0, cutmix = 0;  // Beta(α, α)'s α of mixup and of cutmix (recipe/mix.h); 0: off
    float mix_switch = 0.5f, mix_prob = 1;  // the chance of cutmix when both are on; of mixing a batch at all
    int randaugment = 0, randaugment_ops = 2;  // RandAugment's magnitude (0: off) and ops (recipe/randaugment.h)
    float random_erase = 0;                    // the probability of random erasing (recipe/augment.h); 0: off
    std::string pool = "cls";
    // language
    int seq_len = 128, eval_windows = 1024;
    std::string mask_prior = "window";  // window (±c from G) | alibi (one distance slope per head)
    bool freeze_mask = false;
    // sampling from a checkpoint (run/sample.cuh)
    std::string generate, prompt;
    int64_t sample_tokens = 200;
    float temperature = 1.0f;
    int top_k = 0;
    // the training recipe; the defaults depend on the task family (resolve_recipe below)
    std::string schedule;        // constant | cosine
    int64_t warmup = -1;         // steps of linear warmup; -1: the default (setup.cuh: warmup_steps)
    float min_lr = 0.0f;         // the cosine's end, a fraction of --lr
    float clip_grad = -1;        // global gradient-norm clip; 0: none
    float label_smoothing = -1;  // cross-entropy's
    float drop_path = 0;         // stochastic depth's rate at the last layer (recipe/drop_path.cuh); 0: off
    float ema = 0;               // the decay of the weights' moving average (recipe/ema.cuh); 0: off
    bool wd_given = false, task_given = false;
    std::string list;  // --list WHAT: print a table's names, then exit (main.cu)
};

// Whether word is one of flags
template <size_t N>
inline bool listed(const char* (&flags)[N], const std::string& word) {
    for (const char* f : flags)
        if (word == f) return true;
    return false;
}

// "a, b, c": the names of a table, for an error that lists them
template <typename Table>
inline std::string table_names(const Table& table) {
    std::string names;
    for (const auto& kind : table) names += (names.empty() ? "" : ", ") + std::string(kind.name);
    return names;
}

inline int64_t parse_int(const std::string& flag, const char* text, int64_t lo) {
    char* end = nullptr;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end) fail("%s expects a whole number, got '%s'", flag.c_str(), text);
    if (v < lo) fail("%s must be at least %lld, got %lld", flag.c_str(), (long long)lo, v);
    return v;
}

inline double parse_real(const std::string& flag, const char* text, double lo, bool lo_allowed) {
    char* end = nullptr;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !std::isfinite(v)) fail("%s expects a number, got '%s'", flag.c_str(), text);
    if (v < lo || (!lo_allowed && v == lo))
        fail("%s must be %s %g, got %s", flag.c_str(), lo_allowed ? "at least" : "greater than", lo, text);
    return v;
}

inline std::string parse_choice(const std::string& flag, const char* text, std::initializer_list<const char*> choices) {
    std::string list;
    for (const char* c : choices) {
        if (text == std::string(c)) return text;
        list += (list.empty() ? "" : ", ") + std::string(c);
    }
    fail("%s must be one of %s, got '%s'", flag.c_str(), list.c_str(), text);
}

// A wrong prior needs a G that reaches the model; the mask's learning rate, a mask that learns.
// (Whether the task defines the edges --prior-drop removes is checked with the task: run/setup.cuh.)
inline void check_prior_flags(const Options& o) {
    const bool wrong = o.prior_noise > 0 || o.prior_drop > 0;
    const char* flag = o.prior_noise > 0 ? "--prior-noise" : "--prior-drop";
    if (wrong && !(find_init(o.init)->uses & INIT_USES_STRUCTURE))
        fail("%s makes G wrong, and --init %s reads no G: it needs --init %s", flag, o.init.c_str(),
             init_names(INIT_USES_STRUCTURE).c_str());
    if (wrong && o.mask_prior == "alibi") fail("%s makes G wrong, and --mask-prior alibi's mask reads no G", flag);
    if (o.prior_drop > 0 && !o.mask_structure.empty())
        fail("--prior-drop removes edges of the task's own G, not of a --mask-structure file");
    if (o.prior_seed >= 0 && !wrong) fail("--prior-seed needs --prior-noise or --prior-drop");
    if (o.mask_lr_scale != 1 && !(find_init(o.init)->uses & INIT_USES_MASK))
        fail("--mask-lr-scale needs --init %s", init_names(INIT_USES_MASK).c_str());
    if (o.mask_lr_scale != 1 && o.freeze_mask)
        fail("--mask-lr-scale scales a mask that learns: not with --freeze-mask");
}

// The flags of one task family given to another are refused: the image flags, the language
// flags, and --data-dir and --mask-window, which both take; --g-from to a task that is not
// Boolean, or with a --mask-structure file, which replaces the G it chooses. --init impulse needs
// images. --task boolean's target and hold-out are parsed here, before the run folder exists: a
// bad one throws its line (tasks/boolean_target.h), and nothing is written.
inline void check_task_flags(const Options& o, const std::vector<std::string>& flags) {
    const bool images = is_image_task(o.task), language = is_language_task(o.task);
    static const char* image_flags[] = {"--patch", "--pool", "--crop-pad", "--resize", "--no-flip", "--flip",
                                        "--coarse-labels", "--mixup", "--cutmix", "--mix-switch", "--mix-prob",
                                        "--randaugment", "--randaugment-ops", "--random-erase"};
    static const char* language_flags[] = {"--seq-len", "--eval-windows", "--mask-prior"};
    static const char* data_flags[] = {"--data-dir", "--mask-window"};
    static const char* boolean_flags[] = {"--target", "--unseen"};
    for (const std::string& flag : flags) {
        const char* f = flag.c_str();
        if (!images && listed(image_flags, flag)) fail("%s is for the image tasks, not %s", f, o.task.c_str());
        if (!language && listed(language_flags, flag)) fail("%s is for --task lm, not %s", f, o.task.c_str());
        if (!images && !language && listed(data_flags, flag))
            fail("%s is for the image tasks and --task lm, not %s", f, o.task.c_str());
        if (o.task != "boolean" && listed(boolean_flags, flag))
            fail("%s is for --task boolean, not %s", f, o.task.c_str());
        if (flag == "--g-from" && !task_in_family(o.task, TASKS_BOOLEAN))
            fail("--g-from is for the Boolean tasks (%s), not %s", family_names(TASKS_BOOLEAN).c_str(), o.task.c_str());
        if (flag == "--g-from" && !o.mask_structure.empty())
            fail("--g-from chooses the task's G, and --mask-structure replaces it: give one of them");
    }
    if ((find_init(o.init)->uses & INIT_IMAGES_ONLY) && !images)
        fail("--init %s is for the image tasks, not %s", o.init.c_str(), o.task.c_str());
    if (o.coarse_labels && o.task != "cifar100") fail("--coarse-labels is for cifar100, not %s", o.task.c_str());
    const bool mixing = o.mixup > 0 || o.cutmix > 0;
    auto given = [&](const char* flag) { return std::find(flags.begin(), flags.end(), flag) != flags.end(); };
    if (o.task == "boolean" && !(given("--target") && given("--unseen")))
        fail("--task boolean needs --target EXPR and --unseen COND, e.g. --target 'x0*x1*x2' --unseen 'x0=-1,x1=-1'");
    if (o.task == "boolean") parse_boolean_target(o.target, o.unseen, BOOL_BITS);
    if (given("--mix-switch") && !(o.mixup > 0 && o.cutmix > 0))
        fail("--mix-switch picks between mixup and cutmix: it needs --mixup A and --cutmix A, both above 0");
    if (given("--mix-prob") && !mixing) fail("--mix-prob needs --mixup or --cutmix above 0");
    if (given("--randaugment-ops") && o.randaugment == 0) fail("--randaugment-ops needs --randaugment M above 0");
    if (mixing && !o.dump_state.empty()) fail("--dump-state writes one unmixed batch: no --mixup or --cutmix");
    if (o.resize > 0 && o.task != "images") fail("--resize is for --task images, not %s", o.task.c_str());
    if (o.task == "images" && o.data_dir.empty()) fail("--task images needs --data-dir DIR (DIR/train/<class>/...)");
    if (o.task == "mnist" && o.data_dir.empty())
        fail("--task mnist needs --data-dir, the folder of its four IDX files (data/get_mnist.sh fetches them)");
    if ((o.task == "cifar10" || o.task == "cifar100") && o.data_dir.empty())
        fail("--task %s needs --data-dir (the official binary version; data/get_cifar.sh fetches it)", o.task.c_str());
    if (language && o.data_dir.empty() && o.generate.empty())
        fail("--task lm needs --data-dir DIR, a folder that data/prepare_text.py wrote");
    const bool mask = find_init(o.init)->uses & INIT_USES_MASK;
    const std::string mask_inits = init_names(INIT_USES_MASK);
    if (o.mask_prior == "alibi" && !mask) fail("--mask-prior alibi needs --init %s", mask_inits.c_str());
    if (o.freeze_mask && !mask) fail("--freeze-mask needs --init %s", mask_inits.c_str());
    check_prior_flags(o);
}

// The recipe's defaults: a Vision Transformer trains with warmup and cosine decay, gradient
// clipping, label smoothing and weight decay 0.05; a language model (as nanoGPT does) with
// warmup and cosine decay, clipping and weight decay 0.1; the Boolean and arithmetic tasks with
// a constant rate and none of them, as GOTU's and Lee et al.'s code do. The position scale is the
// init's (impulse 18, as its authors run it; else 1). An image task's crop and flip are its data's
// (IMAGE_RECIPES). A flag given always wins.
inline void resolve_recipe(Options& o) {
    const bool images = is_image_task(o.task), language = is_language_task(o.task);
    if (o.schedule.empty()) o.schedule = images || language ? "cosine" : "constant";
    if (o.clip_grad < 0) o.clip_grad = images || language ? 1.0f : 0.0f;
    if (o.label_smoothing < 0) o.label_smoothing = images ? 0.1f : 0.0f;
    if (!o.wd_given && images) o.wd = 0.05f;
    if (!o.wd_given && language) o.wd = 0.1f;
    if (o.mask_window < 0) o.mask_window = language ? 16 : 3;
    if (o.mask_prior == "alibi") o.mask_per_head = true;  // one slope per head
    if (o.pe_scale == 0) o.pe_scale = find_init(o.init)->pe_scale;  // impulse's authors scale by 18
    if (images && o.crop_pad < 0) o.crop_pad = image_recipe(o.task).crop_pad;
    if (images && o.flip < 0) o.flip = image_recipe(o.task).flip;
    if (o.prior_seed < 0 && (o.prior_noise > 0 || o.prior_drop > 0)) o.prior_seed = (int64_t)o.seed;
}

// The flags that take no value, and those that take one
static const char* SWITCHES[] = {"--mask-per-head", "--causal", "--tf32", "--fast-kernels", "--cuda-graph", "--no-flip",
                                 "--flip", "--coarse-labels", "--freeze-mask", "--continue", "--help", "-h",
                                 "--version"};
static const char* VALUED[] = {
    "--task", "--init", "--device", "--optimizer", "--seed", "--steps", "--epochs", "--batch", "--lr", "--wd",
    "--mask-wd", "--width", "--layers", "--heads", "--head-size", "--mlp", "--mask-c", "--eval-every", "--log-every",
    "--out", "--save", "--resume", "--dump-state", "--mask-structure", "--prior-layers", "--qk-opt-steps",
    "--pe-scale", "--encoding", "--loss", "--data-frac", "--train-file", "--test-file", "--max-test", "--loss-on",
    "--data-dir", "--patch", "--pool", "--mask-window", "--crop-pad", "--resize", "--schedule", "--warmup", "--min-lr",
    "--clip-grad", "--label-smoothing", "--seq-len", "--eval-windows", "--mask-prior", "--generate", "--prompt",
    "--sample-tokens", "--temperature", "--top-k", "--checkpoint-every", "--attention-kernel", "--matmul-kernel",
    "--cpu-kernel", "--list", "--profile", "--drop-path", "--ema", "--mixup", "--cutmix", "--mix-switch",
    "--mix-prob", "--randaugment", "--randaugment-ops", "--random-erase", "--prior-noise", "--prior-drop",
    "--prior-seed", "--mask-lr-scale", "--target", "--unseen", "--g-from"};

// The command line as words, with each --flag=value as the two words --flag value; a valued
// flag's next word is its value, whatever it holds (--prompt "--x=1" stays one word).
inline std::vector<std::string> command_words(int argc, char** argv) {
    std::vector<std::string> words;
    for (int i = 1; i < argc; i++) {
        const std::string word = argv[i];
        const size_t equals = word.find('=');
        if (word.rfind("--", 0) == 0 && equals != std::string::npos) {
            const std::string flag = word.substr(0, equals);
            if (listed(SWITCHES, flag)) fail("%s takes no value, got '%s'", flag.c_str(), word.c_str());
            words.push_back(flag);
            words.push_back(word.substr(equals + 1));
            continue;
        }
        words.push_back(word);
        if (listed(VALUED, word) && i + 1 < argc) words.push_back(argv[++i]);
    }
    return words;
}

inline Options parse_options(int argc, char** argv) {
    Options o;
    bool steps_given = false;
    const std::vector<std::string> args = command_words(argc, argv);
    std::vector<std::string> given;  // the flags, without their values
    for (size_t i = 0; i < args.size(); i++) {
        const std::string& flag = args[i];
        given.push_back(flag);
        if (flag == "--help" || flag == "-h") { fputs(usage_text().c_str(), stdout); exit(0); }
        if (flag == "--version") { print_version("maskprior"); exit(0); }
        if (flag == "--mask-per-head") { o.mask_per_head = true; continue; }
        if (flag == "--causal") { o.causal = true; continue; }
        if (flag == "--tf32") { o.tf32 = true; continue; }
        if (flag == "--fast-kernels") { o.fast_kernels = true; continue; }
        if (flag == "--cuda-graph") { o.cuda_graph = true; continue; }
        if (flag == "--no-flip") { o.flip = 0; continue; }
        if (flag == "--flip") { o.flip = 1; continue; }
        if (flag == "--coarse-labels") { o.coarse_labels = true; continue; }
        if (flag == "--freeze-mask") { o.freeze_mask = true; continue; }
        if (flag == "--continue") { o.continue_run = true; continue; }
        if (flag.rfind("--", 0) != 0) fail("unexpected argument '%s' (see --help)", flag.c_str());
        if (!listed(VALUED, flag)) fail("unknown flag %s (see --help)", flag.c_str());
        if (i + 1 >= args.size()) fail("%s needs a value", flag.c_str());
        const char* value = args[++i].c_str();
        if (flag == "--task") {
            o.task_given = true;
            if (!find_task(value)) fail("--task must be one of %s, got '%s'", table_names(TASKS).c_str(), value);
            o.task = value;
        }
        else if (flag == "--target") o.target = value;
        else if (flag == "--unseen") o.unseen = value;
        else if (flag == "--g-from") o.g_from = parse_choice(flag, value, {"target", "data"});
        else if (flag == "--init") {
            if (!find_init(value)) fail("--init must be one of %s, got '%s'", table_names(INITS).c_str(), value);
            o.init = value;
        }
        else if (flag == "--list")
            o.list = parse_choice(flag, value, {"tasks", "inits", "variants", "attention-kernels"});
        else if (flag == "--device") o.device = parse_choice(flag, value, {"auto", "cpu", "cuda"});
        else if (flag == "--optimizer") o.optimizer = parse_choice(flag, value, {"adamw", "adam"});
        else if (flag == "--encoding") o.encoding = parse_choice(flag, value, {"token", "scalar"});
        else if (flag == "--loss") o.loss = parse_choice(flag, value, {"mse", "logistic"});
        else if (flag == "--seed") o.seed = (uint64_t)parse_int(flag, value, 0);
        else if (flag == "--steps") { o.steps = parse_int(flag, value, 1); steps_given = true; }
        else if (flag == "--epochs") o.epochs = parse_real(flag, value, 0, false);
        else if (flag == "--batch") o.batch = (int)parse_int(flag, value, 1);
        else if (flag == "--lr") o.lr = (float)parse_real(flag, value, 0, false);
        else if (flag == "--wd") { o.wd = (float)parse_real(flag, value, 0, true); o.wd_given = true; }
        else if (flag == "--mask-wd") o.mask_wd = (float)parse_real(flag, value, 0, true);
        else if (flag == "--width") o.width = (int)parse_int(flag, value, 1);
        else if (flag == "--layers") o.layers = (int)parse_int(flag, value, 1);
        else if (flag == "--heads") o.heads = (int)parse_int(flag, value, 1);
        else if (flag == "--head-size") o.head_size = (int)parse_int(flag, value, 1);
        else if (flag == "--mlp") o.mlp = (int)parse_int(flag, value, 1);
        else if (flag == "--mask-c") o.mask_c = (float)parse_real(flag, value, 0, false);
        else if (flag == "--eval-every") o.eval_every = parse_int(flag, value, 1);
        else if (flag == "--log-every") o.log_every = parse_int(flag, value, 1);
        else if (flag == "--cpu-kernel") o.cpu_kernel = (int)parse_int(flag, value, 1);  // setup.cuh checks
        else if (flag == "--attention-kernel") o.attention_kernel = (int)parse_int(flag, value, 1);  // setup.cuh checks
        else if (flag == "--matmul-kernel") o.matmul_kernel = (int)parse_int(flag, value, 1);  // setup.cuh checks
        else if (flag == "--out") o.out = value;
        else if (flag == "--save") o.save = value;
        else if (flag == "--resume") o.resume = value;
        else if (flag == "--dump-state") o.dump_state = value;
        else if (flag == "--profile") o.profile = (int)parse_int(flag, value, 1);
        else if (flag == "--checkpoint-every") o.checkpoint_every = parse_int(flag, value, 0);
        else if (flag == "--mask-structure") o.mask_structure = value;
        else if (flag == "--prior-layers") o.prior_layers = parse_choice(flag, value, {"all", "first"});
        else if (flag == "--qk-opt-steps") o.qk_opt_steps = parse_int(flag, value, 1);
        else if (flag == "--pe-scale") o.pe_scale = (float)parse_real(flag, value, 0, false);
        else if (flag == "--prior-noise") {
            o.prior_noise = parse_real(flag, value, 0, true);
            if (o.prior_noise > 1) fail("--prior-noise is a fraction of G's entries, at most 1, got %s", value);
        }
        else if (flag == "--prior-drop") o.prior_drop = (int)parse_int(flag, value, 0);
        else if (flag == "--prior-seed") o.prior_seed = parse_int(flag, value, 0);
        else if (flag == "--mask-lr-scale") o.mask_lr_scale = (float)parse_real(flag, value, 0, false);
        else if (flag == "--data-frac") {
            o.data_frac = parse_real(flag, value, 0, false);
            if (o.data_frac >= 1) fail("--data-frac must be below 1, got %s", value);
        }
        else if (flag == "--train-file") o.train_file = value;
        else if (flag == "--test-file") o.test_file = value;
        else if (flag == "--max-test") o.max_test = (int)parse_int(flag, value, 1);
        else if (flag == "--loss-on") o.loss_on = parse_choice(flag, value, {"answer", "all"});
        else if (flag == "--data-dir") o.data_dir = value;
        else if (flag == "--patch") o.patch = (int)parse_int(flag, value, 1);
        else if (flag == "--pool") o.pool = parse_choice(flag, value, {"cls", "mean"});
        else if (flag == "--mask-window") o.mask_window = (int)parse_int(flag, value, 1);
        else if (flag == "--crop-pad") o.crop_pad = (int)parse_int(flag, value, 0);
        else if (flag == "--mixup") o.mixup = (float)parse_real(flag, value, 0, true);
        else if (flag == "--cutmix") o.cutmix = (float)parse_real(flag, value, 0, true);
        else if (flag == "--randaugment") {
            o.randaugment = (int)parse_int(flag, value, 0);
            if (o.randaugment > 10) fail("--randaugment is a magnitude on timm's scale 0..10, got %s", value);
        }
        else if (flag == "--randaugment-ops") o.randaugment_ops = (int)parse_int(flag, value, 1);
        else if (flag == "--random-erase") {
            o.random_erase = (float)parse_real(flag, value, 0, true);
            if (o.random_erase > 1) fail("--random-erase is a probability, at most 1, got %s", value);
        }
        else if (flag == "--mix-switch" || flag == "--mix-prob") {
            const float chance = (float)parse_real(flag, value, 0, true);
            if (chance > 1) fail("%s is a chance, at most 1, got %s", flag.c_str(), value);
            (flag == "--mix-switch" ? o.mix_switch : o.mix_prob) = chance;
        }
        else if (flag == "--resize") o.resize = (int)parse_int(flag, value, 1);
        else if (flag == "--schedule") o.schedule = parse_choice(flag, value, {"constant", "cosine"});
        else if (flag == "--warmup") o.warmup = parse_int(flag, value, 0);
        else if (flag == "--min-lr") {
            o.min_lr = (float)parse_real(flag, value, 0, true);
            if (o.min_lr > 1) fail("--min-lr is a fraction of --lr, at most 1, got %s", value);
        }
        else if (flag == "--seq-len") o.seq_len = (int)parse_int(flag, value, 1);
        else if (flag == "--eval-windows") o.eval_windows = (int)parse_int(flag, value, 1);
        else if (flag == "--mask-prior") o.mask_prior = parse_choice(flag, value, {"window", "alibi"});
        else if (flag == "--generate") o.generate = value;
        else if (flag == "--prompt") o.prompt = value;
        else if (flag == "--sample-tokens") o.sample_tokens = parse_int(flag, value, 1);
        else if (flag == "--temperature") o.temperature = (float)parse_real(flag, value, 0, true);
        else if (flag == "--top-k") o.top_k = (int)parse_int(flag, value, 0);
        else if (flag == "--clip-grad") o.clip_grad = (float)parse_real(flag, value, 0, true);
        else if (flag == "--label-smoothing") {
            o.label_smoothing = (float)parse_real(flag, value, 0, true);
            if (o.label_smoothing >= 1) fail("--label-smoothing must be below 1, got %s", value);
        }
        else if (flag == "--drop-path" || flag == "--ema") {
            const float rate = (float)parse_real(flag, value, 0, true);
            if (rate >= 1) fail("%s must be below 1, got %s", flag.c_str(), value);
            (flag == "--ema" ? o.ema : o.drop_path) = rate;
        }
    }
    if (steps_given && o.epochs > 0) fail("give --steps or --epochs, not both");
    if (!o.generate.empty()) {  // sampling: the model and its task come from the checkpoint
        if (o.task_given && !is_language_task(o.task))
            fail("--generate samples from a language model, not %s", o.task.c_str());
        static const char* sampling_flags[] = {"--generate", "--prompt", "--sample-tokens", "--temperature", "--top-k",
                                               "--seed", "--device", "--data-dir", "--task"};
        for (const std::string& flag : given)
            if (!listed(sampling_flags, flag))
                fail("%s is not for --generate (the model comes from the checkpoint)", flag.c_str());
        o.task = "lm";
    }
    if (o.continue_run && !o.resume.empty()) fail("give --continue or --resume FILE, not both");
    if (!o.dump_state.empty() && (o.continue_run || o.checkpoint_every >= 0))
        fail("--dump-state writes one batch's state and trains nothing: no --continue or --checkpoint-every");
    if (o.profile > 0 && (!o.dump_state.empty() || o.continue_run || o.checkpoint_every >= 0))
        fail("--profile times a few steps and writes nothing: no --dump-state, --continue or --checkpoint-every");
    if (o.profile > 0 && o.device == "cpu") fail("--profile records GPU launches: it needs --device cuda (or auto)");
    if (o.mask_per_head && !(find_init(o.init)->uses & INIT_USES_MASK))
        fail("--mask-per-head needs --init %s", init_names(INIT_USES_MASK).c_str());
    if (o.generate.empty() && (!o.prompt.empty() || o.top_k > 0))
        fail("--prompt and --top-k are for --generate CHECKPOINT");
    if (!o.mask_structure.empty() && !(find_init(o.init)->uses & INIT_USES_STRUCTURE))
        fail("--mask-structure needs --init %s", init_names(INIT_USES_STRUCTURE).c_str());
    const bool arithmetic = is_arithmetic_task(o.task);
    std::string arithmetic_flag = o.data_frac > 0 ? "--data-frac" : !o.train_file.empty() ? "--train-file"
                                  : !o.test_file.empty() ? "--test-file" : o.max_test > 0 ? "--max-test"
                                  : o.loss_on != "answer" ? "--loss-on" : "";
    if (!arithmetic && !arithmetic_flag.empty())
        fail("%s is for the arithmetic tasks (add3, mul2), not %s", arithmetic_flag.c_str(), o.task.c_str());
    if (o.data_frac > 0 && !o.train_file.empty()) fail("give --data-frac or --train-file, not both");
    check_task_flags(o, given);
    resolve_recipe(o);
    return o;
}
