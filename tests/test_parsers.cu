// The parsers in-process: a bad checkpoint, a bad --mask-structure file or a checkpoint of
// another config throws InputError with its one line, and the program is not left to exit
// (tests/test_cli.cu checks the same files through the binary, as a user meets them).
#include <fstream>
#include "test_util.h"
#include "prior/structure.h"
#include "run/checkpoint.h"
#include "thrown.h"

// The message of the InputError that f throws, or "" when it throws none.
static std::string input_error_of(const std::function<void()>& f) { return message_of<InputError>(f); }

TEST_CASE("safetensors_read throws InputError on a broken file") {
    const std::string garbage = TMP_PREFIX + "parsers_garbage.safetensors";
    std::ofstream(garbage) << "not a safetensors file";
    CHECK(input_error_of([&] { safetensors_read(garbage); }).find("not a safetensors file") != std::string::npos);
    CHECK(input_error_of([&] { safetensors_read(TMP_PREFIX + "absent.safetensors"); }).find("cannot open") == 0);

    StFile file;
    const float values[3] = {1, 2, 3};
    file.add("x", {3}, values);
    const std::string good = TMP_PREFIX + "parsers_good.safetensors";
    safetensors_write(good, file);
    REQUIRE(safetensors_read(good).find("x")->data == std::vector<float>{1, 2, 3});
    std::ifstream in(good, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string cut = TMP_PREFIX + "parsers_cut.safetensors";
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 4);
    CHECK(input_error_of([&] { safetensors_read(cut); }).find("outside the file") != std::string::npos);
}

TEST_CASE("read_structure throws InputError naming the file and the line") {
    const std::string bad = TMP_PREFIX + "parsers_G_bad.txt";
    std::ofstream(bad) << "1 0 # a comment\n0 x\n";
    CHECK(input_error_of([&] { read_structure(bad, 2, 1); }) == bad + " line 2: 'x' is not 0 or 1");
    const std::string short_G = TMP_PREFIX + "parsers_G_short.txt";
    std::ofstream(short_G) << "1 0 1\n";
    CHECK(input_error_of([&] { read_structure(short_G, 2, 2); }).find("has 3 entries") != std::string::npos);
    const std::string per_head = TMP_PREFIX + "parsers_G_heads.txt";
    std::ofstream(per_head) << "1 0 0 1\n0 1 1 0\n";
    Structure G = read_structure(per_head, 2, 2);
    CHECK(G.heads == 2);
    CHECK(G.head(1)[1] == 1.0f);
}

TEST_CASE("checkpoint_load throws InputError for a checkpoint of another config, and round-trips its own") {
    Config c;
    c.V = 3; c.T = 4; c.C = 4; c.L = 2; c.NH = 2; c.HS = 2; c.MLP = 4; c.mask_heads = 1;
    c.prior_layers = PRIOR_FIRST_LAYER;
    Rng rng(3);
    TrainingState state;
    for (std::vector<float>* buffer : {&state.params, &state.m, &state.v})
        *buffer = random_vector<float>(param_count(c), rng);
    state.adam_t = 7;
    const std::string path = TMP_PREFIX + "parsers_ck.safetensors";
    checkpoint_save(path, c, state, {{"step", "7"}});
    Metadata meta;
    TrainingState back = checkpoint_load(path, c, &meta);
    CHECK(back.params == state.params);
    CHECK(back.m == state.m);
    CHECK(back.v == state.v);
    CHECK(back.adam_t == 7);
    CHECK(meta["mask_layers"] == "first");  // the checkpoint's name for --prior-layers
    CHECK(meta["step"] == "7");
    Config wider = c;
    wider.C = 8;
    CHECK(input_error_of([&] { checkpoint_load(path, wider, &meta); }) ==
          path + " was saved with width=4, but this run has width=8");
    Config all_layers = c;
    all_layers.prior_layers = PRIOR_ALL_LAYERS;
    CHECK(input_error_of([&] { checkpoint_load(path, all_layers, &meta); }).find("mask_layers=first") !=
          std::string::npos);
}
