// text_fixture.h: token folders written by the tests themselves (the format of tasks/token_file.h),
// so that the language tests need neither Python nor a data set: a vocabulary of V tokens and
// train/val token files. V = 256 is the bytes tokenizer (token = byte); any other V has pieces
// (type 0): ids 0..74 the characters '0' + id ('0'..'z'), the rest "<id>".
#pragma once
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include "tasks/token_file.h"

inline void put_u32(std::string& out, uint32_t v) { out.append((const char*)&v, 4); }
inline void put_u64(std::string& out, uint64_t v) { out.append((const char*)&v, 8); }

inline void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), (std::streamsize)bytes.size());
}

// The bytes of a token file: header (magic, version, V, count, text bytes), then the ids.
inline std::string token_file_bytes(int V, const std::vector<uint16_t>& ids, uint64_t text_bytes = 0,
                                    const char* magic = "MPTOKENS", uint32_t version = 1) {
    std::string out(magic, 8);
    put_u32(out, version);
    put_u32(out, (uint32_t)V);
    put_u64(out, ids.size());
    put_u64(out, text_bytes);
    out.append((const char*)ids.data(), ids.size() * 2);
    return out;
}

// What token v of a test vocabulary of V tokens decodes to
inline std::string fixture_piece(int v, int V) {
    if (V == 256) return std::string(1, (char)v);
    return v < 75 ? std::string(1, (char)('0' + v)) : "<" + std::to_string(v) + ">";
}

// One id of a vocabulary file: its score, TokenType and the bytes it decodes to
struct VocabEntry {
    float score;
    uint8_t type;
    std::string bytes;
};

// The bytes of a tokenizer.bin: header (magic, version, V, kind), then the entries in id order
inline std::string vocabulary_bytes(const std::vector<VocabEntry>& entries, uint32_t kind) {
    std::string out("MPVOCAB1", 8);
    put_u32(out, 1);
    put_u32(out, (uint32_t)entries.size());
    put_u32(out, kind);
    put_u32(out, 0);
    for (const VocabEntry& e : entries) {
        out.append((const char*)&e.score, 4);
        out.push_back((char)e.type);
        put_u32(out, (uint32_t)e.bytes.size());
        out += e.bytes;
    }
    return out;
}

// The test vocabulary of V tokens (fixture_piece)
inline std::string vocabulary_bytes(int V) {
    std::vector<VocabEntry> entries;
    const uint8_t type = V == 256 ? TOKEN_BYTE : TOKEN_PIECE;
    for (int v = 0; v < V; v++) entries.push_back({V == 256 ? 0.0f : -(float)v, type, fixture_piece(v, V)});
    return vocabulary_bytes(entries, V == 256 ? 0 : 1);
}

// dir/tokenizer.bin, dir/train.bin, dir/val.bin; returns dir
inline std::string write_token_folder(const std::string& dir, int V, const std::vector<uint16_t>& train,
                                      const std::vector<uint16_t>& val) {
    std::filesystem::create_directories(dir);
    write_bytes(dir + "/tokenizer.bin", vocabulary_bytes(V));
    write_bytes(dir + "/train.bin", token_file_bytes(V, train));
    write_bytes(dir + "/val.bin", token_file_bytes(V, val));
    return dir;
}

// n tokens of a text with something to learn: a seeded random walk over V ids that mostly steps
// by +1 (so the next token is predictable from the last one), with a random jump one time in 8
inline std::vector<uint16_t> walk_tokens(int V, size_t n, uint64_t seed) {
    Rng rng(seed);
    std::vector<uint16_t> ids(n);
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        v = rng.below(8) == 0 ? rng.below(V) : (v + 1) % V;
        ids[i] = (uint16_t)v;
    }
    return ids;
}

// A folder of walk tokens: V ids, train_n and val_n tokens; returns dir
inline std::string write_walk_folder(const std::string& dir, int V, size_t train_n, size_t val_n) {
    return write_token_folder(dir, V, walk_tokens(V, train_n, 1), walk_tokens(V, val_n, 2));
}
