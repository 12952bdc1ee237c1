// tasks/language.h: a causal language model on a text's tokens (host only, like every task).
// The data is a folder that data/prepare_text.py wrote: train.bin, val.bin and tokenizer.bin
// (tasks/token_file.h). An example is a window of T + 1 consecutive tokens: the first T are the
// input, the last T the targets, so every position predicts the token after it.
//   - training windows: the training tokens are cut into chunks of T; the seeded epoch order
//     (EpochOrder) picks a chunk, the row's draw a phase 0 .. T-1 inside it, so window k starts
//     at chunk·T + phase. An epoch sees every chunk once, never from the same place twice in a
//     row, and the window of (seed, step, row) is a pure function of the three: --resume draws
//     what the uninterrupted run drew.
//   - evaluation windows: fixed, non-overlapping, starting at multiples of T in val.bin; at
//     most --eval-windows of them, spread evenly over the file when there are more. Every
//     target of a window counts (those near its start see little context, as in any windowed
//     evaluation).
//   - metrics: val_loss (nats per token), perplexity = e^val_loss, and bits per byte =
//     Σ NLL / (ln 2 · the UTF-8 bytes the predicted tokens decode to): the cost of the text
//     itself, comparable across tokenizers
//   - G, the prior's structure: a causal window, query i may attend to key j when
//     0 <= i - j < w (--mask-window w)
#pragma once
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>
#include "tasks/task.h"        // Task, Scorer, ExampleSlot
#include "tasks/token_file.h"  // TokenFile, Vocabulary

struct LanguageSettings {
    int seq_len = 128;       // T
    int window = 16;         // G's causal window w
    int eval_windows = 1024;  // the most evaluation windows
};

// Sums the per-token losses of the evaluation windows: the outputs are each window's
// per-position NLL (rows, T); target_bytes (eval_size) the bytes each window's targets decode to.
struct LanguageScorer : Scorer {
    const std::vector<int64_t>& target_bytes;
    int T;
    double nll = 0;
    int64_t tokens = 0, bytes = 0;
    LanguageScorer(const std::vector<int64_t>& b, int t) : target_bytes(b), T(t) {}
    void add(int first, int rows, const float* losses) override {
        for (int r = 0; r < rows; r++) {
            for (int t = 0; t < T; t++) nll += losses[(size_t)r * T + t];  // in order: reproducible
            tokens += T;
            bytes += target_bytes[first + r];
        }
    }
    Metrics metrics() const override {
        const double loss = tokens ? nll / tokens : 0;
        return {{"val_loss", loss},
                {"perplexity", std::exp(loss)},
                {"bits_per_byte", bytes ? nll / (std::log(2.0) * bytes) : 0},
                {"eval_tokens", (double)tokens}};
    }
};

struct LanguageTask : Task {
    std::string data_dir;
    LanguageSettings settings;
    TokenFile train, val;
    Vocabulary vocabulary;
    int64_t chunks = 0;                 // training chunks of T tokens
    std::vector<int64_t> eval_start;    // (eval_size) where each evaluation window starts in val
    std::vector<int64_t> target_bytes;  // (eval_size) the bytes of each window's T targets

    LanguageTask(const std::string& dir, const LanguageSettings& s) : data_dir(dir), settings(s) {
        name = "lm";
        const std::string folder = dir.empty() || dir.back() == '/' ? dir : dir + "/";
        vocabulary = read_vocabulary(folder + "tokenizer.bin");
        train = open_token_file(folder + "train.bin");
        val = open_token_file(folder + "val.bin");
        const int T = s.seq_len;
        for (const TokenFile* f : {&train, &val})
            if (f->vocab != vocabulary.size())
                throw std::runtime_error(f->path + " has the vocabulary size " + std::to_string(f->vocab) + ", " +
                                         vocabulary.path + " " + std::to_string(vocabulary.size()));
        if (T < 1) throw std::runtime_error("--seq-len must be at least 1");
        if (s.window < 1) throw std::runtime_error("--mask-window must be at least 1");
        // chunk c's window starts at c·T + phase, phase < T, and needs T + 1 tokens
        chunks = (train.count - 1) / T - 1;
        if (chunks < 1)
            throw std::runtime_error(train.path + " has " + std::to_string(train.count) + " tokens, too few for " +
                                     "training windows of T + 1 = " + std::to_string(T + 1) + " (it needs 2T + 1)");
        if (chunks > INT32_MAX) throw std::runtime_error(train.path + ": more than 2^31 chunks of --seq-len tokens");
        const int64_t windows = (val.count - 1) / T;
        if (windows < 1)
            throw std::runtime_error(val.path + " has " + std::to_string(val.count) + " tokens, shorter than one " +
                                     "window of T + 1 = " + std::to_string(T + 1));
        const int64_t n = std::min<int64_t>(windows, s.eval_windows);
        for (int64_t k = 0; k < n; k++) {
            const int64_t start = (k * windows / n) * T;
            int64_t b = 0;
            for (int t = 1; t <= T; t++) b += (int64_t)vocabulary.bytes[val[start + t]].size();
            eval_start.push_back(start);
            target_bytes.push_back(b);
        }
        vocab = vocabulary.size();
        seq_len = T;
        outputs = vocab;
        next_token = true;
    }

    // window [start, start + T] of a file into the slot: tokens start .. start+T-1, targets one on
    void window(const TokenFile& f, int64_t start, const ExampleSlot& out) const {
        for (int t = 0; t < seq_len; t++) {
            out.tokens[t] = f[start + t];
            out.targets[t] = (float)f[start + t + 1];
        }
    }

    int train_size() const override { return (int)chunks; }
    void train_example(int index, uint64_t draw, const ExampleSlot& out) const override {
        window(train, (int64_t)index * seq_len + (int64_t)(draw % (uint64_t)seq_len), out);
    }
    int eval_size() const override { return (int)eval_start.size(); }
    void eval_example(int index, const ExampleSlot& out) const override { window(val, eval_start[index], out); }
    std::unique_ptr<Scorer> scorer() const override {
        return std::make_unique<LanguageScorer>(target_bytes, seq_len);
    }
    std::vector<float> loss_positions() const override { return std::vector<float>(seq_len, 1.0f); }

    // a token as text for the startup table: its bytes, with the invisible ones escaped
    std::string token_text(int v) const override {
        std::string shown;
        for (unsigned char ch : vocabulary.bytes[v]) {
            if (ch == '\n') shown += "\\n";
            else if (ch < 32 || ch == 127) shown += "\\x" + std::string(1, "0123456789abcdef"[ch >> 4]) +
                                                     "0123456789abcdef"[ch & 15];
            else shown += (char)ch;
        }
        return shown;
    }
    std::string describe() const override {
        char buf[256];
        snprintf(buf, sizeof buf, "%s V %d: train %lld tokens (%.2f bytes each), val %lld",
                 vocabulary.kind == 1 ? "BPE" : "bytes", vocab, (long long)train.count,
                 train.count ? (double)train.text_bytes / train.count : 0.0, (long long)val.count);
        return buf;
    }

    std::vector<float> structure() const override { return causal_window(seq_len, settings.window); }

    // G of a causal window of w keys: query i sees keys i - w + 1 .. i. (T,T)
    static std::vector<float> causal_window(int T, int w) {
        std::vector<float> G((size_t)T * T, 0.0f);
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) G[(size_t)i * T + j] = i - j >= 0 && i - j < w ? 1.0f : 0.0f;
        return G;
    }
};
