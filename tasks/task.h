// tasks/task.h: what a task gives the trainer. Host-only C++: no CUDA
// and nothing of the model, so every task is testable anywhere.
//   - the shapes: vocabulary, sequence length T, head (regression, classes or next token), outputs
//   - training examples by index, and the order they come in (seeded shuffled epochs)
//   - evaluation examples by index, and the metrics computed from the model's outputs
//   - next-token tasks: which positions the loss counts, and which greedy decoding produces
//   - its interaction structure G (T x T, 0/1), for the mask init
//   - the value of each token that stands for a number, for --encoding scalar
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

// Named metric values, in the order they are reported.
using Metrics = std::vector<std::pair<std::string, double>>;

struct Task {
    std::string name;
    int vocab = 0;
    int seq_len = 0;
    int outputs = 1;          // 1: scalar regression (MSE); > 1: classes (cross-entropy); next token: vocab
    bool next_token = false;  // a causal language model: a target token at every position
    virtual ~Task() = default;
    int targets_per_example() const { return next_token ? seq_len : 1; }

    virtual int train_size() const = 0;
    // tokens (seq_len), targets (targets_per_example()): a value, a class id, or under
    // next_token the token that follows each position, all stored as float
    virtual void train_example(int index, int* tokens, float* targets) const = 0;
    virtual int eval_size() const = 0;
    virtual void eval_example(int index, int* tokens, float* targets) const = 0;
    // outputs: the model's head on every evaluation example, in order, (eval_size, outputs);
    // next_token: the greedily decoded token ids, (eval_size, decode_positions().size())
    virtual Metrics evaluate(const std::vector<float>& outputs) const = 0;
    // next_token: (seq_len) 1 where a position's prediction counts in the training loss (the
    // answer), 0 where it does not (the prompt)
    virtual std::vector<float> loss_positions() const { return {}; }
    // next_token: the positions whose predictions greedy decoding produces, ascending; the
    // prediction at position p becomes the input at p + 1
    virtual std::vector<int> decode_positions() const { return {}; }
    // how a token is printed (G's labels): its id, unless the task has a symbol for it
    virtual std::string token_text(int v) const { return std::to_string(v); }
    // one line on the data set for the startup table (sizes, fractions, files); may be empty
    virtual std::string describe() const { return ""; }
    // G (seq_len, seq_len) of 0/1: which query may attend to which key under the prior
    virtual std::vector<float> structure() const = 0;
    // (vocab): the number a token stands for (a bit: -1 or +1), 0 for a token that has no value
    // (CLS, a letter). --encoding scalar embeds a valued token as value * a learned vector.
    virtual std::vector<float> token_values() const { return std::vector<float>(vocab, 0.0f); }
};

// The order of training examples: epoch e is a permutation of 0..N-1 drawn from a generator
// seeded by (seed, e). The k-th example of the whole run is a pure function of (seed, k), so
// resuming at step s needs nothing but s, and a seed fixes the data order.
struct EpochOrder {
    uint64_t seed;
    int n;
    int64_t epoch = -1;
    std::vector<int> perm;

    EpochOrder(uint64_t seed_, int n_) : seed(seed_), n(n_) {}

    int example(int64_t k) {
        int64_t e = k / n;
        if (e != epoch) {
            epoch = e;
            perm.resize(n);
            uint64_t s = seed * 0x9E3779B97F4A7C15ull ^ (uint64_t)(e + 1) * 0xBF58476D1CE4E5B9ull;
            for (int i = 0; i < n; i++) perm[i] = i;
            for (int i = n - 1; i > 0; i--) {  // Fisher-Yates with a splitmix64 stream
                s += 0x9E3779B97F4A7C15ull;
                uint64_t z = s;
                z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
                z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
                z ^= z >> 31;
                int j = (int)(z % (uint64_t)(i + 1));
                std::swap(perm[i], perm[j]);
            }
        }
        return perm[k % n];
    }
};
