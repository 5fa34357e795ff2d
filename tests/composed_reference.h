// The fused kernels' computations composed from primitive ops (exp, log, sum, matmul, ...), each
// written the way the formula reads. Their values and gradients come from the primitives alone,
// which gradcheck verifies one by one, so the tests hold every fused op equal to these on shapes
// far larger than finite differences could afford. Plus `expect_close`, to compare two tensors,
// and `expect_fused_equals_composed`, to compare two functions' values and gradients.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "nn/nn.h"

namespace composed {

using autograd::Tensor;

// softmax(x)_i = e^(x_i - m) / sum_j e^(x_j - m), m the row max. m is a constant shift (detached):
// it changes no value and no gradient, it only keeps exp() from overflowing.
inline Tensor softmax(const Tensor& x) {
    const Tensor e = autograd::exp(x - autograd::max(x, -1, true).detach());
    return e / autograd::sum(e, -1, true);
}

// log_softmax(x)_i = (x_i - m) - log sum_j e^(x_j - m)
inline Tensor log_softmax(const Tensor& x) {
    const Tensor z = x - autograd::max(x, -1, true).detach();
    return z - autograd::log(autograd::sum(autograd::exp(z), -1, true));
}

// (x - mean) / sqrt(biased variance + eps) * gain + bias, over the last dim
inline Tensor layer_norm(const Tensor& x, const Tensor& gain, const Tensor& bias, float eps = 1e-5f) {
    return (x - autograd::mean(x, -1, true)) / autograd::sqrt(autograd::var(x, -1, false, true) + eps) * gain + bias;
}

// Mean over the counted rows of -sum_j q_j log softmax(x)_j, with the target distribution
// q = (1 - eps) one_hot(target) + eps / V, and q = 0 on rows whose target is ignore_index.
inline Tensor cross_entropy(const Tensor& logits, const autograd::Tokens& targets, const nn::CrossEntropyOptions& opt = {}) {
    const int64_t V = logits.size(-1), R = targets.numel();
    std::vector<float> q(static_cast<size_t>(R * V), 0.0f);   // (R, V), a constant
    int64_t n = 0;
    for (int64_t r = 0; r < R; r++) {
        if (targets[r] == opt.ignore_index) continue;
        n++;
        for (int64_t j = 0; j < V; j++) q[r * V + j] = opt.label_smoothing / static_cast<float>(V);
        q[r * V + targets[r]] += 1.0f - opt.label_smoothing;
    }
    const Tensor logp = composed::log_softmax(logits).reshape({R, V});                        // (R, V)
    return -autograd::sum(logp * Tensor::from_vector(q, {R, V})) / static_cast<float>(n);
}

// y = act(x W^T + b) * keep, keep the dropout factors (0 or 1/(1-p)) as a tensor of y's shape,
// or undefined for no dropout
inline Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, nn::Activation act, const Tensor& keep = {}) {
    Tensor y = autograd::matmul(x, w, false, true);
    if (b.defined()) y = y + b;
    if (act == nn::Activation::relu) y = autograd::relu(y);
    return keep.defined() ? y * keep : y;
}

}  // namespace composed

// Every element of `got` within atol + rtol * |want| of `want` (NaN fails); on failure, reports
// how many elements are off and the worst one.
inline void expect_close(const autograd::Tensor& got, const autograd::Tensor& want, double rtol, double atol,
                         const std::string& what) {
    INFO(what);
    REQUIRE(got.shape() == want.shape());
    int64_t bad = 0, worst = -1;
    double worst_excess = 0.0;
    for (int64_t i = 0; i < got.numel(); i++) {
        const double g = got.data()[i], w = want.data()[i];
        if (g == w) continue;   // includes equal infinities
        const double excess = std::fabs(g - w) - (atol + rtol * std::fabs(w));
        if (!(excess <= 0.0)) {
            bad++;
            if (worst < 0 || !(excess <= worst_excess)) worst = i, worst_excess = excess;
        }
    }
    INFO(bad << " of " << got.numel() << " elements differ; worst at flat index " << worst << ": got "
              << (worst >= 0 ? got.data()[worst] : 0.0f) << ", want " << (worst >= 0 ? want.data()[worst] : 0.0f));
    CHECK(bad == 0);
}

// A fused op and its composed reference give the same values and, under the same random upstream
// gradient, the same gradient for every leaf. Both functions take the leaves.
inline void expect_fused_equals_composed(const std::function<autograd::Tensor(const std::vector<autograd::Tensor>&)>& fused,
                                         const std::function<autograd::Tensor(const std::vector<autograd::Tensor>&)>& reference,
                                         std::vector<autograd::Tensor> leaves, double rtol, double atol) {
    auto run = [&](const auto& fn) {
        for (autograd::Tensor& t : leaves) t.zero_grad();
        const autograd::Tensor y = fn(leaves);
        autograd::Rng g(99);
        std::vector<float> w(static_cast<size_t>(y.numel()));
        for (float& v : w) v = g.uniform(-1.0f, 1.0f);
        y.backward(autograd::Tensor::from_vector(w, y.shape()));
        std::vector<autograd::Tensor> out = {y};
        for (const autograd::Tensor& t : leaves) out.push_back(t.requires_grad() ? t.grad() : autograd::Tensor());
        return out;
    };
    const auto got = run(fused), want = run(reference);
    expect_close(got[0], want[0], rtol, atol, "value");
    for (size_t i = 0; i < leaves.size(); i++)
        if (leaves[i].requires_grad()) expect_close(got[i + 1], want[i + 1], rtol, atol, "gradient of input " + std::to_string(i));
    for (autograd::Tensor& t : leaves) t.zero_grad();
}
