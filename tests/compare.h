// Comparing a fused op with its reference (the x_reference functions beside each kernel in
// autograd/kernels/, composed from primitive ops whose gradients gradcheck verifies one by one):
// `expect_close` compares two tensors, `expect_fused_equals_composed` two functions' values and
// gradients. With them the tests hold every fused op equal to its reference on shapes far larger
// than finite differences could afford.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/autograd.h"

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
