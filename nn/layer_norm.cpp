#include "nn/layer_norm.h"

#include <stdexcept>

namespace nn {

using autograd::shape_str;

Tensor layer_norm(const Tensor& x, const Tensor& gain, const Tensor& bias, float eps) {
    const int64_t C = x.dim() ? x.size(-1) : 0;
    if (C == 0 || gain.shape() != Shape{C} || bias.shape() != Shape{C})
        throw std::invalid_argument("layer_norm: input " + shape_str(x.shape()) + " needs gain and bias of shape (" +
                                    std::to_string(C) + ",), got " + shape_str(gain.shape()) + " and " + shape_str(bias.shape()));
    if (autograd::fused_kernels_enabled()) return autograd::fused::layer_norm(x, gain, bias, eps);   // fused: no intermediate tensors
    const Tensor mu = mean(x, -1, true);                           // (..., 1)
    const Tensor centered = x - mu;                                // (..., C)
    const Tensor variance = mean(centered * centered, -1, true);   // (..., 1): biased, divide by C
    const Tensor xhat = centered / sqrt(variance + eps);           // (..., C): mean 0, variance 1 per row
    return xhat * gain + bias;                                     // (..., C)
}

Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, gain, bias, eps); }   // (..., C) -> (..., C)

LayerNorm::LayerNorm(int64_t features, float eps_) : eps(eps_) {
    if (features <= 0) throw std::invalid_argument("LayerNorm: features must be positive, got " + std::to_string(features));
    gain = register_parameter("gain", Tensor::ones({features}));
    bias = register_parameter("bias", Tensor::zeros({features}));
}

}  // namespace nn
