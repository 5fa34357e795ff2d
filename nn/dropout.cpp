#include "nn/dropout.h"

#include <stdexcept>

namespace nn {

void check_dropout_p(float p, const std::string& op) {
    if (!(p >= 0.0f && p < 1.0f))
        throw std::invalid_argument(op + ": dropout probability must be in [0, 1), got " + std::to_string(p));
}

Tensor dropout(const Tensor& x, float p, bool training) {
    check_dropout_p(p, "dropout");
    if (!training || p == 0.0f) return x;                                     // evaluation: the identity
    if (autograd::fused_kernels_enabled()) return autograd::fused::dropout(x, p);   // fused: one pass, no factor tensor
    return x * autograd::dropout_keep(x.shape(), p);                          // same shape as x
}

Tensor add_dropout(const Tensor& x, const Tensor& y, float p, bool training) {
    check_dropout_p(p, "add_dropout");
    if (x.shape() != y.shape())   // not broadcast: a residual adds two tensors of one shape
        throw std::invalid_argument("add_dropout: x " + autograd::shape_str(x.shape()) + " and y " +
                                    autograd::shape_str(y.shape()) + " must have the same shape");
    if (training && autograd::fused_kernels_enabled()) return autograd::fused::add_dropout(x, y, p);   // fused: one pass, dropout(y) never stored
    return x + dropout(y, p, training);   // same shape as x
}

Dropout::Dropout(float p_) : p(p_) { check_dropout_p(p, "Dropout"); }

}  // namespace nn
