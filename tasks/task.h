// tasks/task.h: what a task gives the trainer. Host-only C++: no CUDA
// and nothing of the model, so every task is testable anywhere.
//   - the shapes: vocabulary, sequence length T, readout (regression, classes or next token), outputs;
//     an image task's input is pixels (its image shape) where other tasks give token ids
//   - training examples by index and draw (the random choices of one use of an example, such as
//     an image's augmentation), and the order they come in (seeded shuffled epochs)
//   - evaluation examples by index, and the metrics computed from the model's outputs, streamed
//     batch by batch (a Scorer), so that no evaluation holds every output at once
//   - next-token tasks: which positions the loss counts, and which greedy decoding produces
//   - its interaction structure G (T x T, 0/1), for the mask init, and the edges of G its target needs
//   - the value of each token that stands for a number, for --encoding scalar
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <algorithm>
#include <utility>
#include <vector>

// Named metric values, in the order they are reported.
using Metrics = std::vector<std::pair<std::string, double>>;

// Where one example goes: token ids for token tasks, or the pixels for image tasks; and its
// targets (Task::targets_per_example() floats).
struct ExampleSlot {
    int* tokens = nullptr;     // (seq_len) token tasks
    float* pixels = nullptr;   // (channels, height, width) image tasks: normalised, channel-first
    float* targets = nullptr;  // (targets_per_example())
};

// One step of splitmix64 (Steele, Lea, Flood 2014) from state x: a bijection of 64-bit words
// that scatters nearby inputs over the whole range.
inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// The draw of row `row` of the batch of optimizer step `step` (0-based), under the run's seed
// (Task::train_example): a pure function of the three, so a resumed run draws what the
// uninterrupted one drew.
inline uint64_t example_draw(uint64_t seed, int64_t step, int row) {
    return splitmix64(splitmix64(splitmix64(seed) ^ (uint64_t)step) ^ (uint64_t)row);
}

// The class a row of logits (classes) picks: the first of equal maxima, as torch.argmax.
inline int top_class(const float* row, int classes) {
    return (int)(std::max_element(row, row + classes) - row);
}

// The slot of a token example (no pixels).
inline ExampleSlot token_slot(int* tokens, float* targets) { return {tokens, nullptr, targets}; }

// An image task's input: channels x height x width floats per example.
struct ImageShape {
    int channels = 0, height = 0, width = 0;
    int floats() const { return channels * height * width; }
};

struct Task;

// One edge of a prior's structure G: its entries, (query, key) pairs (both ways for a link)
using PriorEdge = std::vector<std::pair<int, int>>;

// The evaluation's consumer of the model's outputs: given them batch by batch, in the order of
// the evaluation examples, it keeps what its metrics need (counts, sums) and not the outputs.
struct Scorer {
    virtual ~Scorer() = default;
    // outputs (rows, per example) of evaluation examples first .. first + rows - 1: the head's
    // outputs, or for next-token tasks the greedily decoded token ids (as float)
    virtual void add(int first, int rows, const float* outputs) = 0;
    virtual Metrics metrics() const = 0;
};

struct Task {
    std::string name;
    int vocab = 0;
    int seq_len = 0;
    ImageShape image;         // image tasks: the input's shape; all zero for token tasks
    int outputs = 1;          // 1: scalar regression (MSE); > 1: classes (cross-entropy); next token: vocab
    bool next_token = false;  // a causal language model: a target token at every position
    virtual ~Task() = default;
    int targets_per_example() const { return next_token ? seq_len : 1; }
    bool image_input() const { return image.channels > 0; }

    virtual int train_size() const = 0;
    // Training example `index` into out: tokens (seq_len) or pixels, and targets: a value, a
    // class id, or under next_token the token that follows each position, all stored as float.
    // draw: a random key for this use of the example (from the seed, the step and the row:
    // training_batch), so that what it picks, an augmentation, is a pure function of it.
    virtual void train_example(int index, uint64_t draw, const ExampleSlot& out) const = 0;
    virtual int eval_size() const = 0;
    virtual void eval_example(int index, const ExampleSlot& out) const = 0;
    // A fresh Scorer for one pass over the evaluation set.
    virtual std::unique_ptr<Scorer> scorer() const = 0;
    // next_token: (seq_len) 1 where a position's prediction counts in the training loss (the
    // answer), 0 where it does not (the prompt)
    virtual std::vector<float> loss_positions() const { return {}; }
    // next_token: the positions whose predictions greedy decoding produces, ascending; the
    // prediction at position p becomes the input at p + 1
    virtual std::vector<int> decode_positions() const { return {}; }
    // how a token is printed (G's labels): its id, unless the task has a symbol for it
    virtual std::string token_text(int v) const { return std::to_string(v); }
    // the data set for the startup table (sizes, fractions, files; a Boolean task's target), a row a
    // line ('\n' between lines); may be empty
    virtual std::string describe() const { return ""; }
    // G (seq_len, seq_len) of 0/1: which query may attend to which key under the prior
    virtual std::vector<float> structure() const = 0;
    // The edges of G that the target needs, which --prior-drop removes (prior/wrong_prior.h):
    // each edge its entries of G, as (query, key) pairs; empty where the task defines none
    virtual std::vector<PriorEdge> needed_edges() const { return {}; }
    // (vocab): the number a token stands for (a bit: -1 or +1), 0 for a token that has no value
    // (CLS, a letter). --encoding scalar embeds a valued token as value * a learned vector.
    virtual std::vector<float> token_values() const { return std::vector<float>(vocab, 0.0f); }
};

// A Scorer for the tasks whose metrics need every output at once (the Boolean tasks compare the
// whole cube with the min-degree interpolator): it gathers the outputs and hands them to
// evaluate(all outputs) at the end. Fine for a few thousand small outputs; tasks with large
// evaluation sets count as they go instead.
template <typename TaskType>
struct GatheringScorer : Scorer {
    const TaskType& task;
    int per_example;
    std::vector<float> outputs;  // (eval_size, per_example)
    GatheringScorer(const TaskType& t, int per) : task(t), per_example(per) {
        outputs.assign((size_t)t.eval_size() * per, 0.0f);
    }
    void add(int first, int rows, const float* out) override {
        std::copy(out, out + (size_t)rows * per_example, outputs.begin() + (size_t)first * per_example);
    }
    Metrics metrics() const override { return task.evaluate(outputs); }
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
