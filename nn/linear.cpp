#include "nn/linear.h"

#include <stdexcept>

#include "nn/dropout.h"
#include "nn/init.h"

namespace nn {

using autograd::shape_str;

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act, float dropout_p, bool training) {
    if (weight.dim() != 2 || x.dim() < 1 || x.size(-1) != weight.size(1))
        throw std::invalid_argument("linear: input " + shape_str(x.shape()) + " does not match weight " +
                                    shape_str(weight.shape()) + " (expected input (..., " +
                                    (weight.dim() == 2 ? std::to_string(weight.size(1)) : "?") + "))");
    if (bias.defined() && bias.shape() != Shape{weight.size(0)})
        throw std::invalid_argument("linear: bias " + shape_str(bias.shape()) + " does not match weight " + shape_str(weight.shape()));
    check_dropout_p(dropout_p, "linear");
    const bool relu = act == Activation::relu;
    if (autograd::fused_kernels_enabled() && act != Activation::gelu)   // fused: the same values, one gemm and one pass over y
        return autograd::fused::linear(x, weight, bias, relu, training ? dropout_p : 0.0f);
    if (autograd::fused_kernels_enabled())   // GELU after the fused x W^T + b
        return dropout(autograd::gelu(autograd::fused::linear(x, weight, bias, false, 0.0f)), dropout_p, training);
    Tensor y = matmul(x, weight, false, true);   // (..., out): x W^T
    if (bias.defined()) y = y + bias;            // (..., out), b broadcast over the rows
    if (relu) y = autograd::relu(y);             // (..., out)
    if (act == Activation::gelu) y = autograd::gelu(y);   // (..., out)
    return dropout(y, dropout_p, training);      // (..., out)
}

Tensor Linear::forward(const Tensor& x) const { return linear(x, weight, bias); }   // (..., in) -> (..., out)

Linear::Linear(int64_t in_features, int64_t out_features, LinearOptions opt) {
    if (in_features <= 0 || out_features <= 0)
        throw std::invalid_argument("Linear: features must be positive, got in=" + std::to_string(in_features) +
                                    " out=" + std::to_string(out_features));
    weight = register_parameter("weight", Tensor::empty({out_features, in_features}));
    init::xavier_uniform_(weight);
    if (opt.bias) bias = register_parameter("bias", Tensor::zeros({out_features}));
}

}  // namespace nn
