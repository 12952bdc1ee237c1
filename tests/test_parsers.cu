// The parsers in-process: a bad checkpoint, a bad --mask-structure file or a checkpoint of
// another config throws InputError with its one line, and the program is not left to exit
// (tests/test_cli.cu checks the same files through the binary, as a user meets them).
#include <filesystem>
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

// A safetensors file of the given header text (padded to 8 bytes, as the writer does) and
// data_bytes bytes of data (the floats 0, 1, 2, ...); returns its path.
static std::string safetensors_file(const std::string& name, std::string header, size_t data_bytes) {
    while (header.size() % 8) header += ' ';
    const uint64_t header_len = header.size();
    std::string bytes((const char*)&header_len, 8);
    bytes += header;
    for (size_t i = 0; i < data_bytes / 4; i++) {
        const float value = (float)i;
        bytes.append((const char*)&value, 4);
    }
    bytes.resize(8 + header.size() + data_bytes, '\0');
    const std::string path = TMP_PREFIX + "parsers_" + name + ".safetensors";
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

// One tensor's header entry: "name": F32 of the shape, at the data offsets [begin, end).
static std::string st_entry(const std::string& name, const std::string& shape, int begin, int end) {
    return "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(begin) +
           "," + std::to_string(end) + "]}";
}

TEST_CASE("safetensors_read refuses what the official reader refuses, each with one line") {
    // accepted: the tensors listed in any order, a zero-size tensor between two, a shape [] (one float)
    const std::string tiles = st_entry("b", "[1]", 8, 12) + "," + st_entry("z", "[0,3]", 8, 8) + "," +
                              st_entry("a", "[2]", 0, 8) + "," + st_entry("s", "[]", 12, 16);
    const std::string ok = safetensors_file("tiled", "{" + tiles + "}", 16);
    StFile file = safetensors_read(ok);
    REQUIRE(file.tensors.size() == 4);
    CHECK(file.find("a")->data == std::vector<float>{0, 1});
    CHECK(file.find("b")->data == std::vector<float>{2});
    CHECK(file.find("s")->data == std::vector<float>{3});
    CHECK(file.find("z")->data.empty());

    auto refusal = [](const std::string& path) { return input_error_of([&] { safetensors_read(path); }); };
    const std::string gap = safetensors_file("gap", "{" + st_entry("a", "[1]", 0, 4) + "," +
                                                        st_entry("b", "[1]", 8, 12) + "}", 12);
    CHECK(refusal(gap) == gap + ": a gap in the data: tensor b starts at byte 8, the tensors before it cover 4 bytes");
    const std::string late = safetensors_file("late_start", "{" + st_entry("a", "[1]", 4, 8) + "}", 8);
    CHECK(refusal(late) ==
          late + ": a gap in the data: tensor a starts at byte 4, the tensors before it cover 0 bytes");
    const std::string overlap = safetensors_file("overlap", "{" + st_entry("a", "[2]", 0, 8) + "," +
                                                                st_entry("b", "[2]", 4, 12) + "}", 12);
    CHECK(refusal(overlap) ==
          overlap + ": tensors overlap: tensor b starts at byte 4, inside the 8 bytes of the tensors before it");
    const std::string trailing = safetensors_file("trailing", "{" + st_entry("a", "[1]", 0, 4) + "}", 8);
    CHECK(refusal(trailing) ==
          trailing + ": 4 bytes after the last tensor's data (the tensors must cover the data exactly)");
    const std::string reversed = safetensors_file("end_before_begin", "{" + st_entry("a", "[0]", 4, 0) + "," +
                                                                          st_entry("b", "[1]", 0, 4) + "}", 4);
    CHECK(refusal(reversed) == reversed + ": tensor a has data offsets out of order (end before begin)");
    const std::string twice = safetensors_file("duplicate", "{" + st_entry("a", "[1]", 0, 4) + "," +
                                                                st_entry("a", "[1]", 4, 8) + "}", 8);
    CHECK(refusal(twice) == twice + ": corrupt header (the key \"a\" twice in one object)");
    const std::string same_twice = safetensors_file("duplicate_same", "{" + st_entry("a", "[1]", 0, 4) + "," +
                                                                          st_entry("a", "[1]", 0, 4) + "}", 4);
    CHECK(refusal(same_twice) == same_twice + ": corrupt header (the key \"a\" twice in one object)");
    const std::string inner = safetensors_file("duplicate_field",
                                               "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],"
                                               "\"data_offsets\":[0,4]}}", 4);
    CHECK(refusal(inner) == inner + ": corrupt header (the key \"dtype\" twice in one object)");
    const std::string latin1 = safetensors_file("latin1", "{\"__metadata__\":{\"k\":\"\xe9\"}," +
                                                              st_entry("a", "[1]", 0, 4) + "}", 4);
    CHECK(refusal(latin1) == latin1 + ": corrupt header (not UTF-8)");
    const std::string surrogate = safetensors_file("surrogate", "{" + st_entry("\xed\xa0\x80", "[1]", 0, 4) + "}", 4);
    CHECK(refusal(surrogate) == surrogate + ": corrupt header (not UTF-8)");
    const std::string overlong = safetensors_file("overlong", "{" + st_entry("\xc0\xaf", "[1]", 0, 4) + "}", 4);
    CHECK(refusal(overlong) == overlong + ": corrupt header (not UTF-8)");
    const std::string cut_code = safetensors_file("cut_code", "{\"a\":1}       \xe2\x82", 0);  // ends mid-code
    CHECK(refusal(cut_code) == cut_code + ": corrupt header (not UTF-8)");
    const std::string utf8 = safetensors_file("utf8", "{\"__metadata__\":{\"k\":\"\xc3\xa9\xf0\x9f\x98\x80\"}," +
                                                          st_entry("\xe2\x82\xac", "[1]", 0, 4) + "}", 4);
    CHECK(safetensors_read(utf8).metadata.at("k") == "\xc3\xa9\xf0\x9f\x98\x80");
    const std::string not_json = safetensors_file("not_json", "{" + st_entry("a", "[1]", 0, 4), 4);
    CHECK(refusal(not_json) == not_json + ": corrupt header (not JSON)");
    // a header of 100 MB + 1 byte in a (sparse) file that long: refused before it is read
    const std::string huge = safetensors_file("huge_header", "", 0);
    std::filesystem::resize_file(huge, 8 + SAFETENSORS_MAX_HEADER + 1);
    {
        std::fstream out(huge, std::ios::binary | std::ios::in | std::ios::out);
        const uint64_t header_len = SAFETENSORS_MAX_HEADER + 1;
        out.write((const char*)&header_len, 8);
    }
    CHECK(refusal(huge) == huge + ": header of 100000001 bytes, over the format's 100 MB");
    std::filesystem::remove(huge);
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
