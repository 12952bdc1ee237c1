// main.cu: the maskprior program. Command line, task choice, the training loop, evaluation
// and reports. No math lives here: the model, its layers and the tasks do that.
#include <sys/stat.h>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <memory>
#include "checkpoint.cuh"
#include "init.cuh"
#include "options.h"
#include "persistence.cuh"
#include "pictures.h"
#include "tasks/arithmetic.h"
#include "tasks/boolean.h"
#include "tasks/decode.h"

// The task; a data file it cannot read is one line on stderr and exit code 2.
static std::unique_ptr<Task> make_task(const Options& opt) {
    if (opt.task == "2parity" || opt.task == "maj3" || opt.task == "cyclic3")
        return std::make_unique<BooleanTask>(opt.task);
    ArithmeticData data;
    data.data_frac = opt.data_frac > 0 || !opt.train_file.empty() ? opt.data_frac : opt.task == "add3" ? 0.004 : 0.03;
    data.train_file = opt.train_file;
    data.test_file = opt.test_file;
    if (opt.max_test > 0) data.max_test = opt.max_test;
    data.seed = opt.seed;
    try {
        return std::make_unique<ArithmeticTask>(opt.task, data);
    } catch (const std::exception& e) {
        fail("%s", e.what());
    }
}

// G from a text file: T*T numbers (one G for every head) or NH*T*T (one per head), each 0 or 1,
// separated by white space; '#' starts a comment to the end of the line.
static Structure read_structure(const std::string& path, int T, int NH) {
    std::ifstream f(path);
    if (!f) fail("cannot read --mask-structure file %s", path.c_str());
    Structure G;
    G.T = T;
    std::string line, word;
    for (int line_no = 1; std::getline(f, line); line_no++) {
        std::istringstream words(line.substr(0, line.find('#')));
        while (words >> word) {
            if (word != "0" && word != "1")
                fail("%s line %d: '%s' is not 0 or 1", path.c_str(), line_no, word.c_str());
            G.g.push_back(word == "1" ? 1.0f : 0.0f);
        }
    }
    if (G.g.size() == (size_t)T * T) G.heads = 1;
    else if (G.g.size() == (size_t)NH * T * T) G.heads = NH;
    else fail("%s has %zu entries; this task needs T*T = %d (or NH*T*T = %d)", path.c_str(), G.g.size(), T * T,
              NH * T * T);
    return G;
}

static void make_dirs(const std::string& path) {  // mkdir -p
    for (size_t i = 1; i <= path.size(); i++) {
        if (i < path.size() && path[i] != '/') continue;
        std::string prefix = path.substr(0, i);
        if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) fail("cannot create folder %s", prefix.c_str());
    }
}

static std::string device_name(Device dev) {
    if (dev == DEVICE_GPU) {
        cudaDeviceProp prop;
        cudaCheck(cudaGetDeviceProperties(&prop, 0));
        return std::string(prop.name) + " (CUDA)";
    }
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line, model = "CPU";
    while (std::getline(cpuinfo, line))
        if (line.rfind("model name", 0) == 0) { model = line.substr(line.find(':') + 2); break; }
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    return model + ", " + std::to_string(threads) + " threads (CPU)";
}

template <typename... Args>
static std::string fmt(const char* format, Args... args) {
    char buf[256];
    snprintf(buf, sizeof buf, format, args...);
    return buf;
}

static std::string format_duration(double seconds) {
    char buf[32];
    int s = (int)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, sizeof buf, "%dh%02dm", s / 3600, s / 60 % 60);
    else if (s >= 60) snprintf(buf, sizeof buf, "%dm%02ds", s / 60, s % 60);
    else snprintf(buf, sizeof buf, "%ds", s);
    return buf;
}

// ----------------------------------------------------------------------------
// batches

struct Batch {
    std::vector<int> tokens;       // (rows, T)
    std::vector<float> targets;    // (rows, targets_per_example): one, or the next token at every position
    std::vector<float> loss_mask;  // (rows, T) next-token tasks: 1 where the loss counts; empty otherwise
    int rows = 0;

    // room for B rows; `positions` (T) is the loss mask of one example (empty: no mask)
    void shape(const Task& task, int B, const std::vector<float>& positions) {
        rows = B;
        tokens.resize((size_t)B * task.seq_len);
        targets.resize((size_t)B * task.targets_per_example());
        loss_mask.clear();
        for (int b = 0; b < B && !positions.empty(); b++)
            loss_mask.insert(loss_mask.end(), positions.begin(), positions.end());
    }
    const float* mask() const { return loss_mask.empty() ? nullptr : loss_mask.data(); }
};

// The training batch of step `step`: examples step*B .. step*B+B-1 of the seeded epoch order.
static void training_batch(const Task& task, EpochOrder& order, int64_t step, Batch& batch) {
    const int P = task.targets_per_example();
    for (int b = 0; b < batch.rows; b++)
        task.train_example(order.example(step * batch.rows + b), &batch.tokens[(size_t)b * task.seq_len],
                           &batch.targets[(size_t)b * P]);
}

// The loss mask of one example: the task's answer positions, or every position (--loss-on all).
static std::vector<float> loss_positions(const Task& task, const std::string& loss_on) {
    if (!task.next_token) return {};
    if (loss_on == "all") return std::vector<float>(task.seq_len, 1.0f);
    return task.loss_positions();
}

// ----------------------------------------------------------------------------
// evaluation: the model's outputs on every evaluation example, the task's metrics, and the
// prior mass of each layer (mean attention on G-allowed keys) over the same examples

struct Evaluation {
    Metrics metrics;
    std::vector<double> prior_mass;      // (L)
    std::vector<float> mean_attention;   // (L,NH,T,T) A averaged over the evaluation examples
    Persistence persistence;
    double loss = 0;
};

// Next-token tasks are scored on their greedy decoding (tasks/decode.h): the model writes its
// answer token by token from the prompt alone; loss and attention come from the teacher-forced
// pass on the true sequence, as in training.
static Evaluation evaluate(Model& model, const Task& task, const Structure& G, const PersistenceReference& ref,
                           const std::vector<float>& positions) {
    const Config& c = model.cfg;
    const int n = task.eval_size(), P = task.targets_per_example();
    const size_t TT = (size_t)c.T * c.T;
    const std::vector<int> decode_at = task.decode_positions();
    const int per_example = task.next_token ? (int)decode_at.size() : c.OUT;
    std::vector<float> outputs((size_t)n * per_example);
    std::vector<float> att((size_t)model.B * c.NH * TT);
    Evaluation ev;
    ev.prior_mass.assign(c.L, 0.0);
    std::vector<double> attention_sum(c.L * c.NH * TT, 0.0);
    Batch batch;
    batch.shape(task, model.B, positions);
    for (int start = 0; start < n; start += model.B) {
        int rows = std::min(model.B, n - start);
        for (int r = 0; r < rows; r++)
            task.eval_example(start + r, &batch.tokens[(size_t)r * c.T], &batch.targets[(size_t)r * P]);
        ev.loss += model_forward(model, batch.tokens.data(), batch.targets.data(), rows, batch.mask()) * rows;
        Activations a = model_activations(model, rows);
        if (!task.next_token)
            buffer_copy(outputs.data() + (size_t)start * c.OUT, DEVICE_CPU, a.logits, model.dev, (size_t)rows * c.OUT);
        for (int l = 0; l < c.L; l++) {
            size_t per_layer = (size_t)rows * c.NH * TT;
            buffer_copy(att.data(), DEVICE_CPU, a.att + l * per_layer, model.dev, per_layer);
            ev.prior_mass[l] += attention_prior_mass(att.data(), G, rows, c.NH, c.T) * rows;
            for (size_t k = 0; k < per_layer; k++) attention_sum[l * c.NH * TT + k % (c.NH * TT)] += att[k];
        }
        if (task.next_token) {
            auto next_logits = [&](const int* tokens, int r, std::vector<float>& logits) {
                model_forward(model, tokens, nullptr, r);
                logits.resize((size_t)r * c.T * c.V);
                buffer_copy(logits.data(), DEVICE_CPU, model_activations(model, r).logits, model.dev, logits.size());
            };
            std::vector<int> decoded;
            // blank token 0: under causal attention an input is decoded before any position reads it
            greedy_decode(next_logits, batch.tokens.data(), rows, c.T, c.V, decode_at, 0, decoded);
            for (size_t k = 0; k < decoded.size(); k++) outputs[(size_t)start * per_example + k] = (float)decoded[k];
        }
    }
    for (double& m : ev.prior_mass) m /= n;
    for (double sum : attention_sum) ev.mean_attention.push_back((float)(sum / n));
    ev.loss /= n;
    ev.metrics = task.evaluate(outputs);
    ev.persistence = persistence_metrics(model, ref);
    return ev;
}

// a list with NaN (not defined for that layer) as null
static nlohmann::ordered_json layer_list(const std::vector<double>& values) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (double v : values) list.push_back(std::isnan(v) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(v));
    return list;
}

static nlohmann::ordered_json evaluation_json(const Evaluation& ev) {
    nlohmann::ordered_json j;
    j["eval_loss"] = ev.loss;
    for (const auto& [key, value] : ev.metrics) j[key] = value;
    j["prior_mass"] = ev.prior_mass;
    const Persistence& p = ev.persistence;
    bool has_mask = !p.mask_drift.empty() && !std::isnan(p.mask_drift[0]);
    j["mask_drift"] = has_mask ? layer_list(p.mask_drift) : nlohmann::ordered_json(nullptr);
    j["qk_cosine"] = layer_list(p.qk_cosine);
    j["grad_norm_mask"] = has_mask ? layer_list(p.grad_norm_mask) : nlohmann::ordered_json(nullptr);
    j["grad_norm_qk"] = layer_list(p.grad_norm_qk);
    return j;
}

static void print_list(const char* name, const std::vector<double>& values, const char* format) {
    printf(" | %s", name);
    for (double v : values) std::isnan(v) ? printf(" -") : printf(format, v);
}

static void print_evaluation(int step, const Evaluation& ev) {
    printf("eval  step %6d | loss %.5f |", step, ev.loss);
    for (const auto& [key, value] : ev.metrics) printf(" %s %.4f", key.c_str(), value);
    print_list("prior_mass", ev.prior_mass, " %.3f");
    print_list("mask_drift", ev.persistence.mask_drift, " %.3f");
    print_list("qk_cosine", ev.persistence.qk_cosine, " %.3f");
    printf("\n");
    fflush(stdout);
}

// G drawn in text for one example, rows and columns labelled with its tokens, so that a reader
// can check by eye which key each query may attend to (head 0's G when there is one per head).
static void print_structure(const Structure& G, const Task& task, const int* tokens) {
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

// The pictures of one moment of the run (tag: step0 or final): each layer's mean attention
// map and, where there is a mask, log σ(M); rows are layers, columns heads.
static void write_pictures(const std::string& dir, const std::string& tag, const Model& model, const Evaluation& ev) {
    const Config& c = model.cfg;
    Heatmap att;
    att.T = c.T;
    att.grid_rows = c.L;
    att.grid_cols = c.NH;
    att.values = ev.mean_attention;
    att.hi = *std::max_element(att.values.begin(), att.values.end());
    write_heatmap(dir + "/attention_" + tag + ".png", att);
    printf("wrote %s/attention_%s.png (mean attention, layers down, heads across; scale 0 .. %.3f)\n", dir.c_str(),
           tag.c_str(), att.hi);
    if (c.mask_heads == 0) return;
    Heatmap mask;
    mask.T = c.T;
    mask.grid_rows = c.mask_layers();
    mask.grid_cols = c.mask_heads;
    mask.values.resize((size_t)mask.grid_rows * mask.grid_cols * c.T * c.T);
    buffer_copy(mask.values.data(), DEVICE_CPU, model.params.mask, model.dev, mask.values.size());
    for (float& m : mask.values) m = log_sigmoid(m);
    mask.lo = *std::min_element(mask.values.begin(), mask.values.end());
    mask.hi = 0;
    write_heatmap(dir + "/mask_" + tag + ".png", mask);
    printf("wrote %s/mask_%s.png (log σ(M), layers down, heads across; scale %.2f .. 0)\n", dir.c_str(), tag.c_str(),
           mask.lo);
}

// ----------------------------------------------------------------------------
// the program

int main(int argc, char** argv) {
    Options opt = parse_options(argc, argv);
    std::unique_ptr<Task> task = make_task(opt);

    // device
    int gpus = gpu_count();
    if (opt.device == "cuda" && gpus == 0) fail("--device cuda, but no CUDA GPU is available");
    Device dev = (opt.device == "cuda" || (opt.device == "auto" && gpus > 0)) ? DEVICE_GPU : DEVICE_CPU;
    if (dev == DEVICE_GPU) set_tf32(opt.tf32);
    printf("maskprior: training on the %s: %s\n", dev == DEVICE_GPU ? "GPU" : "CPU (no GPU in use)",
           device_name(dev).c_str());

    // config and model
    Config cfg;
    cfg.V = task->vocab;
    cfg.T = task->seq_len;
    cfg.C = opt.width;
    cfg.L = opt.layers;
    cfg.NH = opt.heads;
    cfg.HS = opt.head_size;
    cfg.MLP = opt.mlp;
    cfg.OUT = task->outputs;
    cfg.head = task->next_token ? HEAD_NEXT_TOKEN : task->outputs == 1 ? HEAD_REGRESSION : HEAD_CLASS;
    cfg.mask_heads = opt.init == "mask" ? (opt.mask_per_head ? cfg.NH : 1) : 0;
    cfg.mask_first_layer_only = opt.prior_layers == "first";
    cfg.causal = opt.causal || task->next_token;  // a language model sees only the past
    if (opt.encoding == "scalar") {
        cfg.encoding = ENCODING_SCALAR;
        cfg.token_value = task->token_values();
        if (std::all_of(cfg.token_value.begin(), cfg.token_value.end(), [](float v) { return v == 0.0f; }))
            fail("--encoding scalar: task %s has no token that stands for a number", opt.task.c_str());
    }
    if (opt.loss == "logistic") {
        cfg.loss = LOSS_LOGISTIC;
        if (cfg.head != HEAD_REGRESSION)
            fail("--loss logistic needs a regression head; task %s has %d classes", opt.task.c_str(), cfg.OUT);
        std::vector<int> tokens(task->seq_len);
        float y;  // one target: the head is a regression head
        for (int i = 0; i < task->train_size(); i++) {
            task->train_example(i, tokens.data(), &y);
            if (y != 1.0f && y != -1.0f)
                fail("--loss logistic needs ±1 targets; task %s has the target %g", opt.task.c_str(), y);
        }
    }
    const int B = opt.batch;
    // shapes that cannot be built: the kernels index one layer's activations with 32-bit ints
    long long widest = std::max({cfg.C, cfg.QKV(), cfg.MLP, cfg.NH * cfg.T});
    if ((long long)B * cfg.T * widest > (1LL << 30))
        fail("batch x sequence x width is too large for one buffer (%lld floats)", (long long)B * cfg.T * widest);
    const int train_n = task->train_size();
    const int64_t steps = opt.epochs > 0 ? (int64_t)std::ceil(opt.epochs * train_n / B) : opt.steps;
    if (steps <= 0) fail("the run has no steps (--steps %lld, --epochs %g)", (long long)opt.steps, opt.epochs);

    Model model;
    model_build(model, cfg, dev, B);
    model.adam.lr = opt.lr;
    model.adam.decoupled = opt.optimizer == "adamw";
    model.weight_decay = opt.wd;
    model.mask_weight_decay = opt.mask_wd;

    // the prior's structure G: the task's, or one from a file
    Structure G;
    if (opt.mask_structure.empty()) G = {1, cfg.T, task->structure()};
    else G = read_structure(opt.mask_structure, cfg.T, cfg.NH);
    if (G.heads > 1 && cfg.mask_heads == 1)
        fail("%s has one G per head: add --mask-per-head", opt.mask_structure.c_str());

    // initialisation (init.cuh): the default weights, then what the init changes. The
    // structured inits see the first attention's input on sample examples: the run's first
    // (up to) 1024 training examples.
    const int prior_layers = opt.prior_layers == "first" ? 1 : cfg.L;
    const int samples = std::min(train_n, 1024);
    std::vector<int> sample_tokens((size_t)samples * cfg.T);
    {
        EpochOrder first_epoch(opt.seed, train_n);
        std::vector<float> targets(task->targets_per_example());
        for (int k = 0; k < samples; k++)
            task->train_example(first_epoch.example(k), &sample_tokens[(size_t)k * cfg.T], targets.data());
    }
    std::vector<float> host(model.num_params);
    Rng rng(opt.seed);
    init_default(cfg, host.data(), rng);
    if (opt.init == "mask") init_mask_from_structure(cfg, host.data(), G, opt.mask_c);
    if (opt.init == "mimetic") init_mimetic(cfg, host.data(), rng);
    buffer_copy(model.params_mem, dev, host.data(), DEVICE_CPU, model.num_params);
    const AttentionInputs E = first_attention_inputs(model, sample_tokens, samples);
    std::string init_note;
    if (opt.init == "qk-svd") {
        init_qk_svd(cfg, host.data(), E, G, opt.mask_c, prior_layers);
        init_note = fmt("closed form from %d distinct first-attention inputs", E.distinct.rows);
    }
    if (opt.init == "qk-opt") {
        QkFit fit = init_qk_opt(model, host.data(), E, G, opt.mask_c, prior_layers, (int)opt.qk_opt_steps);
        init_note = fmt("Adam fit, %lld steps: KL(P||A) %.4f -> %.6f", (long long)opt.qk_opt_steps, fit.kl_start,
                        fit.kl_end);
    }
    buffer_copy(model.params_mem, dev, host.data(), DEVICE_CPU, model.num_params);
    const InitCheck check = init_check(model, sample_tokens, samples, G, opt.mask_c);
    const PersistenceReference reference = {host, E.distinct};
    std::map<std::string, std::string> run_meta = {
        {"task", opt.task}, {"init", opt.init}, {"seed", std::to_string(opt.seed)}, {"optimizer", opt.optimizer}};
    int64_t start_step = 0;
    if (!opt.resume.empty()) {
        auto meta = checkpoint_load(opt.resume, model);  // checks the shapes itself
        for (const auto& [key, want] : run_meta)
            if (meta[key] != want)
                fail("%s is a checkpoint of %s=%s; this run asks for %s=%s", opt.resume.c_str(), key.c_str(),
                     meta[key].c_str(), key.c_str(), want.c_str());
        start_step = atoll(meta["step"].c_str());
        if (start_step > steps) fail("%s is at step %lld, past --steps %lld", opt.resume.c_str(),
                                     (long long)start_step, (long long)steps);
    }

    EpochOrder order(opt.seed, train_n);
    const std::vector<float> positions = loss_positions(*task, opt.loss_on);  // (T) or empty
    Batch batch;
    batch.shape(*task, B, positions);
    if (!opt.dump_state.empty()) {  // one forward/backward on the first batch, written out, then stop
        training_batch(*task, order, start_step, batch);
        float loss = model_forward(model, batch.tokens.data(), batch.targets.data(), B, batch.mask());
        model_zero_grad(model);
        model_backward(model, B);
        run_meta["step"] = std::to_string(start_step);
        dump_state(opt.dump_state, model, batch.tokens, batch.targets, batch.loss_mask, B, loss, run_meta);
        printf("wrote %s (loss %.6f)\n", opt.dump_state.c_str(), loss);
        return 0;
    }

    const std::string out_dir = opt.out.empty() ? "runs/" + opt.task + "-" + opt.init + "-s" +
                                                      std::to_string(opt.seed) : opt.out;
    make_dirs(out_dir);
    const std::string save_path = opt.save.empty() ? out_dir + "/model.safetensors" : opt.save;
    std::ofstream log(out_dir + "/log.jsonl", start_step > 0 ? std::ios::app : std::ios::trunc);
    if (!log) fail("cannot write %s/log.jsonl", out_dir.c_str());

    // startup table
    auto row = [](const char* label, const std::string& text) { printf("| %-16s | %-52s |\n", label, text.c_str()); };
    const char* mask_kind = cfg.mask_heads == 0 ? "" : cfg.mask_heads == 1 ? ", mask shared by heads" : ", mask per head";
    const std::string rule = "+------------------+------------------------------------------------------+";
    puts(rule.c_str());
    row("task", fmt("%s (train %d, eval %d)", opt.task.c_str(), train_n, task->eval_size()));
    if (!task->describe().empty()) row("", task->describe());
    if (task->next_token)
        row("loss on", opt.loss_on == "all" ? "every position" : "the answer tokens; greedy decoding at eval");
    const bool structured = opt.init == "mask" || opt.init == "qk-svd" || opt.init == "qk-opt";
    row("init", fmt("%s%s%s%s", opt.init.c_str(), mask_kind, structured ? fmt(", c = %g", opt.mask_c).c_str() : "",
                    structured && prior_layers == 1 ? ", layer 0 only" : ""));
    if (!init_note.empty()) row("", init_note);
    row("structure G", opt.mask_structure.empty() ? "the task's" : fmt("%s (%s)", opt.mask_structure.c_str(),
                                                                      G.heads > 1 ? "one per head" : "all heads"));
    row("step-0 check", fmt("layer 0: prior mass %.3f (target P: %.3f)", check.prior_mass, check.target_mass));
    row("", fmt("|A - P| mean %.4f, max %.4f; P = softmax(c G)", check.mean_abs_diff, check.max_abs_diff));
    row("model", fmt("C %d L %d NH %d HS %d MLP %d T %d%s", cfg.C, cfg.L, cfg.NH, cfg.HS, cfg.MLP, cfg.T,
                     cfg.causal ? " causal" : ""));
    row("parameters", fmt("%zu", model.num_params));
    const std::string loss_name = cfg.head == HEAD_REGRESSION ? opt.loss : "cross-entropy";
    row("encoding, loss", fmt("%s, %s", opt.encoding.c_str(), loss_name.c_str()));
    row("optimizer", fmt("%s lr %g wd %g mask wd %g", opt.optimizer == "adamw" ? "AdamW" : "Adam+L2", opt.lr,
                         opt.wd, opt.mask_wd));
    row("batch, steps", fmt("%d, %lld (from %lld)", B, (long long)steps, (long long)start_step));
    row("seed", fmt("%llu", (unsigned long long)opt.seed));
    row("memory", fmt("params+grads+adam %.2f MB, activations %.2f MB", 4.0 * model.num_params * sizeof(float) / 1e6,
                      2.0 * model.num_acts * sizeof(float) / 1e6));
    row("run folder", out_dir);
    puts(rule.c_str());
    if (start_step == 0) print_structure(G, *task, sample_tokens.data());
    fflush(stdout);

    // training
    const int64_t log_every = opt.log_every > 0 ? opt.log_every : std::max<int64_t>(1, steps / 10);
    const int64_t eval_every = opt.eval_every > 0 ? opt.eval_every : steps;
    double t_start = now_seconds(), t_window = t_start;
    int64_t window_steps = 0;
    float loss = 0;
    Evaluation ev;
    if (start_step == 0) {
        // the gradient of the first batch, so that step 0 reports gradient norms too
        training_batch(*task, order, 0, batch);
        model_forward(model, batch.tokens.data(), batch.targets.data(), B, batch.mask());
        model_zero_grad(model);
        model_backward(model, B);
        ev = evaluate(model, *task, G, reference, positions);
        print_evaluation(0, ev);
        nlohmann::ordered_json j = {{"step", 0}, {"loss", nullptr}};
        j.update(evaluation_json(ev));
        log << j.dump() << "\n" << std::flush;
        write_pictures(out_dir, "step0", model, ev);
        Heatmap structure;
        structure.T = cfg.T;
        structure.grid_rows = 1;
        structure.grid_cols = G.heads;
        structure.values = G.g;
        write_heatmap(out_dir + "/structure.png", structure);
        printf("wrote %s/structure.png (G: 1 where a query may attend to a key, heads across)\n", out_dir.c_str());
        t_window = now_seconds();
    }
    for (int64_t step = start_step; step < steps; step++) {
        training_batch(*task, order, step, batch);
        loss = model_forward(model, batch.tokens.data(), batch.targets.data(), B, batch.mask());
        if (!std::isfinite(loss)) fail("the loss became %f at step %lld: lower --lr?", loss, (long long)step);
        model_zero_grad(model);
        model_backward(model, B);
        model_update(model);
        window_steps++;
        int64_t done = step + 1;
        if (done % log_every == 0 || done == steps) {
            device_sync(dev);
            double now = now_seconds(), ms = 1000 * (now - t_window) / window_steps;
            printf("step %6lld/%lld | loss %.6f | %7.2f ms/step | %7.1f steps/s | ETA %s\n", (long long)done,
                   (long long)steps, loss, ms, 1000 / ms, format_duration((steps - done) * ms / 1000).c_str());
            fflush(stdout);
            t_window = now;
            window_steps = 0;
        }
        if (done % eval_every == 0 || done == steps) {
            ev = evaluate(model, *task, G, reference, positions);
            print_evaluation((int)done, ev);
            nlohmann::ordered_json j = {{"step", done}, {"loss", loss}};
            j.update(evaluation_json(ev));
            log << j.dump() << "\n" << std::flush;
            t_window = now_seconds();  // evaluation time is not training time
            window_steps = 0;
        }
    }
    if (start_step == steps) {  // resumed a finished run: nothing trained, evaluate what is there
        ev = evaluate(model, *task, G, reference, positions);
        print_evaluation((int)steps, ev);
    }
    double seconds = now_seconds() - t_start;
    write_pictures(out_dir, "final", model, ev);

    run_meta["step"] = std::to_string(steps);
    checkpoint_save(save_path, model, run_meta);

    nlohmann::ordered_json metrics = {{"task", opt.task}, {"init", opt.init}, {"seed", opt.seed}, {"optimizer", opt.optimizer},
                                      {"encoding", opt.encoding}, {"loss", loss_name},
                                      {"steps", steps},   {"device", device_name(dev)}, {"seconds", seconds},
                                      {"final_loss", loss}, {"train_examples", train_n},
                                      {"eval_examples", task->eval_size()}};
    metrics.update(evaluation_json(ev));
    std::string metrics_path = out_dir + "/metrics.json", tmp = metrics_path + ".tmp";
    {
        std::ofstream f(tmp);
        f << metrics.dump(2) << "\n";
        if (!f) fail("cannot write %s", tmp.c_str());
    }
    if (rename(tmp.c_str(), metrics_path.c_str()) != 0) fail("cannot write %s", metrics_path.c_str());

    printf("+------------------+------------+\n");
    printf("| final metric     | value      |\n");
    printf("+------------------+------------+\n");
    for (const auto& [key, value] : ev.metrics) printf("| %-16s | %10.4f |\n", key.c_str(), value);
    const Persistence& pe = ev.persistence;
    for (int l = 0; l < cfg.L; l++) {
        printf("| prior_mass[%d]    | %10.4f |\n", l, ev.prior_mass[l]);
        if (cfg.layer_has_mask(l)) printf("| mask_drift[%d]    | %10.4f |\n", l, pe.mask_drift[l]);
        printf("| qk_cosine[%d]     | %10.4f |\n", l, pe.qk_cosine[l]);
    }
    printf("| seconds          | %10.1f |\n", seconds);
    printf("+------------------+------------+\n");
    printf("wrote %s/metrics.json, %s/log.jsonl, %s\n", out_dir.c_str(), out_dir.c_str(), save_path.c_str());
    model_free(model);
    return 0;
}
