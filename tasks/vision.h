// tasks/vision.h: image classification, the Vision Transformer's task (host only, like every
// task). An image of channels x H x W pixels is the input; the model cuts it into P x P patches
// (layers/patch_embedding.cuh), so the sequence is CLS followed by the (H/P)·(W/P) patches in
// row-major order: T = 1 + (H/P)·(W/P). The target is the class; the metric top-1 accuracy.
//   - pixels are normalised per channel by the training set's mean and standard deviation:
//     x = (pixel / 255 - mean_c) / std_c
//   - a training example is augmented, every choice drawn from the example's draw key, so that
//     the pixels of step s are a pure function of (seed, s, row); evaluation examples are not.
//     In turn: RandAugment on the 8-bit image (recipe/randaugment.h; off unless asked), the
//     normalisation, a random crop with `pad` pixels of padding and a random horizontal flip
//     (recipe/augment.h), then random erasing (off unless asked). timm's order but for the crop
//     and flip, which timm applies first, to the raw image
//   - G, the prior's structure (2-D locality): patch (r, c) may attend to patch (r', c') when
//     |r - r'| <= k/2 and |c - c'| <= k/2 (a k x k neighbourhood, k odd); CLS attends to every
//     patch and every patch to CLS
// The data comes from the loaders of tasks/image_files.h and tasks/image_folder.h.
#pragma once
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>
#include "recipe/augment.h"      // augment_image, random_erase
#include "tasks/image_files.h"  // ImageData, ImageSet
#include "recipe/randaugment.h"  // ByteImage, randaugment
#include "tasks/task.h"         // Task, Scorer, ExampleSlot

struct VisionSettings {
    int patch = 4;        // patch side P: must divide the image's height and width
    int window = 3;       // G's neighbourhood k (odd)
    int pad = 4;          // the random crop's padding; 0: no crop
    bool flip = true;     // the random horizontal flip
    int randaugment = 0;      // RandAugment's magnitude M, 1..10 on timm's scale; 0: off
    int randaugment_ops = 2;  // the ops RandAugment draws for each image
    double erase = 0;         // the probability of random erasing; 0: off
};

// Top-1 accuracy, counted batch by batch: the outputs are the logits (rows, classes).
struct TopOneScorer : Scorer {
    const std::vector<int>& labels;  // (eval_size) the evaluation set's classes
    int classes;
    int64_t correct = 0, seen = 0;
    TopOneScorer(const std::vector<int>& l, int k) : labels(l), classes(k) {}
    void add(int first, int rows, const float* logits) override {
        for (int r = 0; r < rows; r++) {
            correct += top_class(logits + (size_t)r * classes, classes) == labels[first + r];
            seen++;
        }
    }
    Metrics metrics() const override { return {{"acc", seen ? (double)correct / seen : 0.0}}; }
};

struct VisionTask : Task {
    ImageData data;
    VisionSettings settings;
    std::vector<double> channel_mean, channel_std;  // (channels) of pixel / 255 over the training images
    std::vector<uint8_t> mean_colour;  // (channels) round(255 channel_mean): RandAugment's fill

    VisionTask(const std::string& task_name, ImageData loaded, const VisionSettings& s)
        : data(std::move(loaded)), settings(s) {
        name = task_name;
        const ImageSet& train = data.train;
        const int P = s.patch;
        const ImageSet& test = data.test;
        if (train.size() == 0) throw std::runtime_error(task_name + ": the training split has no images");
        if (test.channels != train.channels || test.height != train.height || test.width != train.width)
            throw std::runtime_error(task_name + ": the test images are " + std::to_string(test.channels) + "x" +
                                     std::to_string(test.height) + "x" + std::to_string(test.width) +
                                     ", the training images " + std::to_string(train.channels) + "x" +
                                     std::to_string(train.height) + "x" + std::to_string(train.width));
        if (P < 1 || train.height % P != 0 || train.width % P != 0)
            throw std::runtime_error(task_name + ": --patch " + std::to_string(P) + " does not divide its " +
                                     std::to_string(train.height) + "x" + std::to_string(train.width) + " images");
        if (s.window < 1 || s.window % 2 == 0)
            throw std::runtime_error("--mask-window must be odd (a neighbourhood centred on the patch), got " +
                                     std::to_string(s.window));
        if (s.randaugment > 0 && train.channels != 1 && train.channels != 3)
            throw std::runtime_error(task_name + ": RandAugment needs grey or RGB images, these have " +
                                     std::to_string(train.channels) + " channels");
        image = {train.channels, train.height, train.width};
        seq_len = 1 + (train.height / P) * (train.width / P);
        outputs = data.classes;
        measure_normalisation();
        for (double mean : channel_mean) mean_colour.push_back((uint8_t)std::lround(255 * mean));
    }

    // mean and std per channel over every training pixel, summed in double in a fixed order
    void measure_normalisation() {
        const ImageSet& train = data.train;
        const size_t plane = (size_t)train.height * train.width;
        channel_mean.assign(train.channels, 0.0);
        channel_std.assign(train.channels, 0.0);
        for (int c = 0; c < train.channels; c++) {
            double sum = 0, sum_sq = 0;
            for (int i = 0; i < train.size(); i++) {
                const uint8_t* p = train.image(i) + c * plane;
                for (size_t k = 0; k < plane; k++) {
                    const double v = p[k] / 255.0;
                    sum += v;
                    sum_sq += v * v;
                }
            }
            const double n = (double)plane * train.size(), mean = sum / n;
            channel_mean[c] = mean;
            channel_std[c] = std::sqrt(std::max(sum_sq / n - mean * mean, 1e-12));
        }
    }

    // p (channels, H, W) 8-bit pixels, normalised: out (channels, H, W)
    void normalise(const uint8_t* p, float* out) const {
        const size_t plane = (size_t)image.height * image.width;
        for (int c = 0; c < image.channels; c++)
            for (size_t k = 0; k < plane; k++)
                out[c * plane + k] = (float)((p[c * plane + k] / 255.0 - channel_mean[c]) / channel_std[c]);
    }

    // image i of a split, normalised: out (channels, H, W)
    void normalised(const ImageSet& set, int i, float* out) const { normalise(set.image(i), out); }

    int train_size() const override { return data.train.size(); }
    // The stages take their own words of the draw: the crop and flip words 0, 1, 2 (as before
    // the others existed), RandAugment the key splitmix64(draw + 3), erasing splitmix64(draw + 4).
    void train_example(int index, uint64_t draw, const ExampleSlot& out) const override {
        std::vector<float> plain(image.floats());  // (channels, H, W) normalised, before the crop and flip
        const uint8_t* pixels = data.train.image(index);
        if (settings.randaugment > 0) {
            ByteImage augmented{image.channels, image.height, image.width,
                                std::vector<uint8_t>(pixels, pixels + data.train.image_bytes())};
            randaugment(augmented, settings.randaugment, settings.randaugment_ops, mean_colour.data(),
                        splitmix64(draw + 3));
            normalise(augmented.pixels.data(), plain.data());
        } else
            normalise(pixels, plain.data());
        augment_image(plain.data(), out.pixels, image.channels, image.height, image.width, settings.pad,
                      settings.flip, draw);
        if (settings.erase > 0)
            random_erase(out.pixels, image.channels, image.height, image.width, settings.erase, splitmix64(draw + 4));
        *out.targets = (float)data.train.labels[index];
    }
    int eval_size() const override { return data.test.size(); }
    void eval_example(int index, const ExampleSlot& out) const override {
        normalised(data.test, index, out.pixels);
        *out.targets = (float)data.test.labels[index];
    }
    std::unique_ptr<Scorer> scorer() const override {
        return std::make_unique<TopOneScorer>(data.test.labels, data.classes);
    }

    std::string token_text(int t) const override {
        if (t == 0) return "CLS";
        const int cols = image.width / settings.patch;
        return "p" + std::to_string((t - 1) / cols) + "," + std::to_string((t - 1) % cols);
    }
    std::string describe() const override {
        std::string mean, std;
        for (size_t c = 0; c < channel_mean.size(); c++) {
            char buf[32];
            snprintf(buf, sizeof buf, "%s%.4f", c ? " " : "", channel_mean[c]);
            mean += buf;
            snprintf(buf, sizeof buf, "%s%.4f", c ? " " : "", channel_std[c]);
            std += buf;
        }
        return data.source + "; " + std::to_string(image.channels) + "x" + std::to_string(image.height) + "x" +
               std::to_string(image.width) + ", patch " + std::to_string(settings.patch) + "; mean " + mean +
               ", std " + std;
    }

    // G: 2-D locality over the patch grid, CLS to and from all
    std::vector<float> structure() const override {
        const int T = seq_len, cols = image.width / settings.patch, reach = settings.window / 2;
        std::vector<float> G((size_t)T * T, 0.0f);
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                const bool cls = i == 0 || j == 0;
                const int dr = (i - 1) / cols - (j - 1) / cols, dc = (i - 1) % cols - (j - 1) % cols;
                G[(size_t)i * T + j] = cls || (std::abs(dr) <= reach && std::abs(dc) <= reach) ? 1.0f : 0.0f;
            }
        return G;
    }
};
