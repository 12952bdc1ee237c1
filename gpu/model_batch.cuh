// gpu/model_batch.cuh: how a batch reaches the device the model runs on. model.cuh hands a batch
// over at one call (model_set_batch -> model_batch_set); the forward and backward passes read it
// from fixed addresses (ModelBatch's pointers):
//   - the batch block (DeviceBatch): a batch's inputs (token ids or pixels), targets, the loss
//     mask, the token rows of the embedding's kernel 2, a mixed image batch's second classes and
//     weights (recipe/mix.h) and the step's scalars (StepScalars, gpu/device_step.cuh), in one
//     allocation. On the GPU it is filled by one asynchronous copy from one of two pinned host
//     copies of it: the host fills one while the other's copy may still be queued, and waits for
//     nothing else. On the CPU the block is host memory, filled in place.
// Fixed addresses and values read from memory are what let a graph (gpu/graph.cuh) replay a
// step: a captured launch keeps its arguments, so whatever changes from step to step must be in
// memory the launch points to, not in the arguments.
#pragma once
#include <cstring>
#include <stdexcept>
#include <string>
#include "gpu/device_step.cuh"  // StepScalars
#include "layers/config.h"      // Config
#include "layers/device.cuh"    // Device, device_copy_async, cudaCheck
#include "layers/embedding.cuh" // TokenRows, token_rows_capacity, token_rows_build

// The arrays of one batch: room for `rows` examples
struct BatchShape {
    size_t token_ints = 0;      // (rows, T) token ids; 0 for an image model
    size_t pixel_floats = 0;    // (rows, channels, H, W); 0 for a token model
    size_t target_floats = 0;   // (rows · readout_rows)
    size_t mask_floats = 0;     // (rows · T) the next-token loss mask; 0 without one
    size_t token_row_ints = 0;  // TokenRows' array (layers/embedding.cuh); 0 where kernel 2 does not run
    size_t mix_floats = 0;      // (rows · 2) a mixed batch's second class and λ per row; 0 for a token model
};

// The batch block: the same layout (byte offsets) in the host copies and on the device
struct DeviceBatch {
    Device dev = DEVICE_CPU;
    size_t tokens = 0, pixels = 0, targets = 0, loss_mask = 0, token_rows = 0, mix = 0, scalars = 0, bytes = 0;
    char* device = nullptr;                      // the block on dev
    char* staging[2] = {nullptr, nullptr};       // GPU: two pinned host copies; CPU: the block itself
    cudaEvent_t copied[2] = {nullptr, nullptr};  // GPU: recorded after each copy's upload: refilled after it
    int next = 0;                                // the copy the host fills next
    template <typename T>
    T* on_device(size_t offset) const { return reinterpret_cast<T*>(device + offset); }
};

// Lays out and allocates the block for a batch of that shape on dev (the arrays 16-byte aligned).
inline void device_batch_build(DeviceBatch& b, Device dev, const BatchShape& shape) {
    size_t at = 0;
    auto room = [&](size_t bytes) {
        const size_t offset = at;
        at += (bytes + 15) / 16 * 16;
        return offset;
    };
    b.dev = dev;
    b.tokens = room(shape.token_ints * sizeof(int));
    b.pixels = room(shape.pixel_floats * sizeof(float));
    b.targets = room(shape.target_floats * sizeof(float));
    b.loss_mask = room(shape.mask_floats * sizeof(float));
    b.token_rows = room(shape.token_row_ints * sizeof(int));
    b.mix = room(shape.mix_floats * sizeof(float));
    b.scalars = room(sizeof(StepScalars));
    b.bytes = at;
    if (dev == DEVICE_CPU) {
        b.device = (char*)calloc(b.bytes, 1);
        if (!b.device) fail("out of memory allocating a batch of %zu bytes", b.bytes);
        b.staging[0] = b.staging[1] = b.device;
        return;
    }
    cudaCheck(cudaMalloc(&b.device, b.bytes));
    for (int k = 0; k < 2; k++) {
        cudaCheck(cudaMallocHost((void**)&b.staging[k], b.bytes));
        memset(b.staging[k], 0, b.bytes);
        cudaCheck(cudaEventCreate(&b.copied[k]));
    }
}

inline void device_batch_free(DeviceBatch& b) {
    if (b.dev == DEVICE_CPU) free(b.device);
    else if (b.device) cudaCheck(cudaFree(b.device));
    for (int k = 0; k < 2 && b.dev == DEVICE_GPU; k++) {
        if (b.staging[k]) cudaCheck(cudaFreeHost(b.staging[k]));
        if (b.copied[k]) cudaCheck(cudaEventDestroy(b.copied[k]));
    }
    b = DeviceBatch();
}

// The host copy to fill with the next batch. On the GPU the host waits until the upload from
// that pinned copy two batches ago has left (at once unless the GPU is two steps behind;
// --profile counts the wait).
inline char* device_batch_begin(DeviceBatch& b) {
    if (b.dev == DEVICE_CPU) return b.device;
    profile_staging_wait();
    cudaCheck(cudaEventSynchronize(b.copied[b.next]));
    return b.staging[b.next];
}

// Uploads the copy just filled: on the GPU one asynchronous copy on the stream, in order with the
// launches; on the CPU it is in place already.
inline void device_batch_upload(DeviceBatch& b) {
    if (b.dev == DEVICE_CPU) return;
    device_copy_async(b.device, b.staging[b.next], b.bytes, cudaMemcpyHostToDevice);
    cudaCheck(cudaEventRecord(b.copied[b.next], gpu_stream()));
    b.next ^= 1;
}

// ----------------------------------------------------------------------------
// the model's batch

// What a forward pass reads, in host memory: token ids (rows,T), or for an image model the
// normalised pixels (rows,channels,H,W). A token array converts to it, as most callers pass one.
struct ModelInput {
    const int* tokens = nullptr;
    const float* pixels = nullptr;
    ModelInput(const int* token_ids) : tokens(token_ids) {}
    ModelInput(const float* image_pixels) : pixels(image_pixels) {}
    // the same input from example `first` on
    ModelInput from(int first, const Config& c) const {
        return pixels ? ModelInput(pixels + (size_t)first * c.image_size()) : ModelInput(tokens + (size_t)first * c.T);
    }
};

// The batch where the passes read it (slices of the block, on dev), and what it held
struct ModelBatch {
    DeviceBatch block;
    int* tokens = nullptr;           // (B,T) token models
    TokenRows by_token;              // the batch's rows grouped by token: the GPU's kernel 2 embedding gradient
    float* pixels = nullptr;         // (B,channels,H,W) image models
    float* targets = nullptr;        // (B·readout_rows): a value, a class, or the next token at each position
    float* loss_mask = nullptr;      // (B·T) next-token readout only: 1 where a position counts in the loss
    float* mix = nullptr;            // (B,2) image models: a mixed batch's second class and λ of each row
    StepScalars* scalars = nullptr;  // (1) the batch's loss count, the step's AdamW scalars and index
    int rows = 0;                    // the rows of the last batch
    bool with_targets = false;       // whether it had targets
    bool mixed = false;              // whether they were mixed (mix holds the rest of them)
    bool masked = false;             // whether its loss weights the rows by loss_mask
    // the mixed batch's (B,2), for the cross-entropy's soft targets; nullptr: one class a row
    const float* mix_targets() const { return mixed ? mix : nullptr; }
    // the loss's row weights; nullptr: every row counts
    const float* row_weights() const { return masked ? loss_mask : nullptr; }
};

// Room for B rows of a model of config c on dev, with the token rows of the GPU's kernel 2
// embedding gradient where it may run (token models on the GPU)
inline void model_batch_build(ModelBatch& mb, const Config& c, Device dev, int B) {
    const size_t R = (size_t)B * c.readout_rows(), BT = (size_t)B * c.T;
    BatchShape shape;
    shape.token_ints = c.image_input() ? 0 : BT;
    shape.pixel_floats = c.image_input() ? (size_t)B * c.image_size() : 0;
    shape.target_floats = R;
    shape.mask_floats = c.readout == READOUT_NEXT_TOKEN ? R : 0;
    shape.token_row_ints = !c.image_input() && dev == DEVICE_GPU ? token_rows_capacity((int)BT, c.V) : 0;
    shape.mix_floats = c.image_input() ? 2 * R : 0;
    DeviceBatch& block = mb.block;
    device_batch_build(block, dev, shape);
    mb.tokens = shape.token_ints ? block.on_device<int>(block.tokens) : nullptr;
    mb.by_token.device = shape.token_row_ints ? block.on_device<int>(block.token_rows) : nullptr;
    mb.pixels = shape.pixel_floats ? block.on_device<float>(block.pixels) : nullptr;
    mb.targets = block.on_device<float>(block.targets);
    mb.loss_mask = shape.mask_floats ? block.on_device<float>(block.loss_mask) : nullptr;
    mb.mix = shape.mix_floats ? block.on_device<float>(block.mix) : nullptr;
    mb.scalars = block.on_device<StepScalars>(block.scalars);
}

inline void model_batch_free(ModelBatch& mb) {
    device_batch_free(mb.block);
    mb = ModelBatch();
}

// Hands over a batch of `rows` <= B examples in host memory: the input, targets (rows·readout_rows,
// or nullptr: no loss) and for the next-token readout loss_mask (rows·T) of 0/1 (nullptr: every
// position counts), with the step's scalars (a training step's AdamW values and index; the loss
// count is filled in here), and for a mixed image batch mix (rows,2), each row's second class and
// λ (recipe/mix.h; nullptr: unmixed). Written into the next host copy of the block (with the token
// rows of the embedding's kernel 2 when `token_rows`), then uploaded in one copy.
inline void model_batch_set(ModelBatch& mb, const Config& c, int B, bool token_rows, ModelInput input,
                            const float* targets, int rows, const float* loss_mask, StepScalars scalars,
                            const float* mix) {
    const int R = rows * c.readout_rows();
    if (rows < 1 || rows > B)
        throw std::logic_error("model_set_batch: " + std::to_string(rows) + " rows, but the buffers hold 1 to " +
                               std::to_string(B));
    if (c.image_input() != (input.pixels != nullptr))
        throw std::logic_error(std::string("model_set_batch: an ") + (c.image_input() ? "image" : "token") +
                               " model was given " + (input.pixels ? "pixels" : "tokens"));
    if (mix && !mb.mix) throw std::logic_error("model_set_batch: a mixed batch for a token model");
    mb.rows = rows;
    mb.with_targets = targets != nullptr;
    mb.mixed = targets && mix;
    mb.masked = targets && c.readout == READOUT_NEXT_TOKEN && loss_mask;
    scalars.loss_count = (float)R;
    if (mb.masked) {
        scalars.loss_count = 0;
        for (int r = 0; r < R; r++) scalars.loss_count += loss_mask[r];
        if (scalars.loss_count == 0) fail("the loss mask counts no position");
    }
    const size_t input_bytes = c.image_input() ? (size_t)rows * c.image_size() * sizeof(float)
                                               : (size_t)rows * c.T * sizeof(int);
    DeviceBatch& block = mb.block;
    char* staging = device_batch_begin(block);
    if (c.image_input()) memcpy(staging + block.pixels, input.pixels, input_bytes);
    else memcpy(staging + block.tokens, input.tokens, input_bytes);
    if (targets) memcpy(staging + block.targets, targets, R * sizeof(float));
    if (mb.masked) memcpy(staging + block.loss_mask, loss_mask, R * sizeof(float));
    if (mb.mixed) memcpy(staging + block.mix, mix, 2 * R * sizeof(float));
    memcpy(staging + block.scalars, &scalars, sizeof scalars);
    if (!c.image_input() && token_rows && mb.by_token.device) {
        token_rows_build(mb.by_token, input.tokens, rows * c.T, c.V);
        memcpy(staging + block.token_rows, mb.by_token.host.data(), mb.by_token.host.size() * sizeof(int));
    }
    device_batch_upload(block);
}
