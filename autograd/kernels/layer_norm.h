// The LayerNorm kernel, over the last dim of x seen as (R, C):
//     y = (x - mean) / sqrt(var + eps) * gain + bias,   var the biased variance (divide by C)
// One pass per row forward and one backward, instead of the seven primitive ops the formula would
// record. nn::layer_norm (nn/layer_norm.cpp) is the autograd op around it.
#pragma once
#include <cstdint>

#include "autograd/kernels/grad_out.h"
#include "autograd/tensor.h"

namespace autograd::kernels {

// x, y (R, C); gain, bias (C,). Also writes each row's mean and rstd = 1 / sqrt(var + eps)
// (R,) for the backward.
void layer_norm_forward(float* y, float* mean, float* rstd, const float* x, const float* gain, const float* bias,
                        int64_t R, int64_t C, float eps);

// With xhat = (x - mean) * rstd and g = dy * gain, per row:
//     dx (+)= rstd * (g - mean(g) - xhat * mean(g * xhat))
// (the two mean terms are the gradient flowing through the row's mean and variance), and
//     dgain (+)= sum over rows of dy * xhat,    dbias (+)= sum over rows of dy.
void layer_norm_backward(GradOut dx, GradOut dgain, GradOut dbias, const float* dy, const float* x, const float* mean,
                         const float* rstd, const float* gain, int64_t R, int64_t C);

// The reference, composed from autograd ops the way the formula reads.
Tensor layer_norm_reference(const Tensor& x, const Tensor& gain, const Tensor& bias, float eps = 1e-5f);

}  // namespace autograd::kernels
