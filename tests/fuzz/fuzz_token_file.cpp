// tests/fuzz/fuzz_token_file.cpp: libFuzzer harness of open_token_file (tasks/token_file.h), the
// reader of train.bin and val.bin. An accepted file must be exactly its header and count ids,
// each below the vocabulary size, which lies in 1 .. 65536; every id is read once through the
// mapping.
// Valid seeds: tests/fuzz/corpus/token_file/valid/, written by data/prepare_text.py.
//   make tests/fuzz/bin/fuzz_token_file && sh tests/fuzz/run_fuzz.sh --seconds 60 token_file
//   tests/fuzz/bin/fuzz_token_file CRASH_FILE          (replays one input, from the repository root)
#define FUZZ_NAME "token_file"
#include "tests/fuzz/fuzz.h"
#include "tasks/token_file.h"

void parse(const std::string& seed, const uint8_t* data, size_t size) {
    const std::string path = write_input("tokens.bin", data, size);
    auto read = [&] {
        const TokenFile file = open_token_file(path);
        check(file.vocab >= 1 && file.vocab <= 65536, "a vocabulary size outside 1 .. 65536 accepted");
        check(file.count >= 0 && TOKEN_HEADER_BYTES + 2 * (uint64_t)file.count == size,
              "a token count that does not match the file's size accepted");
        for (int64_t i = 0; i < file.count; i++) check(file[i] < file.vocab, "a token id >= V accepted");
    };
    if (seed.empty()) try_parse(read);
    else read();
}
