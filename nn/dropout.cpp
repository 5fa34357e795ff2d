#include "nn/dropout.h"

#include <stdexcept>

#include "autograd/detail.h"
#include "autograd/random.h"

namespace nn {

namespace kernels = autograd::kernels;

void check_dropout_p(float p, const std::string& op) {
    if (!(p >= 0.0f && p < 1.0f))
        throw std::invalid_argument(op + ": dropout probability must be in [0, 1), got " + std::to_string(p));
}

kernels::DropoutDraws dropout_draws(float p, bool training, const std::string& op) {
    check_dropout_p(p, op);
    if (!training || p == 0.0f) return {};
    return {p, autograd::default_rng().next_u64()};
}

Tensor dropout(const Tensor& x, float p, bool training) {
    const kernels::DropoutDraws drop = dropout_draws(p, training, "dropout");
    if (!drop.active()) return x;
    Tensor y = Tensor::empty(x.shape());
    kernels::dropout_forward(y.data(), x.data(), x.numel(), drop);
    // backward: y = x * keep, so dx = dy * keep, with the same keep decisions
    autograd::record(y, {x}, "dropout", [drop](autograd::Node& self) {
        kernels::dropout_backward(autograd::detail::parent_grad_to_write(self, 0), self.grad.data(), self.numel(), drop);
    });
    return y;
}

Dropout::Dropout(float p_) : p(p_) { check_dropout_p(p, "Dropout"); }

}  // namespace nn
