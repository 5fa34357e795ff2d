// The linear layer's kernel: y = dropout(act(x W^T + b)), with W stored (out, in) as in PyTorch.
//
// One gemm forward and two backward; the bias, the ReLU and the dropout ride along in one pass
// over y (the "epilogue"), and only y is kept for the backward: not the pre-activation, not a
// separate dropout output. nn::linear (nn/linear.cpp) is the autograd op around it.
#pragma once
#include <cstdint>

#include "autograd/kernels/dropout.h"
#include "autograd/kernels/grad_out.h"
#include "autograd/mixed_precision.h"
#include "autograd/tensor.h"

namespace autograd::kernels {

struct LinearDims {
    int64_t rows, in, out;   // x (rows, in), W (out, in), b (out,), y (rows, out)
};

// y = dropout(act(x W^T + b)), act = ReLU or the identity. b may be nullptr (no bias).
// precision: the format the products read x and W in (bf16 under mixed precision); the epilogue
// and y are fp32 either way.
void linear_forward(float* y, const float* x, const float* w, const float* b, const LinearDims& d, bool relu,
                    const DropoutDraws& drop, Precision precision = Precision::fp32);

// With g = dL/d(x W^T + b), recovered from dy and the forward's y:
//     dx (+)= g W    (rows, in)      dW (+)= g^T x    (out, in)      db (+)= sum over rows of g
// The two products use `precision`, as the forward did; db is an fp32 sum.
void linear_backward(GradOut dx, GradOut dw, GradOut db, const float* dy, const float* x, const float* w,
                     const float* y, const LinearDims& d, bool relu, const DropoutDraws& drop,
                     Precision precision = Precision::fp32);

// The reference, composed from autograd ops the way the formula reads:
// dropout(relu(matmul(x, W^T) + b)), b optional (an undefined Tensor), x (..., in).
Tensor linear_reference(const Tensor& x, const Tensor& w, const Tensor& b, bool relu, const DropoutDraws& drop);

}  // namespace autograd::kernels
