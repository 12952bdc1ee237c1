// main.cu: the maskprior program. Command line, task choice, the training loop, evaluation
// and reports. No math lives here: the model, its layers and the tasks do that.
#include <sys/stat.h>
#include <cerrno>
#include <fstream>
#include <memory>
#include "checkpoint.cuh"
#include "init.cuh"
#include "options.h"
#include "tasks/boolean.h"

static std::unique_ptr<Task> make_task(const std::string& name) {
    if (name == "2parity" || name == "maj3" || name == "cyclic3") return std::make_unique<BooleanTask>(name);
    fail("unknown task '%s' (choose 2parity, maj3 or cyclic3)", name.c_str());
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
    std::vector<int> tokens;     // (rows, T)
    std::vector<float> targets;  // (rows)
    int rows = 0;
};

// The training batch of step `step`: examples step*B .. step*B+B-1 of the seeded epoch order.
static void training_batch(const Task& task, EpochOrder& order, int64_t step, int B, Batch& batch) {
    batch.rows = B;
    batch.tokens.resize((size_t)B * task.seq_len);
    batch.targets.resize(B);
    for (int b = 0; b < B; b++)
        task.train_example(order.example(step * B + b), &batch.tokens[(size_t)b * task.seq_len], &batch.targets[b]);
}

// ----------------------------------------------------------------------------
// evaluation: the model's outputs on every evaluation example, the task's metrics, and the
// prior mass of each layer (mean attention on G-allowed keys) over the same examples

struct Evaluation {
    Metrics metrics;
    std::vector<double> prior_mass;  // (L)
    double loss = 0;
};

static Evaluation evaluate(Model& model, const Task& task, const std::vector<float>& G) {
    const Config& c = model.cfg;
    const int n = task.eval_size();
    std::vector<float> outputs((size_t)n * c.OUT);
    std::vector<float> att((size_t)model.B * c.NH * c.T * c.T);
    Evaluation ev;
    ev.prior_mass.assign(c.L, 0.0);
    Batch batch;
    batch.tokens.resize((size_t)model.B * c.T);
    batch.targets.resize(model.B);
    for (int start = 0; start < n; start += model.B) {
        int rows = std::min(model.B, n - start);
        for (int r = 0; r < rows; r++)
            task.eval_example(start + r, &batch.tokens[(size_t)r * c.T], &batch.targets[r]);
        ev.loss += model_forward(model, batch.tokens.data(), batch.targets.data(), rows) * rows;
        Activations a = model_activations(model, rows);
        buffer_copy(outputs.data() + (size_t)start * c.OUT, DEVICE_CPU, a.logits, model.dev, (size_t)rows * c.OUT);
        for (int l = 0; l < c.L; l++) {
            size_t per_layer = (size_t)rows * c.NH * c.T * c.T;
            buffer_copy(att.data(), DEVICE_CPU, a.att + l * per_layer, model.dev, per_layer);
            ev.prior_mass[l] += attention_prior_mass(att.data(), G.data(), rows, c.NH, c.T) * rows;
        }
    }
    for (double& m : ev.prior_mass) m /= n;
    ev.loss /= n;
    ev.metrics = task.evaluate(outputs);
    return ev;
}

static nlohmann::ordered_json evaluation_json(const Evaluation& ev) {
    nlohmann::ordered_json j;
    j["eval_loss"] = ev.loss;
    for (const auto& [key, value] : ev.metrics) j[key] = value;
    j["prior_mass"] = ev.prior_mass;
    return j;
}

static void print_evaluation(int step, const Evaluation& ev) {
    printf("eval  step %6d | loss %.5f |", step, ev.loss);
    for (const auto& [key, value] : ev.metrics) printf(" %s %.4f", key.c_str(), value);
    printf(" | prior_mass");
    for (double m : ev.prior_mass) printf(" %.3f", m);
    printf("\n");
    fflush(stdout);
}

// ----------------------------------------------------------------------------
// the program

int main(int argc, char** argv) {
    Options opt = parse_options(argc, argv);
    std::unique_ptr<Task> task = make_task(opt.task);

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
    cfg.head = task->outputs == 1 ? HEAD_REGRESSION : HEAD_CLASS;
    cfg.mask_heads = opt.init == "mask" ? (opt.mask_per_head ? cfg.NH : 1) : 0;
    cfg.causal = opt.causal;
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
        float y;
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

    const std::vector<float> G = task->structure();
    {
        std::vector<float> host(model.num_params);
        Rng rng(opt.seed);
        init_default(cfg, host.data(), rng);
        if (opt.init == "mask") init_mask_from_structure(cfg, host.data(), G, opt.mask_c);
        buffer_copy(model.params_mem, dev, host.data(), DEVICE_CPU, model.num_params);
    }
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
    Batch batch;
    if (!opt.dump_state.empty()) {  // one forward/backward on the first batch, written out, then stop
        training_batch(*task, order, start_step, B, batch);
        float loss = model_forward(model, batch.tokens.data(), batch.targets.data(), B);
        model_zero_grad(model);
        model_backward(model, B);
        run_meta["step"] = std::to_string(start_step);
        dump_state(opt.dump_state, model, batch.tokens, batch.targets, B, loss, run_meta);
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
    auto fmt = [](const char* f, auto... args) {
        char buf[256];
        snprintf(buf, sizeof buf, f, args...);
        return std::string(buf);
    };
    const char* mask_kind = cfg.mask_heads == 0 ? "" : cfg.mask_heads == 1 ? ", mask shared by heads" : ", mask per head";
    const std::string rule = "+------------------+------------------------------------------------------+";
    puts(rule.c_str());
    row("task", fmt("%s (train %d, eval %d)", opt.task.c_str(), train_n, task->eval_size()));
    row("init", fmt("%s%s%s", opt.init.c_str(), mask_kind, cfg.mask_heads ? fmt(", c = %g", opt.mask_c).c_str() : ""));
    row("model", fmt("C %d L %d NH %d HS %d MLP %d T %d%s", cfg.C, cfg.L, cfg.NH, cfg.HS, cfg.MLP, cfg.T,
                     cfg.causal ? " causal" : ""));
    row("parameters", fmt("%zu", model.num_params));
    row("encoding, loss", fmt("%s, %s", opt.encoding.c_str(), opt.loss.c_str()));
    row("optimizer", fmt("%s lr %g wd %g mask wd %g", opt.optimizer == "adamw" ? "AdamW" : "Adam+L2", opt.lr,
                         opt.wd, opt.mask_wd));
    row("batch, steps", fmt("%d, %lld (from %lld)", B, (long long)steps, (long long)start_step));
    row("seed", fmt("%llu", (unsigned long long)opt.seed));
    row("memory", fmt("params+grads+adam %.2f MB, activations %.2f MB", 4.0 * model.num_params * sizeof(float) / 1e6,
                      2.0 * model.num_acts * sizeof(float) / 1e6));
    row("run folder", out_dir);
    puts(rule.c_str());
    fflush(stdout);

    // training
    const int64_t log_every = opt.log_every > 0 ? opt.log_every : std::max<int64_t>(1, steps / 10);
    const int64_t eval_every = opt.eval_every > 0 ? opt.eval_every : steps;
    double t_start = now_seconds(), t_window = t_start;
    int64_t window_steps = 0;
    float loss = 0;
    Evaluation ev;
    if (start_step == 0) {
        ev = evaluate(model, *task, G);
        print_evaluation(0, ev);
        nlohmann::ordered_json j = {{"step", 0}, {"loss", nullptr}};
        j.update(evaluation_json(ev));
        log << j.dump() << "\n" << std::flush;
        t_window = now_seconds();
    }
    for (int64_t step = start_step; step < steps; step++) {
        training_batch(*task, order, step, B, batch);
        loss = model_forward(model, batch.tokens.data(), batch.targets.data(), B);
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
            ev = evaluate(model, *task, G);
            print_evaluation((int)done, ev);
            nlohmann::ordered_json j = {{"step", done}, {"loss", loss}};
            j.update(evaluation_json(ev));
            log << j.dump() << "\n" << std::flush;
            t_window = now_seconds();  // evaluation time is not training time
            window_steps = 0;
        }
    }
    if (start_step == steps) {  // resumed a finished run: nothing trained, evaluate what is there
        ev = evaluate(model, *task, G);
        print_evaluation((int)steps, ev);
    }
    double seconds = now_seconds() - t_start;

    run_meta["step"] = std::to_string(steps);
    checkpoint_save(save_path, model, run_meta);

    nlohmann::ordered_json metrics = {{"task", opt.task}, {"init", opt.init}, {"seed", opt.seed}, {"optimizer", opt.optimizer},
                                      {"encoding", opt.encoding}, {"loss", opt.loss},
                                      {"steps", steps},   {"device", device_name(dev)}, {"seconds", seconds},
                                      {"final_loss", loss}};
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
    for (int l = 0; l < cfg.L; l++) printf("| prior_mass[%d]    | %10.4f |\n", l, ev.prior_mass[l]);
    printf("| seconds          | %10.1f |\n", seconds);
    printf("+------------------+------------+\n");
    printf("wrote %s/metrics.json, %s/log.jsonl, %s\n", out_dir.c_str(), out_dir.c_str(), save_path.c_str());
    model_free(model);
    return 0;
}
