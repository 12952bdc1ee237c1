// prior/linalg.h: the little dense linear algebra the QK initialisations need (prior/init.cuh),
// host only, in double: a matrix type, products, the singular value decomposition and the
// pseudo-inverse. The matrices are small (at most a few hundred rows), and they are used once,
// at initialisation.
//
// Why written here and not taken from LAPACK: the GPU machines the program is built on carry
// CUDA and cuBLAS but no Debian packages, and this is the one place that needs an SVD. The
// method is the one-sided Jacobi SVD (Hestenes): rotate pairs of columns of A until all are
// orthogonal; then A V = U Σ with V the product of the rotations, σ_j the column norms.
#pragma once
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

struct Matrix {
    int rows = 0, cols = 0;
    std::vector<double> a;  // (rows, cols), row-major
    Matrix() = default;
    Matrix(int r, int c) : rows(r), cols(c), a((size_t)r * c, 0.0) {}
    double& operator()(int i, int j) { return a[(size_t)i * cols + j]; }
    double operator()(int i, int j) const { return a[(size_t)i * cols + j]; }
};

inline Matrix transpose(const Matrix& m) {
    Matrix t(m.cols, m.rows);
    for (int i = 0; i < m.rows; i++)
        for (int j = 0; j < m.cols; j++) t(j, i) = m(i, j);
    return t;
}

inline Matrix multiply(const Matrix& x, const Matrix& y) {  // (n,k) (k,m) -> (n,m)
    Matrix out(x.rows, y.cols);
    for (int i = 0; i < x.rows; i++)
        for (int k = 0; k < x.cols; k++) {
            double xik = x(i, k);
            for (int j = 0; j < y.cols; j++) out(i, j) += xik * y(k, j);
        }
    return out;
}

// A (m,n) = U diag(S) V^T with U (m,r), S (r) descending, V (n,r), r = min(m,n).
struct Svd {
    Matrix U, V;
    std::vector<double> S;
};

inline Svd svd(const Matrix& A) {
    if (A.rows < A.cols) {  // work on the tall side: A^T = V S U^T
        Svd t = svd(transpose(A));
        return {t.V, t.U, t.S};
    }
    const int m = A.rows, n = A.cols;
    Matrix W = A, V(n, n);
    for (int j = 0; j < n; j++) V(j, j) = 1;
    for (int sweep = 0; sweep < 100; sweep++) {
        bool rotated = false;
        for (int p = 0; p < n - 1; p++)
            for (int q = p + 1; q < n; q++) {
                double alpha = 0, beta = 0, gamma = 0;  // |w_p|², |w_q|², w_p . w_q
                for (int i = 0; i < m; i++) {
                    alpha += W(i, p) * W(i, p);
                    beta += W(i, q) * W(i, q);
                    gamma += W(i, p) * W(i, q);
                }
                if (std::fabs(gamma) <= 1e-15 * std::sqrt(alpha * beta) || gamma == 0) continue;
                rotated = true;
                // the rotation by θ that makes columns p and q orthogonal: t = tan θ
                double zeta = (beta - alpha) / (2 * gamma);
                double t = (zeta >= 0 ? 1.0 : -1.0) / (std::fabs(zeta) + std::sqrt(1 + zeta * zeta));
                double c = 1 / std::sqrt(1 + t * t), s = c * t;
                for (Matrix* X : {&W, &V})
                    for (int i = 0; i < X->rows; i++) {
                        double xp = (*X)(i, p), xq = (*X)(i, q);
                        (*X)(i, p) = c * xp - s * xq;
                        (*X)(i, q) = s * xp + c * xq;
                    }
            }
        if (!rotated) break;
    }
    std::vector<double> norm(n);
    for (int j = 0; j < n; j++) {
        double s = 0;
        for (int i = 0; i < m; i++) s += W(i, j) * W(i, j);
        norm[j] = std::sqrt(s);
    }
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return norm[x] > norm[y]; });
    Svd out{Matrix(m, n), Matrix(n, n), std::vector<double>(n)};
    for (int k = 0; k < n; k++) {
        int j = order[k];
        out.S[k] = norm[j];
        for (int i = 0; i < m; i++) out.U(i, k) = norm[j] > 0 ? W(i, j) / norm[j] : 0;
        for (int i = 0; i < n; i++) out.V(i, k) = V(i, j);
    }
    return out;
}

// The Moore-Penrose pseudo-inverse (n,m) of A (m,n): V diag(1/σ) U^T over the singular values
// above relative_cutoff · σ_max. The ones below are taken as 0: they are rounding noise of a
// rank-deficient A, and inverting them would blow the result up (for A from float32 data,
// the noise sits near 1e-7 · σ_max, so a cutoff of 1e-5 is safe).
inline Matrix pseudo_inverse(const Matrix& A, double relative_cutoff) {
    Svd d = svd(A);
    const double cutoff = relative_cutoff * (d.S.empty() ? 0 : d.S[0]);
    Matrix P(A.cols, A.rows);
    for (size_t k = 0; k < d.S.size(); k++) {
        if (d.S[k] <= cutoff) continue;
        for (int i = 0; i < A.cols; i++)
            for (int j = 0; j < A.rows; j++) P(i, j) += d.V(i, k) * d.U(j, k) / d.S[k];
    }
    return P;
}

// Two factors of the best rank-r approximation of A (n,n) (Eckart-Young, from the truncated
// SVD): A ≈ X^T Y with X = sqrt(S_r) U_r^T and Y = sqrt(S_r) V_r^T, both (r, n). Rows past A's
// size (r > n) are zero.
inline void low_rank_factors(const Matrix& A, int r, Matrix& X, Matrix& Y) {
    Svd d = svd(A);
    X = Matrix(r, A.rows);
    Y = Matrix(r, A.cols);
    for (int k = 0; k < r && k < (int)d.S.size(); k++) {
        double root = std::sqrt(d.S[k]);
        for (int i = 0; i < A.rows; i++) X(k, i) = root * d.U(i, k);
        for (int i = 0; i < A.cols; i++) Y(k, i) = root * d.V(i, k);
    }
}
