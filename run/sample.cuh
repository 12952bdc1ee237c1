// run/sample.cuh: text from a language model's checkpoint (--generate FILE): the prompt is encoded
// with the data folder's vocabulary, then one token at a time is drawn from the model's
// next-token distribution, printed as it comes, and appended to the context.
//
// No KV cache: each new token runs the model on the whole window again (at most T tokens, one
// row). A cache would save the keys and values of the earlier positions, but this model's
// positions are absolute (wpe and the T x T mask M are indexed by position in the window), so
// once the text is longer than T every token moves one place and every cached key is stale;
// a cache would only help the first T tokens, at T <= 256 a few milliseconds each on a CPU.
#pragma once
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>
#include "model.cuh"           // Model, model_build, model_forward, model_activations
#include "run/checkpoint.h"    // checkpoint_load, config_from_metadata
#include "run/options.h"       // Options
#include "run/safetensors.h"   // safetensors_read
#include "run/setup.cuh"       // choose_kernels
#include "tasks/task.h"        // splitmix64, example_draw, top_class
#include "tasks/token_file.h"  // Vocabulary, read_vocabulary

// A uniform number in [0, 1) from a 64-bit key: its top 53 bits.
inline double unit_interval(uint64_t key) { return (double)(key >> 11) * (1.0 / 9007199254740992.0); }

// One token from the logits (V) of the next position:
//   temperature 0 or top_k 1: the most likely token (greedy; the first of equal maxima)
//   else p_v ∝ exp((z_v - max z) / temperature) over the top_k likeliest tokens (0: all V),
//   and the token is the first v, in order of decreasing p (ties: lower id first), whose
//   cumulative probability passes u · Σp, u in [0, 1): inverse-transform sampling.
inline int sample_token(const float* logits, int V, float temperature, int top_k, double u) {
    if (temperature == 0.0f || top_k == 1) return top_class(logits, V);
    std::vector<int> order(V);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    const int kept = top_k > 0 ? std::min(top_k, V) : V;
    std::vector<double> p(kept);
    double total = 0;
    for (int k = 0; k < kept; k++)
        total += p[k] = std::exp(((double)logits[order[k]] - logits[order[0]]) / temperature);
    const double target = u * total;
    double cumulative = 0;
    for (int k = 0; k < kept; k++)
        if ((cumulative += p[k]) > target) return order[k];
    return order[kept - 1];  // u·total rounded to the very top
}

// --generate: prints the continuation of --prompt (stdout: the text alone; what was loaded goes to
// stderr). Token i is drawn with u = unit_interval(example_draw(seed, i, 0)), so a seed fixes the text.
inline int generate(const Options& opt, Device dev) {
    Metadata meta = safetensors_read(opt.generate).metadata;
    if (meta["head_type"] != "next_token" || meta.count("data_dir") == 0)
        fail("%s is not a language model's checkpoint (--task lm)", opt.generate.c_str());
    const Config cfg = config_from_metadata(meta, opt.generate);
    const Kernels kernels = choose_kernels(opt, cfg.HS, cfg.T);
    gpu_prepare(dev, kernels);
    const std::string dir = opt.data_dir.empty() ? meta["data_dir"] : opt.data_dir;
    const Vocabulary vocabulary = read_vocabulary(dir + "/tokenizer.bin");
    if (vocabulary.size() != cfg.V)
        fail("%s has %d tokens, the model %s was trained on %d", vocabulary.path.c_str(), vocabulary.size(),
             opt.generate.c_str(), cfg.V);
    Model model;
    ModelOwner owner{model};  // frees the buffers however generate() ends
    model_build(model, cfg, dev, 1);
    model.kernels = kernels;
    model_upload(model, model.params_mem, checkpoint_load(opt.generate, cfg, &meta).params);
    // an empty prompt starts a new line, where the texts' documents start (token 0 in a vocabulary
    // without a newline)
    std::vector<int> context;
    if (!opt.prompt.empty()) context = vocabulary.encode(opt.prompt);
    else if (vocabulary.byte_id[(unsigned char)'\n'] >= 0 || vocabulary.piece_id.count("\n"))
        context = vocabulary.encode("\n");
    else context = {0};
    if (context.empty()) fail("--prompt encodes to no token");
    fprintf(stderr, "maskprior: %s (step %s, %s), vocabulary %s; temperature %g, top-k %d, seed %llu\n",
            opt.generate.c_str(), meta["step"].c_str(), device_name(dev).c_str(), vocabulary.path.c_str(),
            opt.temperature, opt.top_k, (unsigned long long)opt.seed);
    fputs(opt.prompt.c_str(), stdout);
    std::vector<int> window(cfg.T);
    std::vector<float> logits(cfg.V);
    const double start = now_seconds();
    for (int64_t i = 0; i < opt.sample_tokens; i++) {
        // the last T tokens of the context, then padding that causal attention never lets them see
        const int len = (int)std::min<size_t>(context.size(), cfg.T);
        std::fill(window.begin(), window.end(), 0);
        std::copy(context.end() - len, context.end(), window.begin());
        model_forward(model, window.data(), nullptr, 1);
        buffer_copy(logits.data(), DEVICE_CPU, model_activations(model, 1).logits + (size_t)(len - 1) * cfg.V, dev,
                    cfg.V);
        const int next = sample_token(logits.data(), cfg.V, opt.temperature, opt.top_k,
                                      unit_interval(example_draw(opt.seed, i, 0)));
        context.push_back(next);
        fwrite(vocabulary.bytes[next].data(), 1, vocabulary.bytes[next].size(), stdout);
        fflush(stdout);
    }
    fprintf(stderr, "\nmaskprior: %lld tokens in %.2f s\n", (long long)opt.sample_tokens, now_seconds() - start);
    return 0;
}
