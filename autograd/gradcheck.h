// gradcheck: compare backward() with central finite differences. Use it for every new op:
//     CHECK(gradcheck([](const std::vector<Tensor>& x) { return my_op(x[0], x[1]); }, {a, b}));
// The output is projected onto fixed random weights w (L = sum(w * f(x))), so one backward
// pass checks the whole Jacobian-vector product; each input element is then nudged by +-eps.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace autograd {

struct GradcheckOptions {
    double eps = 1e-2;     // step of the central difference (float32 needs a large one)
    double atol = 2e-3;    // |analytic - numeric| <= atol + rtol * |numeric|
    double rtol = 2e-2;
    uint64_t seed = 1234;  // for the projection weights
};

struct GradcheckResult {
    bool ok = true;
    double max_abs_error = 0.0;
    std::string report;                    // the worst mismatches, with input and element index
    explicit operator bool() const { return ok; }
};

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Checks every input that requires grad. Leaves inputs' grads cleared.
GradcheckResult gradcheck(const TensorFn& fn, std::vector<Tensor> inputs, const GradcheckOptions& opt = {});

}  // namespace autograd
