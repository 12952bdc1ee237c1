// prior/impulse.cuh: the impulse initialisation (Zheng, Li, Saratchandran, Lucey, "impulse
// initialisation", NeurIPS 2025; the SVD form of their code), for images only. Every head of
// every layer starts as one tap of a 3x3 convolution over the patch grid: the patch at (r, c)
// attends to the patch at (r+m, c+n). It needs no G and no mask, and it fills the host copy of
// the flat parameter buffer after init_default (which has drawn wpe) and the position scale.
//   scale:   as the authors run it, wpe is multiplied by 18 before the fit and kept (--pe-scale,
//            whose default is 18 for this init: run/setup.cuh, initialise): std 0.02 becomes 0.36,
//            so that position weighs in the first layer's input beside the patches' content.
//   offset:  head h takes entry idx of a 3x3 kernel, idx in the order 4 1 5 3 7 0 2 6 8 (head 0
//            the centre, then the four neighbours, then the corners; past 9 heads the order
//            cycles), (m, n) = (idx / 3 - 1, idx % 3 - 1).
//   target:  T_h (N,N) over the N = patches() patch tokens (not CLS), a patch p = r·cols + c:
//            T_h[p, p'] = 1 where p' = (r+m, c+n) is inside the grid, 0 elsewhere.
//   logits:  W_h = 1000·T_h + 3ε ⊙ (1 - T_h)   (N,N), ε ~ N(0, 0.6²) cut to [-2, 2] (the
//            absolute bounds of torch.nn.init.trunc_normal_(std=0.6)), fresh for each layer and head.
//   inputs:  Pe (N,C): the patches' position embeddings wpe[1..N] (scaled), each row LayerNormed without
//            affine (population variance, eps 1e-5); Pe⁺ (C,N) its pseudo-inverse over its HS
//            largest singular values.
//   Wq, Wk:  B_h = Pe⁺ W_h Pe⁺^T (C,C), the least-squares B with Pe B Pe^T ≈ W_h (exact when
//            N <= HS and the rows of Pe are independent); its rank-HS truncated SVD U S V^T gives
//            Wq = S^½ U^T and Wk = S^½ V^T (HS,C each; Wq^T Wk = B_h), each then rescaled to
//            Frobenius norm 7; q, k biases 0. So the logits Pe Wq^T Wk Pe^T / sqrt(HS) keep the
//            pattern of W_h at a sharpness set by the norm 7, not by the 1000.
//   Wv, Wo:  one matrix per layer, as mimetic's (set_layer_value_output): Σ_h Wv_h^T Wo_h^T =
//            0.4 Z - 0.4 I, Z ~ U(±sqrt(3/C)) (C,C), exact when NH·HS >= C.
// HS > N or HS > C is allowed: Pe⁺ and B then have fewer than HS singular values, and the
// factors' extra rows are 0.
#pragma once
#include <cmath>
#include <utility>
#include "prior/init.cuh"       // set_query_key, set_layer_value_output; through it Config, param_bind, Rng, fail
#include "prior/linalg.h"       // Matrix, svd, multiply, transpose, low_rank_factors
#include "prior/structure.h"    // Structure

// Head h's offset (m, n) on the patch grid: the patch at (r, c) attends to (r+m, c+n).
inline std::pair<int, int> impulse_offset(int head) {
    static const int kernel_entry[9] = {4, 1, 5, 3, 7, 0, 2, 6, 8};  // centre, 4 neighbours, 4 corners
    const int idx = kernel_entry[head % 9];
    return {idx / 3 - 1, idx % 3 - 1};
}

// ε ~ N(0, 0.6²) cut to [-2, 2], by rejection.
inline double impulse_noise(Rng& rng) {
    for (;;) {
        const double x = 0.6 * rng.normal();
        if (std::fabs(x) <= 2.0) return x;
    }
}

// Pe (N,C): wpe[1..N], each row LayerNormed without affine.
inline Matrix patch_position_inputs(const Config& c, const float* params) {
    const float* wpe = param_bind(c, const_cast<float*>(params)).wpe;  // (T,C); row 0 is CLS's
    Matrix Pe(c.patches(), c.C);
    for (int p = 0; p < Pe.rows; p++) {
        const float* x = wpe + (size_t)(1 + p) * c.C;
        double mean = 0, var = 0;
        for (int i = 0; i < c.C; i++) mean += x[i] / (double)c.C;
        for (int i = 0; i < c.C; i++) var += (x[i] - mean) * (x[i] - mean) / c.C;
        for (int i = 0; i < c.C; i++) Pe(p, i) = (x[i] - mean) / std::sqrt(var + 1e-5);
    }
    return Pe;
}

// A⁺ (n,m) of A (m,n) over A's `rank` largest singular values: V_r diag(1/σ_r) U_r^T. Those at or
// below 1e-5·σ_max are dropped as well, as pseudo_inverse drops them: the LayerNormed rows of Pe
// sum to 0, so Pe has a zero singular value whenever N >= C.
inline Matrix truncated_pseudo_inverse(const Matrix& A, int rank) {
    const Svd d = svd(A);
    Matrix P(A.cols, A.rows);
    for (int k = 0; k < rank && k < (int)d.S.size() && d.S[k] > 1e-5 * d.S[0]; k++)
        for (int i = 0; i < A.cols; i++)
            for (int j = 0; j < A.rows; j++) P(i, j) += d.V(i, k) * d.U(j, k) / d.S[k];
    return P;
}

inline void init_impulse(const Config& c, float* params, Rng& rng) {
    // params (num_params) host memory, with the default init in it
    if (!c.image_input()) fail("--init impulse is for images: its heads attend to neighbouring patches");
    if (c.T != 1 + c.patches()) fail("impulse init: T is %d, not 1 + %d patches (internal)", c.T, c.patches());
    const int N = c.patches(), cols = c.patch_cols();
    const Matrix Pe = patch_position_inputs(c, params);            // (N,C)
    const Matrix Pe_inv = truncated_pseudo_inverse(Pe, c.HS);      // (C,N)
    const Matrix Pe_inv_T = transpose(Pe_inv);                     // (N,C)
    for (int l = 0; l < c.L; l++) {
        for (int h = 0; h < c.NH; h++) {
            const auto [m, n] = impulse_offset(h);
            Matrix W(N, N);  // the target logits W_h
            for (int p = 0; p < N; p++)
                for (int key = 0; key < N; key++) {
                    const bool target = key / cols == p / cols + m && key % cols == p % cols + n;
                    W(p, key) = target ? 1000.0 : 3.0 * impulse_noise(rng);
                }
            const Matrix B = multiply(multiply(Pe_inv, W), Pe_inv_T);  // (C,C)
            Matrix Wq, Wk;                                              // (HS,C) each, Wq^T Wk = B
            low_rank_factors(B, c.HS, Wq, Wk);
            for (Matrix* w : {&Wq, &Wk}) {
                double norm = 0;
                for (double x : w->a) norm += x * x;
                if (norm == 0) fail("impulse init: the patches' position embeddings are constant rows, Pe is 0");
                for (double& x : w->a) x *= 7.0 / std::sqrt(norm);
            }
            set_query_key(c, params, l, h, Wq, Wk);
        }
        set_layer_value_output(c, params, l, rng);
    }
}

// The impulse init's own structure, for the step-0 check beside the task's G: head h's patch
// query p = r·cols + c (token 1 + p) and the key at its offset, (NH,T,T):
//   G_h[1 + p, 1 + p'] = T_h[p, p']      CLS's row and column 0, a patch on the grid's edge whose
//                                        offset leaves the grid without a key.
inline Structure impulse_structure(const Config& c) {
    const int N = c.patches(), cols = c.patch_cols(), rows = c.patch_rows(), T = c.T;
    Structure G;
    G.heads = c.NH;
    G.T = T;
    G.g.assign((size_t)c.NH * T * T, 0.0f);
    for (int h = 0; h < c.NH; h++) {
        const auto [m, n] = impulse_offset(h);
        for (int p = 0; p < N; p++) {
            const int r = p / cols + m, col = p % cols + n;
            if (r >= 0 && r < rows && col >= 0 && col < cols)
                G.g[((size_t)h * T + 1 + p) * T + 1 + r * cols + col] = 1.0f;
        }
    }
    return G;
}
