// The linear layer's kernel: y = dropout(act(x W^T + b)), with W stored (out, in) as in PyTorch.
//
// One gemm forward and two backward; the bias, the ReLU and the dropout ride along in one pass
// over y (the "epilogue"), and only y is kept for the backward: not the pre-activation, not a
// separate dropout output. autograd::fused::linear (autograd/fused_ops.cpp) records these two as
// an autograd op; nn::linear (nn/linear.cpp) calls it when fused kernels are on.
#pragma once
#include <cstdint>

#include "autograd/kernels/dropout.h"
#include "autograd/kernels/gemm_bf16.h"
#include "autograd/kernels/grad_out.h"
#include "autograd/kernels/precision.h"

namespace autograd::kernels {

struct LinearDims {
    int64_t rows, in, out;   // x (rows, in), W (out, in), b (out,), y (rows, out)
};

// y = dropout(act(x W^T + b)), act = ReLU or the identity. b may be nullptr (no bias).
// precision: the format the products read x and W in (bf16 under mixed precision); the epilogue
// and y are fp32 either way. packed_w_t: with bf16, W^T packed before (decoding packs each weight
// once: autograd/frozen_weights.h), read instead of packing w again; the same bits.
void linear_forward(float* y, const float* x, const float* w, const float* b, const LinearDims& d, bool relu,
                    const DropoutDraws& drop, Precision precision = Precision::fp32,
                    const PackedBf16B* packed_w_t = nullptr);

// dx (rows, in), dW (out, in), db (out,) from dy and the forward's y (rows, out); a GradOut with
// no data is skipped. The two products use `precision`, as the forward did; db is an fp32 sum.
// Writes dx, then dW, then db, each completely (when two are one buffer, the later adds to the
// earlier: grad_out.h).
void linear_backward(GradOut dx, GradOut dw, GradOut db, const float* dy, const float* x, const float* w,
                     const float* y, const LinearDims& d, bool relu, const DropoutDraws& drop,
                     Precision precision = Precision::fp32);

}  // namespace autograd::kernels
