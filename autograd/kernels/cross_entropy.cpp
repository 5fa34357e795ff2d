#include "autograd/kernels/cross_entropy.h"

#include <cmath>
#include <vector>

#include "autograd/kernels/parallel.h"
#include "autograd/kernels/softmax_rows.h"
#include "autograd/ops.h"

namespace autograd::kernels {

static int64_t counted_rows(const int32_t* targets, const CrossEntropyDims& d) {
    int64_t n = 0;
    for (int64_t r = 0; r < d.R; r++) n += targets[r] != d.ignore_index;
    return n;
}

float cross_entropy_forward(float* lse, const float* logits, const int32_t* targets, const CrossEntropyDims& d) {
    const int64_t R = d.R, V = d.V;
    const double eps = d.label_smoothing;
    std::vector<double> row_loss(R, 0.0);
    // per row, with log p_j = x_j - lse:  loss_r = -(1 - eps) log p_target - (eps / V) sum_j log p_j
    #pragma omp parallel for if (worth_threads(R * V, kCrossEntropyParallelMin))
    for (int64_t r = 0; r < R; r++) {
        const float* x = logits + r * V;
        const LogSumExp l = log_sum_exp_row(x, V);
        lse[r] = l.max + l.log_sum;
        if (targets[r] == d.ignore_index) continue;
        const double logp_target = x[targets[r]] - lse[r];
        double sum_x = 0.0;   // sum_j log p_j = sum_j x_j - V lse
        if (eps > 0.0)
            for (int64_t j = 0; j < V; j++) sum_x += x[j];
        const double sum_logp = sum_x - static_cast<double>(V) * lse[r];
        row_loss[r] = -(1.0 - eps) * logp_target - eps / static_cast<double>(V) * sum_logp;
    }
    const int64_t n = counted_rows(targets, d);
    double total = 0.0;
    for (double l : row_loss) total += l;   // fixed order
    return n ? static_cast<float>(total / static_cast<double>(n)) : 0.0f;
}

void cross_entropy_backward(float* dlogits, float dloss, const float* logits, const float* lse, const int32_t* targets,
                            const CrossEntropyDims& d) {
    const int64_t R = d.R, V = d.V, n = counted_rows(targets, d);
    if (n == 0) return;
    const float eps = d.label_smoothing, g = dloss / static_cast<float>(n), uniform = eps / static_cast<float>(V);
    #pragma omp parallel for if (worth_threads(R * V, kCrossEntropyParallelMin))
    for (int64_t r = 0; r < R; r++) {
        if (targets[r] == d.ignore_index) continue;
        const float *x = logits + r * V, l = lse[r];
        float* dx = dlogits + r * V;
        for (int64_t j = 0; j < V; j++) {
            const float q = (j == targets[r] ? 1.0f - eps : 0.0f) + uniform;
            dx[j] += g * (std::exp(x[j] - l) - q);   // softmax_j = e^(x_j - lse)
        }
    }
}

// Mean over the counted rows of -sum_j q_j log softmax(x)_j, with the target distribution
// q = (1 - eps) one_hot(target) + eps / V, and q = 0 on rows whose target is ignore_index.
Tensor cross_entropy_reference(const Tensor& logits, const Tokens& targets, int32_t ignore_index, float label_smoothing) {
    const int64_t V = logits.size(-1), R = targets.numel();
    std::vector<float> q(static_cast<size_t>(R * V), 0.0f);   // (R, V), a constant
    int64_t n = 0;
    for (int64_t r = 0; r < R; r++) {
        if (targets[r] == ignore_index) continue;
        n++;
        for (int64_t j = 0; j < V; j++) q[r * V + j] = label_smoothing / static_cast<float>(V);
        q[r * V + targets[r]] += 1.0f - label_smoothing;
    }
    const Tensor logp = log_softmax_reference(logits).reshape({R, V});                        // (R, V)
    return -sum(logp * Tensor::from_vector(q, {R, V})) / static_cast<float>(n);
}

}  // namespace autograd::kernels
