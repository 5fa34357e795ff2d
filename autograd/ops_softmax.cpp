// softmax and log_softmax over the last dim: fused, numerically stable, hand-derived backward.
#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "autograd/kernels/parallel.h"

namespace autograd {

// softmax over the last dimension. x: (..., C) -> y: (..., C), y_i = e^(x_i - m) / sum_j e^(x_j - m)
// with m = max_j x_j: softmax is shift-invariant, and after the shift no exp() can overflow
// (logits of 1e4 are fine). A row that is entirely -inf (fully masked) gives zeros, not NaN.
Tensor softmax(const Tensor& x) {
    const int64_t C = x.dim() ? x.size(-1) : 1, R = C ? x.numel() / C : 0;   // row length, rows
    Tensor y = Tensor::empty(x.shape());
    const float* px = x.data();
    float* py = y.data();
    #pragma omp parallel for if (worth_threads(R * C, kSoftmaxParallelMin))
    for (int64_t r = 0; r < R; r++) {
        const float* xr = px + r * C;
        float* yr = py + r * C;
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < C; i++) m = std::max(m, xr[i]);
        if (m == -std::numeric_limits<float>::infinity()) {   // nothing to attend to
            for (int64_t i = 0; i < C; i++) yr[i] = 0.0f;
            continue;
        }
        float s = 0.0f;
        for (int64_t i = 0; i < C; i++) s += (yr[i] = std::exp(xr[i] - m));
        const float inv = 1.0f / s;
        for (int64_t i = 0; i < C; i++) yr[i] *= inv;
    }
    // backward: dy_i/dx_j = y_i (delta_ij - y_j), so dx_j = y_j (dy_j - sum_i dy_i y_i).
    // Softmax needs only its own output.
    record(y, {x}, "softmax", [R, C](Node& self) {
        const float *py = self.data->data(), *dy = self.grad.data();
        float* dx = self.parent_grad(0);
        #pragma omp parallel for if (worth_threads(R * C, kSoftmaxParallelMin))
        for (int64_t r = 0; r < R; r++) {
            const float *yr = py + r * C, *gr = dy + r * C;
            float dot = 0.0f;
            for (int64_t i = 0; i < C; i++) dot += gr[i] * yr[i];
            for (int64_t i = 0; i < C; i++) dx[r * C + i] += yr[i] * (gr[i] - dot);
        }
    });
    return y;
}

// log_softmax over the last dimension: y_i = x_i - m - log sum_j e^(x_j - m).
// Computing it directly (not log(softmax(x))) keeps tiny probabilities from rounding to log(0).
// A fully -inf row stays -inf (log of probability zero), never NaN.
Tensor log_softmax(const Tensor& x) {
    const int64_t C = x.dim() ? x.size(-1) : 1, R = C ? x.numel() / C : 0;
    Tensor y = Tensor::empty(x.shape());
    const float* px = x.data();
    float* py = y.data();
    #pragma omp parallel for if (worth_threads(R * C, kSoftmaxParallelMin))
    for (int64_t r = 0; r < R; r++) {
        const float* xr = px + r * C;
        float* yr = py + r * C;
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < C; i++) m = std::max(m, xr[i]);
        if (m == -std::numeric_limits<float>::infinity()) {
            for (int64_t i = 0; i < C; i++) yr[i] = m;
            continue;
        }
        float s = 0.0f;
        for (int64_t i = 0; i < C; i++) s += std::exp(xr[i] - m);
        const float log_s = std::log(s);   // subtract m first: x - (m + log s) loses digits when m is large
        for (int64_t i = 0; i < C; i++) yr[i] = (xr[i] - m) - log_s;
    }
    // backward: dy_i/dx_j = delta_ij - softmax_j, so dx_j = dy_j - e^(y_j) * sum_i dy_i.
    record(y, {x}, "log_softmax", [R, C](Node& self) {
        const float *py = self.data->data(), *dy = self.grad.data();
        float* dx = self.parent_grad(0);
        #pragma omp parallel for if (worth_threads(R * C, kSoftmaxParallelMin))
        for (int64_t r = 0; r < R; r++) {
            const float *yr = py + r * C, *gr = dy + r * C;
            float s = 0.0f;
            for (int64_t i = 0; i < C; i++) s += gr[i];
            for (int64_t i = 0; i < C; i++) dx[r * C + i] += gr[i] - std::exp(yr[i]) * s;
        }
    });
    return y;
}

}  // namespace autograd
