// The one numerically stable softmax of a row, and its log-space twin. softmax and log_softmax
// (autograd/ops_softmax.cpp), attention (attention.cpp) and cross-entropy (cross_entropy.cpp) all
// normalize their rows with these. Inline: attention calls them once per row of a few keys.
//
// Softmax is shift-invariant: softmax(x) = softmax(x - m) for any m. With m = max_j x_j every
// exponent is <= 0, so no exp() can overflow (logits of 1e4 are fine), and the largest term is
// exactly 1, so the sum cannot underflow to 0 either.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace autograd::kernels {

inline float row_max(const float* x, int64_t n) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; i++) m = std::max(m, x[i]);
    return m;
}

// A row's log-sum-exp, in two parts: log sum_j e^(x_j) = max + log_sum, with
// log_sum = log sum_j e^(x_j - max). Kept apart because x_i - max - log_sum keeps more digits
// than x_i - (max + log_sum) when max is large. The sum is taken in double: a vocabulary row has
// thousands of terms. A row that is all -inf has max = -inf.
struct LogSumExp {
    float max;
    float log_sum;
};
inline LogSumExp log_sum_exp_row(const float* x, int64_t n) {
    const float m = row_max(x, n);
    if (m == -std::numeric_limits<float>::infinity()) return {m, 0.0f};
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += std::exp(x[i] - m);
    return {m, static_cast<float>(std::log(s))};
}

// y_i = e^(x_i - m) / sum_j e^(x_j - m), m the row max. A row that is all -inf (every key masked)
// gives zeros, not NaN. y may be x (attention normalizes its scores in place, with the max it
// found while scaling them: softmax_row_with_max saves a pass over the row).
inline void softmax_row_with_max(const float* x, float* y, int64_t n, float m) {
    if (m == -std::numeric_limits<float>::infinity()) {   // nothing to attend to
        std::fill(y, y + n, 0.0f);
        return;
    }
    // The exponentials first, then their sum: the same sum, in the same order, but a sum carried
    // across the calls to exp() would go to memory and back around each one (a call may change
    // every vector register), a store and a load in the chain of additions.
    for (int64_t i = 0; i < n; i++) y[i] = std::exp(x[i] - m);
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += y[i];
    const float inv = 1.0f / s;
    for (int64_t i = 0; i < n; i++) y[i] *= inv;
}
inline void softmax_row(const float* x, float* y, int64_t n) { softmax_row_with_max(x, y, n, row_max(x, n)); }

// y_i = log softmax(x)_i = (x_i - max) - log_sum. Computed directly, not as log(softmax(x)), so a
// tiny probability does not round to log(0). A row that is all -inf stays -inf. y may be x.
inline void log_softmax_row(const float* x, float* y, int64_t n) {
    const LogSumExp lse = log_sum_exp_row(x, n);
    if (lse.max == -std::numeric_limits<float>::infinity()) {   // probability zero everywhere
        std::fill(y, y + n, lse.max);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - lse.max) - lse.log_sum;
}

}  // namespace autograd::kernels
