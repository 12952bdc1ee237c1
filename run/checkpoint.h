// run/checkpoint.h: checkpoints and --dump-state, on top of safetensors.h. Host only: it
// works on host copies of the model's flat buffers, laid out by param_layout (layers/config.h).
//   checkpoint_save: every parameter under its PyTorch-style name, the AdamW moments as
//                    "opt.m.<name>" / "opt.v.<name>", with --ema the weights' moving average as
//                    "ema.<name>", and the config in __metadata__;
//   checkpoint_load: the reverse, refusing (InputError) a file whose config or shapes differ;
//   dump_state:      parameters, one batch, its loss and every gradient ("grad.<name>"),
//                    so an outside reference (tests/torch_reference.py) can check the backward;
//                    under scalar encoding also the table "token_values" (V); for an image
//                    model the batch's normalised pixels are its "batch.inputs".
#pragma once
#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>
#include "layers/config.h"   // Config, param_layout, tensor_name
#include "layers/errors.h"   // fail()
#include "run/safetensors.h" // StFile, safetensors_read, safetensors_write

using Metadata = std::map<std::string, std::string>;

// What a checkpoint holds of a run besides its metadata: host copies of the parameters, of
// both AdamW moments and of the weights' moving average (num_params floats each; ema empty: the
// run has none), and the optimizer's step count.
struct TrainingState {
    std::vector<float> params, m, v, ema;
    int adam_t = 0;
};

// Adds every tensor slice of the flat host buffer `flat` under prefix + its name.
inline void add_tensors(StFile& file, const Config& c, const std::vector<float>& flat, const std::string& prefix) {
    for (const TensorInfo& info : param_layout(c)) {
        if (info.numel == 0) continue;
        for (int l = 0; l < info.slices; l++)
            file.add(prefix + tensor_name(info, l), info.shape, flat.data() + info.offset + l * info.numel);
    }
}

// An image model's input shape, "channels x height x width" ("3x32x32"), or "none".
inline std::string image_text(const Config& c) {
    if (!c.image_input()) return "none";
    return std::to_string(c.channels) + "x" + std::to_string(c.height) + "x" + std::to_string(c.width);
}

// The keys are the checkpoint format's and keep their meaning: "mask_layers" is
// --prior-layers, all or first.
inline Metadata config_metadata(const Config& c) {
    const char* mask = c.mask_heads == 0 ? "none" : c.mask_heads == 1 ? "layer" : "head";
    return {{"width", std::to_string(c.C)},     {"layers", std::to_string(c.L)},
            {"heads", std::to_string(c.NH)},    {"head_size", std::to_string(c.HS)},
            {"mlp", std::to_string(c.MLP)},     {"seq_len", std::to_string(c.T)},
            {"vocab", std::to_string(c.V)},     {"out", std::to_string(c.OUT)},
            {"mask", mask},                     {"causal", c.causal ? "1" : "0"},
            {"mask_layers", c.prior_layers == PRIOR_FIRST_LAYER ? "first" : "all"},
            {"head_type", c.readout == READOUT_REGRESSION ? "regression"
                          : c.readout == READOUT_CLASS    ? "class"
                                                          : "next_token"},
            {"encoding", c.encoding == ENCODING_SCALAR ? "scalar" : "token"},
            {"loss", c.loss == LOSS_LOGISTIC ? "logistic" : "mse"},
            {"image", image_text(c)},           {"patch", std::to_string(c.patch)},
            {"pool", c.pool == POOL_MEAN ? "mean" : "cls"}};
}

// The config of a token model's checkpoint, from its metadata (config_metadata read back):
// what --generate builds without being told the shapes. path names the file in errors.
inline Config config_from_metadata(const Metadata& meta, const std::string& path) {
    auto number = [&](const char* key) {
        auto it = meta.find(key);
        const int v = it == meta.end() ? 0 : atoi(it->second.c_str());
        if (v < 1) fail("%s: metadata has no valid '%s'", path.c_str(), key);
        return v;
    };
    auto text = [&](const char* key) {
        auto it = meta.find(key);
        return it == meta.end() ? std::string() : it->second;
    };
    Config c;
    c.C = number("width");
    c.L = number("layers");
    c.NH = number("heads");
    c.HS = number("head_size");
    c.MLP = number("mlp");
    c.T = number("seq_len");
    c.V = number("vocab");
    c.OUT = number("out");
    c.mask_heads = text("mask") == "layer" ? 1 : text("mask") == "head" ? c.NH : 0;
    c.prior_layers = text("mask_layers") == "first" ? PRIOR_FIRST_LAYER : PRIOR_ALL_LAYERS;
    c.causal = text("causal") == "1";
    c.readout = text("head_type") == "next_token" ? READOUT_NEXT_TOKEN
                : text("head_type") == "class"    ? READOUT_CLASS
                                                  : READOUT_REGRESSION;
    if (text("encoding") == "scalar" || (text("image") != "" && text("image") != "none"))
        fail("%s: not a token model with token encoding", path.c_str());
    return c;
}

// Keys added after the first checkpoints were written, and what a file without them means.
static const Metadata METADATA_ADDED_LATER = {{"encoding", "token"}, {"loss", "mse"},  {"mask_layers", "all"},
                                              {"image", "none"},     {"patch", "0"},    {"pool", "cls"}};

// extra: task, init, seed, step, ... (strings) added to the metadata.
inline void checkpoint_save(const std::string& path, const Config& c, const TrainingState& state,
                            const Metadata& extra) {
    StFile file;
    file.metadata = config_metadata(c);
    file.metadata.insert(extra.begin(), extra.end());
    file.metadata["adam_t"] = std::to_string(state.adam_t);
    add_tensors(file, c, state.params, "");
    add_tensors(file, c, state.m, "opt.m.");
    add_tensors(file, c, state.v, "opt.v.");
    if (!state.ema.empty()) add_tensors(file, c, state.ema, "ema.");
    safetensors_write(path, file);
}

// Reads a checkpoint written for config c; its metadata goes to *metadata. The moving average
// is read where the file has one (its readout bias there), and must then be whole.
inline TrainingState checkpoint_load(const std::string& path, const Config& c, Metadata* metadata) {
    StFile file = safetensors_read(path);
    for (const auto& [key, want] : config_metadata(c)) {
        auto it = file.metadata.find(key);
        auto later = METADATA_ADDED_LATER.find(key);
        if (it == file.metadata.end() && later == METADATA_ADDED_LATER.end())
            fail("%s: metadata has no '%s'", path.c_str(), key.c_str());
        const std::string& have = it != file.metadata.end() ? it->second : later->second;
        if (have != want)
            fail("%s was saved with %s=%s, but this run has %s=%s", path.c_str(), key.c_str(), have.c_str(),
                 key.c_str(), want.c_str());
    }
    TrainingState state;
    std::vector<float>* buffers[4] = {&state.params, &state.m, &state.v, &state.ema};
    const char* prefixes[4] = {"", "opt.m.", "opt.v.", "ema."};
    const int kinds = file.find("ema." + tensor_name(param_layout(c).back(), 0)) ? 4 : 3;  // "ema.head.bias"
    for (int k = 0; k < kinds; k++) {
        buffers[k]->assign(param_count(c), 0.0f);
        for (const TensorInfo& info : param_layout(c)) {
            if (info.numel == 0) continue;
            for (int l = 0; l < info.slices; l++) {
                std::string name = prefixes[k] + tensor_name(info, l);
                const StTensor* t = file.find(name);
                if (!t) fail("%s: tensor %s is missing", path.c_str(), name.c_str());
                if (t->shape != info.shape) fail("%s: tensor %s has the wrong shape", path.c_str(), name.c_str());
                std::copy(t->data.begin(), t->data.end(), buffers[k]->begin() + info.offset + l * info.numel);
            }
        }
    }
    auto it = file.metadata.find("adam_t");
    if (it == file.metadata.end()) fail("%s: metadata has no 'adam_t'", path.c_str());
    state.adam_t = atoi(it->second.c_str());
    *metadata = file.metadata;
    return state;
}

// One batch of a forward and backward pass, for --dump-state: tokens (rows,T) or, for an image
// model, pixels (rows, channels, H, W); targets (rows) or, for the next-token readout, (rows,T);
// loss_mask (rows,T) or empty (every position counts).
struct DumpedBatch {
    const std::vector<int>& tokens;
    const std::vector<float>& pixels;
    const std::vector<float>& targets;
    const std::vector<float>& loss_mask;
    int rows;
    float loss;
};

// What a reference needs to redo one step: params and grads are host copies (num_params).
inline void dump_state(const std::string& path, const Config& c, const std::vector<float>& params,
                       const std::vector<float>& grads, const DumpedBatch& batch, const Metadata& extra) {
    StFile file;
    file.metadata = config_metadata(c);
    file.metadata.insert(extra.begin(), extra.end());
    add_tensors(file, c, params, "");
    add_tensors(file, c, grads, "grad.");
    std::vector<float> inputs(batch.tokens.begin(), batch.tokens.end());  // token ids as float32
    if (c.image_input()) file.add("batch.inputs", {batch.rows, c.channels, c.height, c.width}, batch.pixels.data());
    else file.add("batch.inputs", {batch.rows, c.T}, inputs.data());
    if (c.readout == READOUT_NEXT_TOKEN) file.add("batch.targets", {batch.rows, c.T}, batch.targets.data());
    else file.add("batch.targets", {batch.rows}, batch.targets.data());
    if (!batch.loss_mask.empty()) file.add("batch.loss_mask", {batch.rows, c.T}, batch.loss_mask.data());
    file.add("loss", {1}, &batch.loss);
    if (c.encoding == ENCODING_SCALAR) file.add("token_values", {c.V}, c.token_value.data());
    safetensors_write(path, file);
}
