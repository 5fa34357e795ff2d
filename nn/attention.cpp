#include "nn/attention.h"

#include <cmath>
#include <stdexcept>

namespace nn {

using autograd::shape_str;

// The shapes attention needs, checked before any work (the fused kernel checks nothing): q
// (B, T, D), k and v (B, S, D) with D a multiple of the heads, and a mask that broadcasts to
// (B, T, S), optionally with a head dim of 1, as in (B, 1, 1, S).
static void check_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const Mask& mask, float dropout_p) {
    if (q.dim() != 3 || k.dim() != 3 || k.shape() != v.shape() || q.size(0) != k.size(0) || q.size(2) != k.size(2) ||
        heads <= 0 || q.size(2) % heads != 0)
        throw std::invalid_argument("attention: expected q (B, T, D) and k, v (B, S, D) with D a multiple of the " +
                                    std::to_string(heads) + " heads, got q " + shape_str(q.shape()) + ", k " +
                                    shape_str(k.shape()) + ", v " + shape_str(v.shape()));
    check_dropout_p(dropout_p, "attention");
    if (mask.data.empty()) return;
    Shape ms = mask.shape;
    if (ms.size() == 4 && ms[1] == 1) ms.erase(ms.begin() + 1);
    const Shape target{q.size(0), q.size(1), k.size(1)};
    bool ok = ms.size() <= 3 && mask.numel() == autograd::shape_numel(ms);
    for (size_t i = 0; ok && i < ms.size(); i++) ok = ms[i] == target[3 - ms.size() + i] || ms[i] == 1;
    if (!ok)
        throw std::invalid_argument("attention: mask of shape " + shape_str(mask.shape) +
                                    " does not broadcast to (B, T, S) = " + shape_str(target));
}

// The keys a query may not see, as masked_fill takes them (true = fill): the mask negated, with
// a head dim of 1 so that it broadcasts to the scores (B, H, T, S).
static Mask blocked_keys(const Mask& allowed) {
    Mask blocked = allowed;
    for (uint8_t& m : blocked.data) m = !m;
    if (blocked.dim() == 3) blocked.shape.insert(blocked.shape.begin() + 1, 1);   // (B, 1, T, S): every head alike
    return blocked;
}

AttentionOutput scaled_dot_product_attention_with_weights(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                                                          const Mask& mask, float dropout_p) {
    check_attention(q, k, v, heads, mask, dropout_p);
    if (autograd::fused_kernels_enabled()) {   // fused: the same values; no head copies, no (B, H, T, S) intermediates but the weights
        const autograd::fused::Attention a = autograd::fused::attention(q, k, v, heads, mask, dropout_p);
        return {a.out, a.weights};
    }
    const int64_t B = q.size(0), T = q.size(1), S = k.size(1), D = q.size(2), Dk = D / heads;
    // 1) split the heads: (B, ., D) -> (B, ., H, Dk) -> (B, H, ., Dk)
    const Tensor qh = transpose(q.reshape({B, T, heads, Dk}), 1, 2);   // (B, H, T, Dk)
    const Tensor kh = transpose(k.reshape({B, S, heads, Dk}), 1, 2);   // (B, H, S, Dk)
    const Tensor vh = transpose(v.reshape({B, S, heads, Dk}), 1, 2);   // (B, H, S, Dk)
    // 2) scores: how well each query matches each key, scaled so their variance does not grow with Dk
    Tensor scores = matmul(qh, kh, false, true) * (1.0f / std::sqrt(static_cast<float>(Dk)));   // (B, H, T, S)
    // 3) a key the mask forbids scores -inf: softmax gives it weight exactly 0
    if (!mask.data.empty()) scores = masked_fill(scores, blocked_keys(mask), -INFINITY);           // (B, H, T, S)
    // 4) weights: a distribution over the keys for each query; dropout on them when training
    const Tensor weights = softmax(scores);                                                        // (B, H, T, S)
    // 5) the weighted sum of the values, then the heads side by side again: (B, H, T, Dk) -> (B, T, D)
    const Tensor x = matmul(dropout(weights, dropout_p, /*training=*/true), vh);                   // (B, H, T, Dk)
    return {transpose(x, 1, 2).reshape({B, T, D}), weights.detach()};
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const Mask& mask,
                                    float dropout_p) {
    return scaled_dot_product_attention_with_weights(q, k, v, heads, mask, dropout_p).out;
}

MultiHeadAttention::MultiHeadAttention(int64_t d_model, int64_t heads, float dropout)
    : d_model(d_model), heads(heads), d_k(heads > 0 ? d_model / heads : 0), dropout_p(dropout) {
    if (heads <= 0 || d_model <= 0 || d_model % heads != 0)
        throw std::invalid_argument("MultiHeadAttention: d_model (" + std::to_string(d_model) +
                                    ") must be a positive multiple of the number of heads (" + std::to_string(heads) + ")");
    check_dropout_p(dropout, "MultiHeadAttention");
    w_q = register_module("w_q", std::make_shared<Linear>(d_model, d_model));
    w_k = register_module("w_k", std::make_shared<Linear>(d_model, d_model));
    w_v = register_module("w_v", std::make_shared<Linear>(d_model, d_model));
    w_o = register_module("w_o", std::make_shared<Linear>(d_model, d_model));
}

// The inputs' shapes, named in the message a user sees.
static void check_inputs(const Tensor& query, const Tensor& key, const Tensor& value, int64_t d_model) {
    if (query.dim() != 3 || query.size(-1) != d_model || key.dim() != 3 || key.shape() != value.shape() ||
        key.size(-1) != d_model || key.size(0) != query.size(0))
        throw std::invalid_argument("MultiHeadAttention: expected query (B, T, " + std::to_string(d_model) + ") and key, value (B, S, " +
                                    std::to_string(d_model) + "), got " + shape_str(query.shape()) + ", " +
                                    shape_str(key.shape()) + ", " + shape_str(value.shape()));
}

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value, const Mask& mask) {
    check_inputs(query, key, value, d_model);
    // 1) project: q, k and v each (B, ., D); head h lives in columns [h*Dk, (h+1)*Dk)
    const Tensor q = w_q->forward(query);   // (B, T, D)
    const Tensor k = w_k->forward(key);     // (B, S, D)
    const Tensor v = w_v->forward(value);   // (B, S, D)
    // 2) attend in every head at once; the output has the heads side by side (concatenated)
    const AttentionOutput a = scaled_dot_product_attention_with_weights(q, k, v, heads, mask, is_training() ? dropout_p : 0.0f);
    if (keep_attention) last_attention = a.weights;   // (B, H, T, S)
    // 3) the final projection mixes the heads
    return w_o->forward(a.out);   // (B, T, D)
}

}  // namespace nn
