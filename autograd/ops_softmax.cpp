// softmax and log_softmax over the last dim: fused, numerically stable, hand-derived backward.
// The forward of one row is kernels::softmax_row / log_softmax_row (kernels/softmax_rows.h), the
// one stable row that attention and cross-entropy use too.
#include <cmath>

#include "autograd/kernels/softmax_rows.h"
#include "autograd/ops.h"

namespace autograd {

namespace {
// Rows of the last dim: C = row length, R = number of rows.
struct Rows {
    int64_t R, C;
};
}  // namespace

static Rows rows_of(const Tensor& x) {
    const int64_t C = x.dim() ? x.size(-1) : 1;
    return {C ? x.numel() / C : 0, C};
}

// y = row_fn(x) for every row of the last dim (the rows are independent)
template <class RowFn>
static Tensor for_each_row(const Tensor& x, RowFn row_fn) {
    const auto [R, C] = rows_of(x);
    Tensor y = Tensor::empty(x.shape());
    for (int64_t r = 0; r < R; r++) row_fn(x.data() + r * C, y.data() + r * C, C);
    return y;
}

// The backward's loop: row_fn(y, dy, dx, C) adds each row's gradient into dx, from the op's
// output y and its upstream gradient dy.
template <class RowFn>
static void for_each_row_backward(Node& self, Rows rows, RowFn row_fn) {
    const float *y = self.data->data(), *dy = self.grad.data();
    float* dx = self.parent_grad(0);
    for (int64_t r = 0; r < rows.R; r++) row_fn(y + r * rows.C, dy + r * rows.C, dx + r * rows.C, rows.C);
}

// softmax over the last dimension. x: (..., C) -> y: (..., C), y_i = e^(x_i - m) / sum_j e^(x_j - m)
// with m = max_j x_j. A row that is entirely -inf (fully masked) gives zeros, not NaN.
Tensor softmax(const Tensor& x) {
    Tensor y = for_each_row(x, kernels::softmax_row);
    // backward: dy_i/dx_j = y_i (delta_ij - y_j), so dx_j = y_j (dy_j - sum_i dy_i y_i).
    // Softmax needs only its own output.
    record(y, {x}, "softmax", [rows = rows_of(x)](Node& self) {
        for_each_row_backward(self, rows, [](const float* y, const float* dy, float* dx, int64_t C) {
            float dot = 0.0f;
            for (int64_t i = 0; i < C; i++) dot += dy[i] * y[i];
            for (int64_t i = 0; i < C; i++) dx[i] += y[i] * (dy[i] - dot);
        });
    });
    return y;
}

// log_softmax over the last dimension: y_i = x_i - m - log sum_j e^(x_j - m).
// A fully -inf row stays -inf (log of probability zero), never NaN.
Tensor log_softmax(const Tensor& x) {
    Tensor y = for_each_row(x, kernels::log_softmax_row);
    // backward: dy_i/dx_j = delta_ij - softmax_j, so dx_j = dy_j - e^(y_j) * sum_i dy_i.
    // A fully -inf row is defined as the constant -inf, so it passes no gradient (as softmax's
    // zero row does); the formula would give dx = dy there, since e^(-inf) = 0.
    record(y, {x}, "log_softmax", [rows = rows_of(x)](Node& self) {
        for_each_row_backward(self, rows, [](const float* y, const float* dy, float* dx, int64_t C) {
            float s = 0.0f;
            bool fully_masked = true;
            for (int64_t i = 0; i < C; i++) {
                s += dy[i];
                fully_masked = fully_masked && y[i] == -INFINITY;
            }
            if (fully_masked) return;
            for (int64_t i = 0; i < C; i++) dx[i] += dy[i] - std::exp(y[i]) * s;
        });
    });
    return y;
}

}  // namespace autograd
