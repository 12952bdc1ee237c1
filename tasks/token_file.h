// tasks/token_file.h: the files data/prepare_text.py writes, read back (host only, like every task).
//
// A token file (train.bin, val.bin) is a 32-byte header and the tokens, little-endian:
//   offset  0  8 bytes  magic "MPTOKENS"
//   offset  8  uint32   version (1)
//   offset 12  uint32   vocabulary size V (1 .. 65536)
//   offset 16  uint64   token count N
//   offset 24  uint64   UTF-8 bytes of the text the tokens encode
//   offset 32  N x uint16 token ids, each < V
// It is memory-mapped, not read: the full TinyStories is hundreds of millions of tokens, and the
// pages a run touches are the only ones read from disk.
//
// The vocabulary (tokenizer.bin) says what each id stands for:
//   offset  0  8 bytes  magic "MPVOCAB1"
//   offset  8  uint32   version (1);  offset 12 uint32 V;  offset 16 uint32 kind (0 bytes, 1 bpe);
//   offset 20  uint32   reserved
//   then per id: float32 score, uint8 type, uint32 length L, L bytes: the UTF-8 bytes the token decodes to
// Types: 0 a piece (merged by BPE), 1 a single byte (byte fallback; every token of the bytes
// tokenizer), 2 control (<unk>: decodes to nothing), 3 user-defined (<|endoftext|>: matched whole).
#pragma once
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

constexpr size_t TOKEN_HEADER_BYTES = 32;

// One memory-mapped token file. Moves, does not copy; unmaps when it goes.
struct TokenFile {
    std::string path;
    int vocab = 0;
    int64_t count = 0;       // tokens
    int64_t text_bytes = 0;  // of the text they encode
    const uint16_t* tokens = nullptr;  // (count) into the mapping
    void* mapping = nullptr;
    size_t mapped_bytes = 0;

    TokenFile() = default;
    TokenFile(const TokenFile&) = delete;
    TokenFile& operator=(const TokenFile&) = delete;
    TokenFile(TokenFile&& o) noexcept { *this = std::move(o); }
    TokenFile& operator=(TokenFile&& o) noexcept {
        std::swap(path, o.path);
        std::swap(vocab, o.vocab);
        std::swap(count, o.count);
        std::swap(text_bytes, o.text_bytes);
        std::swap(tokens, o.tokens);
        std::swap(mapping, o.mapping);
        std::swap(mapped_bytes, o.mapped_bytes);
        return *this;
    }
    ~TokenFile() {
        if (mapping) munmap(mapping, mapped_bytes);
    }
    uint16_t operator[](int64_t i) const { return tokens[i]; }
};

// Little-endian integers from a byte buffer (the machines here are little-endian; the
// explicit form keeps the format's definition in one place).
inline uint32_t read_u32(const unsigned char* p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
inline uint64_t read_u64(const unsigned char* p) { return read_u32(p) | (uint64_t)read_u32(p + 4) << 32; }

// Maps a token file and checks it: the header, the size it implies, and every id < V (one pass
// over the tokens). Anything wrong throws one line naming the file.
inline TokenFile open_token_file(const std::string& path) {
    auto bad = [&](const std::string& why) { throw std::runtime_error(path + ": " + why); };
    const int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) bad("cannot open it (data/prepare_text.py writes token files)");
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        bad("not a regular file");
    }
    TokenFile f;
    f.path = path;
    f.mapped_bytes = (size_t)st.st_size;
    if (f.mapped_bytes < TOKEN_HEADER_BYTES) {
        close(fd);
        bad("is " + std::to_string(f.mapped_bytes) + " bytes, shorter than the 32-byte header of a token file");
    }
    f.mapping = mmap(nullptr, f.mapped_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f.mapping == MAP_FAILED) {
        f.mapping = nullptr;
        bad("cannot map it into memory");
    }
    const unsigned char* head = (const unsigned char*)f.mapping;
    if (memcmp(head, "MPTOKENS", 8) != 0) bad("not a token file (its magic is not MPTOKENS)");
    if (read_u32(head + 8) != 1) bad("token file version " + std::to_string(read_u32(head + 8)) + ", expected 1");
    const uint32_t V = read_u32(head + 12);
    if (V < 1 || V > 65536) bad("vocabulary size " + std::to_string(V) + " is outside 1 .. 65536");
    const uint64_t count = read_u64(head + 16);
    const uint64_t expected = TOKEN_HEADER_BYTES + 2 * count;
    if (count > (uint64_t)1 << 40 || expected != f.mapped_bytes)
        bad("the header says " + std::to_string(count) + " tokens (" + std::to_string(expected) +
            " bytes), the file has " + std::to_string(f.mapped_bytes) + " bytes: truncated or not this format");
    f.vocab = (int)V;
    f.count = (int64_t)count;
    f.text_bytes = (int64_t)read_u64(head + 24);
    f.tokens = (const uint16_t*)(head + TOKEN_HEADER_BYTES);
    for (int64_t i = 0; i < f.count; i++)
        if (f.tokens[i] >= V)
            bad("token " + std::to_string(i) + " is " + std::to_string(f.tokens[i]) +
                ", not below the vocabulary size " + std::to_string(V));
    return f;
}

enum TokenType { TOKEN_PIECE = 0, TOKEN_BYTE = 1, TOKEN_CONTROL = 2, TOKEN_USER = 3 };

// The vocabulary of tokenizer.bin: what each id decodes to, and encoding a prompt the way
// llama2.c's run.c does it, which for a sentencepiece BPE model with byte fallback gives
// sentencepiece's own ids (tests/test_language.cu checks it on the fixture):
//   1. the user-defined pieces (<|endoftext|>) are cut out first, each one token;
//   2. the rest starts as one token per UTF-8 character, a character without a token as its
//      bytes' tokens (byte fallback);
//   3. then, again and again, the adjacent pair whose concatenation is a piece with the highest
//      score is merged, until no pair is a piece.
struct Vocabulary {
    std::string path;
    int kind = 0;                     // 0 bytes, 1 bpe
    std::vector<std::string> bytes;   // (V) what each id decodes to
    std::vector<float> score;         // (V)
    std::vector<uint8_t> type;        // (V) TokenType
    std::map<std::string, int> piece_id;  // decoded bytes -> id, for the pieces merging may make
    int byte_id[256];                 // the id of each single byte's token, -1 if none

    int size() const { return (int)bytes.size(); }

    std::string decode(const uint16_t* ids, int64_t n) const {
        std::string text;
        for (int64_t i = 0; i < n; i++) text += bytes[ids[i]];
        return text;
    }

    std::vector<int> encode(const std::string& text) const {
        std::vector<int> out;
        size_t start = 0;
        while (start < text.size()) {  // 1. cut at the earliest user-defined piece
            size_t cut = text.size(), cut_len = 0;
            int cut_id = -1;
            for (int v = 0; v < size(); v++) {
                if (type[v] != TOKEN_USER || bytes[v].empty()) continue;
                const size_t at = text.find(bytes[v], start);
                if (at < cut) cut = at, cut_len = bytes[v].size(), cut_id = v;
            }
            encode_plain(text.substr(start, cut - start), out);
            if (cut_id < 0) break;
            out.push_back(cut_id);
            start = cut + cut_len;
        }
        return out;
    }

    void encode_plain(const std::string& text, std::vector<int>& out) const {
        std::vector<std::string> parts;  // the tokens so far, as their bytes
        for (size_t i = 0; i < text.size();) {  // 2. characters, or their bytes
            size_t len = 1;
            const unsigned char lead = (unsigned char)text[i];
            if (lead >= 0xF0) len = 4;
            else if (lead >= 0xE0) len = 3;
            else if (lead >= 0xC0) len = 2;
            len = std::min(len, text.size() - i);
            const std::string ch = text.substr(i, len);
            if (piece_id.count(ch)) parts.push_back(ch);
            else
                for (size_t k = 0; k < len; k++) parts.push_back(ch.substr(k, 1));
            i += len;
        }
        while (parts.size() > 1) {  // 3. the best-scoring merge, first of equals, until none
            int best = -1;
            float best_score = 0;
            for (size_t k = 0; k + 1 < parts.size(); k++) {
                auto it = piece_id.find(parts[k] + parts[k + 1]);
                if (it == piece_id.end()) continue;
                if (best < 0 || score[it->second] > best_score) best = (int)k, best_score = score[it->second];
            }
            if (best < 0) break;
            parts[best] += parts[best + 1];
            parts.erase(parts.begin() + best + 1);
        }
        for (const std::string& p : parts) {  // a piece, or a lone byte (never merged) by its byte token
            auto it = piece_id.find(p);
            if (it != piece_id.end()) out.push_back(it->second);
            else if (byte_id[(unsigned char)p[0]] >= 0) out.push_back(byte_id[(unsigned char)p[0]]);
            else throw std::runtime_error(path + ": the byte " + std::to_string((unsigned char)p[0]) + " has no token");
        }
    }
};

inline Vocabulary read_vocabulary(const std::string& path) {
    auto bad = [&](const std::string& why) { throw std::runtime_error(path + ": " + why); };
    std::ifstream f(path, std::ios::binary);
    if (!f) bad("cannot open it (data/prepare_text.py writes tokenizer.bin)");
    std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const unsigned char* p = (const unsigned char*)data.data();
    if (data.size() < 24 || memcmp(p, "MPVOCAB1", 8) != 0) bad("not a vocabulary file (its magic is not MPVOCAB1)");
    if (read_u32(p + 8) != 1) bad("vocabulary version " + std::to_string(read_u32(p + 8)) + ", expected 1");
    const uint32_t V = read_u32(p + 12);
    if (V < 1 || V > 65536) bad("vocabulary size " + std::to_string(V) + " is outside 1 .. 65536");
    Vocabulary voc;
    voc.path = path;
    voc.kind = (int)read_u32(p + 16);
    std::fill(voc.byte_id, voc.byte_id + 256, -1);
    size_t at = 24;
    for (uint32_t v = 0; v < V; v++) {
        if (at + 9 > data.size()) bad("truncated at token " + std::to_string(v) + " of " + std::to_string(V));
        float score;
        memcpy(&score, p + at, 4);
        const uint8_t type = p[at + 4];
        const uint32_t len = read_u32(p + at + 5);
        at += 9;
        if (type > TOKEN_USER) bad("token " + std::to_string(v) + " has the unknown type " + std::to_string(type));
        if (len > data.size() - at) bad("truncated at token " + std::to_string(v) + " of " + std::to_string(V));
        std::string piece = data.substr(at, len);
        at += len;
        if (type == TOKEN_BYTE && len != 1) bad("byte token " + std::to_string(v) + " is not one byte long");
        if (type == TOKEN_BYTE) voc.byte_id[(unsigned char)piece[0]] = (int)v;
        else if (type == TOKEN_PIECE && !piece.empty()) voc.piece_id.emplace(piece, (int)v);
        voc.bytes.push_back(piece);
        voc.score.push_back(score);
        voc.type.push_back(type);
    }
    if (at != data.size()) bad(std::to_string(data.size() - at) + " bytes after the last token");
    return voc;
}
