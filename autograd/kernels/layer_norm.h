// The LayerNorm kernel, over the last dim of x seen as (R, C):
//     y = (x - mean) / sqrt(var + eps) * gain + bias,   var the biased variance (divide by C)
// One pass per row forward and one backward, instead of the seven primitive ops the formula
// records. autograd::fused::layer_norm (autograd/fused_ops.cpp) records these two as an autograd
// op; nn::layer_norm (nn/layer_norm.cpp) calls it when fused kernels are on.
#pragma once
#include <cstdint>

#include "autograd/kernels/grad_out.h"

namespace autograd::kernels {

struct LayerNormDims {
    int64_t R, C;   // rows, and the features each row normalizes over
};

// x, y (R, C); gain, bias (C,). Also writes each row's mean and rstd = 1 / sqrt(var + eps)
// (R,) for the backward.
void layer_norm_forward(float* y, float* mean, float* rstd, const float* x, const float* gain, const float* bias,
                        const LayerNormDims& d, float eps);

// dx (R, C), dgain and dbias (C,) from dy and the forward's x, mean and rstd; a GradOut with no
// data is skipped. Writes dx completely first, then dgain and dbias.
void layer_norm_backward(GradOut dx, GradOut dgain, GradOut dbias, const float* dy, const float* x, const float* mean,
                         const float* rstd, const float* gain, const LayerNormDims& d);

// The same gradients as plain loops, the chapter's formulas one row at a time (docs/05-layernorm.md):
// adds (+=) into dx (R, C), dgain and dbias (C,), which the caller fills with zeros. What
// layer_norm_backward is held equal to.
void layer_norm_backward_reference(float* dx, float* dgain, float* dbias, const float* dy, const float* x, const float* mean,
                                   const float* rstd, const float* gain, const LayerNormDims& d);

}  // namespace autograd::kernels
