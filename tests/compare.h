// Comparing a fused op with its plain form (the same computation composed from primitive ops
// whose gradients gradcheck verifies one by one): `expect_close` compares two tensors,
// `expect_fused_equals_composed` two functions' values and gradients, `expect_fused_equals_plain`
// one nn function with fused kernels on and off. With them the tests hold every fused op equal to
// its plain form on shapes far larger than finite differences could afford.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
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

// f run twice on the same leaves, under FusedKernelsGuard(true) and FusedKernelsGuard(false):
// the same values and gradients. f reseeds the generator itself if it draws dropout masks.
inline void expect_fused_equals_plain(const std::function<autograd::Tensor(const std::vector<autograd::Tensor>&)>& f,
                                      std::vector<autograd::Tensor> leaves, double rtol, double atol) {
    expect_fused_equals_composed(
        [&](const std::vector<autograd::Tensor>& v) { autograd::FusedKernelsGuard fused(true); return f(v); },
        [&](const std::vector<autograd::Tensor>& v) { autograd::FusedKernelsGuard plain(false); return f(v); },
        std::move(leaves), rtol, atol);
}

// softmax and log_softmax over the last dim, composed from primitive ops the way the formulas
// read: what autograd::softmax and log_softmax (ops_softmax.cpp) are held equal to.
// m is a constant shift (detached): it changes no value and no gradient, it only keeps exp()
// from overflowing.
inline autograd::Tensor softmax_reference(const autograd::Tensor& x) {
    const autograd::Tensor e = exp(x - max(x, -1, true).detach());
    return e / sum(e, -1, true);
}
inline autograd::Tensor log_softmax_reference(const autograd::Tensor& x) {
    const autograd::Tensor z = x - max(x, -1, true).detach();
    return z - log(sum(exp(z), -1, true));
}

// The GRU cell after its hidden product, r = σ(gi_r + gh_r), z = σ(gi_z + gh_z),
// n = tanh(gi_n + r ⊙ gh_n), h' = (1 − z) ⊙ n + z ⊙ h, composed from primitive ops line for line
// as nn::gru_step's plain form (nn/recurrent.cpp) writes it: what autograd::fused::gru_cell is
// held equal to where a test hands it gh itself (nn::gru_step always makes gh from h; that the
// two give the same bits is checked in test_kernels.cpp). gi, gh (B, 3Hd), h (B, Hd) -> (B, Hd).
inline autograd::Tensor gru_cell_reference(const autograd::Tensor& gi, const autograd::Tensor& gh, const autograd::Tensor& h) {
    const int64_t Hd = h.size(1);
    auto gate = [Hd](const autograd::Tensor& t, int64_t k) { return narrow(t, -1, k * Hd, Hd); };   // (B, Hd)
    const autograd::Tensor r = sigmoid(gate(gi, 0) + gate(gh, 0));    // (B, Hd)
    const autograd::Tensor z = sigmoid(gate(gi, 1) + gate(gh, 1));    // (B, Hd)
    const autograd::Tensor n = tanh(gate(gi, 2) + r * gate(gh, 2));   // (B, Hd)
    return (1.0f - z) * n + z * h;                                     // (B, Hd)
}
