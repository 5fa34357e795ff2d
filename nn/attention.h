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
// with a hand-derived backward (autograd/kernels/attention.h).
// mask: true = "query t may attend to key s"; any shape that broadcasts to (B, T, S), e.g. a
// padding mask (B, 1, S), the decoder's subsequent mask (1, T, T), or both combined (B, T, S);
// an empty Mask means no mask. A query row with no allowed key gets weight 0 everywhere.
// keys: attend to the first `keys` rows of k and v only (S = keys; the mask is relative to it),
// e.g. the filled rows of a decoder cache that holds more; -1 = all of them.
// kv_slot (B entries), for decoding without gradients: query row b attends to k[kv_slot[b]] and
// v[kv_slot[b]] instead of k[b] and v[b], so k and v are (slots, ., D) with any number of slots,
// e.g. one per sentence, read by all of that sentence's beam hypotheses (KVCache below); empty:
// slot b. Refused while grad mode is on.
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

// The keys and values of earlier calls, kept while n sequences are decoded one position at a time
// (incremental decoding; models/decoder_cache.h says why this gives the same result and what it
// saves). A plain value owned by the decoding call and passed to every forward, not state of the
// module: the module stays reusable, and a beam search reorders the sequences. Two kinds:
//   appending (self-attention), KVCache(n, capacity, D, slots): room for `capacity` rows of up to
//     `slots` sequences, allocated up front; each forward projects its key and value rows,
//     writes them after the rows already held, and attends to every row held.
//   computed once (encoder-decoder attention), KVCache(): the first forward projects its key
//     and value (the encoder's output, the same at every step) and keeps them; later forwards
//     attend to those and do not read their key and value.
// Sequence i's keys and values are k[slot[i]] and v[slot[i]], read in place by the attention
// (kv_slot above). So reordering the sequences (beam search: hypothesis i continues hypothesis
// from[i]) changes the slot map and moves as little as it can:
//   computed once: nothing. A slot is a sentence's memory, which all its hypotheses read alike.
//   appending: a step writes each sequence's new row into its own slot, so no two sequences may
//     share one. The first sequence continuing a slot keeps it; each other one gets a copy of the
//     filled rows in a slot no sequence uses. No allocation, no copy for a sole continuation.
// For decoding without gradients only (under autograd::NoGradGuard): rows are written in place.
struct KVCache {
    Tensor k, v;                 // (slots, rows, D): w_k and w_v of the keys and values so far, rows 0..length-1 filled
    std::vector<int64_t> slot;   // n entries: sequence i's are k[slot[i]], v[slot[i]]; computed once: empty
                                 // (sequence i reads slot i) until the first forward or reorder fills it
    int64_t length = 0;          // rows filled
    bool appending = false;

    KVCache() = default;                                                          // computed once
    KVCache(int64_t n, int64_t capacity, int64_t d_model, int64_t slots = -1);   // appending: (slots, capacity, D), never grown;
                                                                                  // slots = -1: n
    int64_t sequences() const { return static_cast<int64_t>(slot.size()); }      // n
    int64_t capacity() const { return appending ? k.size(1) : length; }
    bool needs_keys() const { return appending || length == 0; }   // forward projects its key and value
    // appending: k_new, v_new (n, T, D), written at rows length..length+T-1 of each sequence's slot;
    // computed once: (slots, S, D), kept as all the rows (every slot[i] must be one of the slots).
    void write(const Tensor& k_new, const Tensor& v_new);
    // Sequence i continues sequence from[i] (beam search: hypothesis i continues hypothesis
    // from[i]); sequences may repeat or disappear, up to `slots` of them.
    void reorder(const std::vector<int64_t>& from);
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
    // With a cache, S counts the cached rows too (the new ones included), and key and value are
    // read only when cache->needs_keys(); a computed-once cache that has a slot map takes key and
    // value with one row per slot (beam search: per sentence).
    Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const Mask& mask = Mask(),
                   KVCache* cache = nullptr);

    int64_t d_model, heads, d_k;
    float dropout_p;
    std::shared_ptr<Linear> w_q, w_k, w_v, w_o;
    Tensor last_attention;   // (B, H, T, S) weights of the last forward, for visualization
                             // (in a data-parallel step, shard 0's rows: autograd/data_parallel.h)
};

}  // namespace nn
