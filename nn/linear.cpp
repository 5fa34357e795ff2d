#include "nn/linear.h"

#include <stdexcept>

#include "autograd/detail.h"
#include "autograd/kernels/linear.h"
#include "autograd/mixed_precision.h"
#include "nn/dropout.h"
#include "nn/init.h"

namespace nn {

namespace kernels = autograd::kernels;
using autograd::detail::parent_grad_to_write;
using autograd::Node;
using autograd::shape_str;

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act, float dropout_p, bool training) {
    if (weight.dim() != 2 || x.dim() < 1 || x.size(-1) != weight.size(1))
        throw std::invalid_argument("linear: input " + shape_str(x.shape()) + " does not match weight " +
                                    shape_str(weight.shape()) + " (expected input (..., " +
                                    (weight.dim() == 2 ? std::to_string(weight.size(1)) : "?") + "))");
    const int64_t in = weight.size(1), out = weight.size(0);
    if (bias.defined() && bias.shape() != Shape{out})
        throw std::invalid_argument("linear: bias " + shape_str(bias.shape()) + " does not match weight " + shape_str(weight.shape()));
    const kernels::LinearDims d{x.numel() / std::max<int64_t>(in, 1), in, out};
    const bool relu = act == Activation::relu;
    const kernels::DropoutDraws drop = dropout_draws(dropout_p, training, "linear");
    Shape ys = x.shape();
    ys.back() = out;
    Tensor y = Tensor::empty(ys);                                                   // (..., out)
    const autograd::Precision precision = autograd::matmul_precision();   // the backward uses it too
    kernels::linear_forward(y.data(), x.data(), weight.data(), bias.defined() ? bias.data() : nullptr, d, relu, drop,
                            precision);

    std::vector<Tensor> inputs = {x, weight};
    if (bias.defined()) inputs.push_back(bias);
    const char* name = relu ? (drop.active() ? "linear_relu_dropout" : "linear_relu") : (drop.active() ? "linear_dropout" : "linear");
    autograd::record(y, inputs, name, [d, relu, drop, precision](Node& self) {
        // dx, dW, db in the order the kernel writes them (autograd/detail.h says why that matters)
        const kernels::GradOut dx = parent_grad_to_write(self, 0), dw = parent_grad_to_write(self, 1),
                               db = self.parents.size() > 2 ? parent_grad_to_write(self, 2) : kernels::GradOut{};
        kernels::linear_backward(dx, dw, db, self.grad.data(), self.parent_data(0), self.parent_data(1), self.data->data(), d,
                                 relu, drop, precision);
    });
    return y;
}

Linear::Linear(int64_t in_features, int64_t out_features, LinearOptions opt) {
    if (in_features <= 0 || out_features <= 0)
        throw std::invalid_argument("Linear: features must be positive, got in=" + std::to_string(in_features) +
                                    " out=" + std::to_string(out_features));
    weight = register_parameter("weight", Tensor::empty({out_features, in_features}));
    init::xavier_uniform_(weight);
    if (opt.bias) bias = register_parameter("bias", Tensor::zeros({out_features}));
}

}  // namespace nn
