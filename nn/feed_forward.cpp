#include "nn/feed_forward.h"

namespace nn {

PositionwiseFeedForward::PositionwiseFeedForward(int64_t d_model, int64_t d_ff, float dropout, Activation a)
    : dropout_p(dropout), act(a) {
    w_1 = register_module("w_1", std::make_shared<Linear>(d_model, d_ff));
    w_2 = register_module("w_2", std::make_shared<Linear>(d_ff, d_model));
}

Tensor PositionwiseFeedForward::forward(const Tensor& x) const {
    // (B, T, F): bias, activation and dropout fused into the first layer's output pass
    const Tensor hidden = linear(x, w_1->weight, w_1->bias, act, dropout_p, is_training());
    return w_2->forward(hidden);   // (B, T, D)
}

}  // namespace nn
