// LayerNorm over the last dim, as torch.nn.LayerNorm: y = (x - mean) / sqrt(var + eps) * gain + bias
// with the biased variance (divide by C). Ba, Kiros & Hinton (2016).
#pragma once
#include "nn/module.h"

namespace nn {

// x (..., C), gain (C,), bias (C,) -> y (..., C). Written as the formula reads (mean, centre,
// variance as the mean of the squares, normalize, scale, shift: primitive ops); with fused kernels on, one op with one loop over
// the rows forward and backward computes the same values (autograd::fused::layer_norm).
Tensor layer_norm(const Tensor& x, const Tensor& gain, const Tensor& bias, float eps = 1e-5f);

class LayerNorm : public Module {
public:
    explicit LayerNorm(int64_t features, float eps = 1e-5f);
    Tensor forward(const Tensor& x) const;   // layer_norm(x, gain, bias, eps): (..., C) -> (..., C)
    Tensor gain;   // (C,), ones
    Tensor bias;   // (C,), zeros
    float eps;
};

}  // namespace nn
