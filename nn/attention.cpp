#include "nn/attention.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace nn {

using autograd::shape_str;

// Expand a mask that broadcasts to (B, T, S) into a dense (B, T, S) one (1 = may attend).
// A leading head dim of size 1, as in (B, 1, 1, S), is accepted too.
static Mask expand_mask(const Mask& mask, int64_t B, int64_t T, int64_t S) {
    Shape ms = mask.shape;
    if (ms.size() == 4 && ms[1] == 1) ms.erase(ms.begin() + 1);
    const Shape target{B, T, S};
    bool ok = ms.size() <= 3 && static_cast<int64_t>(mask.data.size()) == autograd::shape_numel(ms);
    for (size_t i = 0; ok && i < ms.size(); i++) ok = ms[i] == target[3 - ms.size() + i] || ms[i] == 1;
    if (!ok)
        throw std::invalid_argument("attention: mask of shape " + shape_str(mask.shape) +
                                    " does not broadcast to (B, T, S) = " + shape_str(target));
    while (ms.size() < 3) ms.insert(ms.begin(), 1);
    Mask out = Mask::full(target, 0);   // (B, T, S)
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t s = 0; s < S; s++) {
                const int64_t i = ((ms[0] == 1 ? 0 : b) * ms[1] + (ms[1] == 1 ? 0 : t)) * ms[2] + (ms[2] == 1 ? 0 : s);
                out[(b * T + t) * S + s] = mask.data[i] != 0;
            }
    return out;
}

// The arguments' shapes, keys and slot map, checked before any arithmetic.
static void check_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, int64_t keys,
                            const std::vector<int64_t>& kv_slot) {
    const bool slotted = !kv_slot.empty();   // query row b reads k[kv_slot[b]], not k[b]
    if (q.dim() != 3 || k.dim() != 3 || k.shape() != v.shape() || (!slotted && q.size(0) != k.size(0)) ||
        q.size(2) != k.size(2) || heads <= 0 || q.size(2) % heads != 0)
        throw std::invalid_argument("attention: expected q (B, T, D) and k, v (B, S, D) with D a multiple of the " +
                                    std::to_string(heads) + " heads, got q " + shape_str(q.shape()) + ", k " +
                                    shape_str(k.shape()) + ", v " + shape_str(v.shape()));
    if (keys < -1 || keys > k.size(1))
        throw std::invalid_argument("attention: keys = " + std::to_string(keys) + " is outside [0, " + std::to_string(k.size(1)) +
                                    "] (the rows of k " + shape_str(k.shape()) + "), or -1 for all of them");
    if (!slotted) return;
    if (autograd::is_grad_enabled())
        throw std::logic_error("attention: kv_slot is for decoding without gradients (under autograd::NoGradGuard)");
    if (static_cast<int64_t>(kv_slot.size()) != q.size(0))
        throw std::invalid_argument("attention: kv_slot has " + std::to_string(kv_slot.size()) + " entries, q " +
                                    shape_str(q.shape()) + " " + std::to_string(q.size(0)) + " rows");
    for (int64_t s : kv_slot)
        if (s < 0 || s >= k.size(0))
            throw std::invalid_argument("attention: kv_slot " + std::to_string(s) + " of k " + shape_str(k.shape()) + " with " +
                                        std::to_string(k.size(0)) + " slots");
}

AttentionOutput scaled_dot_product_attention_with_weights(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                                                          const Mask& mask, float dropout_p, bool training, int64_t keys,
                                                          const std::vector<int64_t>& kv_slot) {
    check_attention(q, k, v, heads, keys, kv_slot);
    check_dropout_p(dropout_p, "attention");
    const int64_t B = q.size(0), T = q.size(1), S = keys < 0 ? k.size(1) : keys, D = q.size(2), Dk = D / heads;
    const Mask allowed = mask.data.empty() ? Mask() : expand_mask(mask, B, T, S);   // (B, T, S), or empty: no mask
    const float p = training ? dropout_p : 0.0f;
    if (autograd::fused_kernels_enabled()) {   // fused: the same values; no head copies, no (B, H, T, S) intermediates but P
        const autograd::fused::Attention a = autograd::fused::attention(q, k, v, heads, allowed, p, S, kv_slot);
        return {a.out, a.weights};
    }
    // 1) each query row's keys and values: its slot (a gather; the fused op reads the slots in
    //    place), the first S rows; split the heads: (B, ., D) -> (B, ., H, Dk) -> (B, H, ., Dk)
    Tensor ks = k, vs = v;
    if (!kv_slot.empty()) {
        const Tokens ids(std::vector<int32_t>(kv_slot.begin(), kv_slot.end()), {B});   // (B,)
        ks = index_select(k, 0, ids);                                   // (B, rows, D)
        vs = index_select(v, 0, ids);                                   // (B, rows, D)
    }
    if (S != ks.size(1)) ks = narrow(ks, 1, 0, S);                      // (B, S, D)
    if (S != vs.size(1)) vs = narrow(vs, 1, 0, S);                      // (B, S, D)
    const Tensor qh = transpose(q.reshape({B, T, heads, Dk}), 1, 2);    // (B, H, T, Dk)
    const Tensor kh = transpose(ks.reshape({B, S, heads, Dk}), 1, 2);   // (B, H, S, Dk)
    const Tensor vh = transpose(vs.reshape({B, S, heads, Dk}), 1, 2);   // (B, H, S, Dk)
    // 2) scores: how well each query matches each key, scaled so their variance does not grow with Dk
    Tensor scores = matmul(qh, kh, false, true) * (1.0f / std::sqrt(static_cast<float>(Dk)));   // (B, H, T, S)
    // 3) a key the mask forbids scores -inf: softmax gives it weight exactly 0
    if (!allowed.data.empty()) {
        Mask blocked = allowed;                   // masked_fill fills where true: the forbidden keys
        for (auto& m : blocked.data) m = !m;
        blocked.shape = {B, 1, T, S};             // the same for every head
        scores = masked_fill(scores, blocked, -std::numeric_limits<float>::infinity());   // (B, H, T, S)
    }
    // 4) weights: a distribution over the keys for each query; dropout on them when training
    const Tensor weights = softmax(scores);                    // (B, H, T, S)
    const Tensor dropped = dropout(weights, p, training);     // (B, H, T, S)
    // 5) the weighted sum of the values, then the heads side by side again: (B, H, T, Dk) -> (B, T, D)
    const Tensor x = matmul(dropped, vh);                      // (B, H, T, Dk)
    return {transpose(x, 1, 2).reshape({B, T, D}), weights.detach()};
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const Mask& mask,
                                    float dropout_p, bool training, int64_t keys, const std::vector<int64_t>& kv_slot) {
    return scaled_dot_product_attention_with_weights(q, k, v, heads, mask, dropout_p, training, keys, kv_slot).out;
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

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value, const Mask& mask, KVCache* cache) {
    const bool reads_key = !cache || cache->needs_keys();   // false: the cache holds every key and value
    if (query.dim() != 3 || query.size(-1) != d_model ||
        (reads_key && (key.dim() != 3 || key.shape() != value.shape() || key.size(-1) != d_model ||
                       (!cache && key.size(0) != query.size(0)))))
        throw std::invalid_argument("MultiHeadAttention: expected query (B, T, " + std::to_string(d_model) + ") and key, value (B, S, " +
                                    std::to_string(d_model) + "), got " + shape_str(query.shape()) + ", " +
                                    (reads_key ? shape_str(key.shape()) + ", " + shape_str(value.shape()) : "(cached), (cached)"));
    // 1) project: q, k and v each (B, ., D); head h lives in columns [h*Dk, (h+1)*Dk)
    const Tensor q = w_q->forward(query);   // (B, T, D)
    AttentionOutput a;
    if (!cache) {
        const Tensor k = w_k->forward(key);     // (B, S, D)
        const Tensor v = w_v->forward(value);   // (B, S, D)
        // 2) attend in every head at once; the output has the heads side by side (concatenated)
        a = scaled_dot_product_attention_with_weights(q, k, v, heads, mask, dropout_p, is_training());
    } else {
        // decoding: the earlier positions' keys and values are in the cache; this step adds its own
        if (reads_key) cache->write(w_k->forward(key), w_v->forward(value));   // the new rows (., T, D)
        const KVCache::Rows kv = cache->rows();   // (slots, rows, D), query row b reading slot kv.slot[b]
        a = scaled_dot_product_attention_with_weights(q, kv.k, kv.v, heads, mask, dropout_p, is_training(), kv.length, kv.slot);
    }
    if (autograd::current_shard() <= 0) last_attention = a.weights;   // (B, H, T, S); a data-parallel step keeps shard 0's
    // 3) final projection mixes the heads
    return w_o->forward(a.out);    // (B, T, D)
}

}  // namespace nn
