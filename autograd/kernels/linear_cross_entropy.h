// The generator and the loss in one kernel: cross_entropy(x W^T + b, targets), with x (R, D) the
// decoder's output, W (V, D) and b (V,) the projection to the vocabulary, computed chunk_rows
// rows at a time so that the (R, V) logits never exist whole.
//
// Why: at the end of a translation model, V is the vocabulary (12,000 subwords on real text) and
// R the target tokens of a batch (1,000): the logits are 1,000 x 12,000 floats, 48 MB, and the
// backward makes their gradient, 48 MB more, while every other activation of the model is a
// fraction of that. Here a chunk's logits (chunk_rows x V) are made, turned into their loss and,
// in place, into their gradient (softmax - q) / n, and that gradient goes straight into dx, dW
// and db before the next chunk reuses the buffer. The gradient is computed in the forward pass,
// for dloss = 1: the loss is a scalar at the end of the graph, so the backward only scales it by
// the dloss it receives. No work is done twice (the three products are the forward's and the
// backward's of nn::linear), and only dx (R, D), dW (V, D) and db (V,) wait for the backward.
//
// The loss is the same number as cross_entropy_forward's over the whole logits (each row's loss
// is added in row order, whatever the chunks); the gradients differ by float rounding (dW and db
// are summed chunk by chunk). autograd::fused::linear_cross_entropy (autograd/fused_ops.cpp)
// records it as an autograd op; nn::linear_cross_entropy (nn/loss.cpp) holds its plain form.
#pragma once
#include <cstdint>

#include "autograd/kernels/grad_out.h"
#include "autograd/kernels/precision.h"

namespace autograd::kernels {

struct LinearCrossEntropyDims {
    int64_t R, D, V;            // x (R, D), W (V, D), b (V,), targets (R,)
    int32_t ignore_index;       // rows whose target is this count for nothing
    float label_smoothing;      // eps, as in cross_entropy.h
    int64_t chunk_rows;         // rows of logits at once (>= 1)
};

// Rows of logits per chunk for a vocabulary of V: about 8 MB of them (at least one row).
int64_t logits_chunk_rows(int64_t V);

// Returns the loss: the mean over the counted rows of -sum_j q_j log softmax(x_r W^T + b)_j.
// With dx, dw, db given (any may be nullptr: not wanted), also writes the loss's gradient for
// dloss = 1: dx (R, D), dW (V, D), db (V,), each completely (=, not +=). scratch: chunk_rows x V
// floats. b may be nullptr (no bias; db is then not written). The products read x and W in
// `precision`, as nn::linear's do.
float linear_cross_entropy_forward(float* dx, float* dw, float* db, float* scratch, const float* x, const float* w, const float* b,
                                   const int32_t* targets, const LinearCrossEntropyDims& d, Precision precision);

// out (+)= dloss * saved, n floats: the backward, from the gradient the forward saved.
void scale_saved_gradient(GradOut out, float dloss, const float* saved, int64_t n);

// The gradient linear_cross_entropy_forward writes, as plain loops over chunks of one row
// (docs/11-label-smoothing-and-loss.md): per row, its V logits, their gradient (p - q) / n
// (cross_entropy_backward_reference), then the Linear's backward with it. Adds (+=) the gradient
// for dloss = 1 into dx (R, D), dW (V, D) and db (V,), which the caller fills with zeros; b and db
// may be nullptr (no bias). fp32 products. What linear_cross_entropy_forward is held equal to.
void linear_cross_entropy_backward_reference(float* dx, float* dw, float* db, const float* x, const float* w, const float* b,
                                             const int32_t* targets, const LinearCrossEntropyDims& d);

}  // namespace autograd::kernels
