#include "nn/loss.h"

#include <cmath>
#include <stdexcept>

#include "autograd/kernels/parallel.h"

namespace nn {

using autograd::Node;
using autograd::shape_str;

// Shared argument checks: logits (..., V) and targets (...) with ids in [0, V) or ignore_index.
static void check_targets(const char* op, const Tensor& x, const Tokens& targets, int32_t ignore_index) {
    const Shape lead(x.shape().begin(), x.shape().end() - (x.dim() ? 1 : 0));
    if (x.dim() < 1 || targets.shape != lead)
        throw std::invalid_argument(std::string(op) + ": targets of shape " + shape_str(targets.shape) +
                                    " do not match input " + shape_str(x.shape()) + " (expected targets " + shape_str(lead) + ")");
    const int64_t V = x.size(-1);
    for (int64_t i = 0; i < targets.numel(); i++)
        if (targets[i] != ignore_index && (targets[i] < 0 || targets[i] >= V))
            throw std::out_of_range(std::string(op) + ": target " + std::to_string(targets[i]) + " at flat position " +
                                    std::to_string(i) + " is outside [0, " + std::to_string(V) + ")");
}

Tensor cross_entropy(const Tensor& logits, const Tokens& targets, const CrossEntropyOptions& opt) {
    check_targets("cross_entropy", logits, targets, opt.ignore_index);
    if (!(opt.label_smoothing >= 0.0f && opt.label_smoothing <= 1.0f))
        throw std::invalid_argument("cross_entropy: label_smoothing must be in [0, 1]");
    const int64_t V = logits.size(-1), R = targets.numel();
    const float eps = opt.label_smoothing;
    int64_t n = 0;
    for (int64_t r = 0; r < R; r++) n += targets[r] != opt.ignore_index;
    // per row: log-sum-exp, then loss_r = -(1 - eps) logp[target] - (eps / V) sum_j logp[j]
    auto lse = std::make_shared<autograd::FloatBuffer>(R);
    std::vector<double> row_loss(R, 0.0);
    const float* x = logits.data();
    #pragma omp parallel for if (autograd::worth_threads(R * V, autograd::kCrossEntropyParallelMin))
    for (int64_t r = 0; r < R; r++) {
        const float* xr = x + r * V;
        float m = xr[0];
        for (int64_t j = 1; j < V; j++) m = std::max(m, xr[j]);
        double s = 0.0, sum_x = 0.0;
        for (int64_t j = 0; j < V; j++) { s += std::exp(xr[j] - m); sum_x += xr[j]; }
        (*lse)[r] = m + static_cast<float>(std::log(s));
        if (targets[r] == opt.ignore_index) continue;
        const double logp_t = xr[targets[r]] - (*lse)[r], sum_logp = sum_x - static_cast<double>(V) * (*lse)[r];
        row_loss[r] = -(1.0 - eps) * logp_t - eps / static_cast<double>(V) * sum_logp;
    }
    double total = 0.0;
    for (double l : row_loss) total += l;   // fixed order
    Tensor loss = Tensor::scalar(n ? static_cast<float>(total / static_cast<double>(n)) : 0.0f);
    // backward: d loss / d x_j = (softmax_j - q_j) / n with q_j = (1 - eps) [j == target] + eps / V
    autograd::record(loss, {logits}, "cross_entropy", [targets, lse, V, R, n, eps, ig = opt.ignore_index](Node& self) {
        if (n == 0) return;
        const float* x = self.parent_data(0);
        float* dx = self.parent_grad(0);
        const float g = self.grad[0] / static_cast<float>(n), uniform = eps / static_cast<float>(V);
        #pragma omp parallel for if (autograd::worth_threads(R * V, autograd::kCrossEntropyParallelMin))
        for (int64_t r = 0; r < R; r++) {
            if (targets[r] == ig) continue;
            for (int64_t j = 0; j < V; j++) {
                const float q = (j == targets[r] ? 1.0f - eps : 0.0f) + uniform;
                dx[r * V + j] += g * (std::exp(x[r * V + j] - (*lse)[r]) - q);
            }
        }
    });
    return loss;
}

Tensor nll_loss(const Tensor& log_probs, const Tokens& targets, int32_t ignore_index) {
    check_targets("nll_loss", log_probs, targets, ignore_index);
    const int64_t V = log_probs.size(-1), R = targets.numel();
    int64_t n = 0;
    double total = 0.0;
    for (int64_t r = 0; r < R; r++)
        if (targets[r] != ignore_index) { total -= log_probs.data()[r * V + targets[r]]; n++; }
    Tensor loss = Tensor::scalar(n ? static_cast<float>(total / static_cast<double>(n)) : 0.0f);
    // backward: only the target entry of each counted row moved the loss, by -1/n
    autograd::record(loss, {log_probs}, "nll_loss", [targets, V, R, n, ignore_index](Node& self) {
        float* dx = self.parent_grad(0);
        for (int64_t r = 0; r < R; r++)
            if (targets[r] != ignore_index) dx[r * V + targets[r]] -= self.grad[0] / static_cast<float>(n);
    });
    return loss;
}

}  // namespace nn
