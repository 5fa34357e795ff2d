// Attention: a weighted sum of values, weighted by softmax(similarity of the query to each key).
// Vaswani et al. (2017), section 3.2.
#pragma once
#include <memory>
#include <vector>

#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace nn {

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
// keys: attend to the first `keys` rows of k and v only (S = keys; the mask is relative to it),
// e.g. the filled rows of a decoder cache that holds more; -1 = all of them.
// kv_slot (B entries), for decoding without gradients: query row b attends to k[kv_slot[b]] and
// v[kv_slot[b]] instead of k[b] and v[b], so k and v are (slots, ., D) with any number of slots,
// e.g. one per sentence, read by all of that sentence's beam hypotheses; empty: slot b. Refused
// while grad mode is on.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                                    const Mask& mask = Mask(), float dropout_p = 0.0f, bool training = false,
                                    int64_t keys = -1, const std::vector<int64_t>& kv_slot = {});

// The same, also returning the attention weights, e.g. to draw them.
struct AttentionOutput {
    Tensor out;       // (B, T, D)
    Tensor weights;   // (B, H, T, S): the softmax probabilities, before dropout; no gradient
};
AttentionOutput scaled_dot_product_attention_with_weights(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                                                          const Mask& mask = Mask(), float dropout_p = 0.0f,
                                                          bool training = false, int64_t keys = -1,
                                                          const std::vector<int64_t>& kv_slot = {});

// The keys and values of earlier decoding steps, kept while sequences are decoded one position at
// a time, so that a step projects only its new position's (incremental decoding: models/
// decoder_cache.h keeps them, and says why the result is the same). MultiHeadAttention hands a
// cache the rows it projects and attends to every row the cache holds.
class KVCache {
public:
    virtual ~KVCache() = default;
    // Does this step project its key and value? (Not when the cache holds them all already, as a
    // cache of the encoder's output does after the first step.)
    virtual bool needs_keys() const = 0;
    // Keep this step's new rows, k_new and v_new (., T, D).
    virtual void write(const Tensor& k_new, const Tensor& v_new) = 0;
    // What attention reads: k and v (slots, rows, D), of which the first `length` rows are
    // filled, and the slot each query row reads (kv_slot above).
    struct Rows {
        Tensor k, v;
        int64_t length;
        std::vector<int64_t> slot;
    };
    virtual Rows rows() const = 0;
};

// Multi-head attention (section 3.2.2): project q, k, v to H heads of size Dk = D / H, attend in
// each head independently, concatenate the heads and project back to D.
// w_k's bias adds q.b_k to every score of a query row, which softmax ignores: its gradient is
// exactly zero in theory and rounding noise in practice (docs/07). Kept, as in PyTorch's
// nn.MultiheadAttention, so the parameters match the standard model one for one.
class MultiHeadAttention : public Module {
public:
    MultiHeadAttention(int64_t d_model, int64_t heads, float dropout = 0.1f);
    // query (B, T, D), key and value (B, S, D), mask broadcastable to (B, T, S) -> (B, T, D).
    // With a cache (decoding), key and value are read only when cache->needs_keys(), and the
    // queries attend to every row the cache holds (S counts them, the new ones included).
    Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const Mask& mask = Mask(),
                   KVCache* cache = nullptr);

    int64_t d_model, heads, d_k;
    float dropout_p;
    std::shared_ptr<Linear> w_q, w_k, w_v, w_o;
    Tensor last_attention;   // (B, H, T, S) weights of the last forward, for visualization
                             // (in a data-parallel step, shard 0's rows: autograd/data_parallel.h)
};

}  // namespace nn
