// run/safetensors.h: read and write safetensors files (host only).
// Format: 8-byte little-endian header length N, N bytes of JSON header, raw data.
// Header: {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
//          "__metadata__": {"key": "value", ...}}; offsets are relative to the data start.
// Writes go to FILE.tmp, which is synced and then renamed to FILE (run/atomic_file.h): a crash
// never leaves a torn file.
// The reader refuses what the official reader (huggingface/safetensors) refuses, and duplicate
// keys besides: a header over 100 MB or longer than the file, a header that is not UTF-8 or not a
// JSON object, a key twice in one object, a dtype we do not read (we read F32 alone), a shape or
// offsets that are not integers, a negative dimension, a tensor whose end comes before its begin,
// lies outside the data or holds other than numel(shape) floats, and tensors whose byte ranges,
// sorted by (begin, end), do not tile the data exactly from 0 to its end (no gap, no overlap, no
// byte left over). Each throws InputError (fail()) with one line naming the file.
#pragma once
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>
#include <nlohmann/json.hpp>
#include "layers/errors.h"    // fail()
#include "run/atomic_file.h"  // open_temporary, write_bytes, commit_file

struct StTensor {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> data;  // row-major, numel(shape) floats
};

struct StFile {
    std::map<std::string, std::string> metadata;
    std::vector<StTensor> tensors;

    void add(const std::string& name, std::vector<int64_t> shape, const float* host_data) {
        size_t n = 1;
        for (int64_t d : shape) n *= (size_t)d;
        tensors.push_back({name, std::move(shape), std::vector<float>(host_data, host_data + n)});
    }
    const StTensor* find(const std::string& name) const {
        for (const StTensor& t : tensors)
            if (t.name == name) return &t;
        return nullptr;
    }
};

inline void safetensors_write(const std::string& path, const StFile& file) {
    nlohmann::ordered_json header;
    if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
    size_t offset = 0;
    for (const StTensor& t : file.tensors) {
        size_t bytes = t.data.size() * sizeof(float);
        header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    while (text.size() % 8) text += ' ';  // keep the data 8-byte aligned, as the format suggests
    uint64_t header_len = text.size();

    std::string tmp = path + ".tmp";
    FILE* f = open_temporary(tmp);
    write_bytes(f, tmp, &header_len, 8);
    write_bytes(f, tmp, text.data(), text.size());
    for (const StTensor& t : file.tensors) write_bytes(f, tmp, t.data.data(), t.data.size() * sizeof(float));
    commit_file(f, tmp, path);  // on disk, then renamed over path
}

// The official reader's limit on the header's length.
static const uint64_t SAFETENSORS_MAX_HEADER = 100000000;

// Whether text is well-formed UTF-8: no stray continuation byte, no overlong form, no surrogate
// (U+D800..U+DFFF), nothing above U+10FFFF.
inline bool valid_utf8(const std::string& text) {
    const auto* s = (const unsigned char*)text.data();
    const size_t n = text.size();
    for (size_t i = 0; i < n;) {
        const unsigned char b = s[i];
        const int extra = b < 0x80 ? 0 : (b >> 5) == 0x6 ? 1 : (b >> 4) == 0xE ? 2 : (b >> 3) == 0x1E ? 3 : -1;
        if (extra < 0 || i + extra >= n) return false;  // a code cut off at the end
        uint32_t code = extra == 0 ? b : b & (0x3F >> extra);
        for (int k = 1; k <= extra; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            code = code << 6 | (s[i + k] & 0x3F);
        }
        const uint32_t least[4] = {0, 0x80, 0x800, 0x10000};  // the smallest code of each length
        if (code < least[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
        i += extra + 1;
    }
    return true;
}

// The header as JSON; *duplicate is a key that one of its objects holds twice, or "" (nlohmann
// keeps the last one silently, so the parser's callback watches every object's keys).
inline nlohmann::json parse_header(const std::string& text, std::string* duplicate) {
    std::vector<std::set<std::string>> open_objects;  // the keys seen so far, one set per open object
    auto watch = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using event_t = nlohmann::json::parse_event_t;
        if (event == event_t::object_start) open_objects.emplace_back();
        if (event == event_t::object_end) open_objects.pop_back();
        if (event == event_t::key && !open_objects.back().insert(parsed.get<std::string>()).second &&
            duplicate->empty())
            *duplicate = parsed.get<std::string>();
        return true;
    };
    return nlohmann::json::parse(text, watch, false);
}

// Where a tensor's bytes lie in the data: [begin, end).
struct StRange {
    uint64_t begin, end;
    size_t tensor;  // its index in StFile::tensors
};

inline StFile safetensors_read(const std::string& path) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) fail("cannot open %s", path.c_str());
    fseek(f, 0, SEEK_END);
    long file_size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint64_t header_len = 0;
    if (file_size < 8 || fread(&header_len, 8, 1, f) != 1 || header_len > (uint64_t)file_size - 8) {
        fclose(f);
        fail("%s is not a safetensors file (bad header length)", path.c_str());
    }
    if (header_len > SAFETENSORS_MAX_HEADER) {
        fclose(f);
        fail("%s: header of %llu bytes, over the format's 100 MB", path.c_str(), (unsigned long long)header_len);
    }
    std::string text(header_len, '\0');
    size_t got = fread(&text[0], 1, header_len, f);
    uint64_t data_size = (uint64_t)file_size - 8 - header_len;
    std::vector<char> data(data_size);
    got += fread(data.data(), 1, data_size, f);
    fclose(f);
    if (got != header_len + data_size) fail("%s: short read", path.c_str());

    if (!valid_utf8(text)) fail("%s: corrupt header (not UTF-8)", path.c_str());
    std::string duplicate;
    nlohmann::json header = parse_header(text, &duplicate);
    if (header.is_discarded() || !header.is_object()) fail("%s: corrupt header (not JSON)", path.c_str());
    if (!duplicate.empty()) fail("%s: corrupt header (the key \"%s\" twice in one object)", path.c_str(),
                                 duplicate.c_str());
    StFile file;
    std::vector<StRange> ranges;
    try {
        for (auto& [name, entry] : header.items()) {
            if (name == "__metadata__") {
                for (auto& [key, value] : entry.items()) file.metadata[key] = value.get<std::string>();
                continue;
            }
            if (entry.at("dtype").get<std::string>() != "F32")
                fail("%s: tensor %s is not F32", path.c_str(), name.c_str());
            for (const char* key : {"shape", "data_offsets"})  // get<> would convert 1e30 or -1.5 undefined
                for (const auto& v : entry.at(key))
                    if (!v.is_number_integer())
                        fail("%s: tensor %s has a %s entry that is not an integer", path.c_str(), name.c_str(), key);
            StTensor t;
            t.name = name;
            t.shape = entry.at("shape").get<std::vector<int64_t>>();
            auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
            const size_t max_floats = SIZE_MAX / sizeof(float);  // more than any file holds
            size_t n = 1;  // numel, held at max_floats from above: [2^32, 2^32] must not wrap round to 0
            for (int64_t d : t.shape) {
                if (d < 0) fail("%s: tensor %s has a negative dimension", path.c_str(), name.c_str());
                n = d != 0 && n > max_floats / (size_t)d ? max_floats : n * (size_t)d;
            }
            if (offsets.size() != 2) fail("%s: tensor %s has no [begin, end] data offsets", path.c_str(), name.c_str());
            if (offsets[0] > offsets[1])
                fail("%s: tensor %s has data offsets out of order (end before begin)", path.c_str(), name.c_str());
            if (offsets[1] > data_size || offsets[1] - offsets[0] != n * sizeof(float))
                fail("%s: tensor %s has data offsets outside the file (truncated?)", path.c_str(), name.c_str());
            ranges.push_back({offsets[0], offsets[1], file.tensors.size()});
            t.data.resize(n);
            if (n > 0) memcpy(t.data.data(), data.data() + offsets[0], n * sizeof(float));  // no null pointer
            file.tensors.push_back(std::move(t));
        }
    } catch (const nlohmann::json::exception& e) {
        fail("%s: corrupt header (%s)", path.c_str(), e.what());
    }
    // sorted by (begin, end), each range starts where the one before it ends, the first at 0
    std::sort(ranges.begin(), ranges.end(), [](const StRange& a, const StRange& b) {
        return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
    });
    uint64_t covered = 0;  // the data's bytes [0, covered) belong to the tensors checked so far
    for (const StRange& r : ranges) {
        const char* name = file.tensors[r.tensor].name.c_str();
        if (r.begin > covered)
            fail("%s: a gap in the data: tensor %s starts at byte %llu, the tensors before it cover %llu bytes",
                 path.c_str(), name, (unsigned long long)r.begin, (unsigned long long)covered);
        if (r.begin < covered)
            fail("%s: tensors overlap: tensor %s starts at byte %llu, inside the %llu bytes of the tensors before it",
                 path.c_str(), name, (unsigned long long)r.begin, (unsigned long long)covered);
        covered = r.end;
    }
    if (covered != data_size)
        fail("%s: %llu bytes after the last tensor's data (the tensors must cover the data exactly)", path.c_str(),
             (unsigned long long)(data_size - covered));
    return file;
}
