// layers/activations.h: the model's activations for a batch of B rows and their layout in one
// buffer (activations_bind), and the slices one block reads and writes (block_activations,
// block_gradients, readout_row_block). model.cuh's header has the math whose results they hold.
#pragma once
#include <cstddef>
#include "layers/config.h"  // Config

// ----------------------------------------------------------------------------
// activations for a batch of B rows; the same struct over the gradient buffers holds their
// gradients, where what has no gradient (the LayerNorm statistics, A, the probabilities, the
// losses) has no room and a null pointer

struct Activations {
    // images only (empty for a token model): the flattened patches and their embedding
    float* patches;    // (B,NP,channels·P·P)
    float* embedded;   // (B,NP,C)
    float* encoded;    // (B,T,C)  the embedding: layer 0's x
    // every layer's block, as in BlockActivations (layer l's slice: block_activations)
    float* ln1;        // (L,B,T,C)
    float* ln1_mean;   // (L,B,T)
    float* ln1_rstd;   // (L,B,T)
    float* qkv;        // (L,B,T,3·NH·HS)
    float* att;        // (L,B,NH,T,T)  A (its gradient is never stored: see Model::dscores)
    float* y;          // (L,B,T,NH·HS)
    float* proj;       // (L,B,T,C)
    float* x_mid;      // (L,B,T,C)  x after the attention half of the block
    float* ln2;        // (L,B,T,C)
    float* ln2_mean;   // (L,B,T)
    float* ln2_rstd;   // (L,B,T)
    float* mlp_fc;     // (L,B,T,MLP)
    float* mlp_gelu;   // (L,B,T,MLP)
    float* mlp_proj;   // (L,B,T,C)
    float* x_out;      // (L,B,T,C)  x after the whole block
    // the readout's rows R = B·readout_rows(): one per example, or (next token) every position
    float* pooled;     // (B,C)  x_out[:, readout_position] of the last block (--pool mean: the patches'
                       //        mean); unused by next token
    // the last block after attention on the readout's row alone (model_forward with
    // readout_row_only): BlockActivations' fields, one row per example; its x_out is pooled
    float* readout_input;     // (B,C)  x[:, readout_position] entering the last block
    float* readout_y;         // (B,NH·HS)
    float* readout_proj;      // (B,C)
    float* readout_x_mid;     // (B,C)
    float* readout_ln2;       // (B,C)
    float* readout_ln2_mean;  // (B)
    float* readout_ln2_rstd;  // (B)
    float* readout_mlp_fc;    // (B,MLP)
    float* readout_mlp_gelu;  // (B,MLP)
    float* readout_mlp_proj;  // (B,C)
    float* lnf;        // (R,C)
    float* lnf_mean;   // (R)
    float* lnf_rstd;   // (R)
    float* logits;     // (R,OUT)
    float* probs;      // (R,OUT)  softmax, classification and next token
    float* losses;     // (R)
};

// Points the fields of a at consecutive slices of base (nullptr: only count) and returns the
// floats they take; gradients = true lays out the gradient buffers, without the slots that
// have no gradient, and without the residual stream's slots but one: a sum passes its gradient
// to both its terms unchanged, so the gradients of every block's x, proj, x_mid, mlp_proj and
// x_out are one buffer, encoded's (B,T,C), which the backward reads and adds into in place
// (block_gradients).
inline size_t activations_bind(const Config& c, int B, Activations* a, float* base, bool gradients) {
    const size_t BT = (size_t)B * c.T, L = c.L, R = (size_t)B * c.readout_rows(), BP = (size_t)B * c.patches();
    const bool FWD = true;  // a slot only the forward pass has: no room in the gradient buffers
    const bool RESIDUAL = true;  // a residual-stream slot: its gradient is encoded's (no room of its own)
    struct Slot { float** ptr; size_t n; bool forward_only = false; };
    const Slot slots[] = {
        {&a->patches, BP * c.patch_size(), FWD},  {&a->embedded, BP * c.C},
        {&a->encoded, BT * c.C},
        {&a->ln1, L * BT * c.C},           {&a->ln1_mean, L * BT, FWD},   {&a->ln1_rstd, L * BT, FWD},
        {&a->qkv, L * BT * c.qkv_width()}, {&a->att, L * B * c.NH * c.T * c.T, FWD},
        {&a->y, L * BT * c.attention_width()},
        {&a->proj, L * BT * c.C, RESIDUAL}, {&a->x_mid, L * BT * c.C, RESIDUAL},
        {&a->ln2, L * BT * c.C},           {&a->ln2_mean, L * BT, FWD},   {&a->ln2_rstd, L * BT, FWD},
        {&a->mlp_fc, L * BT * c.MLP},      {&a->mlp_gelu, L * BT * c.MLP},
        {&a->mlp_proj, L * BT * c.C, RESIDUAL}, {&a->x_out, L * BT * c.C, RESIDUAL},
        {&a->pooled, (size_t)B * c.C},
        {&a->readout_input, (size_t)B * c.C, FWD},       {&a->readout_y, (size_t)B * c.attention_width(), FWD},
        {&a->readout_proj, (size_t)B * c.C, FWD},        {&a->readout_x_mid, (size_t)B * c.C, FWD},
        {&a->readout_ln2, (size_t)B * c.C, FWD},         {&a->readout_ln2_mean, (size_t)B, FWD},
        {&a->readout_ln2_rstd, (size_t)B, FWD},          {&a->readout_mlp_fc, (size_t)B * c.MLP, FWD},
        {&a->readout_mlp_gelu, (size_t)B * c.MLP, FWD},  {&a->readout_mlp_proj, (size_t)B * c.C, FWD},
        {&a->lnf, R * c.C},                {&a->lnf_mean, R, FWD},        {&a->lnf_rstd, R, FWD},
        {&a->logits, R * c.OUT},           {&a->probs, R * c.OUT, FWD},   {&a->losses, R, FWD},
    };
    size_t total = 0;
    for (const Slot& slot : slots) {
        if (gradients && slot.forward_only) {
            if (base) *slot.ptr = nullptr;
            continue;
        }
        if (base) *slot.ptr = base + total;
        total += slot.n;
    }
    return total;
}

// Layer l's slice of the activations (or of their gradients): what one block reads and writes.
// input is the block's x: the embedding for layer 0, the previous block's output after that.
struct BlockActivations {
    float* input;      // (B,T,C)
    float* ln1;        // (B,T,C)
    float* ln1_mean;   // (B,T)
    float* ln1_rstd;   // (B,T)
    float* qkv;        // (B,T,3·NH·HS)
    float* att;        // (B,NH,T,T)
    float* y;          // (B,T,NH·HS)
    float* proj;       // (B,T,C)
    float* x_mid;      // (B,T,C)
    float* ln2;        // (B,T,C)
    float* ln2_mean;   // (B,T)
    float* ln2_rstd;   // (B,T)
    float* mlp_fc;     // (B,T,MLP)
    float* mlp_gelu;   // (B,T,MLP)
    float* mlp_proj;   // (B,T,C)
    float* x_out;      // (B,T,C)
};

inline BlockActivations block_activations(const Config& c, const Activations& a, int B, int l) {
    const size_t BT = (size_t)B * c.T, C = c.C;
    // slot + l * per_layer, or null where the slot has no room (the gradient buffers)
    auto at = [l](float* slot, size_t per_layer) { return slot ? slot + l * per_layer : nullptr; };
    return {l == 0 ? a.encoded : a.x_out ? a.x_out + (l - 1) * BT * C : nullptr,
            at(a.ln1, BT * C),
            at(a.ln1_mean, BT),
            at(a.ln1_rstd, BT),
            at(a.qkv, BT * c.qkv_width()),
            at(a.att, (size_t)B * c.NH * c.T * c.T),
            at(a.y, BT * c.attention_width()),
            at(a.proj, BT * C),
            at(a.x_mid, BT * C),
            at(a.ln2, BT * C),
            at(a.ln2_mean, BT),
            at(a.ln2_rstd, BT),
            at(a.mlp_fc, BT * c.MLP),
            at(a.mlp_gelu, BT * c.MLP),
            at(a.mlp_proj, BT * C),
            at(a.x_out, BT * C)};
}

// Layer l's slice of the gradient buffers: the residual stream's fields all the one residual
// gradient (activations_bind), the others as block_activations gives them.
inline BlockActivations block_gradients(const Config& c, const Activations& d, int B, int l) {
    BlockActivations dx = block_activations(c, d, B, l);
    dx.input = dx.proj = dx.x_mid = dx.mlp_proj = dx.x_out = d.encoded;
    return dx;
}

// The last block's readout row (forward only): the compact slots of Activations as a block whose
// rows are the examples, for block_tail_forward. Only the fields after attention are used.
inline BlockActivations readout_row_block(const Activations& a) {
    BlockActivations h = {};
    h.input = a.readout_input;
    h.y = a.readout_y;
    h.proj = a.readout_proj;
    h.x_mid = a.readout_x_mid;
    h.ln2 = a.readout_ln2;
    h.ln2_mean = a.readout_ln2_mean;
    h.ln2_rstd = a.readout_ln2_rstd;
    h.mlp_fc = a.readout_mlp_fc;
    h.mlp_gelu = a.readout_mlp_gelu;
    h.mlp_proj = a.readout_mlp_proj;
    h.x_out = a.pooled;
    return h;
}
