// checkpoint.cuh: the model's half of DESIGN.md section 6, on top of safetensors.cuh.
//   checkpoint_save: every parameter under its PyTorch-style name, the AdamW moments as
//                    "opt.m.<name>" / "opt.v.<name>", and the config in __metadata__;
//   checkpoint_load: the reverse, refusing a file whose shapes differ from the config;
//   dump_state:      parameters, one batch, its loss and every gradient ("grad.<name>"),
//                    so an outside reference (tests/torch_reference.py) can check the backward;
//                    under scalar encoding also the table "token_values" (V).
#pragma once
#include <map>
#include <string>
#include <vector>
#include "model.cuh"
#include "safetensors.cuh"

// Adds every tensor slice of the flat buffer `flat` (host copy) under prefix + its name.
inline void add_tensors(StFile& file, const Model& model, const std::vector<float>& flat, const std::string& prefix) {
    for (const TensorInfo& info : model.layout) {
        if (info.numel == 0) continue;
        for (int l = 0; l < info.slices; l++)
            file.add(prefix + tensor_name(info, l), info.shape, flat.data() + info.offset + l * info.numel);
    }
}

inline std::vector<float> download(const Model& model, const float* buffer) {
    std::vector<float> host(model.num_params);
    buffer_copy(host.data(), DEVICE_CPU, buffer, model.dev, model.num_params);
    return host;
}

inline std::map<std::string, std::string> config_metadata(const Config& c) {
    const char* mask = c.mask_heads == 0 ? "none" : c.mask_heads == 1 ? "layer" : "head";
    return {{"width", std::to_string(c.C)},     {"layers", std::to_string(c.L)},
            {"heads", std::to_string(c.NH)},    {"head_size", std::to_string(c.HS)},
            {"mlp", std::to_string(c.MLP)},     {"seq_len", std::to_string(c.T)},
            {"vocab", std::to_string(c.V)},     {"out", std::to_string(c.OUT)},
            {"mask", mask},                     {"causal", c.causal ? "1" : "0"},
            {"mask_layers", c.mask_first_layer_only ? "first" : "all"},
            {"head_type", c.head == HEAD_REGRESSION ? "regression" : c.head == HEAD_CLASS ? "class" : "next_token"},
            {"encoding", c.encoding == ENCODING_SCALAR ? "scalar" : "token"},
            {"loss", c.loss == LOSS_LOGISTIC ? "logistic" : "mse"}};
}

// Keys added after the first checkpoints were written, and what a file without them means.
static const std::map<std::string, std::string> METADATA_ADDED_LATER = {
    {"encoding", "token"}, {"loss", "mse"}, {"mask_layers", "all"}};

// extra: task, init, seed, step, ... (strings) added to the metadata.
inline void checkpoint_save(const std::string& path, const Model& model, std::map<std::string, std::string> extra) {
    StFile file;
    file.metadata = config_metadata(model.cfg);
    file.metadata.insert(extra.begin(), extra.end());
    file.metadata["adam_t"] = std::to_string(model.adam_t);
    add_tensors(file, model, download(model, model.params_mem), "");
    add_tensors(file, model, download(model, model.m_mem), "opt.m.");
    add_tensors(file, model, download(model, model.v_mem), "opt.v.");
    safetensors_write(path, file);
}

// Loads parameters and optimizer state into a built model; returns the file's metadata.
inline std::map<std::string, std::string> checkpoint_load(const std::string& path, Model& model) {
    StFile file = safetensors_read(path);
    for (const auto& [key, want] : config_metadata(model.cfg)) {
        auto it = file.metadata.find(key);
        auto later = METADATA_ADDED_LATER.find(key);
        if (it == file.metadata.end() && later == METADATA_ADDED_LATER.end())
            fail("%s: metadata has no '%s'", path.c_str(), key.c_str());
        const std::string& have = it != file.metadata.end() ? it->second : later->second;
        if (have != want)
            fail("%s was saved with %s=%s, but this run has %s=%s", path.c_str(), key.c_str(), have.c_str(),
                 key.c_str(), want.c_str());
    }
    float* buffers[3] = {model.params_mem, model.m_mem, model.v_mem};
    const char* prefixes[3] = {"", "opt.m.", "opt.v."};
    std::vector<float> host(model.num_params);
    for (int k = 0; k < 3; k++) {
        for (const TensorInfo& info : model.layout) {
            if (info.numel == 0) continue;
            for (int l = 0; l < info.slices; l++) {
                std::string name = prefixes[k] + tensor_name(info, l);
                const StTensor* t = file.find(name);
                if (!t) fail("%s: tensor %s is missing", path.c_str(), name.c_str());
                if (t->shape != info.shape) fail("%s: tensor %s has the wrong shape", path.c_str(), name.c_str());
                memcpy(host.data() + info.offset + l * info.numel, t->data.data(), info.numel * sizeof(float));
            }
        }
        buffer_copy(buffers[k], model.dev, host.data(), DEVICE_CPU, model.num_params);
    }
    auto it = file.metadata.find("adam_t");
    if (it == file.metadata.end()) fail("%s: metadata has no 'adam_t'", path.c_str());
    model.adam_t = atoi(it->second.c_str());
    return file.metadata;
}

// After model_forward + model_backward on one batch: write what a reference needs to redo it.
// tokens (rows,T); targets (rows) or, for the next-token head, (rows,T); loss_mask (rows,T) or
// empty (every position counts).
inline void dump_state(const std::string& path, const Model& model, const std::vector<int>& tokens,
                       const std::vector<float>& targets, const std::vector<float>& loss_mask, int rows,
                       float loss, std::map<std::string, std::string> extra) {
    StFile file;
    file.metadata = config_metadata(model.cfg);
    file.metadata.insert(extra.begin(), extra.end());
    add_tensors(file, model, download(model, model.params_mem), "");
    add_tensors(file, model, download(model, model.grads_mem), "grad.");
    std::vector<float> inputs(tokens.begin(), tokens.end());  // token ids as float32
    file.add("batch.inputs", {rows, model.cfg.T}, inputs.data());
    if (model.cfg.head == HEAD_NEXT_TOKEN) file.add("batch.targets", {rows, model.cfg.T}, targets.data());
    else file.add("batch.targets", {rows}, targets.data());
    if (!loss_mask.empty()) file.add("batch.loss_mask", {rows, model.cfg.T}, loss_mask.data());
    file.add("loss", {1}, &loss);
    if (model.cfg.encoding == ENCODING_SCALAR) file.add("token_values", {model.cfg.V}, model.cfg.token_value.data());
    safetensors_write(path, file);
}
