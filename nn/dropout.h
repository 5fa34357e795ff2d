// Dropout (Srivastava et al. 2014), "inverted": in training, zero each element with probability p
// and scale the survivors by 1/(1-p), so evaluation needs no rescaling and is the identity.
#pragma once
#include "autograd/random.h"
#include "nn/module.h"

namespace nn {

// Each call draws one 64-bit seed from the default generator; element i is then kept iff
// counter_uniform(seed, i) >= p, a counter-based draw (a hash of seed and i, autograd/random.h). So the decisions do not
// depend on which thread handles which element, and the backward recomputes them instead of
// storing a mask.
Tensor dropout(const Tensor& x, float p, bool training);
using autograd::counter_uniform;

class Dropout : public Module {
public:
    explicit Dropout(float p = 0.1f);
    Tensor forward(const Tensor& x) const { return dropout(x, p, is_training()); }   // same shape
    float p;
};

}  // namespace nn
