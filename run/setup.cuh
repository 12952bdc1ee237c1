// run/setup.cuh: from the command line to a model ready to train: the task, the device, the
// model's config (checked against what the task can give), the prior's structure G, the
// initialisation with its step-0 check, the run's metadata and folder, and the startup table
// that shows all of it. Checkpoints and resuming are run/checkpointing.cuh's.
#pragma once
#include <sys/stat.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>
#include "model.cuh"              // Config, Model
#include "prior/init.cuh"         // init_default, first_attention_inputs, init_check
#include "prior/inits.cuh"        // INITS, find_init: what --init applies
#include "prior/persistence.cuh"  // PersistenceReference
#include "prior/structure.h"      // Structure, read_structure
#include "prior/wrong_prior.h"    // WrongPrior, make_prior_wrong, wrong_entries
#include "run/checkpoint.h"       // Metadata
#include "run/options.h"          // Options
#include "run/report.cuh"         // fmt
#include "run/schedule.h"         // learning_rate
#include "run/step.cuh"           // batch_input, weight_decay_on
#include "tasks/arithmetic.h"     // ArithmeticTask
#include "tasks/boolean.h"        // BooleanTask, parse_boolean_target
#include "tasks/image_folder.h"   // load_image_folder
#include "tasks/language.h"       // LanguageTask
#include "recipe/mix.h"            // MixSettings
#include "tasks/vision.h"         // VisionTask, load_idx_folder, load_cifar_binary

// Where Debian's dataset-fashion-mnist package puts the four IDX files
static const char* FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist";

inline std::unique_ptr<Task> make_task(const Options& opt) {
    switch (find_task(opt.task)->family) {  // the flags named one (run/options.h)
    case TASKS_BOOLEAN:  // a target that parses: the flags checked it (run/options.h)
    {
        const GSource g = opt.g_from == "data" ? G_FROM_DATA : G_FROM_TARGET;
        if (opt.task == "boolean")
            return std::make_unique<BooleanTask>(parse_boolean_target(opt.target, opt.unseen, BOOL_BITS), g);
        return std::make_unique<BooleanTask>(opt.task, g);
    }
    case TASKS_LANGUAGE: {  // a bad or missing token file throws, naming it
        LanguageSettings settings;
        settings.seq_len = opt.seq_len;
        settings.window = opt.mask_window;
        settings.eval_windows = opt.eval_windows;
        return std::make_unique<LanguageTask>(opt.data_dir, settings);
    }
    case TASKS_IMAGES: {  // a bad or missing data file throws, naming it
        ImageData data = opt.task == "fashion-mnist"
                             ? load_idx_folder(opt.data_dir.empty() ? FASHION_MNIST_DIR : opt.data_dir, true)
                         : opt.task == "mnist"    ? load_idx_folder(opt.data_dir, false)
                         : opt.task == "cifar10"  ? load_cifar_binary(opt.data_dir, 10)
                         : opt.task == "cifar100" ? load_cifar_binary(opt.data_dir, 100, opt.coarse_labels)
                                                  : load_image_folder(opt.data_dir, opt.resize);
        VisionSettings settings;
        settings.patch = opt.patch;
        settings.window = opt.mask_window;
        settings.pad = opt.crop_pad;
        settings.flip = opt.flip == 1;
        settings.randaugment = opt.randaugment;
        settings.randaugment_ops = opt.randaugment_ops;
        settings.erase = opt.random_erase;
        return std::make_unique<VisionTask>(opt.task, std::move(data), settings);
    }
    case TASKS_ARITHMETIC:
        break;
    }
    ArithmeticData data;
    data.data_frac = opt.data_frac > 0 || !opt.train_file.empty() ? opt.data_frac : opt.task == "add3" ? 0.004 : 0.03;
    data.train_file = opt.train_file;
    data.test_file = opt.test_file;
    if (opt.max_test > 0) data.max_test = opt.max_test;
    data.seed = opt.seed;
    return std::make_unique<ArithmeticTask>(opt.task, data);  // a bad data file throws
}

// --device auto takes the GPU when there is one. The build without CUDA has none to train on
// (gpu_count() is 0): there --device cuda runs the CUDA code on the emulation, to check it.
inline Device pick_device(const Options& opt) {
    if (opt.device == "cuda" && BUILT_WITHOUT_CUDA) {
        fprintf(stderr, "maskprior: warning: built without CUDA, --device cuda runs the CUDA code on its CPU "
                        "emulation (emu/), for checking it: far slower than --device cpu\n");
        return DEVICE_GPU;
    }
    int gpus = gpu_count();
    if (opt.device == "cuda" && gpus == 0) fail("--device cuda, but no CUDA GPU is available");
    const Device dev = (opt.device == "cuda" || (opt.device == "auto" && gpus > 0)) ? DEVICE_GPU : DEVICE_CPU;
    if (dev == DEVICE_GPU) check_gpu_arch();
    return dev;
}

// How the program computes (--cpu-kernel; on the GPU --attention-kernel, --matmul-kernel,
// --fast-kernels, --tf32, --cuda-graph), for heads of HS dims over sequences of T tokens; a version
// that cannot run them, or does not exist, is refused with one line.
inline Kernels choose_kernels(const Options& opt, int HS, int T) {
    Kernels kernels;
    if (opt.cpu_kernel) kernels.cpu = opt.cpu_kernel;
    if (kernels.cpu > CPU_KERNEL_COUNT) fail("--cpu-kernel must be 1 to %d, got %d", CPU_KERNEL_COUNT, kernels.cpu);
    if (opt.attention_kernel) kernels.attention = opt.attention_kernel;
    const std::string refusal = attention_kernel_refusal(kernels.attention, HS, T);
    if (!refusal.empty()) fail("--attention-kernel: %s", refusal.c_str());
    if (opt.matmul_kernel) kernels.matmul = opt.matmul_kernel;
    if (kernels.matmul > MATMUL_KERNEL_COUNT)
        fail("--matmul-kernel must be 1 to %d, got %d", MATMUL_KERNEL_COUNT, kernels.matmul);
    kernels.fast_layers = opt.fast_kernels;
    kernels.tf32 = opt.tf32;
    kernels.graph = opt.cuda_graph;
    return kernels;
}

// What the GPU needs before a step runs (a graph capture cannot hold an allocation): the stream,
// cuBLAS's handle and workspace, and at matmul version 2 cuBLASLt's (layers/matmul_lt.cuh).
inline void gpu_prepare(Device dev, const Kernels& kernels) {
    if (dev != DEVICE_GPU) return;
    gpu_setup();
    if (kernels.matmul == 2) matmul_lt_setup();
}

// Which versions compute on dev: the start-up table's "kernels" row and the end of the first line
inline std::string kernels_text(Device dev, const Kernels& kernels) {
    if (dev == DEVICE_CPU)
        return "CPU kernel " + std::to_string(kernels.cpu) +
               (kernels.cpu == 1 ? " (the lesson's loops)" : " (cpu_fast/)");
    return "attention kernel " + std::to_string(kernels.attention) + ", matmul kernel " +
           std::to_string(kernels.matmul) + (kernels.fast_layers ? ", fast kernels" : "") +
           (kernels.tf32 ? ", TF32" : "") + (kernels.graph ? ", CUDA graph" : "");
}

// The first line of a run: where it trains, and with which kernels
inline std::string device_line(Device dev, const Kernels& kernels) {
    if (dev == DEVICE_CPU)
        return std::string(BUILT_WITHOUT_CUDA ? "CPU (a build without CUDA): " : "CPU (no GPU in use): ") +
               device_name(dev) + ", " + kernels_text(dev, kernels);
    return "GPU: " + device_name(dev) + ", " + kernels_text(dev, kernels);
}

// The model's config from the flags and the task, refusing what cannot be built or trained.
inline Config model_config(const Options& opt, const Task& task) {
    Config cfg;
    cfg.V = task.vocab;
    cfg.T = task.seq_len;
    cfg.C = opt.width;
    cfg.L = opt.layers;
    cfg.NH = opt.heads;
    cfg.HS = opt.head_size;
    cfg.MLP = opt.mlp;
    cfg.OUT = task.outputs;
    cfg.readout = task.next_token ? READOUT_NEXT_TOKEN : task.outputs == 1 ? READOUT_REGRESSION : READOUT_CLASS;
    cfg.mask_heads = find_init(opt.init)->uses & INIT_USES_MASK ? (opt.mask_per_head ? cfg.NH : 1) : 0;
    cfg.prior_layers = opt.prior_layers == "first" ? PRIOR_FIRST_LAYER : PRIOR_ALL_LAYERS;
    cfg.causal = opt.causal || task.next_token;  // a language model sees only the past
    if (task.image_input()) {
        cfg.V = 0;
        cfg.channels = task.image.channels;
        cfg.height = task.image.height;
        cfg.width = task.image.width;
        cfg.patch = opt.patch;
        cfg.pool = opt.pool == "mean" ? POOL_MEAN : POOL_CLS;
    } else if (opt.pool != "cls") {
        fail("--pool is for the image tasks");
    }
    if (opt.label_smoothing > 0 && cfg.readout == READOUT_REGRESSION)
        fail("--label-smoothing needs a classification or next-token readout; task %s is a regression",
             opt.task.c_str());
    if (opt.encoding == "scalar") {
        cfg.encoding = ENCODING_SCALAR;
        cfg.token_value = task.token_values();
        if (std::all_of(cfg.token_value.begin(), cfg.token_value.end(), [](float v) { return v == 0.0f; }))
            fail("--encoding scalar: task %s has no token that stands for a number", opt.task.c_str());
    }
    if (opt.loss == "logistic") {
        cfg.loss = LOSS_LOGISTIC;
        if (cfg.readout != READOUT_REGRESSION)
            fail("--loss logistic needs a regression readout; task %s has %d classes", opt.task.c_str(), cfg.OUT);
        std::vector<int> tokens(task.seq_len);
        float y;  // one target: the readout is a regression
        for (int i = 0; i < task.train_size(); i++) {
            task.train_example(i, 0, token_slot(tokens.data(), &y));
            if (y != 1.0f && y != -1.0f)
                fail("--loss logistic needs ±1 targets; task %s has the target %g", opt.task.c_str(), y);
        }
    }
    // The kernels index the body's activations with int row counts; keep the largest, B·T times
    // its widest row, below 2^31 floats. The logits (B·T·V for a language model) are indexed in
    // 64 bits everywhere and may pass 2^31 (the "past 2^31" case of tests/test_gpu_language.cu shows it
    // on a GPU).
    const long long widest = std::max({cfg.C, cfg.qkv_width(), cfg.MLP, cfg.NH * cfg.T});
    const long long largest = (long long)opt.batch * cfg.T * widest;
    if (largest >= (1LL << 31))
        fail("batch x sequence x width is too large: B·T·max(C, 3·NH·HS, MLP, NH·T) = %lld floats, "
             "the limit is 2^31", largest);
    return cfg;
}

// optimizer steps: --steps, or --epochs passes over the training set
inline int64_t training_steps(const Options& opt, const Task& task) {
    const int64_t steps = opt.epochs > 0 ? (int64_t)std::ceil(opt.epochs * task.train_size() / opt.batch) : opt.steps;
    if (steps <= 0) fail("the run has no steps (--steps %lld, --epochs %g)", (long long)opt.steps, opt.epochs);
    return steps;
}

// the warmup's steps: --warmup, else 5% of the run for images and language models (0 for the others)
inline int64_t warmup_steps(const Options& opt, int64_t steps) {
    if (opt.warmup >= 0) return opt.warmup;
    return is_image_task(opt.task) || is_language_task(opt.task) ? steps / 20 : 0;
}

// The learning rate of the step about to be taken (run/schedule.h); constant is the cosine that
// ends where it starts (min_lr 1): --lr itself after any warmup.
inline float step_learning_rate(const Options& opt, int64_t step, int64_t steps) {
    const float end = opt.schedule == "constant" ? 1.0f : opt.min_lr;
    return learning_rate(step, steps, opt.lr, warmup_steps(opt, steps), end);
}

inline void set_optimizer(Model& model, const Options& opt) {
    model.adam.lr = opt.lr;
    model.adam.decoupled = opt.optimizer == "adamw";
    model.weight_decay = opt.wd;
    model.decay_matrices_only = is_image_task(opt.task) || is_language_task(opt.task);
    model.mask_weight_decay = opt.mask_wd;
    model.mask_lr_scale = opt.mask_lr_scale;
    model.label_smoothing = opt.label_smoothing;
    model.freeze_mask = opt.freeze_mask;
    drop_path_build(model.drop_path, model.dev, model.cfg, model.B, opt.drop_path, opt.seed);  // the recipe's too
}

// The mixing of an image run's training batches (--mixup, --cutmix, --mix-switch, --mix-prob; recipe/mix.h)
inline MixSettings mix_settings(const Options& opt) {
    MixSettings s;
    s.mixup_alpha = opt.mixup;
    s.cutmix_alpha = opt.cutmix;
    s.switch_prob = opt.mix_switch;
    s.prob = opt.mix_prob;
    return s;
}

// The model of the flags for the task: on the device they pick (its first line says which, and
// which kernels), built, with the optimizer's settings and the recipe's drop-path; its weights are
// set by initialise.
inline void set_up_model(Model& model, const Options& opt, const Task& task) {
    const Device dev = pick_device(opt);
    const Kernels kernels = choose_kernels(opt, opt.head_size, task.seq_len);
    gpu_prepare(dev, kernels);
    printf("maskprior: training on the %s\n", device_line(dev, kernels).c_str());
    model_build(model, model_config(opt, task), dev, opt.batch);
    model.kernels = kernels;
    set_optimizer(model, opt);
}

// The room of one training batch, with the image tasks' mixing (recipe/mix.h) and, for a
// next-token task, the loss mask of one example, `positions` (tasks/batch.h, loss_positions)
inline Batch training_batch_room(const Options& opt, const Task& task, const std::vector<float>& positions) {
    Batch batch;
    batch.shape(task, opt.batch, positions);
    batch.mixing = mix_settings(opt);
    return batch;
}

// The wrong prior the flags ask for (off: noise 0, drop 0)
inline WrongPrior wrong_prior(const Options& opt) {
    return {opt.prior_noise, opt.prior_drop, (uint64_t)opt.prior_seed};
}

// the prior's structure G: the task's, or one from a file; made wrong by --prior-noise and
// --prior-drop (prior/wrong_prior.h), carrying the true one then
inline Structure prior_structure(const Options& opt, const Task& task, const Config& cfg) {
    Structure G;
    if (opt.mask_structure.empty()) G = {1, cfg.T, task.structure()};
    else G = read_structure(opt.mask_structure, cfg.T, cfg.NH);
    if (G.heads > 1 && cfg.mask_heads == 1)
        fail("%s has one G per head: add --mask-per-head", opt.mask_structure.c_str());
    const WrongPrior wrong = wrong_prior(opt);
    if (!wrong.on()) return G;
    const std::vector<PriorEdge> needed = task.needed_edges();
    if (wrong.drop > 0 && needed.empty())
        fail("--prior-drop: task %s defines no edges that its target needs (those of the Boolean tasks "
             "are in docs/method.md); --prior-noise works on any G", opt.task.c_str());
    return make_prior_wrong(G, wrong, needed, cfg.causal);
}

// ----------------------------------------------------------------------------
// initialisation (prior/init.cuh): the default weights, then what --init changes

struct Initialisation {
    Batch samples;                   // the run's first training examples (1024; images 64)
    std::string note;                // how the QK inits were fitted; empty for the others
    InitCheck check;                 // how closely layer 0 starts at the target pattern P
    PersistenceReference reference;  // step 0, what the persistence metrics compare with
};

// The structured inits see the first attention's input on sample examples: the run's first
// (up to) 1024 training examples, 64 for images (whose E is made of positions: first_attention_inputs),
// and for a language model as many windows as make 2048 rows of E: a text's distinct
// (position, token) rows number ~10^5, too many for qk-svd's n x n target, so E is a sample of them.
inline int init_sample_count(const Task& task) {
    const int wanted = task.image_input() ? 64 : is_language_task(task.name) ? std::max(1, 2048 / task.seq_len) : 1024;
    return std::min(task.train_size(), wanted);
}

inline Initialisation initialise(Model& model, const Options& opt, const Task& task, const Structure& G) {
    const Config& cfg = model.cfg;
    Initialisation init;
    const int samples = init_sample_count(task);
    init.samples.shape(task, samples, {});
    EpochOrder first_epoch(opt.seed, task.train_size());
    for (int k = 0; k < samples; k++)
        task.train_example(first_epoch.example(k), example_draw(opt.seed, 0, k), init.samples.slot(task, k));
    std::vector<float> host(model.num_params);
    Rng rng(opt.seed);
    init_default(cfg, host.data(), rng, is_language_task(opt.task) ? WEIGHTS_GPT2 : WEIGHTS_PYTORCH);
    scale_position_embedding(cfg, host.data(), opt.pe_scale);  // before the init, which may fit on it
    const InitKind& kind = *find_init(opt.init);  // the flags named one (run/options.h)
    InitContext context{model, host.data(), rng, G, opt.mask_c, opt.mask_prior == "alibi", (int)opt.qk_opt_steps,
                        nullptr};
    if (!(kind.uses & INIT_USES_INPUTS)) kind.apply(context);
    model_upload(model, model.params_mem, host);
    const AttentionInputs E = first_attention_inputs(model, batch_input(init.samples), samples);
    context.E = &E;
    if (kind.uses & INIT_USES_INPUTS) kind.apply(context);
    init.note = context.note;
    model_upload(model, model.params_mem, host);
    const Structure own = kind.own_structure ? kind.own_structure(cfg) : Structure{};  // impulse's offsets
    init.check = init_check(model, batch_input(init.samples), samples, G, opt.mask_c,
                            kind.own_structure ? &own : nullptr);
    init.reference = {host, E.distinct};
    return init;
}

// What a checkpoint must match to be resumed, and what it records of the run besides the
// model's config.
inline Metadata run_metadata(const Options& opt) {
    Metadata m = {{"task", opt.task},
                  {"init", opt.init},
                  {"seed", std::to_string(opt.seed)},
                  {"optimizer", opt.optimizer},
                  {"schedule", opt.schedule},
                  {"warmup", std::to_string(opt.warmup)},
                  {"min_lr", fmt("%g", opt.min_lr)},
                  {"clip_grad", fmt("%g", opt.clip_grad)},
                  {"label_smoothing", fmt("%g", opt.label_smoothing)},
                  {"pe_scale", fmt("%g", opt.pe_scale)}};
    if (is_image_task(opt.task)) {
        m["data_dir"] = opt.data_dir;
        m["mask_window"] = std::to_string(opt.mask_window);
        m["crop_pad"] = std::to_string(opt.crop_pad);
        m["flip"] = opt.flip == 1 ? "1" : "0";
    }
    if (is_language_task(opt.task)) {
        m["data_dir"] = opt.data_dir;
        m["mask_window"] = std::to_string(opt.mask_window);
        m["mask_prior"] = opt.mask_prior;
    }
    if (opt.task == "boolean") {
        m["target"] = opt.target;
        m["unseen"] = opt.unseen;
    }
    m["freeze_mask"] = opt.freeze_mask ? "1" : "0";
    // written only when on, so that a run without them writes what it wrote before they existed
    // (run/checkpointing.cuh, RUN_METADATA_WHEN_ON)
    if (wrong_prior(opt).on()) {
        m["prior_noise"] = fmt("%g", opt.prior_noise);
        m["prior_drop"] = std::to_string(opt.prior_drop);
        m["prior_seed"] = std::to_string(opt.prior_seed);
    }
    if (opt.mask_lr_scale != 1) m["mask_lr_scale"] = fmt("%g", opt.mask_lr_scale);
    if (opt.g_from != "target") m["g_from"] = opt.g_from;
    if (opt.drop_path > 0) m["drop_path"] = fmt("%g", opt.drop_path);
    if (opt.ema > 0) m["ema"] = fmt("%g", opt.ema);
    if (opt.randaugment > 0) {
        m["randaugment"] = std::to_string(opt.randaugment);
        m["randaugment_ops"] = std::to_string(opt.randaugment_ops);
    }
    if (opt.random_erase > 0) m["random_erase"] = fmt("%g", opt.random_erase);
    if (mix_settings(opt).on()) {
        m["mixup"] = fmt("%g", opt.mixup);
        m["cutmix"] = fmt("%g", opt.cutmix);
        m["mix_switch"] = fmt("%g", opt.mix_switch);
        m["mix_prob"] = fmt("%g", opt.mix_prob);
    }
    return m;
}

// The init with its variant: mask, mask-alibi, mask-frozen, mask-alibi-frozen, or the init's name;
// then -pe<S> where --pe-scale is not the init's own (default-pe18, impulse-pe1)
inline std::string init_variant(const Options& opt) {
    const bool own_scale = opt.pe_scale == find_init(opt.init)->pe_scale;
    return opt.init + (opt.mask_prior == "alibi" ? "-alibi" : "") + (opt.freeze_mask ? "-frozen" : "") +
           (own_scale ? "" : fmt("-pe%g", opt.pe_scale));
}

// Every name init_variant gives, in the order of INITS: each init, and an init with a mask with
// its -frozen, -alibi and -alibi-frozen variants
inline std::vector<std::string> init_variants() {
    std::vector<std::string> names;
    for (const InitKind& kind : INITS) {
        const std::string name = kind.name;
        names.push_back(name);
        if (kind.uses & INIT_USES_MASK)
            for (const char* variant : {"-frozen", "-alibi", "-alibi-frozen"}) names.push_back(name + variant);
    }
    return names;
}

// --list WHAT: one name a line, the name first (what the Python tools read), then its line of help
inline int print_list(const std::string& what) {
    if (what == "tasks")
        for (const TaskKind& kind : TASKS) printf("%-14s %s\n", kind.name, kind.help);
    if (what == "inits")
        for (const InitKind& kind : INITS) printf("%-14s %s\n", kind.name, kind.help);
    if (what == "variants")
        for (const std::string& name : init_variants()) printf("%s\n", name.c_str());
    if (what == "attention-kernels")
        for (int v = 1; v <= ATTENTION_KERNEL_COUNT; v++) printf("%-14d %s\n", v, ATTENTION_KERNELS[v - 1].idea);
    return 0;
}

// What metrics.json records of a Boolean task besides its metrics: its target and hold-out as
// text (a named task's own), which G the run used (g_from), the monomials it was read off
// (g_support; null for a G written by hand, cyclic3's), and the MDI's sign accuracy on the
// unseen points where f != 0 (mdi_acc_unseen; null where there is none)
inline nlohmann::ordered_json boolean_facts(const Options& opt, const Task& task) {
    const BooleanTask& boolean = dynamic_cast<const BooleanTask&>(task);
    nlohmann::ordered_json facts = {{"target", boolean.target.text}, {"unseen", boolean.target.unseen_text},
                                    {"g_from", opt.g_from}};
    facts["g_support"] = nullptr;
    if (!boolean.own_structure) {
        facts["g_support"] = nlohmann::ordered_json::array();
        for (uint32_t A : boolean.g_support)
            if (A != 0) facts["g_support"].push_back(monomial_text(A));
    }
    const double unseen = boolean.mdi_accuracy_unseen;
    facts["mdi_acc_unseen"] = std::isnan(unseen) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(unseen);
    return facts;
}

// A flag's text as a piece of a folder's name: spaces dropped, '*' as '.', and every character but
// letters, digits and . + - = , as '_' (sign(x0+x1)*x2 -> sign_x0+x1_.x2); its first 50 characters.
// Two texts can give one piece (2*5*x0 and 2.5*x0 both 2.5.x0): a hash of them follows it.
inline std::string folder_piece(const std::string& text) {
    std::string piece;
    for (unsigned char c : text) {
        if (c == ' ' || c == '\t') continue;
        piece += c == '*' ? '.' : isalnum(c) || strchr(".+-=,", c) ? (char)c : '_';
    }
    return piece.substr(0, 50);
}

// The 32-bit FNV-1a hash of text, as 8 hex digits
inline std::string text_hash(const std::string& text) {
    uint32_t hash = 2166136261u;
    for (unsigned char c : text) hash = (hash ^ c) * 16777619u;
    return fmt("%08x", hash);
}

// --out, or runs/<task>-<init variant>-s<seed>; created with its parents (mkdir -p).
// --task images and --task lm say which data folder: runs/images-<its name>-..., runs/lm-<its name>-...;
// --task boolean its target and hold-out, and a hash of the two as written, which tells apart the
// targets whose pieces are the same: runs/boolean-x0.x1.x2-unseen-x0=-1,x1=-1-b00cdd21-mask-s1;
// --g-from data adds -g-data (runs/maj3-g-data-mask-s1)
inline std::string run_folder(const Options& opt) {
    std::string data = opt.task;
    if (opt.task == "boolean")
        data += "-" + folder_piece(opt.target) + "-unseen-" + folder_piece(opt.unseen) + "-" +
                text_hash(opt.target + "\n" + opt.unseen);
    if (opt.g_from == "data") data += "-g-data";
    if (opt.task == "images" || is_language_task(opt.task)) {
        std::string path = opt.data_dir;
        while (path.size() > 1 && path.back() == '/') path.pop_back();
        data += "-" + path.substr(path.find_last_of('/') + 1);
    }
    const std::string dir = opt.out.empty() ? "runs/" + data + "-" + init_variant(opt) + "-s" + std::to_string(opt.seed)
                                            : opt.out;
    for (size_t i = 1; i <= dir.size(); i++) {
        if (i < dir.size() && dir[i] != '/') continue;
        std::string prefix = dir.substr(0, i);
        if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) fail("cannot create folder %s", prefix.c_str());
    }
    return dir;
}

// ----------------------------------------------------------------------------
// the startup table

// G drawn in text for one example, rows and columns labelled with its tokens, so that a reader
// can check by eye which key each query may attend to (head 0's G when there is one per head).
inline void print_structure(const Structure& G, const Task& task, const int* tokens) {
    // tokens (T): one example
    const int T = G.T;
    std::vector<std::string> label(T);
    size_t width = 1;
    for (int t = 0; t < T; t++) width = std::max(width, (label[t] = task.token_text(tokens[t])).size());
    printf("G on a sample row (row: the query, column: the key, '#': G allows it%s)\n",
           G.heads > 1 ? "; head 0" : "");
    printf("%*s", (int)width + 1, "");
    for (int j = 0; j < T; j++) printf(" %*s", (int)width, label[j].c_str());
    printf("\n");
    for (int i = 0; i < T; i++) {
        printf("%*s ", (int)width + 1, label[i].c_str());
        for (int j = 0; j < T; j++) printf(" %*s", (int)width, G.head(0)[i * T + j] != 0 ? "#" : ".");
        printf("\n");
    }
}

// An image run's augmentation, and whether it is its task's recipe (tasks/registry.h) or flags changed it
inline std::string augmentation_text(const Options& opt) {
    const ImageRecipe& recipe = image_recipe(opt.task);
    const bool own = opt.crop_pad == recipe.crop_pad && (opt.flip == 1) == recipe.flip;
    const std::string crop_flip = fmt("crop pad %d, %s", opt.crop_pad, opt.flip == 1 ? "flip" : "no flip");
    if (own) return crop_flip + " (the recipe of " + opt.task + ")";
    return crop_flip + fmt(" (flags; %s's: pad %d, %s)", opt.task.c_str(), recipe.crop_pad,
                           recipe.flip ? "flip" : "no flip");
}

inline void print_startup(const Options& opt, const Task& task, const Model& model, const Structure& G,
                          const Initialisation& init, int64_t steps, int64_t start_step, const std::string& out_dir) {
    const Config& cfg = model.cfg;
    auto row = [](const char* label, const std::string& text) { printf("| %-16s | %-52s |\n", label, text.c_str()); };
    const char* mask_kind = cfg.mask_heads == 0   ? ""
                            : cfg.mask_heads == 1 ? ", mask shared by heads"
                                                  : ", mask per head";
    const std::string rule = "+------------------+------------------------------------------------------+";
    puts(rule.c_str());
    row("task", fmt("%s (train %d, eval %d)", opt.task.c_str(), task.train_size(), task.eval_size()));
    std::istringstream described(task.describe());  // its lines, each a row
    for (std::string line; std::getline(described, line);) row("", line);
    if (is_image_task(opt.task)) row("augmentation", augmentation_text(opt));
    if (opt.randaugment > 0 || opt.random_erase > 0)
        row("", fmt("RandAugment m%d x %d ops, random erasing %g", opt.randaugment, opt.randaugment_ops,
                    opt.random_erase));
    if (mix_settings(opt).on())
        row("batch mixing", fmt("mixup %g, cutmix %g, switch %g, prob %g; train hits: each row's own class",
                                opt.mixup, opt.cutmix, opt.mix_switch, opt.mix_prob));
    if (is_language_task(opt.task)) row("loss on", "every position; eval: loss, perplexity, bits per byte");
    else if (task.next_token)
        row("loss on", opt.loss_on == "all" ? "every position" : "the answer tokens; greedy decoding at eval");
    const bool structured = find_init(opt.init)->uses & INIT_USES_STRUCTURE;
    row("init", fmt("%s%s%s%s", init_variant(opt).c_str(), mask_kind,
                    structured ? fmt(", c = %g", opt.mask_c).c_str() : "",
                    structured && cfg.prior_layers == PRIOR_FIRST_LAYER ? ", layer 0 only" : ""));
    if (!init.note.empty()) row("", init.note);
    if (opt.pe_scale != 1.0f) row("", fmt("position embedding x%g before the init, and kept", opt.pe_scale));
    const std::string task_G =
        is_language_task(opt.task) ? fmt("causal window of %d keys", opt.mask_window) : "the task's";
    row("structure G", opt.mask_structure.empty() ? task_G : fmt("%s (%s)", opt.mask_structure.c_str(),
                                                                 G.heads > 1 ? "one per head" : "all heads"));
    if (G.made_wrong())
        row("", fmt("made wrong: %d entries (noise %g, drop %d, seed %lld)", wrong_entries(G), opt.prior_noise,
                    opt.prior_drop, (long long)opt.prior_seed));
    if (opt.mask_prior == "alibi") row("", "mask: log σ(M) = -m_h (i - j), ALiBi slopes; G for prior mass");
    const InitCheck& check = init.check;
    row("step-0 check", fmt("layer 0: prior mass %.3f (target P: %.3f)", check.prior_mass, check.target_mass));
    row("", fmt("|A - P| mean %.4f, max %.4f; P = softmax(c G)", check.mean_abs_diff, check.max_abs_diff));
    if (check.own_mass >= 0) row("", fmt("%s's own structure: mass %.3f", opt.init.c_str(), check.own_mass));
    row("model", fmt("C %d L %d NH %d HS %d MLP %d T %d%s", cfg.C, cfg.L, cfg.NH, cfg.HS, cfg.MLP, cfg.T,
                     cfg.causal ? " causal" : ""));
    row("parameters", fmt("%zu", model.num_params));
    row("build", build_text());
    row("kernels", kernels_text(model.dev, model.kernels) +
                       (model.dev == DEVICE_CPU && model.kernels.cpu == 2 ? "; --cpu-kernel 1 runs the loops" : ""));
    const std::string loss_name = cfg.readout == READOUT_REGRESSION ? opt.loss : "cross-entropy";
    row("encoding, loss", fmt("%s, %s", opt.encoding.c_str(), loss_name.c_str()));
    row("optimizer", fmt("%s lr %g wd %g on %s, mask wd %g", opt.optimizer == "adamw" ? "AdamW" : "Adam+L2", opt.lr,
                         opt.wd, weight_decay_on(model).c_str(), opt.mask_wd));
    if (opt.mask_lr_scale != 1) row("", fmt("the mask's lr: %g x lr", opt.mask_lr_scale));
    if (opt.drop_path > 0 || opt.ema > 0)
        row("regularisation", fmt("drop-path %g (last block), EMA decay %g", opt.drop_path, opt.ema));
    row("batch, steps", fmt("%d, %lld (from %lld)", model.B, (long long)steps, (long long)start_step));
    row("seed", fmt("%llu", (unsigned long long)opt.seed));
    const size_t activations = model.num_acts + model.num_dacts + model.num_dscores;
    row("memory", fmt("params+grads+adam %.2f MB, activations %.2f MB", 4.0 * model.num_params * sizeof(float) / 1e6,
                      activations * sizeof(float) / 1e6));
    row("run folder", out_dir);
    puts(rule.c_str());
    if (start_step == 0 && !task.image_input() && cfg.T <= 32) print_structure(G, task, init.samples.tokens.data());
    fflush(stdout);
}
