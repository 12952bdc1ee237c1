// The language task's pieces on the host: token files and their errors, the vocabulary (decode,
// encode by merges), the training and evaluation windows and their determinism, the scorer's
// metrics, the causal window G, the ALiBi-shaped mask by hand, the sampler (greedy, seeded, and
// a chi-square test of its frequencies), and the LM head's gradient at a vocabulary in the
// thousands. test_cli_language.cu runs the binary.
#include <cmath>
#include <set>
#include "test_util.h"
#include "text_fixture.h"
#include "prior/init.cuh"     // init_mask_alibi, alibi_slope
#include "run/sample.cuh"     // sample_token, unit_interval
#include "tasks/batch.h"      // Batch, training_batch
#include "tasks/language.h"   // LanguageTask, LanguageScorer

static std::vector<uint16_t> counting(size_t n, int V) {  // 0, 1, 2, ... modulo V
    std::vector<uint16_t> ids(n);
    for (size_t i = 0; i < n; i++) ids[i] = (uint16_t)(i % V);
    return ids;
}

TEST_CASE("token files: a good one maps with its header; every bad one is one line naming the file") {
    const std::string path = TMP_PREFIX + "tokens.bin";
    write_bytes(path, token_file_bytes(300, {5, 299, 0, 7}, 11));
    TokenFile f = open_token_file(path);
    CHECK(f.vocab == 300);
    CHECK(f.count == 4);
    CHECK(f.text_bytes == 11);
    CHECK((f[0] == 5 && f[1] == 299 && f[2] == 0 && f[3] == 7));

    auto expect_bad = [&](const std::string& bytes, const std::string& words) {
        write_bytes(path, bytes);
        CAPTURE(words);
        try {
            open_token_file(path);
            FAIL("no error");
        } catch (const std::runtime_error& e) {
            const std::string what = e.what();
            CHECK(what.find(path) == 0);
            CHECK(what.find(words) != std::string::npos);
            CHECK(what.find('\n') == std::string::npos);
        }
    };
    const std::string good = token_file_bytes(300, {5, 299, 0, 7});
    expect_bad(good.substr(0, 20), "shorter than the 32-byte header");
    expect_bad(token_file_bytes(300, {1, 2}, 0, "MPTOKENZ"), "magic is not MPTOKENS");
    expect_bad(token_file_bytes(300, {1, 2}, 0, "MPTOKENS", 2), "version 2");
    expect_bad(token_file_bytes(0, {}), "vocabulary size 0");
    expect_bad(token_file_bytes(70000, {1}), "vocabulary size 70000");
    expect_bad(good.substr(0, good.size() - 2), "the header says 4 tokens");      // truncated
    expect_bad(good + "xx", "the header says 4 tokens");                          // trailing bytes
    expect_bad(token_file_bytes(299, {5, 299, 0, 7}), "token 1 is 299, not below the vocabulary size 299");
    CHECK_THROWS_WITH(open_token_file(TMP_PREFIX + "no_such.bin"), doctest::Contains("cannot open"));
}

// A small BPE vocabulary: <unk>, <|endoftext|>, the 256 bytes, then pieces with their scores.
static Vocabulary hand_vocabulary() {
    std::vector<VocabEntry> entries = {{0, TOKEN_CONTROL, ""}, {0, TOKEN_USER, "<|endoftext|>"}};
    for (int b = 0; b < 256; b++) entries.push_back({0, TOKEN_BYTE, std::string(1, (char)b)});
    entries.push_back({-1, TOKEN_PIECE, "a"});     // 258
    entries.push_back({-2, TOKEN_PIECE, "b"});     // 259
    entries.push_back({-3, TOKEN_PIECE, "c"});     // 260
    entries.push_back({-4, TOKEN_PIECE, "ab"});    // 261
    entries.push_back({-0.5, TOKEN_PIECE, "bc"});  // 262: scores higher than "ab", so it merges first
    entries.push_back({-6, TOKEN_PIECE, "abc"});   // 263
    entries.push_back({-7, TOKEN_PIECE, "é"});     // 264: a two-byte character that is a piece
    const std::string path = TMP_PREFIX + "hand_vocab.bin";
    write_bytes(path, vocabulary_bytes(entries, 1));
    return read_vocabulary(path);
}

TEST_CASE("the vocabulary decodes ids to bytes and encodes by the best-scoring merges, as llama2.c's run.c") {
    const Vocabulary voc = hand_vocabulary();
    CHECK(voc.size() == 265);
    auto encode = [&](const std::string& s) { return voc.encode(s); };
    CHECK(encode("abc") == std::vector<int>{263});  // a b c -> a bc (bc scores best) -> abc
    CHECK(encode("ab") == std::vector<int>{261});
    CHECK(encode("abx") == std::vector<int>{261, 2 + 'x'});  // x is no piece: its byte's token
    CHECK(encode("c<|endoftext|>a") == std::vector<int>{260, 1, 258});  // the user piece is cut out whole
    CHECK(encode("é") == std::vector<int>{264});
    CHECK(encode("ü") == std::vector<int>{2 + 0xC3, 2 + 0xBC});  // no piece: byte fallback, one token per byte
    const std::vector<uint16_t> ids = {263, 1, 2 + 'x', 0, 264};
    CHECK(voc.decode(ids.data(), 5) == "abc<|endoftext|>xé");  // <unk> decodes to nothing

    // the bytes vocabulary: V = 256, token = byte, every text round-trips
    const std::string dir = write_token_folder(TMP_PREFIX + "bytes_vocab", 256, {1, 2}, {3});
    const Vocabulary bytes = read_vocabulary(dir + "/tokenizer.bin");
    const std::string text = "Once upon a time, naïve café\t\n<|endoftext|>\n";
    const std::vector<int> encoded = bytes.encode(text);
    REQUIRE(encoded.size() == text.size());
    std::vector<uint16_t> as_ids(encoded.begin(), encoded.end());
    for (size_t i = 0; i < text.size(); i++) CHECK(encoded[i] == (unsigned char)text[i]);
    CHECK(bytes.decode(as_ids.data(), (int64_t)as_ids.size()) == text);

    const std::string path = TMP_PREFIX + "bad_vocab.bin";
    const std::string good = vocabulary_bytes(300);
    write_bytes(path, good.substr(0, good.size() - 3));
    CHECK_THROWS_WITH(read_vocabulary(path), doctest::Contains("truncated at token 299"));
    write_bytes(path, good + "z");
    CHECK_THROWS_WITH(read_vocabulary(path), doctest::Contains("1 bytes after the last token"));
    write_bytes(path, "MPVOCAB2" + good.substr(8));
    CHECK_THROWS_WITH(read_vocabulary(path), doctest::Contains("magic is not MPVOCAB1"));
}

TEST_CASE("the language task: training windows by (seed, step, row), evaluation windows, metrics, G") {
    const int V = 1000, T = 8;
    const std::string dir = write_token_folder(TMP_PREFIX + "lm_counting", V, counting(5000, 997), counting(100, V));
    LanguageSettings s;
    s.seq_len = T;
    s.window = 3;
    LanguageTask task(dir, s);
    CHECK(task.vocab == V);
    CHECK(task.outputs == V);
    CHECK(task.next_token);
    CHECK(task.train_size() == (5000 - 1) / T - 1);
    CHECK(task.loss_positions() == std::vector<float>(T, 1.0f));

    // window of chunk 10 with draw 13: starts at 10·T + 13 % T = 85
    std::vector<int> tokens(T);
    std::vector<float> targets(T);
    task.train_example(10, 13, token_slot(tokens.data(), targets.data()));
    for (int t = 0; t < T; t++) {
        CHECK(tokens[t] == (85 + t) % 997);
        CHECK(targets[t] == (float)((86 + t) % 997));
    }
    // the last chunk's window with the largest phase stays inside the file
    task.train_example(task.train_size() - 1, T - 1, token_slot(tokens.data(), targets.data()));
    CHECK(targets[T - 1] == (float)(((task.train_size() - 1) * T + T - 1 + T) % 997));

    // an epoch takes every chunk once; the batch of a step is a pure function of (seed, step)
    EpochOrder order(7, task.train_size());
    std::set<int> seen;
    for (int k = 0; k < task.train_size(); k++) seen.insert(order.example(k));
    CHECK((int)seen.size() == task.train_size());
    Batch a, b, c;
    for (Batch* batch : {&a, &b, &c}) batch->shape(task, 4, task.loss_positions());
    EpochOrder walked(7, task.train_size()), fresh(7, task.train_size()), other_seed(8, task.train_size());
    for (int step = 0; step <= 17; step++) training_batch(task, walked, step, a);
    training_batch(task, fresh, 17, b);
    training_batch(task, other_seed, 17, c);
    CHECK(a.tokens == b.tokens);
    CHECK(a.targets == b.targets);
    CHECK(a.tokens != c.tokens);

    // evaluation: non-overlapping windows at multiples of T; capped, spread evenly over the file
    CHECK(task.eval_size() == (100 - 1) / T);
    task.eval_example(3, token_slot(tokens.data(), targets.data()));
    CHECK(tokens[0] == 24);
    s.eval_windows = 5;
    LanguageTask capped(dir, s);
    REQUIRE(capped.eval_size() == 5);
    CHECK(capped.eval_start == std::vector<int64_t>{0, 16, 32, 56, 72});
    // the bytes of window 0's targets: ids 1..8, each a single character (text_fixture.h)
    CHECK(capped.target_bytes[0] == 8);

    // the scorer: losses of 1 nat everywhere -> val_loss 1, perplexity e, bits per byte = tokens / (ln 2 · bytes)
    std::unique_ptr<Scorer> scorer = capped.scorer();
    std::vector<float> ones((size_t)2 * T, 1.0f);
    scorer->add(0, 2, ones.data());
    Metrics m = scorer->metrics();
    CHECK(m[0].first == "val_loss");
    CHECK(m[0].second == doctest::Approx(1.0));
    CHECK(m[1].second == doctest::Approx(std::exp(1.0)));
    const double bytes = (double)(capped.target_bytes[0] + capped.target_bytes[1]);
    CHECK(m[2].second == doctest::Approx(2.0 * T / (std::log(2.0) * bytes)));

    // G: query i sees keys i-2 .. i
    const std::vector<float> G = LanguageTask::causal_window(4, 3);
    CHECK(G == std::vector<float>{1, 0, 0, 0,  1, 1, 0, 0,  1, 1, 1, 0,  0, 1, 1, 1});
}

TEST_CASE("the language task refuses files that do not fit, one line each") {
    LanguageSettings s;
    s.seq_len = 8;
    const std::string short_train = write_token_folder(TMP_PREFIX + "lm_short", 50, counting(16, 50), counting(40, 50));
    CHECK_THROWS_WITH(LanguageTask(short_train, s), doctest::Contains("too few for training windows"));
    const std::string short_val =
        write_token_folder(TMP_PREFIX + "lm_short_val", 50, counting(400, 50), counting(8, 50));
    CHECK_THROWS_WITH(LanguageTask(short_val, s), doctest::Contains("shorter than one window"));
    const std::string mixed = write_token_folder(TMP_PREFIX + "lm_mixed", 50, counting(400, 50), counting(40, 50));
    write_bytes(mixed + "/val.bin", token_file_bytes(60, counting(40, 50)));
    CHECK_THROWS_WITH(LanguageTask(mixed, s), doctest::Contains("has the vocabulary size 60"));
    CHECK_THROWS_WITH(LanguageTask(TMP_PREFIX + "no_such_folder", s), doctest::Contains("tokenizer.bin"));
}

TEST_CASE("the ALiBi-shaped mask: log σ(M) = -m_h (i - j), the diagonal +c, clamped to [-c, c], by hand") {
    Config c;
    c.V = 10; c.T = 5; c.NH = 2; c.L = 2; c.mask_heads = 2; c.causal = true; c.readout = READOUT_NEXT_TOKEN; c.OUT = 10;
    CHECK(alibi_slope(0, 2) == 1.0f / 16);   // 2^(-8·1/2)
    CHECK(alibi_slope(1, 2) == 1.0f / 256);  // 2^(-8·2/2)
    std::vector<float> params(param_count(c));
    init_mask_alibi(c, params.data(), 6.0f);
    const float* M = param_bind(c, params.data()).mask;  // (L, NH, T, T)
    auto at = [&](int l, int h, int i, int j) { return M[(((size_t)l * 2 + h) * 5 + i) * 5 + j]; };
    // head 0, distance 1: b = -1/16, M = b - log(1 - e^b) = 2.741176 (computed by hand)
    CHECK(at(0, 0, 1, 0) == doctest::Approx(2.741176).epsilon(1e-6));
    CHECK(at(1, 0, 3, 1) == doctest::Approx(2.016291).epsilon(1e-6));  // distance 2, layer 1 the same
    CHECK(at(0, 1, 4, 0) == doctest::Approx(4.151060).epsilon(1e-6));  // head 1, distance 4: b = -4/256
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 5; j++) {
                const float m = at(0, h, i, j);
                if (j == i) CHECK(m == 6.0f);
                if (j > i) CHECK(m == -6.0f);
                if (j < i) CHECK(log_sigmoid(m) == doctest::Approx(-alibi_slope(h, 2) * (i - j)).epsilon(1e-5));
            }
    init_mask_alibi(c, params.data(), 2.0f);  // c = 2 clamps the near past of head 0: M would be 2.74, 2.02
    CHECK(at(0, 0, 1, 0) == 2.0f);
    CHECK(at(0, 0, 2, 0) == 2.0f);
    CHECK(at(0, 0, 3, 0) == doctest::Approx(1.578762).epsilon(1e-6));  // b = -3/16
}

TEST_CASE("sampling: top-k 1 and temperature 0 are greedy; the draws follow softmax(z / temperature)") {
    Rng rng(3);
    for (int trial = 0; trial < 20; trial++) {
        std::vector<float> logits = random_vector<float>(50, rng, 4.0f);
        const int greedy = top_class(logits.data(), 50);
        CHECK(sample_token(logits.data(), 50, 1.0f, 1, 0.99) == greedy);
        CHECK(sample_token(logits.data(), 50, 0.0f, 0, 0.5) == greedy);
    }
    // chi-square: 20000 draws from 8 logits at temperature 0.7 among the top 5. The expected count of
    // token v is n p_v with p = softmax(z/0.7) over the 5 likeliest; the statistic sum (O - E)^2 / E
    // has 4 degrees of freedom, and a correct sampler passes 18.47 (the 0.1% point) but once in 1000.
    const std::vector<float> z = {0.3f, 1.2f, -0.5f, 2.0f, 0.9f, -1.0f, 1.5f, 0.0f};
    const float temperature = 0.7f;
    const int n = 20000, k = 5;
    std::vector<int> count(8, 0);
    for (int i = 0; i < n; i++)
        count[sample_token(z.data(), 8, temperature, k, unit_interval(example_draw(11, i, 0)))]++;
    const std::vector<int> top = {3, 6, 1, 4, 0};  // the 5 likeliest, by z
    double total = 0;
    for (int v : top) total += std::exp(z[v] / temperature);
    double chi2 = 0;
    int counted = 0;
    for (int v : top) {
        const double expected = n * std::exp(z[v] / temperature) / total;
        chi2 += (count[v] - expected) * (count[v] - expected) / expected;
        counted += count[v];
    }
    CHECK(counted == n);  // nothing outside the top 5
    CHECK(chi2 < 18.47);
    // the same draws with top_k 0 reach every token, and a wrong temperature fails the test
    std::vector<int> all(8, 0), hot(8, 0);
    for (int i = 0; i < n; i++) {
        all[sample_token(z.data(), 8, temperature, 0, unit_interval(example_draw(11, i, 0)))]++;
        hot[sample_token(z.data(), 8, 1.0f, k, unit_interval(example_draw(11, i, 0)))]++;
    }
    for (int v = 0; v < 8; v++) CHECK(all[v] > 0);
    double chi2_hot = 0;
    for (int v : top) {
        const double expected = n * std::exp(z[v] / temperature) / total;
        chi2_hot += (hot[v] - expected) * (hot[v] - expected) / expected;
    }
    CHECK(chi2_hot > 18.47);
}

TEST_CASE("the LM head's gradient at a vocabulary of 1500 matches finite differences") {
    Config c;
    c.V = 1500; c.OUT = 1500; c.T = 4; c.C = 8; c.L = 1; c.NH = 2; c.HS = 4; c.MLP = 8;
    c.readout = READOUT_NEXT_TOKEN;
    c.causal = true;
    c.mask_heads = 2;
    check_model_gradient_of(c);
}

// data/prepare_text.py's folders read back by the C++: its tokens decode to the fixture text byte
// for byte, and the C++ encoder (run.c's merges) gives the very ids sentencepiece gave.
TEST_CASE("data/prepare_text.py's folders: decoded by the C++ to the text, encoded by it to the same ids") {
    if (run_command(PYTHON_BIN + " -c 'import sentencepiece, numpy'").exit_code != 0) {
        MESSAGE("skipped: no sentencepiece for " << PYTHON_BIN << " (make deps installs python3-sentencepiece)");
        return;
    }
    const std::string fixture = "tests/fixtures/text/tiny.txt";
    std::ifstream f(fixture, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    REQUIRE(text.size() > 1000);
    for (const char* tokenizer : {"bytes", "bpe"}) {
        CAPTURE(tokenizer);
        const std::string dir = TMP_PREFIX + "prepared_" + tokenizer;
        CommandResult r = run_command(PYTHON_BIN + " data/prepare_text.py --input " + fixture + " --tokenizer " +
                                      tokenizer + (tokenizer[1] == 'p' ? " --vocab 400" : "") + " --out " + dir);
        REQUIRE_MESSAGE(r.exit_code == 0, r.out);
        const Vocabulary voc = read_vocabulary(dir + "/tokenizer.bin");
        const TokenFile train = open_token_file(dir + "/train.bin"), val = open_token_file(dir + "/val.bin");
        CHECK(voc.size() == (tokenizer[1] == 'p' ? 400 : 256));
        const std::string train_text = voc.decode(train.tokens, train.count);
        const std::string val_text = voc.decode(val.tokens, val.count);
        CHECK(train_text + val_text == text);
        CHECK((int64_t)train_text.size() == train.text_bytes);
        for (const TokenFile* file : {&train, &val}) {
            const std::vector<int> ids = voc.encode(voc.decode(file->tokens, file->count));
            CHECK(ids == std::vector<int>(file->tokens, file->tokens + file->count));
        }
        LanguageSettings s;
        s.seq_len = 16;
        CHECK(LanguageTask(dir, s).vocab == voc.size());
    }
}
