// The cross-entropy kernel: log_softmax and the loss fused, over logits (R, V) and R integer
// targets. With the (smoothed) target distribution of row r
//     q_j = (1 - eps) [j == target_r] + eps / V        (eps = label_smoothing; eps = 0: one-hot)
// the loss is the mean over the counted rows (target != ignore_index) of -sum_j q_j log softmax(x_r)_j,
// and its gradient is simply (softmax(x_r) - q) / n per counted row (0 on ignored rows).
// nn::cross_entropy (nn/loss.cpp) is the autograd op around it.
#pragma once
#include <cstdint>

#include "autograd/tensor.h"

namespace autograd::kernels {

struct CrossEntropyDims {
    int64_t R, V;                  // rows (targets), classes
    int32_t ignore_index;          // rows whose target is this count for nothing
    float label_smoothing;         // eps
};

// Returns the loss (0 if every row is ignored); writes each row's log-sum-exp lse (R,) for the
// backward.
float cross_entropy_forward(float* lse, const float* logits, const int32_t* targets, const CrossEntropyDims& d);

// dlogits += dloss * (softmax(x_r) - q) / n, n the number of counted rows.
void cross_entropy_backward(float* dlogits, float dloss, const float* logits, const float* lse, const int32_t* targets,
                            const CrossEntropyDims& d);

// The reference, composed from autograd ops: -sum(log_softmax(logits) * q) / n, with q built as
// a constant tensor. logits (..., V), targets (...).
Tensor cross_entropy_reference(const Tensor& logits, const Tokens& targets, int32_t ignore_index, float label_smoothing);

}  // namespace autograd::kernels
