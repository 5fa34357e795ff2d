// Dropout (Srivastava et al. 2014), "inverted": in training, zero each element with probability p
// and scale the survivors by 1/(1-p), so evaluation needs no rescaling and is the identity.
#pragma once
#include <string>

#include "nn/module.h"

namespace nn {

// y = x * keep, keep_i = 0 with probability p, else 1/(1-p); x itself when not training.
// Each call draws one 64-bit seed from the default generator, and element i (its flat index) is
// kept iff a hash of (seed, i) is >= p, in both paths: so the decisions do not depend on the
// order in which the elements are computed, the backward recomputes them instead of storing a mask, and the
// fused and the plain path drop the same elements (autograd::dropout_keep, autograd/ops.h).
Tensor dropout(const Tensor& x, float p, bool training);

// x + dropout(y, p, training): a residual connection around a sublayer whose output y is dropped
// out (the Transformer's SublayerConnection). x and y must have one shape. With fused kernels on,
// one pass that never stores dropout(y) (autograd::fused::add_dropout), with the same values.
Tensor add_dropout(const Tensor& x, const Tensor& y, float p, bool training);

// The one check of a dropout probability: throws std::invalid_argument naming `op` unless 0 <= p < 1.
void check_dropout_p(float p, const std::string& op);

class Dropout : public Module {
public:
    explicit Dropout(float p = 0.1f);
    Tensor forward(const Tensor& x) const { return dropout(x, p, is_training()); }   // same shape
    float p;
};

}  // namespace nn
