// Incremental decoding: the key/value cache (what fairseq calls incremental state, Hugging Face
// past_key_values).
//
// The decoder is causal: position t attends only to positions <= t, so once a position is
// decoded, every layer's output there never changes again. Re-running the decoder over the
// whole prefix for each new token (models/decoding.cpp's recomputing path) redoes all that work:
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
// the work, drop from O(T^2) to O(T)).
//
// Memory, per sentence (and per beam hypothesis), with N layers of width D, after T steps:
//   self-attention  2 x N x T x D floats (K and V),   memory's K/V  2 x N x S x D floats.
//
// The cache is a plain value owned by one decoding call and passed to every step, not state
// hidden inside the modules: the model stays stateless and reusable, and a beam search can
// reorder the cache's rows (a gather by hypothesis) when it keeps different hypotheses.
#pragma once
#include <vector>

#include "models/transformer.h"

namespace models {

// One decoder layer's cached keys and values, row i belonging to the i-th sequence decoded.
// D is the model width: the H heads side by side, as MultiHeadAttention projects them.
struct LayerCache {
    Tensor self_k, self_v;       // (n, t, D): w_k and w_v of self_attn applied to positions 0..t-1
    Tensor memory_k, memory_v;   // (n, S, D): w_k and w_v of src_attn applied to the encoder's output
};

struct DecoderCache {
    std::vector<LayerCache> layers;   // N entries, one per decoder layer
    Mask src_mask;                    // (n, 1, S): which memory positions are real (not padding)
    int64_t length = 0;               // t: positions decoded so far (the next one is position t)

    int64_t rows() const { return src_mask.shape.empty() ? 0 : src_mask.shape[0]; }   // n
    // Row i of the new cache is row from[i] of the old one (beam search: hypothesis i continues
    // hypothesis from[i]); rows may repeat or disappear. A gather: index_select along dim 0.
    void reorder(const std::vector<int64_t>& from);
};

// Rows of a (n, 1, S) mask: row i of the result is row from[i]. What reorder does to the cache's
// src_mask, and what the recomputing beam search does to its own.
Mask select_mask_rows(const Mask& mask, const std::vector<int64_t>& from);

// A cache for n = B rows with no position decoded yet: memory (B, S, D) from Transformer::encode,
// src_mask (B, 1, S). Computes the memory's keys and values of every layer (once per sentence).
DecoderCache start_decoder_cache(Transformer& model, const Tensor& memory, const Mask& src_mask);

// One decoding step: tokens (n, 1), the token at position t of every row -> the decoder's output
// at position t, (n, D) (what Transformer::decode gives at position t for the whole prefix; feed
// it to the generator). Appends position t's keys and values to every layer's cache.
Tensor decode_step(Transformer& model, DecoderCache& cache, const Tokens& tokens);

}  // namespace models
