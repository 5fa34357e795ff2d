#include "nn/layer_norm.h"

#include <stdexcept>

#include "autograd/detail.h"
#include "autograd/kernels/layer_norm.h"

namespace nn {

namespace kernels = autograd::kernels;
using autograd::Node;
using autograd::shape_str;

Tensor layer_norm(const Tensor& x, const Tensor& gain, const Tensor& bias, float eps) {
    const int64_t C = x.dim() ? x.size(-1) : 0;
    if (C == 0 || gain.shape() != Shape{C} || bias.shape() != Shape{C})
        throw std::invalid_argument("layer_norm: input " + shape_str(x.shape()) + " needs gain and bias of shape (" +
                                    std::to_string(C) + ",), got " + shape_str(gain.shape()) + " and " + shape_str(bias.shape()));
    const int64_t R = x.numel() / C;
    Tensor y = Tensor::empty(x.shape());                                     // (..., C)
    auto stats = std::make_shared<autograd::FloatBuffer>(2 * R);            // per row: mean, then 1/std
    float *mean = stats->data(), *rstd = mean + R;
    kernels::layer_norm_forward(y.data(), mean, rstd, x.data(), gain.data(), bias.data(), R, C, eps);
    autograd::record(y, {x, gain, bias}, "layer_norm", [R, C, stats](Node& self) {
        const float *mean = stats->data(), *rstd = mean + R;
        // dx in the order the kernel writes it, first (autograd/detail.h); gain and bias add
        const kernels::GradOut dx = autograd::detail::parent_grad_to_write(self, 0);
        const kernels::GradOut dgain{self.parent_grad(1)}, dbias{self.parent_grad(2)};
        kernels::layer_norm_backward(dx, dgain, dbias, self.grad.data(), self.parent_data(0), mean, rstd,
                                     self.parent_data(1), R, C);
    });
    return y;
}

LayerNorm::LayerNorm(int64_t features, float eps_) : eps(eps_) {
    if (features <= 0) throw std::invalid_argument("LayerNorm: features must be positive, got " + std::to_string(features));
    gain = register_parameter("gain", Tensor::ones({features}));
    bias = register_parameter("bias", Tensor::zeros({features}));
}

}  // namespace nn
