// Attention: a weighted sum of values, weighted by softmax(similarity of the query to each key).
// Vaswani et al. (2017), section 3.2.
#pragma once
#include <memory>

#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace nn {

// What attention returns: the output, and the weights it took it with (e.g. to draw them).
struct AttentionOutput {
    Tensor out;       // (B, T, D)
    Tensor weights;   // (B, H, T, S): the softmax probabilities, before dropout; no gradient
};

// Scaled dot-product attention over H = heads heads:
//     out_h = dropout(softmax(Q_h K_h^T / sqrt(Dk) with masked scores removed)) V_h   for every head h
// q (B, T, D), k (B, S, D), v (B, S, D) -> out (B, T, D), with D = H * Dk. Head h of a token is
// the slice [h*Dk, (h+1)*Dk) of its D-vector; the heads' outputs come out side by side, already
// concatenated. Written step by step as the paper draws it (split the heads, scores, mask,
// softmax, dropout, weighted sum, concatenate); with fused kernels on, one op computes the same
// with a hand-derived backward (autograd::fused::attention).
// mask: true = "query t may attend to key s"; any shape that broadcasts to (B, T, S), e.g. a
// padding mask (B, 1, S), the decoder's subsequent mask (1, T, T), or both combined (B, T, S);
// an empty Mask means no mask. A query row with no allowed key gets weight 0 everywhere.
// dropout_p: dropout on the weights (training; 0 in evaluation).
AttentionOutput scaled_dot_product_attention_with_weights(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                                                          const Mask& mask = Mask(), float dropout_p = 0.0f);
// The same, the output alone.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                                    const Mask& mask = Mask(), float dropout_p = 0.0f);

// Multi-head attention (section 3.2.2): project q, k, v to H heads of size Dk = D / H, attend in
// each head independently, concatenate the heads and project back to D.
// w_k's bias adds q.b_k to every score of a query row, which softmax ignores: its gradient is
// exactly zero in theory and rounding noise in practice (docs/07). Kept, as in PyTorch's
// nn.MultiheadAttention, so the parameters match the standard model one for one.
class MultiHeadAttention : public Module {
public:
    MultiHeadAttention(int64_t d_model, int64_t heads, float dropout = 0.1f);
    // query (B, T, D), key and value (B, S, D), mask broadcastable to (B, T, S) -> (B, T, D).
    Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const Mask& mask = Mask());

    int64_t d_model, heads, d_k;
    float dropout_p;
    std::shared_ptr<Linear> w_q, w_k, w_v, w_o;
    bool keep_attention = false;   // true: each forward keeps its weights in last_attention (pictures)
    Tensor last_attention;         // (B, H, T, S) weights of the last forward, when kept
};

}  // namespace nn
