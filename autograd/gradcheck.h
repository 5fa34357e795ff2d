// gradcheck: compare backward() with finite differences. Use it for every new op:
//     CHECK(gradcheck([](const std::vector<Tensor>& x) { return my_op(x[0], x[1]); }, {a, b}));
// The output is projected onto fixed random weights w (L = sum(w * f(x))), so one backward pass
// checks the whole vector-Jacobian product w^T J; each input element is then nudged by +-eps and
// +-eps/2 for the numeric derivative of L.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace autograd {

struct GradcheckOptions {
    // The numeric derivative is (4 D(eps/2) - D(eps)) / 3, D(h) the central difference with step
    // h: the O(h^2) truncation errors of the two cancel, leaving O(eps^4) (Richardson). That lets
    // eps be large, which keeps float32 rounding small: the rounding error of D(h) is about
    // u |L| / h, with u = 6e-8 the float32 precision.
    double eps = 2e-2;
    // Pass when |analytic - numeric| <= atol + rtol * |numeric|. Measured over every gradcheck of
    // the suite, the largest gap is 4e-5 (rounding, in the attention module's check of 30
    // elements), and no gap exceeds 2e-5 + 1e-4 * |numeric|. A plain central difference at
    // eps = 1e-2 is off by up to 6e-4 (3e-4 relative), more than the error of plausible wrong
    // backwards: label smoothing eps/(V-1) instead of eps/V, or GELU's tanh approximation's
    // derivative (8.7e-4 at x = 2.02, 8e-4 of the derivative there). Each now fails: the
    // label smoothing in tests/test_nn.cpp, GELU in tests/test_ops.cpp.
    double atol = 5e-5;
    double rtol = 2e-4;
    uint64_t seed = 1234;  // for the projection weights
};

struct GradcheckResult {
    bool ok = true;
    double max_abs_error = 0.0;
    std::string report;                    // "ok", or the mismatch count and the five worst (by how far
                                           // beyond the tolerance), each with input, shape, element index
    explicit operator bool() const { return ok; }
};

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Checks every input that requires grad. Leaves inputs' grads cleared.
GradcheckResult gradcheck(const TensorFn& fn, std::vector<Tensor> inputs, const GradcheckOptions& opt = {});

}  // namespace autograd
