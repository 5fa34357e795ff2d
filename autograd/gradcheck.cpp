#include "autograd/gradcheck.h"

#include <algorithm>
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
    Rng g(opt.seed);
    std::vector<float> w(static_cast<size_t>(out.numel()));
    // |w| in [0.5, 1], random sign: no output's error is scaled down to nothing by a tiny weight
    for (float& v : w) v = g.uniform(0.5f, 1.0f) * (g.uniform() < 0.5f ? -1.0f : 1.0f);
    if (!out.requires_grad()) {
        res.ok = false;
        res.report = "gradcheck: the output does not require grad (no input requires grad?)";
        return res;
    }
    out.backward(Tensor::from_vector(w, out.shape()));

    // 2) numeric: central differences of L for every element k of every input, at steps eps and
    // eps/2, combined so that their O(eps^2) errors cancel (Richardson extrapolation)
    struct Mismatch { double excess; size_t input; int64_t k; float analytic; double numeric; };
    std::vector<Mismatch> bad;
    for (size_t t = 0; t < inputs.size(); t++) {
        Tensor& x = inputs[t];
        if (!x.requires_grad()) continue;
        const std::vector<float> analytic = x.has_grad() ? x.grad().to_vector() : std::vector<float>(x.numel(), 0.0f);
        for (int64_t k = 0; k < x.numel(); k++) {
            const float orig = x.data()[k];
            // central difference with step h, over the float32 values actually tried (x +- h rounded)
            auto central = [&](double h) {
                const float x_hi = orig + static_cast<float>(h), x_lo = orig - static_cast<float>(h);
                x.data()[k] = x_hi;
                const double hi = projected(fn, inputs, w);
                x.data()[k] = x_lo;
                const double lo = projected(fn, inputs, w);
                x.data()[k] = orig;
                return (hi - lo) / (static_cast<double>(x_hi) - static_cast<double>(x_lo));
            };
            // D(h) = f' + h^2/6 f''' + O(h^4) and D(h/2) = f' + h^2/24 f''' + O(h^4), so the h^2 terms cancel in:
            const double numeric = (4.0 * central(opt.eps / 2) - central(opt.eps)) / 3.0;
            const double err = std::fabs(analytic[k] - numeric);
            res.max_abs_error = std::max(res.max_abs_error, err);
            const double excess = err - (opt.atol + opt.rtol * std::fabs(numeric));
            if (!(excess <= 0.0)) bad.push_back({std::isnan(excess) ? INFINITY : excess, t, k, analytic[k], numeric});   // NaN fails
        }
        x.zero_grad();
    }
    res.ok = bad.empty();
    if (res.ok) {
        res.report = "ok";
        return res;
    }
    // the worst five, by how far each is beyond its tolerance
    std::stable_sort(bad.begin(), bad.end(), [](const Mismatch& a, const Mismatch& b) { return a.excess > b.excess; });
    std::ostringstream report;
    report << "gradcheck failed: " << bad.size() << " mismatches (|analytic - numeric| > " << opt.atol << " + " << opt.rtol
           << " * |numeric|), the worst " << std::min<size_t>(bad.size(), 5) << ":\n";
    for (size_t i = 0; i < bad.size() && i < 5; i++)
        report << "input " << bad[i].input << " " << shape_str(inputs[bad[i].input].shape()) << " element " << bad[i].k
               << ": analytic " << bad[i].analytic << " vs numeric " << bad[i].numeric << "\n";
    res.report = report.str();
    return res;
}

}  // namespace autograd
