// tasks/decode.h: greedy decoding for the next-token tasks. Host-only C++; the model comes in
// as a function that gives the next-token logits at every position.
//
// For the decode positions p_1 < ... < p_P, one forward pass each, in order:
//     y_j = argmax_v logits[p_j, v]        (the lowest id on ties)
//     tokens[p_j + 1] = y_j                (when p_j + 1 < T)
// so each prediction is the input the next one reads. Before the first pass every input that
// decoding will fill is set to blank_token, so the true answer is never an input (under a
// causal model position p sees only tokens 0..p anyway: the blank is a guard, not what makes
// the result right). Exactly P passes: the answers have a fixed length, so decoding stops
// there and never looks for an end token.
#pragma once
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

// next_logits(tokens (rows, T), rows, logits (rows, T, V) out): the model's next-token logits
// at every position
using NextTokenLogits = std::function<void(const int* tokens, int rows, std::vector<float>& logits)>;

// tokens (rows, T): the examples, overwritten at the decoded inputs; decoded (rows, P) out:
// y_j of row r at decoded[r * P + j]
inline void greedy_decode(const NextTokenLogits& next_logits, int* tokens, int rows, int T, int V,
                          const std::vector<int>& positions, int blank_token, std::vector<int>& decoded) {
    const int P = (int)positions.size();
    for (int j = 0; j < P; j++)
        if (positions[j] < 0 || positions[j] >= T || (j > 0 && positions[j] <= positions[j - 1]))
            throw std::invalid_argument("greedy_decode: positions must ascend within 0.." + std::to_string(T - 1));
    for (int r = 0; r < rows; r++)
        for (int p : positions)
            if (p + 1 < T) tokens[r * T + p + 1] = blank_token;
    decoded.assign((size_t)rows * P, 0);
    std::vector<float> logits;  // (rows, T, V)
    for (int j = 0; j < P; j++) {
        const int p = positions[j];
        next_logits(tokens, rows, logits);
        if (logits.size() != (size_t)rows * T * V)
            throw std::invalid_argument("greedy_decode: the model gave " + std::to_string(logits.size()) +
                                        " logits, not rows * T * V = " + std::to_string((size_t)rows * T * V));
        for (int r = 0; r < rows; r++) {
            const float* row = logits.data() + ((size_t)r * T + p) * V;  // (V): position p of row r
            int best = 0;
            for (int v = 1; v < V; v++)
                if (row[v] > row[best]) best = v;
            decoded[(size_t)r * P + j] = best;
            if (p + 1 < T) tokens[r * T + p + 1] = best;
        }
    }
}
