// The cross-entropy kernel: log_softmax and the loss fused, over logits (R, V) and R integer
// targets. With the (smoothed) target distribution of row r
//     q_j = (1 - eps) [j == target_r] + eps / V        (eps = label_smoothing; eps = 0: one-hot)
// the loss is the mean over the counted rows (target != ignore_index) of -sum_j q_j log softmax(x_r)_j.
// autograd::fused::cross_entropy (autograd/fused_ops.cpp) records these two as an autograd op;
// nn::cross_entropy (nn/loss.cpp) calls it when fused kernels are on.
#pragma once
#include <cstdint>

#include "autograd/kernels/grad_out.h"

namespace autograd::kernels {

struct CrossEntropyDims {
    int64_t R, V;                  // rows (targets), classes
    int32_t ignore_index;          // rows whose target is this count for nothing
    float label_smoothing;         // eps
};

// The rows the mean is over: those whose target is not ignore_index.
int64_t counted_rows(const int32_t* targets, const CrossEntropyDims& d);

// Adds each counted row's loss -sum_j q_j log softmax(x_r)_j to `total`, in row order, and writes
// each row's log-sum-exp lse (R,): the forward without the mean, for a loss computed over many
// chunks of rows (linear_cross_entropy.h), whose total is then the same number.
void cross_entropy_rows(double& total, float* lse, const float* logits, const int32_t* targets, const CrossEntropyDims& d);

// dlogits (R, V) (+)= g (p - q) on each counted row, 0 on the ignored ones: the gradient of
// g x (the rows' summed loss), from the forward's lse. dlogits may be logits itself (each element
// is read before it is written).
void cross_entropy_rows_backward(GradOut dlogits, float g, const float* logits, const float* lse, const int32_t* targets,
                                 const CrossEntropyDims& d);

// Returns the loss (0 if every row is ignored); writes each row's log-sum-exp lse (R,) for the
// backward.
float cross_entropy_forward(float* lse, const float* logits, const int32_t* targets, const CrossEntropyDims& d);

// dlogits (R, V) (+)= dloss * dL/dlogits, from the forward's lse; every element is written
// (0 on ignored rows). No data: skipped.
void cross_entropy_backward(GradOut dlogits, float dloss, const float* logits, const float* lse, const int32_t* targets,
                            const CrossEntropyDims& d);

// The same gradient as a plain loop, the chapter's formula one row at a time
// (docs/11-label-smoothing-and-loss.md): adds (+=) dloss (p - q) / n into each counted row of
// dlogits (R, V), which the caller fills with zeros, and nothing into the ignored ones. What
// cross_entropy_backward is held equal to.
void cross_entropy_backward_reference(float* dlogits, float dloss, const float* logits, const float* lse, const int32_t* targets,
                                      const CrossEntropyDims& d);

}  // namespace autograd::kernels
