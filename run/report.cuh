// run/report.cuh: what a run prints and what it writes into its folder, besides the pictures:
//   - the progress line every --log-every steps (loss, ms/step, steps/s, ETA);
//   - each evaluation as one line on stdout and one JSON object in log.jsonl;
//   - at the end, metrics.json (the final evaluation and how the run was made) and the final
//     table. Scripts and tables read the JSON files, never stdout.
#pragma once
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include "layers/device.cuh"     // DEVICE_CPU, DEVICE_GPU, Device, cpu_threads, cpu_vector_bits
#include "layers/kernels.h"      // Kernels
#include "run/atomic_file.h"   // write_file
#include "run/evaluate.cuh"    // Evaluation

template <typename... Args>
inline std::string fmt(const char* format, Args... args) {
    char buf[256];
    snprintf(buf, sizeof buf, format, args...);
    return buf;
}

inline std::string format_duration(double seconds) {
    int s = (int)(seconds + 0.5);
    if (s >= 3600) return fmt("%dh%02dm", s / 3600, s / 60 % 60);
    if (s >= 60) return fmt("%dm%02ds", s / 60, s % 60);
    return fmt("%ds", s);
}

// The command line as typed, words joined by spaces
inline std::string command_line(int argc, char** argv) {
    std::string line = argv[0];
    for (int i = 1; i < argc; i++) line += std::string(" ") + argv[i];
    return line;
}

// ----------------------------------------------------------------------------
// evaluations: a line on stdout and a row of log.jsonl

// a list with NaN (not defined for that layer) as null
inline nlohmann::ordered_json layer_list(const std::vector<double>& values) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (double v : values) list.push_back(std::isnan(v) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(v));
    return list;
}

inline nlohmann::ordered_json evaluation_json(const Evaluation& ev) {
    nlohmann::ordered_json j;
    j["eval_loss"] = ev.loss;
    for (const auto& [key, value] : ev.metrics) j[key] = value;
    j["prior_mass"] = ev.prior_mass;
    if (!ev.prior_mass_true.empty()) j["prior_mass_true"] = ev.prior_mass_true;  // a wrong G's runs only
    const Persistence& p = ev.persistence;
    bool has_mask = !p.mask_drift.empty() && !std::isnan(p.mask_drift[0]);
    j["mask_drift"] = has_mask ? layer_list(p.mask_drift) : nlohmann::ordered_json(nullptr);
    j["qk_cosine"] = layer_list(p.qk_cosine);
    j["grad_norm_mask"] = has_mask ? layer_list(p.grad_norm_mask) : nlohmann::ordered_json(nullptr);
    j["grad_norm_qk"] = layer_list(p.grad_norm_qk);
    return j;
}

inline void print_list(const char* name, const std::vector<double>& values, const char* format) {
    printf(" | %s", name);
    for (double v : values) std::isnan(v) ? printf(" -") : printf(format, v);
}

// one evaluation as a line on stdout
inline void print_evaluation(int64_t step, const Evaluation& ev) {
    printf("eval  step %6lld | loss %.5f |", (long long)step, ev.loss);
    for (const auto& [key, value] : ev.metrics) printf(" %s %.4f", key.c_str(), value);
    print_list("prior_mass", ev.prior_mass, " %.3f");
    if (!ev.prior_mass_true.empty()) print_list("prior_mass_true", ev.prior_mass_true, " %.3f");
    print_list("mask_drift", ev.persistence.mask_drift, " %.3f");
    print_list("qk_cosine", ev.persistence.qk_cosine, " %.3f");
    printf("\n");
    fflush(stdout);
}

// log.jsonl in the run folder: started afresh, or, when the run resumes at start_step, kept up to
// that step and appended to. Rows past start_step are dropped: a run killed after an evaluation
// but before its next checkpoint does that evaluation again, and its row must not appear twice.
// A row that cannot be written (a full disk) stops the run with one line (InputError); the
// checkpoint is untouched, and --continue drops a row cut short, as after a kill.
struct RunLog {
    std::string path;
    FILE* file = nullptr;  // open for appending

    RunLog(const std::string& dir, bool resumed, int64_t start_step) : path(dir + "/log.jsonl") {
        if (resumed) {
            std::ifstream old(path);
            std::string line, kept;
            while (std::getline(old, line)) {
                if (old.eof()) break;  // a last line without its newline: a write cut short by a kill
                const nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
                if (row.is_discarded() || !row.contains("step") || !row["step"].is_number_integer())
                    fail("%s: a line is not a log row: %.60s", path.c_str(), line.c_str());
                if (row["step"].get<int64_t>() <= start_step) kept += line + "\n";
            }
            write_file(path, kept);
        }
        file = fopen(path.c_str(), resumed ? "ab" : "wb");
        if (!file) fail("cannot write %s: %s", path.c_str(), strerror(errno));
    }
    ~RunLog() { fclose(file); }
    RunLog(const RunLog&) = delete;
    RunLog& operator=(const RunLog&) = delete;

    // One evaluation: its line on stdout, its row in log.jsonl. train_loss: the loss of the
    // last training batch, NaN when there is none yet (step 0; written as null).
    void evaluation(int64_t step, double train_loss, const Evaluation& ev) {
        print_evaluation(step, ev);
        nlohmann::ordered_json row = {{"step", step}, {"loss", nullptr}};
        if (!std::isnan(train_loss)) row["loss"] = (float)train_loss;
        row.update(evaluation_json(ev));
        const std::string line = row.dump() + "\n";
        if (fwrite(line.data(), 1, line.size(), file) != line.size() || fflush(file) != 0)
            fail("cannot write %s: %s", path.c_str(), strerror(errno));
    }
};

// ----------------------------------------------------------------------------
// progress: a line every `every` steps with the training speed of the steps since the last
// line: the forward, backward and update passes only. Evaluations restart the clock, and on
// the CPU the time spent making batches is left out (exclude), so the speed is the model's.

struct Progress {
    int64_t every, steps;
    Device dev;
    int items_per_step = 0;   // images (the batch) or tokens (batch x T) per step, to print their rate too
    const char* items = "";   // "images" or "tokens"
    double window_start = now_seconds();
    double window_excluded = 0;  // seconds of the window that were not training
    int64_t window_steps = 0;

    // Host time that was not training (making a batch). On the GPU it is not left out: the
    // previous step's kernels are still running then, so that time is the GPU's too.
    void exclude(double seconds) {
        if (dev == DEVICE_CPU) window_excluded += seconds;
    }

    bool due(int64_t done) const { return done % every == 0 || done == steps; }  // a progress line after step done

    void step_done(int64_t done, float loss) {
        window_steps++;
        if (!due(done)) return;
        device_sync(dev);
        double now = now_seconds(), ms = 1000 * (now - window_start - window_excluded) / window_steps;
        printf("step %6lld/%lld | loss %.6f | %7.2f ms/step | %7.1f steps/s", (long long)done, (long long)steps, loss,
               ms, 1000 / ms);
        if (items_per_step > 0) printf(" | %8.0f %s/s", items_per_step * 1000 / ms, items);
        printf(" | ETA %s\n", format_duration((steps - done) * ms / 1000).c_str());
        fflush(stdout);
        restart();
    }
    void restart() {
        window_start = now_seconds();
        window_excluded = 0;
        window_steps = 0;
    }
};

// ----------------------------------------------------------------------------
// the end of a run

// metrics.json's content: `about` (what was run and how) followed by the final evaluation.
inline nlohmann::ordered_json metrics_json(nlohmann::ordered_json about, const Evaluation& ev, Device dev,
                                           const Kernels& kernels, const std::string& command) {
    about["command"] = command;
    about["git_commit"] = MASKPRIOR_GIT_COMMIT;
    about["device"] = device_name(dev);
    if (dev == DEVICE_CPU) about["cpu_kernel"] = kernels.cpu;
    if (dev == DEVICE_GPU) {
        about["attention_kernel"] = kernels.attention;
        about["matmul_kernel"] = kernels.matmul;
        about["fast_kernels"] = kernels.fast_layers;
        about["cuda_graph"] = kernels.graph;
    }
    about["cpu_vector_bits"] = cpu_vector_bits();
    about["threads"] = cpu_threads();
    about.update(evaluation_json(ev));
    return about;
}

// metrics.json, written to a temporary file and renamed, so that a reader never sees half of it
inline void write_metrics(const std::string& dir, const nlohmann::ordered_json& metrics) {
    write_file(dir + "/metrics.json", metrics.dump(2) + "\n");
}

inline void print_final_table(const Config& c, const Evaluation& ev, double seconds) {
    printf("+------------------+------------+\n");
    printf("| final metric     | value      |\n");
    printf("+------------------+------------+\n");
    for (const auto& [key, value] : ev.metrics) printf("| %-16s | %10.4f |\n", key.c_str(), value);
    const Persistence& pe = ev.persistence;
    for (int l = 0; l < c.L; l++) {
        printf("| prior_mass[%d]    | %10.4f |\n", l, ev.prior_mass[l]);
        if (!ev.prior_mass_true.empty()) printf("|   on true G[%d]   | %10.4f |\n", l, ev.prior_mass_true[l]);
        if (c.layer_has_mask(l)) printf("| mask_drift[%d]    | %10.4f |\n", l, pe.mask_drift[l]);
        printf("| qk_cosine[%d]     | %10.4f |\n", l, pe.qk_cosine[l]);
    }
    printf("| seconds          | %10.1f |\n", seconds);
    printf("+------------------+------------+\n");
}
