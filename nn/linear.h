// Linear: y = x W^T + b, W stored (out_features, in_features) as in PyTorch.
#pragma once
#include "nn/module.h"

namespace nn {

enum class Activation { none, relu, gelu };   // gelu: x Phi(x), exact (autograd::gelu; GPT's feed-forward)

// y = dropout(act(x W^T + b)) over the last dim: x (..., in) -> y (..., out). b may be undefined;
// dropout applies only when training and dropout_p > 0 (the same draws as nn::dropout).
// Written as the formula reads (a matmul with the transposed weight, then bias, activation, dropout);
// with fused kernels on, one op computes the same values (autograd::fused::linear): one gemm
// forward and two backward, with bias, ReLU and dropout riding along in one pass over y.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act = Activation::none,
              float dropout_p = 0.0f, bool training = false);

struct LinearOptions {
    bool bias = true;
};

class Linear : public Module {
public:
    Linear(int64_t in_features, int64_t out_features, LinearOptions opt = {});
    Tensor forward(const Tensor& x) const;   // linear(x, weight, bias): (..., in) -> (..., out)
    Tensor weight;   // (out, in), Xavier-uniform
    Tensor bias;     // (out,), zeros; undefined when opt.bias is false
};

}  // namespace nn
