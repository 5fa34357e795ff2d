// Shared by the test files that gradcheck ops: a random leaf that requires grad, a CHECK that
// prints gradcheck's report (the worst mismatches) when it fails, and check_backward_adds.
#pragma once
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autograd.h"

inline autograd::Tensor param(const autograd::Shape& s, float lo = -1.0f, float hi = 1.0f) {
    return autograd::Tensor::uniform(s, lo, hi).requires_grad_();
}

#define CHECK_GRAD(fn, ...)                                                         \
    do {                                                                            \
        const autograd::GradcheckResult r_ = autograd::gradcheck(fn, {__VA_ARGS__}); \
        INFO(r_.report);                                                            \
        CHECK(r_.ok);                                                               \
    } while (0)

// A backward must add (+=) into its inputs' gradients, never overwrite them: a tensor can feed
// several ops, and gradients accumulate across backward() calls. Runs the same forward and
// backward twice without zero_grad; every input's gradient must then be twice the first (up to
// rounding: a gradient summed over broadcast elements adds its terms onto the first result).
inline void check_backward_adds(const autograd::TensorFn& fn, std::vector<autograd::Tensor> inputs) {
    for (autograd::Tensor& t : inputs) t.zero_grad();
    autograd::Tensor y = fn(inputs);
    autograd::Rng g(7);
    std::vector<float> w(static_cast<size_t>(y.numel()));
    for (float& v : w) v = g.uniform(-1.0f, 1.0f);
    const autograd::Tensor upstream = autograd::Tensor::from_vector(w, y.shape());
    y.backward(upstream);
    std::vector<std::vector<float>> once;
    for (const autograd::Tensor& t : inputs) once.push_back(t.has_grad() ? t.grad().to_vector() : std::vector<float>());
    fn(inputs).backward(upstream);
    for (size_t i = 0; i < inputs.size(); i++) {
        CAPTURE(i);
        if (once[i].empty()) continue;   // needs no gradient
        const std::vector<float> twice = inputs[i].grad().to_vector();
        int64_t wrong = 0;
        for (size_t k = 0; k < twice.size(); k++) wrong += std::fabs(twice[k] - 2.0f * once[i][k]) > 1e-5f * (1.0f + std::fabs(twice[k]));
        CHECK(wrong == 0);
    }
    for (autograd::Tensor& t : inputs) t.zero_grad();
}
