#include "nn/loss.h"

#include <algorithm>
#include <stdexcept>

#include "autograd/autograd.h"
#include "nn/linear.h"

namespace nn {

using autograd::Node;
using autograd::shape_str;

// Shared argument checks: logits (..., V) and targets (...) with ids in [0, V) or ignore_index.
static void check_targets(const char* op, const Shape& x, const Tokens& targets, int32_t ignore_index) {
    const Shape lead(x.begin(), x.end() - (x.empty() ? 0 : 1));
    if (x.empty() || targets.shape != lead)
        throw std::invalid_argument(std::string(op) + ": targets of shape " + shape_str(targets.shape) +
                                    " do not match input " + shape_str(x) + " (expected targets " + shape_str(lead) + ")");
    const int64_t V = x.back();
    for (int64_t i = 0; i < targets.numel(); i++)
        if (targets[i] != ignore_index && (targets[i] < 0 || targets[i] >= V))
            throw std::out_of_range(std::string(op) + ": target " + std::to_string(targets[i]) + " at flat position " +
                                    std::to_string(i) + " is outside [0, " + std::to_string(V) + ")");
}

Tensor cross_entropy(const Tensor& logits, const Tokens& targets, const CrossEntropyOptions& opt) {
    check_targets("cross_entropy", logits.shape(), targets, opt.ignore_index);
    if (!(opt.label_smoothing >= 0.0f && opt.label_smoothing <= 1.0f))
        throw std::invalid_argument("cross_entropy: label_smoothing must be in [0, 1], got " + std::to_string(opt.label_smoothing));
    const float eps = opt.label_smoothing;
    if (autograd::fused_kernels_enabled())   // fused: one pass per row, the backward simply (softmax - q) / n
        return autograd::fused::cross_entropy(logits, targets, opt.ignore_index, eps);
    const Tensor logp = log_softmax(logits);                             // (..., V)
    const Tensor nll = nll_loss(logp, targets, {opt.ignore_index});      // (): mean of -log p[target]
    if (eps == 0.0f) return nll;
    // The smoothed target puts eps / V on every class: its part of the loss is the mean over the
    // counted rows of (1/V) sum_j -log p_j. `counted` weighs a row 1/n, or 0 if it is ignored.
    Shape rows = logits.shape();
    rows.back() = 1;
    std::vector<float> w(static_cast<size_t>(targets.numel()), 0.0f);
    const int64_t n = std::count_if(targets.data.begin(), targets.data.end(), [&](int32_t t) { return t != opt.ignore_index; });
    for (int64_t r = 0; r < targets.numel(); r++)
        if (targets[r] != opt.ignore_index) w[r] = 1.0f / static_cast<float>(n);
    const Tensor counted = Tensor::from_vector(w, rows);                 // (..., 1)
    const Tensor uniform = -sum(mean(logp, -1, true) * counted);         // ()
    return (1.0f - eps) * nll + eps * uniform;                           // ()
}

Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tokens& targets,
                            const CrossEntropyOptions& opt) {
    if (!autograd::fused_kernels_enabled()) return cross_entropy(linear(x, weight, bias), targets, opt);   // (rows, V) logits, then the loss
    // the checks the two ops make, before any work
    if (weight.dim() != 2 || x.dim() < 1 || x.size(-1) != weight.size(1) || (bias.defined() && bias.shape() != Shape{weight.size(0)}))
        throw std::invalid_argument("linear_cross_entropy: input " + shape_str(x.shape()) + ", weight " + shape_str(weight.shape()) +
                                    " and bias " + (bias.defined() ? shape_str(bias.shape()) : std::string("(none)")) +
                                    " do not fit (expected input (..., D), weight (V, D), bias (V,))");
    Shape logits = x.shape();
    logits.back() = weight.size(0);
    check_targets("linear_cross_entropy", logits, targets, opt.ignore_index);
    if (!(opt.label_smoothing >= 0.0f && opt.label_smoothing <= 1.0f))
        throw std::invalid_argument("linear_cross_entropy: label_smoothing must be in [0, 1], got " + std::to_string(opt.label_smoothing));
    return autograd::fused::linear_cross_entropy(x, weight, bias, targets, opt.ignore_index, opt.label_smoothing);
}

Tensor nll_loss(const Tensor& log_probs, const Tokens& targets, const NllLossOptions& opt) {
    check_targets("nll_loss", log_probs.shape(), targets, opt.ignore_index);
    const int64_t V = log_probs.size(-1), R = targets.numel();
    const int32_t ignore = opt.ignore_index;
    int64_t n = 0;
    double total = 0.0;
    for (int64_t r = 0; r < R; r++)
        if (targets[r] != ignore) { total -= log_probs.data()[r * V + targets[r]]; n++; }
    Tensor loss = Tensor::scalar(n ? static_cast<float>(total / static_cast<double>(n)) : 0.0f);
    // backward: only the target entry of each counted row moved the loss, by -1/n
    autograd::record(loss, {log_probs}, "nll_loss", [targets, V, R, n, ignore](Node& self) {
        float* dx = self.parent_grad(0);
        for (int64_t r = 0; r < R; r++)
            if (targets[r] != ignore) dx[r * V + targets[r]] -= self.grad[0] / static_cast<float>(n);
    });
    return loss;
}

}  // namespace nn
