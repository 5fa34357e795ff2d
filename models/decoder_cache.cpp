#include "models/decoder_cache.h"

#include <algorithm>
#include <stdexcept>

namespace models {

using autograd::shape_str;

void DecoderCache::reorder(const std::vector<int64_t>& from) {
    src_mask = select_mask_rows(src_mask, from);   // (n', 1, S); checks every row index
    for (LayerCache& c : layers) {
        c.self_attn.reorder(from);   // a copy of the filled rows for a second continuation of one hypothesis only
        c.src_attn.reorder(from);    // no copy: a hypothesis reads its sentence's slot, as its parent did
    }
}

Mask select_mask_rows(const Mask& mask, const std::vector<int64_t>& from) {
    if (mask.dim() != 3 || mask.shape[1] != 1)
        throw std::invalid_argument("select_mask_rows: mask must be (n, 1, S), got " + shape_str(mask.shape));
    const int64_t n = mask.shape[0], S = mask.shape[2];
    Mask m = Mask::full({static_cast<int64_t>(from.size()), 1, S}, 0);   // (n', 1, S)
    for (size_t i = 0; i < from.size(); i++) {
        if (from[i] < 0 || from[i] >= n)
            throw std::invalid_argument("select_mask_rows: row " + std::to_string(from[i]) + " of a mask with " +
                                        std::to_string(n) + " rows");
        std::copy_n(mask.data.begin() + from[i] * S, S, m.data.begin() + static_cast<int64_t>(i) * S);
    }
    return m;
}

DecoderCache start_decoder_cache(Transformer& model, const Tensor& memory, const Mask& src_mask, int64_t max_positions,
                                 int64_t max_sequences) {
    if (memory.dim() != 3 || src_mask.shape != autograd::Shape{memory.size(0), 1, memory.size(1)} || max_positions < 0)
        throw std::invalid_argument("start_decoder_cache: expected memory (B, S, D), src_mask (B, 1, S) and max_positions >= 0, got " +
                                    shape_str(memory.shape()) + ", " + shape_str(src_mask.shape) + " and " +
                                    std::to_string(max_positions));
    DecoderCache cache;
    cache.memory = memory;
    cache.src_mask = src_mask;
    for (size_t l = 0; l < model.decoder->layers->size(); l++)
        cache.layers.push_back({nn::KVCache(memory.size(0), max_positions, model.cfg.d_model, max_sequences),   // (slots, L, D) each
                                nn::KVCache()});
    return cache;
}

Tensor decode_step(Transformer& model, DecoderCache& cache, const Tokens& tokens) {
    const int64_t n = cache.rows(), D = model.cfg.d_model;
    if (tokens.shape != autograd::Shape{n, 1})
        throw std::invalid_argument("decode_step: tokens must be (n, 1) = (" + std::to_string(n) + ", 1) for this cache, got " +
                                    shape_str(tokens.shape));
    autograd::NoGradGuard no_grad;
    // the decoder on position t alone: no target mask, as nothing lies in its future
    const Tensor out = model.decode(cache.memory, cache.src_mask, tokens, Mask(), &cache);   // (n, 1, D)
    cache.memory = Tensor();   // every layer's src_attn cache holds its keys and values now
    return out.reshape({n, D});                                                            // (n, D)
}

}  // namespace models
