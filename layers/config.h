// layers/config.h: the model's shapes and switches (Config), and where every parameter lives in
// the flat parameter buffer: its checkpoint name, its shape, its offset (param_layout). Host
// only, so that the checkpoints and the initialisations can read the layout without the
// model's CUDA code. The same layout serves the parameters, their gradients and both AdamW
// moments (four buffers, one struct of pointers each: ParamTensors).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

// The output layer (the readout, "head" in the checkpoints' names as in timm and nanoGPT): a value
// per example, a class per example, or the next token at every position
enum ReadoutType { READOUT_REGRESSION = 0, READOUT_CLASS = 1, READOUT_NEXT_TOKEN = 2 };
enum Encoding { ENCODING_TOKEN = 0, ENCODING_SCALAR = 1 };  // see layers/embedding.cuh
enum LossType { LOSS_MSE = 0, LOSS_LOGISTIC = 1 };          // of the regression readout
// what a classification readout reads: the CLS position, or the mean of the patch tokens (images)
enum Pooling { POOL_CLS = 0, POOL_MEAN = 1 };
// --prior-layers: the structured prior (the mask, or the QK inits' weights) in every layer, or
// in layer 0 only (the other layers then have no mask and default query/key weights)
enum PriorLayers { PRIOR_ALL_LAYERS = 0, PRIOR_FIRST_LAYER = 1 };

struct Config {
    int V = 3;      // vocabulary size
    int T = 16;     // sequence length
    int C = 32;     // width
    int L = 2;      // layers
    int NH = 2;     // heads
    int HS = 16;    // head size, independent of C; attention works in NH*HS dims
    int MLP = 32;   // MLP hidden size
    int OUT = 1;    // readout outputs: 1 (regression), the number of classes, or V (next token)
    int mask_heads = 0;  // 0: no mask, 1: one M per layer shared by heads, NH: one per head
    PriorLayers prior_layers = PRIOR_ALL_LAYERS;
    bool causal = false;
    ReadoutType readout = READOUT_REGRESSION;
    Encoding encoding = ENCODING_TOKEN;
    std::vector<float> token_value;  // (V) scalar encoding: a token's value, 0 for none (the task's)
    LossType loss = LOSS_MSE;
    // images (layers/patch_embedding.cuh): an input is channels x height x width pixels, cut into
    // patch x patch squares; the sequence is CLS followed by the patches in row-major order, so
    // T = 1 + patches(). patch = 0: a token model (V token ids), as above.
    int channels = 0, height = 0, width = 0, patch = 0;
    Pooling pool = POOL_CLS;

    bool image_input() const { return patch > 0; }
    int patch_rows() const { return image_input() ? height / patch : 0; }
    int patch_cols() const { return image_input() ? width / patch : 0; }
    int patches() const { return patch_rows() * patch_cols(); }
    int patch_size() const { return channels * patch * patch; }  // floats of one flattened patch
    int image_size() const { return channels * height * width; }  // floats of one image
    int qkv_width() const { return 3 * NH * HS; }   // one row of the qkv projection: q, k, v of every head
    int attention_width() const { return NH * HS; }  // the heads' outputs side by side
    // the layers that carry the prior: 0 .. prior_layer_count() - 1
    int prior_layer_count() const { return prior_layers == PRIOR_FIRST_LAYER ? 1 : L; }
    bool layer_has_mask(int l) const { return mask_heads > 0 && l < prior_layer_count(); }
    // the position the readout reads: CLS, or under causal attention the last position, the
    // only one that sees the whole sequence
    int readout_position() const { return causal ? T - 1 : 0; }
    // rows of the readout per example: one, or every position for the next-token readout
    int readout_rows() const { return readout == READOUT_NEXT_TOKEN ? T : 1; }
};

// ----------------------------------------------------------------------------
// parameters: one struct of pointers, four instances (params, grads, AdamW m and v)

struct ParamTensors {
    float* wte;        // (V,C)  token models only
    float* patchw;     // (C, channels·patch·patch)  image models only: the patch embedding, a Conv2d's weight
    float* patchb;     // (C)  image models only
    float* cls;        // (C)  image models only: the CLS token's embedding
    float* wval;       // (C)  scalar encoding only: a valued token is value * wval
    float* wpe;        // (T,C)
    float* ln1w;       // (L,C)
    float* ln1b;       // (L,C)
    float* qkvw;       // (L,3·NH·HS,C)
    float* qkvb;       // (L,3·NH·HS)
    float* mask;       // (L,T,T) or (L,NH,T,T), L = 1 with --prior-layers first; absent (size 0) without a mask
    float* projw;      // (L,C,NH·HS)
    float* projb;      // (L,C)
    float* ln2w;       // (L,C)
    float* ln2b;       // (L,C)
    float* mlp_fcw;    // (L,MLP,C)
    float* mlp_fcb;    // (L,MLP)
    float* mlp_projw;  // (L,C,MLP)
    float* mlp_projb;  // (L,C)
    float* lnfw;       // (C)
    float* lnfb;       // (C)
    float* readoutw;   // (OUT,C)
    float* readoutb;   // (OUT)
};

// One tensor of the layout: its checkpoint name ("%d" for the layer), the shape of one
// layer's slice, where it sits in the flat buffer, and which ParamTensors field points to it.
struct TensorInfo {
    std::string name;
    float* ParamTensors::*field;
    bool per_layer;
    std::vector<int64_t> shape;
    size_t numel;   // of one slice
    size_t offset;  // of the whole (stacked) tensor in the flat buffer
    int slices;     // layers stacked: L for a per-layer tensor (the mask: the layers that have one), 1 else
};

inline std::vector<TensorInfo> param_layout(const Config& c) {
    std::vector<int64_t> mask_shape = c.mask_heads == 1 ? std::vector<int64_t>{c.T, c.T}
                                                          : std::vector<int64_t>{c.NH, c.T, c.T};
    std::vector<TensorInfo> t = {
        {"wte", &ParamTensors::wte, false, {c.V, c.C}},
        {"patch.weight", &ParamTensors::patchw, false, {c.C, c.patch_size()}},
        {"patch.bias", &ParamTensors::patchb, false, {c.C}},
        {"cls", &ParamTensors::cls, false, {c.C}},
        {"wval", &ParamTensors::wval, false, {c.C}},
        {"wpe", &ParamTensors::wpe, false, {c.T, c.C}},
        {"h.%d.ln1.weight", &ParamTensors::ln1w, true, {c.C}},
        {"h.%d.ln1.bias", &ParamTensors::ln1b, true, {c.C}},
        {"h.%d.attn.qkv.weight", &ParamTensors::qkvw, true, {c.qkv_width(), c.C}},
        {"h.%d.attn.qkv.bias", &ParamTensors::qkvb, true, {c.qkv_width()}},
        {"h.%d.attn.mask", &ParamTensors::mask, true, mask_shape},
        {"h.%d.attn.proj.weight", &ParamTensors::projw, true, {c.C, c.attention_width()}},
        {"h.%d.attn.proj.bias", &ParamTensors::projb, true, {c.C}},
        {"h.%d.ln2.weight", &ParamTensors::ln2w, true, {c.C}},
        {"h.%d.ln2.bias", &ParamTensors::ln2b, true, {c.C}},
        {"h.%d.mlp.fc.weight", &ParamTensors::mlp_fcw, true, {c.MLP, c.C}},
        {"h.%d.mlp.fc.bias", &ParamTensors::mlp_fcb, true, {c.MLP}},
        {"h.%d.mlp.proj.weight", &ParamTensors::mlp_projw, true, {c.C, c.MLP}},
        {"h.%d.mlp.proj.bias", &ParamTensors::mlp_projb, true, {c.C}},
        {"ln_f.weight", &ParamTensors::lnfw, false, {c.C}},
        {"ln_f.bias", &ParamTensors::lnfb, false, {c.C}},
        {"head.weight", &ParamTensors::readoutw, false, {c.OUT, c.C}},
        {"head.bias", &ParamTensors::readoutb, false, {c.OUT}},
    };
    size_t offset = 0;
    for (TensorInfo& info : t) {
        info.numel = 1;
        for (int64_t d : info.shape) info.numel *= (size_t)d;
        const int mask_slices = c.mask_heads > 0 ? c.prior_layer_count() : 0;
        info.slices = info.field == &ParamTensors::mask ? mask_slices : info.per_layer ? c.L : 1;
        if (info.slices == 0) info.numel = 0;
        if (info.field == &ParamTensors::wval && c.encoding != ENCODING_SCALAR) info.numel = 0;
        const bool image_only = info.field == &ParamTensors::patchw || info.field == &ParamTensors::patchb ||
                                info.field == &ParamTensors::cls;
        if ((image_only && !c.image_input()) || (info.field == &ParamTensors::wte && c.image_input())) info.numel = 0;
        info.offset = offset;
        offset += info.numel * info.slices;
    }
    return t;
}

inline size_t param_count(const Config& c) {
    TensorInfo last = param_layout(c).back();
    return last.offset + last.numel;
}

// Points every field of p into the flat buffer base (laid out by param_layout).
inline ParamTensors param_bind(const Config& c, float* base) {
    ParamTensors p;
    for (const TensorInfo& info : param_layout(c)) p.*info.field = info.numel ? base + info.offset : nullptr;
    return p;
}

// The checkpoint name of a tensor's slice for layer l ("h.3.ln1.weight"), or of a global one.
inline std::string tensor_name(const TensorInfo& info, int l) {
    if (!info.per_layer) return info.name;
    char buf[128];
    snprintf(buf, sizeof buf, info.name.c_str(), l);
    return buf;
}

// Layer l's slice of every per-layer tensor of p (parameters, gradients or a moment): what one
// transformer block reads. mask is nullptr in a layer without a mask.
struct BlockParams {
    float* ln1w;       // (C)
    float* ln1b;       // (C)
    float* qkvw;       // (3·NH·HS,C)
    float* qkvb;       // (3·NH·HS)
    float* mask;       // (T,T) or (NH,T,T), or nullptr
    float* projw;      // (C,NH·HS)
    float* projb;      // (C)
    float* ln2w;       // (C)
    float* ln2b;       // (C)
    float* mlp_fcw;    // (MLP,C)
    float* mlp_fcb;    // (MLP)
    float* mlp_projw;  // (C,MLP)
    float* mlp_projb;  // (C)
};

inline BlockParams block_params(const Config& c, const ParamTensors& p, int l) {
    const size_t C = c.C, QKV = c.qkv_width(), AW = c.attention_width(), MLP = c.MLP;
    const size_t mask_size = (size_t)c.mask_heads * c.T * c.T;
    return {p.ln1w + l * C,              p.ln1b + l * C,
            p.qkvw + l * QKV * C,        p.qkvb + l * QKV,
            c.layer_has_mask(l) ? p.mask + l * mask_size : nullptr,
            p.projw + l * C * AW,        p.projb + l * C,
            p.ln2w + l * C,              p.ln2b + l * C,
            p.mlp_fcw + l * MLP * C,     p.mlp_fcb + l * MLP,
            p.mlp_projw + l * C * MLP,   p.mlp_projb + l * C};
}
