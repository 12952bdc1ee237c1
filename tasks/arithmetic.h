// tasks/arithmetic.h: the arithmetic tasks in the setup of Lee et al., "Teaching Arithmetic
// to Small Transformers", for a causal decoder (docs/method.md, "The tasks and their G").
//
//   task  answer   operands (D digits)  operand pairs N   example string (length 2D + 8)
//   add3  a + b    a, b in 0..999       10^6              $123+456=9750$   579 -> 0579 -> 9750
//   mul2  a * b    a, b in 0..99        10^4              $12*34=8040$     408 -> 0408 -> 8040
//
// One string per example: '$', a zero-padded to D digits (most significant first), the op,
// b zero-padded, '=', the answer zero-padded to 4 digits and REVERSED (least significant
// first), '$'. Vocabulary (V = 14): ids 0..9 are the digits, 10 '+', 11 '*', 12 '=', 13 '$'.
// Causal LM on s of length L: T = L - 1, tokens = s[0..T-1], targets = s[1..T] (the next
// token at each position). The loss counts the positions that predict the answer: e + 0..4,
// e = 2D + 2 the index of '=' (4 answer digits, then the closing '$'); greedy decoding
// produces the same positions.
//
// Data: operand pair index = a * 10^D + b. Training pairs come from a file, or a fraction of
// all N pairs drawn by a seeded permutation; test pairs from a file, or the next pairs of that
// permutation. Test pairs never overlap training pairs.
// File format, one example per line, read leniently so that Lee et al.'s files work:
//   [$] a (1..D digits) op b (1..D digits) = reversed answer (1..4 digits) [$]
// e.g. "$12+34=64$", "012+034=6400", "7*8=65". A reversed answer shorter than 4 digits has
// zeros for its missing high digits. Blank lines and surrounding whitespace (CR too) are ignored.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include "tasks/task.h"  // Task, Metrics, EpochOrder

enum ArithOp { ARITH_ADD, ARITH_MUL };

constexpr int ARITH_VOCAB = 14;
constexpr const char* ARITH_SYMBOLS = "0123456789+*=$";  // (ARITH_VOCAB): token id -> character
constexpr int ARITH_ANSWER_DIGITS = 4;
constexpr int ARITH_DECODED = ARITH_ANSWER_DIGITS + 1;  // the answer digits and the closing '$'
// mixed into the data seed, so the split's permutation is not the training order's stream
constexpr uint64_t ARITH_SPLIT_SALT = 0x73706C6974ull;  // "split"

inline int arith_operand_digits(ArithOp op) { return op == ARITH_ADD ? 3 : 2; }
inline char arith_op_char(ArithOp op) { return op == ARITH_ADD ? '+' : '*'; }
inline int arith_answer(ArithOp op, int a, int b) { return op == ARITH_ADD ? a + b : a * b; }

inline int power_of_ten(int e) {
    int p = 1;
    while (e-- > 0) p *= 10;
    return p;
}

// the token id of a character of ARITH_SYMBOLS
inline int arith_token(char c) { return (int)(std::string(ARITH_SYMBOLS).find(c)); }

// v zero-padded to width digits, most significant first
inline std::string zero_padded(int v, int width) {
    std::string s = std::to_string(v);
    return std::string(width - (int)s.size(), '0') + s;
}

// "$123+456=9750$": the example string of a op b
inline std::string arithmetic_string(ArithOp op, int a, int b) {
    const int D = arith_operand_digits(op);
    if (a < 0 || b < 0 || a >= power_of_ten(D) || b >= power_of_ten(D))
        throw std::invalid_argument("arithmetic operands out of range: " + std::to_string(a) + ", " +
                                    std::to_string(b));
    std::string answer = zero_padded(arith_answer(op, a, b), ARITH_ANSWER_DIGITS);
    std::reverse(answer.begin(), answer.end());
    return "$" + zero_padded(a, D) + arith_op_char(op) + zero_padded(b, D) + "=" + answer + "$";
}

struct ArithmeticData {
    double data_frac = 0;     // fraction of all operand pairs to train on (used when train_file is empty)
    std::string train_file, test_file;
    int max_test = 10000;     // test examples drawn from the held-out pairs when there is no test_file
    uint64_t seed = 1;        // fixes which pairs are drawn
};

// The operand pairs of one train or test file, in file order, and the line each came from.
struct ArithmeticFile {
    std::string path;
    std::vector<int> pairs;  // (examples): a * 10^D + b
    std::vector<int> lines;  // (examples): 1-based line numbers
};

// One line of a data file (whitespace already stripped, not blank): its pair index a * 10^D + b.
inline int parse_arithmetic_line(ArithOp op, const std::string& text, const std::string& where) {
    const int D = arith_operand_digits(op);
    const char op_char = arith_op_char(op);
    auto bad = [&](const std::string& why) {
        throw std::runtime_error(where + ": " + why + " in '" + text + "' (the format is a" + op_char +
                                 "b=reversed answer, e.g. " + arithmetic_string(op, 12, 34) + ")");
    };
    size_t i = 0;
    auto read_number = [&](int max_digits, const std::string& what) {
        size_t start = i;
        while (i < text.size() && text[i] >= '0' && text[i] <= '9') i++;
        if (i == start) bad("no " + what);
        if ((int)(i - start) > max_digits) bad(what + " has more than " + std::to_string(max_digits) + " digits");
        return text.substr(start, i - start);
    };
    auto expect = [&](char c) {
        if (i >= text.size() || text[i] != c) bad(std::string("expected '") + c + "'");
        i++;
    };
    if (text[i] == '$') i++;
    std::string a = read_number(D, "first operand");
    expect(op_char);
    std::string b = read_number(D, "second operand");
    expect('=');
    std::string reversed = read_number(ARITH_ANSWER_DIGITS, "answer");
    if (i < text.size() && text[i] == '$') i++;
    if (i != text.size()) bad("unexpected '" + text.substr(i) + "' after the answer");

    int va = std::stoi(a), vb = std::stoi(b), answer = 0;
    for (int k = (int)reversed.size() - 1; k >= 0; k--) answer = answer * 10 + (reversed[k] - '0');
    int right = arith_answer(op, va, vb);
    if (answer != right) {
        std::string shown = std::to_string(va) + op_char + std::to_string(vb);
        throw std::runtime_error(where + ": " + text + " is wrong: the reversed answer " + reversed + " means " +
                                 std::to_string(answer) + ", but " + shown + " = " + std::to_string(right));
    }
    return va * power_of_ten(D) + vb;
}

// Reads a train or test file; throws on a missing or empty file, a bad line, a repeated pair.
inline ArithmeticFile read_arithmetic_file(ArithOp op, const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open arithmetic data file " + path);
    const int D = arith_operand_digits(op);
    std::vector<int> line_of(power_of_ten(2 * D), 0);  // (N): the line a pair was read on, 0 if not
    ArithmeticFile file{path, {}, {}};
    std::string line;
    for (int line_no = 1; std::getline(in, line); line_no++) {
        const char* space = " \t\r\n\f\v";
        size_t first = line.find_first_not_of(space);
        if (first == std::string::npos) continue;
        std::string text = line.substr(first, line.find_last_not_of(space) - first + 1);
        std::string where = path + " line " + std::to_string(line_no);
        int pair = parse_arithmetic_line(op, text, where);
        if (line_of[pair] != 0) {
            int a = pair / power_of_ten(D), b = pair % power_of_ten(D);
            throw std::runtime_error(where + " repeats the pair " + std::to_string(a) + arith_op_char(op) +
                                     std::to_string(b) + " of line " + std::to_string(line_of[pair]));
        }
        line_of[pair] = line_no;
        file.pairs.push_back(pair);
        file.lines.push_back(line_no);
    }
    if (file.pairs.empty()) throw std::runtime_error("arithmetic data file " + path + " has no examples");
    return file;
}

struct ArithmeticTask : Task {
    ArithOp op;
    int digits;      // D: digits of an operand
    int pairs;       // N = 10^(2D): all operand pairs
    int equals_pos;  // e = 2D + 2: the index of '=' in the string
    ArithmeticData data;
    std::vector<int> train_pairs, test_pairs;  // (train_size), (eval_size): a * 10^D + b, in the order drawn or read

    ArithmeticTask(const std::string& task_name, const ArithmeticData& data_) : data(data_) {
        if (task_name == "add3") op = ARITH_ADD;
        else if (task_name == "mul2") op = ARITH_MUL;
        else throw std::invalid_argument("unknown arithmetic task " + task_name);
        name = task_name;
        digits = arith_operand_digits(op);
        pairs = power_of_ten(2 * digits);
        equals_pos = 2 * digits + 2;
        vocab = ARITH_VOCAB;
        seq_len = 2 * digits + 7;  // the string's length 2D + 8, less one
        outputs = ARITH_VOCAB;
        next_token = true;
        split();
    }

    // The train and test pairs: read from the files, drawn from one seeded permutation of all
    // N pairs where there is no file (training pairs first, then the test pairs after them),
    // every drawn pair skipping the pairs already taken.
    void split() {
        std::vector<char> taken(pairs, 0);  // (N): 1 once a pair is a training or test pair
        ArithmeticFile test_file;
        if (!data.test_file.empty()) {
            test_file = read_arithmetic_file(op, data.test_file);
            test_pairs = test_file.pairs;
            for (int p : test_pairs) taken[p] = 1;
        }
        if (!data.train_file.empty()) {
            ArithmeticFile train_file = read_arithmetic_file(op, data.train_file);
            for (size_t i = 0; i < train_file.pairs.size(); i++)
                if (taken[train_file.pairs[i]]) throw overlap(train_file, i, test_file);
            train_pairs = train_file.pairs;
            for (int p : train_pairs) taken[p] = 1;
        }
        EpochOrder order(data.seed ^ ARITH_SPLIT_SALT, pairs);
        int64_t k = 0;  // the next permutation slot to look at
        auto draw = [&](std::vector<int>& into, int64_t count) {
            while ((int64_t)into.size() < count && k < pairs) {
                int p = order.example(k++);
                if (!taken[p]) {
                    taken[p] = 1;
                    into.push_back(p);
                }
            }
        };
        if (data.train_file.empty()) {
            if (!(data.data_frac > 0 && data.data_frac < 1))
                throw std::runtime_error(name + ": the data fraction must lie in (0, 1), not " +
                                         number(data.data_frac));
            int64_t count = std::llround(data.data_frac * pairs);
            if (count == 0)
                throw std::runtime_error(name + ": a data fraction of " + number(data.data_frac) + " of " +
                                         std::to_string(pairs) + " pairs is no training pair");
            draw(train_pairs, count);
            if ((int64_t)train_pairs.size() < count)
                throw std::runtime_error(name + ": a data fraction of " + number(data.data_frac) + " asks for " +
                                         std::to_string(count) + " training pairs, but only " +
                                         std::to_string(train_pairs.size()) + " are not in the test file " +
                                         data.test_file);
        }
        if (data.test_file.empty()) {
            if (data.max_test < 1) throw std::runtime_error(name + ": the test set size must be at least 1");
            draw(test_pairs, std::min<int64_t>(data.max_test, pairs - (int64_t)train_pairs.size()));
            if (test_pairs.empty())
                throw std::runtime_error(name + ": the training pairs leave no held-out pair to test on");
        }
    }

    static std::string number(double v) {
        std::ostringstream s;
        s << v;
        return s.str();
    }

    std::string pair_text(int pair) const {
        int base = power_of_ten(digits);
        return std::to_string(pair / base) + arith_op_char(op) + std::to_string(pair % base);
    }

    // the error for train pair i, which the test file holds too
    std::runtime_error overlap(const ArithmeticFile& train, size_t i, const ArithmeticFile& test) const {
        size_t j = std::find(test.pairs.begin(), test.pairs.end(), train.pairs[i]) - test.pairs.begin();
        return std::runtime_error("the pair " + pair_text(train.pairs[i]) + " is in both the training file " +
                                  train.path + " (line " + std::to_string(train.lines[i]) + ") and the test file " +
                                  test.path + " (line " + std::to_string(test.lines[j]) +
                                  "); test pairs must be held out");
    }

    // tokens (T) = s[0..T-1], targets (T) = s[1..T] of the pair's string s
    void example(int pair, int* tokens, float* targets) const {
        int base = power_of_ten(digits);
        std::string s = arithmetic_string(op, pair / base, pair % base);
        for (int t = 0; t < seq_len; t++) {
            tokens[t] = arith_token(s[t]);
            targets[t] = (float)arith_token(s[t + 1]);
        }
    }

    int train_size() const override { return (int)train_pairs.size(); }
    void train_example(int index, uint64_t, const ExampleSlot& out) const override {  // no draw: no choices
        example(train_pairs[index], out.tokens, out.targets);
    }
    int eval_size() const override { return (int)test_pairs.size(); }
    void eval_example(int index, const ExampleSlot& out) const override {
        example(test_pairs[index], out.tokens, out.targets);
    }
    // a few thousand decoded answers of 5 tokens: gathered, then evaluate()
    std::unique_ptr<Scorer> scorer() const override {
        return std::make_unique<GatheringScorer<ArithmeticTask>>(*this, ARITH_DECODED);
    }

    // (T): 1 at e .. e+4, the positions whose targets are the answer digits and the closing '$'
    std::vector<float> loss_positions() const override {
        std::vector<float> counted(seq_len, 0.0f);
        for (int p : decode_positions()) counted[p] = 1.0f;
        return counted;
    }
    std::vector<int> decode_positions() const override {
        std::vector<int> positions;
        for (int j = 0; j < ARITH_DECODED; j++) positions.push_back(equals_pos + j);
        return positions;
    }

    // outputs (eval_size, 5): the decoded ids at e .. e+4 (the answer's 4 reversed digits, '$').
    // seq_acc: all 5 right; digit_acc: the fraction of the 4 answer digits that are right.
    Metrics evaluate(const std::vector<float>& outputs) const {
        const int n = eval_size();
        if ((int64_t)outputs.size() != (int64_t)n * ARITH_DECODED)
            throw std::invalid_argument("arithmetic evaluate: expected " + std::to_string(n * ARITH_DECODED) +
                                        " decoded tokens, got " + std::to_string(outputs.size()));
        std::vector<int> tokens(seq_len);
        std::vector<float> targets(seq_len);
        double sequences = 0, answer_digits = 0;
        for (int i = 0; i < n; i++) {
            example(test_pairs[i], tokens.data(), targets.data());
            bool all = true;
            for (int j = 0; j < ARITH_DECODED; j++) {
                bool right = std::lround(outputs[i * ARITH_DECODED + j]) == std::lround(targets[equals_pos + j]);
                all = all && right;
                if (j < ARITH_ANSWER_DIGITS) answer_digits += right;
            }
            sequences += all;
        }
        return {{"seq_acc", sequences / n}, {"digit_acc", answer_digits / ((double)n * ARITH_ANSWER_DIGITS)}};
    }

    std::string token_text(int v) const override { return std::string(1, ARITH_SYMBOLS[v]); }

    std::string describe() const override {
        // drawn sets are fixed by the seed, which the startup table shows on its own row
        std::string train = data.train_file.empty()
            ? "train " + std::to_string(train_size()) + " of 10^" + std::to_string(2 * digits) + " pairs (" +
                  number(data.data_frac) + ")"
            : "train " + std::to_string(train_size()) + " from " + data.train_file;
        std::string test = data.test_file.empty() ? "test " + std::to_string(eval_size()) + " held out"
                                                  : "test " + std::to_string(eval_size()) + " from " + data.test_file;
        return train + ", " + test;
    }

    // G (T, T), row = query position, causal (no key after its query).
    // Position p predicts s[p+1]. Answer digit c_k (k = 0 least significant .. 3) is predicted
    // at q = e + k, which holds c_{k-1} ('=' for k = 0). In column addition
    //     c_k = (a_k + b_k + carry_k) mod 10,   carry_k = [c_{k-1} < a_{k-1} + b_{k-1}]
    // (c_{k-1} wrapped past 10 exactly when the carry out of digit k-1 is 1), so q's keys are:
    // operand digits k and k-1 of a and b (those that exist), itself (c_{k-1}) and q - 1.
    // Digit i of a sits at 1 + (D-1-i), of b at D + 2 + (D-1-i). The last position (holding
    // c_3, predicting '$') keys itself and q - 1. Prompt positions p < e keep a local causal
    // band: p-2, p-1, p. (mul2 gets the same, addition-shaped prior: docs/results.md measures it.)
    std::vector<float> structure() const override {
        const int T = seq_len, D = digits;
        std::vector<float> G(T * T, 0.0f);
        for (int p = 0; p < equals_pos; p++)
            for (int key = std::max(0, p - 2); key <= p; key++) G[p * T + key] = 1.0f;
        for (int k = 0; k < ARITH_DECODED; k++) {
            int q = equals_pos + k;
            G[q * T + q] = G[q * T + q - 1] = 1.0f;
            if (k == ARITH_ANSWER_DIGITS) break;  // the closing '$' reads no operand
            for (int i : {k, k - 1}) {
                if (i < 0 || i >= D) continue;
                G[q * T + 1 + (D - 1 - i)] = 1.0f;      // a_i
                G[q * T + D + 2 + (D - 1 - i)] = 1.0f;  // b_i
            }
        }
        return G;
    }
};
