// Position-wise feed-forward network (section 3.3): the same two-layer MLP applied to every
// position separately, FFN(x) = W2 dropout(relu(W1 x + b1)) + b2, widening D to F and back.
// GPT's (Radford et al. 2018) is the same with GELU in place of ReLU (act = Activation::gelu).
#pragma once
#include <memory>

#include "nn/dropout.h"
#include "nn/linear.h"

namespace nn {

class PositionwiseFeedForward : public Module {
public:
    PositionwiseFeedForward(int64_t d_model, int64_t d_ff, float dropout = 0.1f, Activation act = Activation::relu);
    Tensor forward(const Tensor& x) const;   // (B, T, D) -> (B, T, D)
    std::shared_ptr<Linear> w_1, w_2;        // D -> F, F -> D
    float dropout_p;
    Activation act;                          // relu (the paper's) or gelu (GPT's)
};

}  // namespace nn
