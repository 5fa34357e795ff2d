#include "models/decoder_cache.h"

#include <algorithm>
#include <stdexcept>

namespace models {

using autograd::shape_str;

void DecoderCache::reorder(const std::vector<int64_t>& from) {
    src_mask = select_mask_rows(src_mask, from);   // (n', 1, S); checks every row index
    const Tokens ids(std::vector<int32_t>(from.begin(), from.end()), {static_cast<int64_t>(from.size())});   // (n',)
    for (LayerCache& c : layers) {
        if (c.self_k.defined()) {
            c.self_k = autograd::index_select(c.self_k, 0, ids);   // (n', t, D)
            c.self_v = autograd::index_select(c.self_v, 0, ids);
        }
        c.memory_k = autograd::index_select(c.memory_k, 0, ids);   // (n', S, D)
        c.memory_v = autograd::index_select(c.memory_v, 0, ids);
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

DecoderCache start_decoder_cache(Transformer& model, const Tensor& memory, const Mask& src_mask) {
    if (memory.dim() != 3 || src_mask.shape != autograd::Shape{memory.size(0), 1, memory.size(1)})
        throw std::invalid_argument("start_decoder_cache: expected memory (B, S, D) and src_mask (B, 1, S), got " +
                                    shape_str(memory.shape()) + " and " + shape_str(src_mask.shape));
    autograd::NoGradGuard no_grad;
    DecoderCache cache;
    cache.src_mask = src_mask;
    for (const auto& layer : *model.decoder->layers) {
        LayerCache c;   // self_k, self_v: empty until the first step
        c.memory_k = layer->src_attn->w_k->forward(memory);   // (B, S, D)
        c.memory_v = layer->src_attn->w_v->forward(memory);   // (B, S, D)
        cache.layers.push_back(std::move(c));
    }
    return cache;
}

// DecoderLayer::forward for the newest position only, reading the earlier positions from the cache.
// x (n, 1, D) -> (n, 1, D)
static Tensor decoder_layer_step(DecoderLayer& layer, const Tensor& x, LayerCache& c, const Mask& src_mask) {
    nn::MultiHeadAttention &self_attn = *layer.self_attn, &src_attn = *layer.src_attn;
    // 1) self-attention: the new position attends to every position so far, itself included. It
    //    is the last one, so nothing lies in its future: no mask. Its key and value join the cache.
    Tensor h = layer.sublayer0->forward(x, [&](const Tensor& y) {
        const Tensor k = self_attn.w_k->forward(y), v = self_attn.w_v->forward(y);                  // (n, 1, D)
        c.self_k = c.self_k.defined() ? autograd::cat({c.self_k, k}, 1) : k;                        // (n, t+1, D)
        c.self_v = c.self_v.defined() ? autograd::cat({c.self_v, v}, 1) : v;                        // (n, t+1, D)
        const Tensor q = self_attn.w_q->forward(y);                                                 // (n, 1, D)
        return self_attn.w_o->forward(nn::scaled_dot_product_attention(q, c.self_k, c.self_v, self_attn.h));   // (n, 1, D)
    });
    // 2) encoder-decoder attention: the memory's keys and values were computed once, up front
    h = layer.sublayer1->forward(h, [&](const Tensor& y) {
        const Tensor q = src_attn.w_q->forward(y);                                                  // (n, 1, D)
        return src_attn.w_o->forward(nn::scaled_dot_product_attention(q, c.memory_k, c.memory_v, src_attn.h, src_mask));
    });
    // 3) feed-forward, on this position alone as always
    return layer.sublayer2->forward(h, [&](const Tensor& y) { return layer.feed_forward->forward(y); });   // (n, 1, D)
}

Tensor decode_step(Transformer& model, DecoderCache& cache, const Tokens& tokens) {
    const int64_t n = cache.rows(), t = cache.length, D = model.cfg.d_model;
    if (tokens.shape != autograd::Shape{n, 1})
        throw std::invalid_argument("decode_step: tokens must be (n, 1) = (" + std::to_string(n) + ", 1) for this cache, got " +
                                    shape_str(tokens.shape));
    if (cache.layers.size() != model.decoder->layers->size())
        throw std::invalid_argument("decode_step: the cache has " + std::to_string(cache.layers.size()) +
                                    " layers, the model's decoder " + std::to_string(model.decoder->layers->size()));
    autograd::NoGradGuard no_grad;
    // the embedding of the token at position t plus the positional encoding of position t
    const nn::PositionalEncoding& pos = *model.tgt_pos;
    const Tensor pe = autograd::narrow(pos.table(t + 1), 0, t, 1);                                  // (1, D)
    Tensor x = nn::dropout(model.tgt_embed->forward(tokens) + pe, pos.dropout_p, pos.is_training());   // (n, 1, D)
    auto& layers = *model.decoder->layers;
    for (size_t l = 0; l < layers.size(); l++) x = decoder_layer_step(layers[l], x, cache.layers[l], cache.src_mask);
    cache.length++;
    return model.decoder->norm->forward(x).reshape({n, D});                                        // (n, D)
}

}  // namespace models
