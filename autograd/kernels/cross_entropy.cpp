#include "autograd/kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/kernels/allocator.h"
#include "autograd/kernels/parallel.h"
#include "autograd/kernels/softmax_rows.h"

namespace autograd::kernels {

int64_t counted_rows(const int32_t* targets, const CrossEntropyDims& d) {
    int64_t n = 0;
    for (int64_t r = 0; r < d.R; r++) n += targets[r] != d.ignore_index;
    return n;
}

void cross_entropy_rows(double& total, float* lse, const float* logits, const int32_t* targets, const CrossEntropyDims& d) {
    const int64_t R = d.R, V = d.V;
    const double eps = d.label_smoothing;
    std::vector<double> row_loss(R, 0.0);
    double* loss = row_loss.data();
    // per row, with log p_j = x_j - lse:  loss_r = -(1 - eps) log p_target - (eps / V) sum_j log p_j
    parallel_for(R, worth_threads(R * V, kCrossEntropyParallelMin), [=](int64_t r) {
        const float* x = logits + r * V;
        const LogSumExp l = log_sum_exp_row(x, V);
        lse[r] = l.max + l.log_sum;
        if (targets[r] == d.ignore_index) return;
        const double logp_target = x[targets[r]] - lse[r];
        double sum_x = 0.0;   // sum_j log p_j = sum_j x_j - V lse
        if (eps > 0.0)
            for (int64_t j = 0; j < V; j++) sum_x += x[j];
        const double sum_logp = sum_x - static_cast<double>(V) * lse[r];
        loss[r] = -(1.0 - eps) * logp_target - eps / static_cast<double>(V) * sum_logp;
    });
    for (double l : row_loss) total += l;   // fixed order
}

float cross_entropy_forward(float* lse, const float* logits, const int32_t* targets, const CrossEntropyDims& d) {
    double total = 0.0;
    cross_entropy_rows(total, lse, logits, targets, d);
    const int64_t n = counted_rows(targets, d);
    return n ? static_cast<float>(total / static_cast<double>(n)) : 0.0f;
}

void cross_entropy_rows_backward(GradOut dlogits, float g, const float* logits, const float* lse, const int32_t* targets,
                                 const CrossEntropyDims& d) {
    if (!dlogits.data) return;
    const int64_t R = d.R, V = d.V;
    const bool add = dlogits.add;
    const float eps = d.label_smoothing, uniform = eps / static_cast<float>(V);
    // In the forward pass this was, per counted row, loss_r = -sum_j q_j log p_j with
    // log p_j = x_j - lse(x). Since d lse / d x_j = p_j and sum_j q_j = 1:
    //     d loss_r / d x_j = -q_j + (sum_k q_k) p_j = p_j - q_j,   so  dx_j = g (p_j - q_j),
    // and 0 on ignored rows. p_j = e^(x_j - lse), from the lse the forward kept.
    parallel_for(R, worth_threads(R * V, kCrossEntropyParallelMin), [=](int64_t r) {
        float* dx = dlogits.data + r * V;
        if (targets[r] == d.ignore_index || g == 0.0f) {
            if (!add) std::fill(dx, dx + V, 0.0f);
            return;
        }
        const float *x = logits + r * V, l = lse[r];
        for (int64_t j = 0; j < V; j++) {
            const float q = (j == targets[r] ? 1.0f - eps : 0.0f) + uniform;
            dx[j] = (add ? dx[j] : 0.0f) + g * (std::exp(x[j] - l) - q);
        }
    });
}

void cross_entropy_backward(GradOut dlogits, float dloss, const float* logits, const float* lse, const int32_t* targets,
                            const CrossEntropyDims& d) {
    // the loss is the mean of the counted rows' losses: each row's gradient is dloss / n (p - q)
    const int64_t n = counted_rows(targets, d);
    cross_entropy_rows_backward(dlogits, n ? dloss / static_cast<float>(n) : 0.0f, logits, lse, targets, d);
}

// cross_entropy_backward's plain twin (cross_entropy.h): the chapter's formula, one row at a time.
void cross_entropy_backward_reference(float* dlogits, float dloss, const float* logits, const float* lse, const int32_t* targets,
                                      const CrossEntropyDims& d) {
    const int64_t R = d.R, V = d.V;
    const float eps = d.label_smoothing;
    int64_t n = 0;   // the rows the mean is over
    for (int64_t row = 0; row < R; row++)
        if (targets[row] != d.ignore_index) n++;
    for (int64_t row = 0; row < R; row++) {
        const int32_t y = targets[row];
        if (y == d.ignore_index) continue;   // an ignored row's gradient is 0
        const float* z = logits + row * V;
        float* dz = dlogits + row * V;
        // ℓ = −Σ_j q_j log p_j with log p_j = z_j − lse(z) and q_j = (1 − ε)·[j = y] + ε/V.
        // ∂lse/∂z_j = p_j and Σ_j q_j = 1, so ∂ℓ/∂z_j = p_j − q_j; the mean over n rows divides by n
        for (int64_t j = 0; j < V; j++) {
            const float p = std::exp(z[j] - lse[row]);
            const float q = (j == y ? 1.0f - eps : 0.0f) + eps / static_cast<float>(V);
            dz[j] += dloss / static_cast<float>(n) * (p - q);
        }
    }
}

}  // namespace autograd::kernels
