// Incremental decoding: the key/value cache (what fairseq calls incremental state, Hugging Face
// past_key_values).
//
// The decoder is causal: position t attends only to positions <= t, so once a position is
// decoded, every layer's output there never changes again. Re-running the decoder over the
// whole prefix for each new token (models::greedy_decode, the plain one) redoes all that work:
// T tokens cost 1 + 2 + ... + T = O(T^2) position-passes through the decoder. What a new position
// actually needs from the earlier ones is only what its attention reads from them:
//
//   self-attention   the keys and values of positions 0..t-1, in every layer: each is a linear
//                    map of that layer's input at that position, which never changes -> store them
//                    and append one row per step;
//   src-attention    the keys and values of the encoder's output (memory): the same for every
//                    step -> compute them once per sentence.
//
// One step then runs the decoder on the newest position only: every linear layer, LayerNorm and
// feed-forward sees 1 row instead of t, and attention reads t cached rows. A token costs O(t)
// instead of O(t^2), a whole output O(T^2) instead of O(T^3) (and the linear layers, the bulk of
// the work, drop from O(T^2) to O(T)). The step runs the very modules training runs (the
// embeddings, each layer's sublayers, LayerNorms, feed-forward and projections), in the order
// DecoderLayer::forward and MultiHeadAttention::forward call them (decoder_layer_step and
// cached_attention in decoder_cache.cpp); only the attention reads its keys and values from the
// cache (attend_to_cache). tests/test_decoding.cpp holds the two equal: every step's output bit
// for bit, the same tokens.
//
// Memory, with N layers of width D, for outputs of up to L positions: self-attention  2 x N x L x D
// floats per beam hypothesis (K and V, allocated up front, so a step writes its row in place and
// never copies the rows before it), memory's K/V  2 x N x S x D floats per sentence (its
// hypotheses all read the same ones).
//
// The cache is a plain value owned by one decoding call and passed to every step, not state
// hidden inside the modules: the model stays stateless and reusable. A beam search reorders it
// when it keeps different hypotheses. Sequence i's keys and values are k[slot[i]] and v[slot[i]],
// read in place by the attention (autograd::fused::attention's kv_slot), so a reorder
// (hypothesis i continues hypothesis from[i]) changes the slot maps and moves as little as it can:
//   the memory's keys and values: nothing. A slot is a sentence's memory, which all its
//     hypotheses read alike.
//   self-attention's: a step writes each sequence's new row into its own slot, so no two sequences
//     may share one. The first sequence continuing a slot keeps it; each other one gets a copy of
//     the filled rows in a slot no sequence uses. No allocation, no copy for a sole continuation.
// For decoding without gradients only (under autograd::NoGradGuard): rows are written in place.
#pragma once
#include <vector>

#include "models/transformer.h"

namespace models {

// What one attention of the decoder keeps: k and v (slots, rows, D), of which the first `length`
// rows are filled, and the slot each sequence reads.
struct KVCache {
    virtual ~KVCache() = default;
    // Does this step project its key and value? (Not when the cache holds them all already, as a
    // cache of the encoder's output does after the first step.)
    virtual bool needs_keys() const = 0;
    // Keep this step's new rows, k_new and v_new (., T, D).
    virtual void write(const Tensor& k_new, const Tensor& v_new) = 0;
    Tensor k, v;
    std::vector<int64_t> slot;
    int64_t length = 0;
};

// Attention over cached keys and values: query row i (q (n, T, D)) attends to the first `length`
// rows of k[slot[i]] and v[slot[i]] (k, v (slots, rows, D)), under mask (n, 1, length) or none.
// With fused kernels on the kernel reads the slots in place; else the rows are gathered and the
// plain nn::scaled_dot_product_attention_with_weights runs. Under NoGradGuard only.
nn::AttentionOutput attend_to_cache(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const Mask& mask,
                                    int64_t length, const std::vector<int64_t>& slot);

// MultiHeadAttention::forward with the keys and values of the cache: the same projections and
// attention, with this step's key and value rows written into the cache first (when it needs
// them), and the queries attending to every row the cache holds. query (n, T, D) -> (n, T, D).
Tensor cached_attention(const nn::MultiHeadAttention& mha, const Tensor& query, const Tensor& key_value, KVCache& cache,
                        const Mask& mask);

// Self-attention's cache: room for `capacity` rows of up to `slots` sequences, allocated up
// front; each step writes its new key and value rows after the rows already held, and attends to
// every row held.
struct AppendingCache : KVCache {
    // k, v (slots, capacity, D): w_k and w_v of positions 0..length-1; slot: n entries, sequence
    // i's rows are k[slot[i]], v[slot[i]]

    AppendingCache(int64_t n, int64_t capacity, int64_t d_model, int64_t slots = -1);   // slots = -1: n
    int64_t sequences() const { return static_cast<int64_t>(slot.size()); }            // n
    int64_t capacity() const { return k.size(1); }
    bool needs_keys() const override { return true; }
    // k_new, v_new (n, T, D), written at rows length..length+T-1 of each sequence's slot
    void write(const Tensor& k_new, const Tensor& v_new) override;
    // Sequence i continues sequence from[i]; sequences may repeat or disappear, up to `slots` of them.
    void reorder(const std::vector<int64_t>& from);
};

// Encoder-decoder attention's cache: the first step projects the key and value (the encoder's
// output, the same at every step) and keeps them; later steps attend to those.
struct ComputedOnceCache : KVCache {
    // k, v (slots, S, D), one slot per sentence, undefined before the first step; slot: sequence i
    // reads slot slot[i], empty until the first write or reorder (sequence i reads slot i); length:
    // S once written

    bool needs_keys() const override { return !k.defined(); }
    // k_new, v_new (slots, S, D): all the rows (every slot[i] must be one of the slots)
    void write(const Tensor& k_new, const Tensor& v_new) override;
    void reorder(const std::vector<int64_t>& from);   // as AppendingCache's, without a copy
};

// One decoder layer's cached keys and values of the n sequences decoded. D is the model width:
// the H heads side by side, as MultiHeadAttention projects them.
struct LayerCache {
    AppendingCache self_attn;    // (slots, L, D): w_k and w_v of self_attn at positions 0..t-1
    ComputedOnceCache src_attn;  // (B, S, D): w_k and w_v of src_attn on the encoder's output, per sentence
};

struct DecoderCache {
    std::vector<LayerCache> layers;   // N entries, one per decoder layer
    Tensor memory;                    // (B, S, D): the encoder's output, until the first step has put its
                                      // keys and values into every src_attn cache; undefined after
    Mask src_mask;                    // (n, 1, S): which memory positions are real (not padding), per sequence

    int64_t rows() const { return src_mask.shape.empty() ? 0 : src_mask.shape[0]; }        // n
    int64_t length() const { return layers.empty() ? 0 : layers[0].self_attn.length; }      // t: positions decoded so far
    int64_t capacity() const { return layers.empty() ? 0 : layers[0].self_attn.capacity(); }   // L: positions it has room for
    // Sequence i of the new cache continues sequence from[i] of the old one (beam search:
    // hypothesis i continues hypothesis from[i]); sequences may repeat or disappear. Gathers the
    // mask's rows (n' x S bytes) and changes every layer's slot maps.
    void reorder(const std::vector<int64_t>& from);
};

// Rows of a (n, 1, S) mask: row i of the result is row from[i]. What reorder does to the cache's
// src_mask, and what the recomputing beam search does to its own.
Mask select_mask_rows(const Mask& mask, const std::vector<int64_t>& from);

// A cache for n = B sequences with no position decoded yet, with room for max_positions positions
// (a decoding call producing outputs of L tokens, bos included, decodes L - 1) of up to
// max_sequences sequences at once (beam search: B x K; -1: B): memory (B, S, D) from
// Transformer::encode, src_mask (B, 1, S).
DecoderCache start_decoder_cache(Transformer& model, const Tensor& memory, const Mask& src_mask, int64_t max_positions,
                                 int64_t max_sequences = -1);

// One decoding step: tokens (n, 1), the token at position t of every row -> the decoder's output
// at position t, (n, D) (what Transformer::decode gives at position t for the whole prefix; feed
// it to the generator). Writes position t's keys and values into every layer's cache.
Tensor decode_step(Transformer& model, DecoderCache& cache, const Tokens& tokens);

}  // namespace models
