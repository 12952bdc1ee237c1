// tests/fuzz/fuzz_vocabulary.cpp: libFuzzer harness of read_vocabulary (tasks/token_file.h), the
// reader of tokenizer.bin, and of the accepted vocabulary's encode and decode: a prompt that
// encodes (a missing byte token is a clean rejection) must decode back to itself byte for byte,
// since every id encode gives stands for the bytes it was merged from.
// Valid seeds: tests/fuzz/corpus/vocabulary/valid/, written by data/prepare_text.py (bytes and
// BPE); these must also encode the prompt.
//   make tests/fuzz/bin/fuzz_vocabulary && sh tests/fuzz/run_fuzz.sh --seconds 60 vocabulary
//   tests/fuzz/bin/fuzz_vocabulary CRASH_FILE          (replays one input, from the repository root)
#define FUZZ_NAME "vocabulary"
#include "tests/fuzz/fuzz.h"
#include "tasks/token_file.h"

// plain words, a tab and newline, two- and three-byte UTF-8, the separator, a cut-off character
static const std::string PROMPT =
    "Once upon a time,\tTom met a cat\xC3\xA9 \xE2\x80\x94 the end.\n<|endoftext|>Lily\xF0\x9F";

static Vocabulary read(const std::string& path) {
    Vocabulary voc = read_vocabulary(path);
    const int V = voc.size();
    check(V >= 1 && V <= 65536 && voc.score.size() == (size_t)V && voc.type.size() == (size_t)V,
          "a vocabulary of inconsistent size accepted");
    for (int b = 0; b < 256; b++)
        check(voc.byte_id[b] < V && (voc.byte_id[b] < 0 || voc.bytes[voc.byte_id[b]] == std::string(1, (char)b)),
              "byte " + std::to_string(b) + " maps to a token that is not that byte");
    return voc;
}

static void round_trip(const Vocabulary& voc) {
    const std::vector<int> ids = voc.encode(PROMPT);
    std::vector<uint16_t> short_ids;
    for (int id : ids) {
        check(id >= 0 && id < voc.size(), "encode gave the id " + std::to_string(id));
        short_ids.push_back((uint16_t)id);
    }
    check(voc.decode(short_ids.data(), (int64_t)short_ids.size()) == PROMPT, "the prompt does not decode to itself");
}

void parse(const std::string& seed, const uint8_t* data, size_t size) {
    const std::string path = write_input("tokenizer.bin", data, size);
    if (seed.empty()) {
        Vocabulary voc;
        if (try_parse([&] { voc = read(path); })) try_parse([&] { round_trip(voc); });
        return;
    }
    round_trip(read(path));
}
