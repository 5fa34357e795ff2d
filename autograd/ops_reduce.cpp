// Reductions: sum, mean, max, var over all elements or along one dim (keepdim optional).
// Along a dim, a tensor is seen as (outer, n, inner): n is the reduced dim, outer the dims
// before it, inner the dims after it. Sums accumulate in double, in a fixed order.
#include <cmath>
#include <limits>
#include <stdexcept>

#include "autograd/ops.h"

namespace autograd {

namespace {
struct Split { int64_t outer, n, inner; Shape out_shape; };

Split split_at(const Shape& s, int64_t dim, bool keepdim, const char* op) {
    const int d = normalize_dim(dim, static_cast<int>(s.size()), op);
    Split sp{1, s.empty() ? 1 : s[d], 1, {}};
    for (int i = 0; i < d; i++) sp.outer *= s[i];
    for (size_t i = d + 1; i < s.size(); i++) sp.inner *= s[i];
    for (size_t i = 0; i < s.size(); i++) {
        if (static_cast<int>(i) != d) sp.out_shape.push_back(s[i]);
        else if (keepdim) sp.out_shape.push_back(1);
    }
    return sp;
}

// Whole-tensor reductions are the same loops with everything in one row.
Split split_all(const Shape& s) { return {1, shape_numel(s), 1, {}}; }

// sum (scale 1) or mean (scale 1/n) over the middle dim of (outer, n, inner)
Tensor sum_impl(const Tensor& a, const Split& sp, float scale, const char* op) {
    Tensor y = Tensor::empty(sp.out_shape);
    const float* x = a.data();
    float* py = y.data();
    for (int64_t o = 0; o < sp.outer; o++)
        for (int64_t i = 0; i < sp.inner; i++) {
            double acc = 0.0;
            for (int64_t j = 0; j < sp.n; j++) acc += x[(o * sp.n + j) * sp.inner + i];
            py[o * sp.inner + i] = static_cast<float>(acc * scale);
        }
    // backward: every x[o, j, i] contributed once (times scale) to y[o, i]
    record(y, {a}, op, [sp, scale](Node& self) {
        const float* dy = self.grad.data();
        float* dx = self.parent_grad(0);
        for (int64_t o = 0; o < sp.outer; o++)
            for (int64_t j = 0; j < sp.n; j++)
                for (int64_t i = 0; i < sp.inner; i++) dx[(o * sp.n + j) * sp.inner + i] += scale * dy[o * sp.inner + i];
    });
    return y;
}

Tensor max_impl(const Tensor& a, const Split& sp, const char* op) {
    if (sp.n == 0) throw std::invalid_argument(std::string(op) + ": cannot take the max over an empty dim of shape " + shape_str(a.shape()));
    Tensor y = Tensor::empty(sp.out_shape);
    std::vector<int64_t> arg(static_cast<size_t>(sp.outer * sp.inner));
    const float* x = a.data();
    for (int64_t o = 0; o < sp.outer; o++)
        for (int64_t i = 0; i < sp.inner; i++) {
            int64_t best = 0;
            for (int64_t j = 1; j < sp.n; j++)   // strict '>' keeps the first maximum
                if (x[(o * sp.n + j) * sp.inner + i] > x[(o * sp.n + best) * sp.inner + i]) best = j;
            arg[o * sp.inner + i] = best;
            y.data()[o * sp.inner + i] = x[(o * sp.n + best) * sp.inner + i];
        }
    // backward: only the winning element moved y, so it alone receives dy
    record(y, {a}, op, [sp, arg](Node& self) {
        const float* dy = self.grad.data();
        float* dx = self.parent_grad(0);
        for (int64_t o = 0; o < sp.outer; o++)
            for (int64_t i = 0; i < sp.inner; i++) dx[(o * sp.n + arg[o * sp.inner + i]) * sp.inner + i] += dy[o * sp.inner + i];
    });
    return y;
}

// var = sum_j (x_j - m)^2 / (n - c), m the mean, c = 1 for the unbiased (Bessel) estimate
Tensor var_impl(const Tensor& a, const Split& sp, bool unbiased, const char* op) {
    const int64_t denom = sp.n - (unbiased ? 1 : 0);
    if (denom <= 0)
        throw std::invalid_argument(std::string(op) + ": " + (unbiased ? "unbiased " : "") + "variance needs at least " +
                                    std::to_string(unbiased ? 2 : 1) + " elements along the dim, got " + std::to_string(sp.n));
    Tensor y = Tensor::empty(sp.out_shape);
    std::vector<float> means(static_cast<size_t>(sp.outer * sp.inner));
    const float* x = a.data();
    for (int64_t o = 0; o < sp.outer; o++)
        for (int64_t i = 0; i < sp.inner; i++) {
            double m = 0.0, ss = 0.0;
            for (int64_t j = 0; j < sp.n; j++) m += x[(o * sp.n + j) * sp.inner + i];
            m /= static_cast<double>(sp.n);
            for (int64_t j = 0; j < sp.n; j++) {   // two passes: stable for large means
                const double d = x[(o * sp.n + j) * sp.inner + i] - m;
                ss += d * d;
            }
            means[o * sp.inner + i] = static_cast<float>(m);
            y.data()[o * sp.inner + i] = static_cast<float>(ss / static_cast<double>(denom));
        }
    // backward: d var / d x_j = 2 (x_j - m) / (n - c); the terms through m sum to zero
    record(y, {a}, op, [sp, means, denom](Node& self) {
        const float* x = self.parent_data(0);
        const float* dy = self.grad.data();
        float* dx = self.parent_grad(0);
        for (int64_t o = 0; o < sp.outer; o++)
            for (int64_t j = 0; j < sp.n; j++)
                for (int64_t i = 0; i < sp.inner; i++) {
                    const int64_t k = (o * sp.n + j) * sp.inner + i;
                    dx[k] += dy[o * sp.inner + i] * 2.0f * (x[k] - means[o * sp.inner + i]) / static_cast<float>(denom);
                }
    });
    return y;
}
}  // namespace

Tensor sum(const Tensor& a) { return sum_impl(a, split_all(a.shape()), 1.0f, "sum"); }
Tensor sum(const Tensor& a, int64_t dim, bool keepdim) { return sum_impl(a, split_at(a.shape(), dim, keepdim, "sum"), 1.0f, "sum"); }

Tensor mean(const Tensor& a) {
    if (a.numel() == 0) throw std::invalid_argument("mean: empty tensor of shape " + shape_str(a.shape()));
    return sum_impl(a, split_all(a.shape()), 1.0f / static_cast<float>(a.numel()), "mean");
}
Tensor mean(const Tensor& a, int64_t dim, bool keepdim) {
    const Split sp = split_at(a.shape(), dim, keepdim, "mean");
    if (sp.n == 0) throw std::invalid_argument("mean: empty dim in shape " + shape_str(a.shape()));
    return sum_impl(a, sp, 1.0f / static_cast<float>(sp.n), "mean");
}

Tensor max(const Tensor& a) { return max_impl(a, split_all(a.shape()), "max"); }
Tensor max(const Tensor& a, int64_t dim, bool keepdim) { return max_impl(a, split_at(a.shape(), dim, keepdim, "max"), "max"); }

Tensor var(const Tensor& a, bool unbiased) { return var_impl(a, split_all(a.shape()), unbiased, "var"); }
Tensor var(const Tensor& a, int64_t dim, bool unbiased, bool keepdim) {
    return var_impl(a, split_at(a.shape(), dim, keepdim, "var"), unbiased, "var");
}

Tokens argmax(const Tensor& a, int64_t dim, bool keepdim) {
    const Split sp = split_at(a.shape(), dim, keepdim, "argmax");
    if (sp.n == 0) throw std::invalid_argument("argmax: empty dim in shape " + shape_str(a.shape()));
    Tokens out = Tokens::full(sp.out_shape, 0);
    const float* x = a.data();
    for (int64_t o = 0; o < sp.outer; o++)
        for (int64_t i = 0; i < sp.inner; i++) {
            int64_t best = 0;
            for (int64_t j = 1; j < sp.n; j++)
                if (x[(o * sp.n + j) * sp.inner + i] > x[(o * sp.n + best) * sp.inner + i]) best = j;
            out[o * sp.inner + i] = static_cast<int32_t>(best);
        }
    return out;
}

}  // namespace autograd
