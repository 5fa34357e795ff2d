// Dropout (Srivastava et al. 2014), "inverted": in training, zero each element with probability p
// and scale the survivors by 1/(1-p), so evaluation needs no rescaling and is the identity.
#pragma once
#include "nn/module.h"

namespace nn {

// The keep/drop decisions come from the default seeded generator, in element order.
Tensor dropout(const Tensor& x, float p, bool training);

class Dropout : public Module {
public:
    explicit Dropout(float p = 0.1f);
    Tensor forward(const Tensor& x) const { return dropout(x, p, is_training()); }   // same shape
    float p;
};

}  // namespace nn
