// Attention: a weighted sum of values, weighted by softmax(similarity of the query to each key).
// Vaswani et al. (2017), section 3.2.
#pragma once
#include <memory>

#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace nn {

// Scaled dot-product attention, fused, with a hand-derived backward:
//     out = dropout(softmax(Q K^T / sqrt(Dk) with masked scores removed)) V
// q (B, H, T, Dk), k (B, H, S, Dk), v (B, H, S, Dk) -> out (B, H, T, Dk).
// mask: true = "query t may attend to key s"; any shape that broadcasts to (B, T, S), e.g. a
// padding mask (B, 1, S), the decoder's subsequent mask (1, T, T), or both combined (B, T, S);
// an empty Mask means no mask. A query row with no allowed key gets weight 0 everywhere.
// If `weights` is given it receives the attention probabilities (B, H, T, S), before dropout.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Mask& mask = Mask(),
                                    float dropout_p = 0.0f, bool training = false, Tensor* weights = nullptr);

// The same computation composed from primitive ops (matmul, masked_fill, softmax, dropout):
// slower and heavier on memory, kept as the reference the fused version is tested against.
Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Mask& mask = Mask());

// Multi-head attention (section 3.2.2): project q, k, v to H heads of size Dk = D / H, attend in
// each head independently, concatenate the heads and project back to D.
class MultiHeadAttention : public Module {
public:
    MultiHeadAttention(int64_t d_model, int64_t h, float dropout = 0.1f);
    // query (B, T, D), key and value (B, S, D), mask broadcastable to (B, T, S) -> (B, T, D)
    Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const Mask& mask = Mask());

    int64_t d_model, h, d_k;
    float dropout_p;
    std::shared_ptr<Linear> w_q, w_k, w_v, w_o;
    Tensor last_attention;   // (B, H, T, S) weights of the last forward, for visualization
};

}  // namespace nn
