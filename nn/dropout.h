// Dropout (Srivastava et al. 2014), "inverted": in training, zero each element with probability p
// and scale the survivors by 1/(1-p), so evaluation needs no rescaling and is the identity.
#pragma once
#include <string>

#include "autograd/kernels/dropout.h"
#include "nn/module.h"

namespace nn {

// Each call draws one 64-bit seed from the default generator; element i is then kept iff
// counter_uniform(seed, i) >= p, a counter-based draw (autograd/kernels/dropout.h). So the
// decisions do not depend on which thread handles which element, and the backward recomputes
// them instead of storing a mask.
Tensor dropout(const Tensor& x, float p, bool training);

// The one check of a dropout probability: throws std::invalid_argument naming `op` unless 0 <= p < 1.
void check_dropout_p(float p, const std::string& op);
// The draws of one dropout (in nn::dropout, linear or attention): none when not training or
// p = 0, else p and a fresh seed from the default generator. Checks p first.
autograd::kernels::DropoutDraws dropout_draws(float p, bool training, const std::string& op);

class Dropout : public Module {
public:
    explicit Dropout(float p = 0.1f);
    Tensor forward(const Tensor& x) const { return dropout(x, p, is_training()); }   // same shape
    float p;
};

}  // namespace nn
