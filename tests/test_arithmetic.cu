// The arithmetic tasks (docs/method.md, "The tasks and their G") against hand-written strings and matrices, their
// train/test split and data files, and greedy decoding with fake models.
// Host-only: doctest and the task headers, nothing of CUDA.
#include <doctest/doctest.h>
#include <fstream>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>
#include "tasks/arithmetic.h"
#include "tasks/decode.h"
#include "temp_dir.h"
#include "thrown.h"

// The message of the std::runtime_error that f throws, or "" when it throws none.
static std::string runtime_error_of(const std::function<void()>& f) { return message_of<std::runtime_error>(f); }

static ArithmeticData fraction_of_pairs(double frac, uint64_t seed = 1, int max_test = 10000) {
    ArithmeticData data;
    data.data_frac = frac;
    data.seed = seed;
    data.max_test = max_test;
    return data;
}

// The string of an example as the model sees it: tokens (T), then the last target.
static std::string example_text(const ArithmeticTask& task, bool train, int index) {
    std::vector<int> tokens(task.seq_len);
    std::vector<float> targets(task.seq_len);
    if (train) task.train_example(index, 0, token_slot(tokens.data(), targets.data()));
    else task.eval_example(index, token_slot(tokens.data(), targets.data()));
    std::string s;
    for (int t : tokens) s += task.token_text(t);
    return s + task.token_text((int)targets.back());
}

TEST_CASE("arithmetic strings by hand: padded operands, answer padded to 4 and reversed") {
    CHECK(arithmetic_string(ARITH_ADD, 123, 456) == "$123+456=9750$");  // 579 -> 0579 -> 9750
    CHECK(arithmetic_string(ARITH_ADD, 999, 999) == "$999+999=8991$");  // 1998
    CHECK(arithmetic_string(ARITH_ADD, 0, 0) == "$000+000=0000$");
    CHECK(arithmetic_string(ARITH_ADD, 5, 70) == "$005+070=5700$");     // 75 -> 0075 -> 5700
    CHECK(arithmetic_string(ARITH_MUL, 12, 34) == "$12*34=8040$");      // 408 -> 0408 -> 8040
    CHECK(arithmetic_string(ARITH_MUL, 99, 99) == "$99*99=1089$");      // 9801
    CHECK(arithmetic_string(ARITH_MUL, 7, 8) == "$07*08=6500$");        // 56
    CHECK(arithmetic_string(ARITH_MUL, 0, 57) == "$00*57=0000$");
    CHECK_THROWS_AS(arithmetic_string(ARITH_MUL, 100, 1), std::invalid_argument);
}

TEST_CASE("arithmetic shapes, tokens and targets of one example, loss and decode positions") {
    ArithmeticTask mul("mul2", fraction_of_pairs(0.03)), add("add3", fraction_of_pairs(0.004));
    CHECK(mul.seq_len == 11);
    CHECK(add.seq_len == 13);
    for (const ArithmeticTask* task : {&mul, &add}) {
        CHECK(task->vocab == 14);
        CHECK(task->outputs == 14);
        CHECK(task->next_token);
        CHECK(task->targets_per_example() == task->seq_len);
    }
    std::string symbols;
    for (int v = 0; v < 14; v++) symbols += mul.token_text(v);
    CHECK(symbols == "0123456789+*=$");

    std::vector<int> tokens(11);
    std::vector<float> targets(11);
    mul.example(12 * 100 + 34, tokens.data(), targets.data());  // "$12*34=8040$"
    CHECK(tokens == std::vector<int>{13, 1, 2, 11, 3, 4, 12, 8, 0, 4, 0});
    CHECK(targets == std::vector<float>{1, 2, 11, 3, 4, 12, 8, 0, 4, 0, 13});

    CHECK(mul.decode_positions() == std::vector<int>{6, 7, 8, 9, 10});
    CHECK(add.decode_positions() == std::vector<int>{8, 9, 10, 11, 12});
    CHECK(mul.loss_positions() == std::vector<float>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1});
    CHECK(add.loss_positions() == std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1});
    std::string text = example_text(add, true, 0);  // a training example reads back as its string
    CHECK(text.size() == 14);
    CHECK(text[0] == '$');
    CHECK(text[4] == '+');
    CHECK(text[8] == '=');
}

TEST_CASE("arithmetic split: sizes, no test pair is a training pair, a seed fixes it") {
    ArithmeticTask add("add3", fraction_of_pairs(0.004));
    CHECK(add.train_size() == 4000);  // llround(0.004 * 10^6)
    CHECK(add.eval_size() == 10000);
    ArithmeticTask mul("mul2", fraction_of_pairs(0.03));
    CHECK(mul.train_size() == 300);   // llround(0.03 * 10^4)
    CHECK(mul.eval_size() == 9700);   // min(10000, 10^4 - 300): every held-out pair
    CHECK(ArithmeticTask("mul2", fraction_of_pairs(0.03, 1, 50)).eval_size() == 50);
    CHECK(add.describe() == "train 4000 of 10^6 pairs (0.004), test 10000 held out");

    for (const ArithmeticTask* task : {&add, &mul}) {
        std::set<int> train(task->train_pairs.begin(), task->train_pairs.end());
        std::set<int> test(task->test_pairs.begin(), task->test_pairs.end());
        CHECK(train.size() == task->train_pairs.size());  // no pair twice
        CHECK(test.size() == task->test_pairs.size());
        for (int p : test) REQUIRE(train.count(p) == 0);
    }
    ArithmeticTask same("mul2", fraction_of_pairs(0.03)), other("mul2", fraction_of_pairs(0.03, 2));
    CHECK(same.train_pairs == mul.train_pairs);
    CHECK(same.test_pairs == mul.test_pairs);
    CHECK(other.train_pairs != mul.train_pairs);
    CHECK(other.test_pairs != mul.test_pairs);

    for (double frac : {0.0, 1.0, -0.5, 1e-5})  // 1e-5 of 10^4 pairs rounds to no pair
        CHECK(runtime_error_of([&] { ArithmeticTask("mul2", fraction_of_pairs(frac)); }).find("mul2: ") == 0);
    CHECK_THROWS_AS(ArithmeticTask("sub3", fraction_of_pairs(0.5)), std::invalid_argument);
}

TEST_CASE("arithmetic G for mul2 by hand") {
    // positions: 0 '$', 1 a1, 2 a0, 3 '*', 4 b1, 5 b0, 6 '=', 7 c0, 8 c1, 9 c2, 10 c3
    const std::vector<float> expected = {
        1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // 0: band
        1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // 1
        1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0,  // 2
        0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0,  // 3
        0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0,  // 4
        0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0,  // 5
        0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0,  // 6 '=' emits c0: a0, b0, itself, 5 (= b0)
        0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0,  // 7 emits c1: a1 a0 b1 b0, '=', itself
        0, 1, 0, 0, 1, 0, 0, 1, 1, 0, 0,  // 8 emits c2: a1 b1 (no digit 2), c0, itself
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0,  // 9 emits c3: no operand digit 3 or 2
        0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1,  // 10 emits '$'
    };
    CHECK(ArithmeticTask("mul2", fraction_of_pairs(0.03)).structure() == expected);
}

TEST_CASE("arithmetic G is causal; add3's answer rows by hand") {
    for (const char* name : {"add3", "mul2"}) {
        ArithmeticTask task(name, fraction_of_pairs(0.03));
        std::vector<float> G = task.structure();
        const int T = task.seq_len;
        REQUIRE((int)G.size() == T * T);
        for (int i = 0; i < T; i++) {
            CHECK(G[i * T + i] == 1);
            for (int j = i + 1; j < T; j++) REQUIRE(G[i * T + j] == 0);
        }
    }
    // add3 positions: 1 a2, 2 a1, 3 a0, 5 b2, 6 b1, 7 b0, 8 '=', 9 c0, 10 c1, 11 c2, 12 c3
    std::vector<float> G = ArithmeticTask("add3", fraction_of_pairs(0.004)).structure();
    auto keys = [&](int q) {
        std::vector<int> k;
        for (int j = 0; j < 13; j++)
            if (G[q * 13 + j] == 1) k.push_back(j);
        return k;
    };
    CHECK(keys(8) == std::vector<int>{3, 7, 8});
    CHECK(keys(9) == std::vector<int>{2, 3, 6, 7, 8, 9});
    CHECK(keys(10) == std::vector<int>{1, 2, 5, 6, 9, 10});
    CHECK(keys(11) == std::vector<int>{1, 5, 10, 11});
    CHECK(keys(12) == std::vector<int>{11, 12});
    CHECK(keys(4) == std::vector<int>{2, 3, 4});
}

TEST_CASE("greedy decode: argmax, one call per position, blanks ahead, predictions fed back") {
    const int T = 6, V = 7, rows = 2, blank = 0;
    const std::vector<int> positions = {2, 3, 4, 5};
    std::vector<int> tokens = {1, 4, 3, 6, 6, 6,   // positions 3..5 hold a "true answer" (6) decoding must hide
                               0, 0, 6, 6, 6, 6};
    int calls = 0;
    // the fake model: at position p the logits peak at (tokens[p] + 2) mod V, falling off with distance
    NextTokenLogits fake = [&](const int* in, int n, std::vector<float>& logits) {
        REQUIRE(n == rows);
        for (int r = 0; r < rows; r++)
            for (int i = calls; i < (int)positions.size(); i++)  // inputs not decoded yet are blank
                if (positions[i] + 1 < T) CHECK(in[r * T + positions[i] + 1] == blank);
        logits.assign(rows * T * V, 0.0f);
        for (int r = 0; r < rows; r++)
            for (int p = 0; p < T; p++) {
                int peak = (in[r * T + p] + 2) % V;
                for (int v = 0; v < V; v++) logits[(r * T + p) * V + v] = -(float)std::abs(v - peak);
            }
        calls++;
    };
    std::vector<int> decoded;
    greedy_decode(fake, tokens.data(), rows, T, V, positions, blank, decoded);
    CHECK(calls == 4);
    // row 0: 3 -> 5 -> 0 -> 2 -> 4; row 1: 6 -> 1 -> 3 -> 5 -> 0: each step reads the one before
    CHECK(decoded == std::vector<int>{5, 0, 2, 4, 1, 3, 5, 0});
    CHECK(tokens == std::vector<int>{1, 4, 3, 5, 0, 2, 0, 0, 6, 1, 3, 5});  // the last prediction is not written

    NextTokenLogits tie = [](const int*, int n, std::vector<float>& logits) {
        logits.assign(n * 2 * 4, 0.0f);
        for (int i = 0; i < n * 2; i++) logits[i * 4 + 1] = logits[i * 4 + 3] = 1.0f;  // 1 and 3 tie
    };
    std::vector<int> two = {5, 5};
    greedy_decode(tie, two.data(), 1, 2, 4, {0}, 9, decoded);
    CHECK(decoded == std::vector<int>{1});  // the lowest id of the tie
    CHECK(two == std::vector<int>{5, 1});
}

TEST_CASE("greedy decode with a fake model that adds by reading only G's keys gets every answer right") {
    ArithmeticTask task("add3", fraction_of_pairs(0.004, 3, 300));
    const int T = task.seq_len, V = task.vocab, D = task.digits, e = task.equals_pos, n = task.eval_size();
    const std::vector<float> G = task.structure();
    std::vector<int> tokens(n * T);
    std::vector<float> targets(T);
    for (int i = 0; i < n; i++) task.eval_example(i, token_slot(&tokens[i * T], targets.data()));
    // c_k = (a_k + b_k + carry_k) mod 10, carry_k = [c_{k-1} < a_{k-1} + b_{k-1}], at q = e + k
    NextTokenLogits column_addition = [&](const int* in, int rows, std::vector<float>& logits) {
        logits.assign(rows * T * V, 0.0f);
        for (int r = 0; r < rows; r++)
            for (int k = 0; k <= 4; k++) {
                const int q = e + k;
                auto key = [&](int j) {  // the token at key j, which G must allow
                    REQUIRE(G[q * T + j] == 1);
                    return in[r * T + j];
                };
                auto a = [&](int i) { return i >= 0 && i < D ? key(1 + (D - 1 - i)) : 0; };
                auto b = [&](int i) { return i >= 0 && i < D ? key(D + 2 + (D - 1 - i)) : 0; };
                int next = arith_token('$');
                if (k < 4) {
                    int carry = k > 0 && key(q) < a(k - 1) + b(k - 1);
                    next = (a(k) + b(k) + carry) % 10;
                }
                logits[(r * T + q) * V + next] = 1.0f;
            }
    };
    std::vector<int> decoded;
    greedy_decode(column_addition, tokens.data(), n, T, V, task.decode_positions(), arith_token('$'), decoded);
    std::vector<float> outputs(decoded.begin(), decoded.end());
    CHECK(task.evaluate(outputs) == Metrics{{"seq_acc", 1.0}, {"digit_acc", 1.0}});
}

TEST_CASE("arithmetic evaluate: sequence and digit accuracy") {
    ArithmeticTask task("mul2", fraction_of_pairs(0.03, 1, 20));
    const int n = task.eval_size(), T = task.seq_len;
    REQUIRE(n == 20);
    std::vector<float> truth;  // (n, 5): the targets at the decode positions
    std::vector<int> tokens(T);
    std::vector<float> targets(T);
    for (int i = 0; i < n; i++) {
        task.eval_example(i, token_slot(tokens.data(), targets.data()));
        for (int p : task.decode_positions()) truth.push_back(targets[p]);
    }
    CHECK(task.evaluate(truth) == Metrics{{"seq_acc", 1.0}, {"digit_acc", 1.0}});
    std::vector<float> wrong = truth;
    wrong[3 * 5 + 2] = (float)(((int)wrong[3 * 5 + 2] + 1) % 10);  // one digit of example 3
    Metrics m = task.evaluate(wrong);
    CHECK(m[0].second == doctest::Approx(19.0 / 20));
    CHECK(m[1].second == doctest::Approx(79.0 / 80));
    wrong[7 * 5 + 4] = 0;  // the closing '$' of example 7: the sequence is wrong, no digit is
    m = task.evaluate(wrong);
    CHECK(m[0].second == doctest::Approx(18.0 / 20));
    CHECK(m[1].second == doctest::Approx(79.0 / 80));
}

TEST_CASE("arithmetic data files: lenient lines read right, held-out pairs drawn around them") {
    TempDir dir;
    ArithmeticData data;
    data.train_file = dir.write("train.txt", "$12*34=8040$\n7*8=65\n\n$3*05=51\r\n  99*99=1089$  \n0*0=0");
    data.test_file = dir.write("test.txt", "1*1=1\n02*02=4000$\n");
    ArithmeticTask task("mul2", data);
    REQUIRE(task.train_size() == 5);
    CHECK(task.train_pairs == std::vector<int>{1234, 708, 305, 9999, 0});
    CHECK(example_text(task, true, 1) == "$07*08=6500$");
    CHECK(example_text(task, true, 2) == "$03*05=5100$");
    CHECK(task.test_pairs == std::vector<int>{101, 202});
    CHECK(task.describe() == "train 5 from " + data.train_file + ", test 2 from " + data.test_file);

    ArithmeticData drawn_train = fraction_of_pairs(0.03);  // the test file's pairs are skipped
    drawn_train.test_file = data.test_file;
    ArithmeticTask around_test("mul2", drawn_train);
    CHECK(around_test.train_size() == 300);
    for (int p : around_test.train_pairs) REQUIRE((p != 101 && p != 202));
    ArithmeticData drawn_test;  // the training file's pairs are skipped
    drawn_test.train_file = data.train_file;
    ArithmeticTask around_train("mul2", drawn_test);
    CHECK(around_train.eval_size() == 9995);  // min(10000, 10^4 - 5)
    std::set<int> in_file(task.train_pairs.begin(), task.train_pairs.end());
    for (int p : around_train.test_pairs) REQUIRE(in_file.count(p) == 0);
}

TEST_CASE("arithmetic data files: every bad input throws naming the file and the line") {
    TempDir dir;
    auto train_error = [&](const std::string& text, const char* task = "mul2") {
        ArithmeticData data;
        data.train_file = dir.write("train.txt", text);
        return runtime_error_of([&] { ArithmeticTask(task, data); });
    };
    const std::string train = dir.path + "/train.txt";
    ArithmeticData missing;
    missing.train_file = dir.path + "/missing.txt";
    CHECK(runtime_error_of([&] { ArithmeticTask("mul2", missing); }) ==
          "cannot open arithmetic data file " + missing.train_file);
    CHECK(train_error("") == "arithmetic data file " + train + " has no examples");
    CHECK(train_error("\n  \r\n") == "arithmetic data file " + train + " has no examples");
    CHECK(train_error("12*34=804\n12x34=804\n").find(train + " line 2: expected '*'") == 0);
    CHECK(train_error("12*34=804\n\n123*4=294\n").find(train + " line 3: first operand has more than 2 digits") == 0);
    CHECK(train_error("12*34=804\n12*34=804=\n").find(train + " line 2: unexpected '=' after the answer") == 0);
    CHECK(train_error("12*34=804\n12*34=\n").find(train + " line 2: no answer") == 0);
    CHECK(train_error("12*34=804", "add3").find(train + " line 1: expected '+'") == 0);
    CHECK(train_error("12*34=4080\n") ==
          train + " line 1: 12*34=4080 is wrong: the reversed answer 4080 means 804, but 12*34 = 408");
    CHECK(train_error("5*5=52\n1*1=1\n05*05=5200$\n") == train + " line 3 repeats the pair 5*5 of line 1");

    ArithmeticData both;
    both.train_file = dir.write("train.txt", "12*34=804\n5*5=52\n");
    both.test_file = dir.write("test.txt", "1*1=1\n\n5*5=52\n");
    CHECK(runtime_error_of([&] { ArithmeticTask("mul2", both); }) ==
          "the pair 5*5 is in both the training file " + both.train_file + " (line 2) and the test file " +
              both.test_file + " (line 3); test pairs must be held out");
    both.train_file = dir.write("train.txt", "12*34=804\n");
    both.test_file = dir.write("test.txt", "1*1=1\n1*1=1\n");
    CHECK(runtime_error_of([&] { ArithmeticTask("mul2", both); }) ==
          both.test_file + " line 2 repeats the pair 1*1 of line 1");
}
