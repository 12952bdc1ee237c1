// run/safetensors.h: read and write safetensors files (host only).
// Format: 8-byte little-endian header length N, N bytes of JSON header, raw data.
// Header: {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
//          "__metadata__": {"key": "value", ...}}; offsets are relative to the data start.
// Writes go to FILE.tmp, which is synced and then renamed to FILE (run/atomic_file.h): a crash
// never leaves a torn file.
// Every way a file can be broken (short, bad JSON, offsets outside the data, a dtype we do
// not read) throws InputError (fail()) with one line naming the file.
#pragma once
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include "layers/errors.h"    // fail()
#include "run/atomic_file.h"  // commit_file

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
    FILE* f = fopen(tmp.c_str(), "wb");
    if (!f) fail("cannot write %s", tmp.c_str());
    bool ok = fwrite(&header_len, 8, 1, f) == 1 && fwrite(text.data(), 1, text.size(), f) == text.size();
    for (const StTensor& t : file.tensors)
        ok = ok && fwrite(t.data.data(), sizeof(float), t.data.size(), f) == t.data.size();
    if (!ok) {
        fclose(f);
        fail("writing %s failed (disk full?)", tmp.c_str());
    }
    commit_file(f, tmp, path);  // on disk, then renamed over path
}

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
    std::string text(header_len, '\0');
    size_t got = fread(&text[0], 1, header_len, f);
    uint64_t data_size = (uint64_t)file_size - 8 - header_len;
    std::vector<char> data(data_size);
    got += fread(data.data(), 1, data_size, f);
    fclose(f);
    if (got != header_len + data_size) fail("%s: short read", path.c_str());

    nlohmann::json header = nlohmann::json::parse(text, nullptr, false);
    if (header.is_discarded() || !header.is_object()) fail("%s: corrupt header (not JSON)", path.c_str());
    StFile file;
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
            if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size ||
                offsets[1] - offsets[0] != n * sizeof(float))
                fail("%s: tensor %s has data offsets outside the file (truncated?)", path.c_str(), name.c_str());
            t.data.resize(n);
            if (n > 0) memcpy(t.data.data(), data.data() + offsets[0], n * sizeof(float));  // no null pointer
            file.tensors.push_back(std::move(t));
        }
    } catch (const nlohmann::json::exception& e) {
        fail("%s: corrupt header (%s)", path.c_str(), e.what());
    }
    return file;
}
