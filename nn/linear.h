// Linear: y = x W^T + b, W stored (out_features, in_features) as in PyTorch.
#pragma once
#include "nn/module.h"

namespace nn {

enum class Activation { none, relu };

// Fused y = act(x W^T + b) over the last dim: x (..., in) -> y (..., out). b may be undefined.
// One gemm forward and two backward; the bias add and ReLU ride along in the same pass over y.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act = Activation::none);

struct LinearOptions {
    bool bias = true;
};

class Linear : public Module {
public:
    Linear(int64_t in_features, int64_t out_features, LinearOptions opt = {});
    Tensor forward(const Tensor& x) const { return linear(x, weight, bias); }   // (..., in) -> (..., out)
    Tensor weight;   // (out, in), Xavier-uniform
    Tensor bias;     // (out,), zeros; undefined when opt.bias is false
};

}  // namespace nn
