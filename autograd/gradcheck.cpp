#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/random.h"

namespace autograd {

// L(x) = sum_i w_i f(x)_i, accumulated in double so the difference of two nearby L's keeps its digits
static double projected(const TensorFn& fn, const std::vector<Tensor>& inputs, const std::vector<float>& w) {
    NoGradGuard no_grad;
    const Tensor out = fn(inputs);
    double L = 0.0;
    for (int64_t i = 0; i < out.numel(); i++) L += static_cast<double>(w[i]) * out.data()[i];
    return L;
}

GradcheckResult gradcheck(const TensorFn& fn, std::vector<Tensor> inputs, const GradcheckOptions& opt) {
    GradcheckResult res;
    for (Tensor& t : inputs) t.zero_grad();

    // 1) analytic: one backward pass of L = sum(w * f(x)) gives dL/dx for every input
    Tensor out = fn(inputs);
    Generator g(opt.seed);
    std::vector<float> w(static_cast<size_t>(out.numel()));
    for (float& v : w) v = g.uniform(-1.0f, 1.0f);
    if (!out.requires_grad()) {
        res.ok = false;
        res.report = "gradcheck: the output does not require grad (no input requires grad?)";
        return res;
    }
    out.backward(Tensor::from_vector(w, out.shape()));

    // 2) numeric: (L(x + eps e_k) - L(x - eps e_k)) / 2 eps for every element k of every input
    std::ostringstream report;
    int shown = 0;
    for (size_t t = 0; t < inputs.size(); t++) {
        Tensor& x = inputs[t];
        if (!x.requires_grad()) continue;
        const std::vector<float> analytic = x.has_grad() ? x.grad().to_vector() : std::vector<float>(x.numel(), 0.0f);
        for (int64_t k = 0; k < x.numel(); k++) {
            const float orig = x.data()[k];
            x.data()[k] = orig + static_cast<float>(opt.eps);
            const double hi = projected(fn, inputs, w);
            x.data()[k] = orig - static_cast<float>(opt.eps);
            const double lo = projected(fn, inputs, w);
            x.data()[k] = orig;
            const double numeric = (hi - lo) / (2.0 * opt.eps);
            const double err = std::fabs(analytic[k] - numeric);
            res.max_abs_error = std::max(res.max_abs_error, err);
            if (!(err <= opt.atol + opt.rtol * std::fabs(numeric))) {   // also catches NaN
                res.ok = false;
                if (shown++ < 5)
                    report << "input " << t << " " << shape_str(x.shape()) << " element " << k << ": analytic "
                           << analytic[k] << " vs numeric " << numeric << "\n";
            }
        }
        x.zero_grad();
    }
    res.report = res.ok ? "ok" : "gradcheck failed (" + std::to_string(shown) + " mismatches):\n" + report.str();
    return res;
}

}  // namespace autograd
