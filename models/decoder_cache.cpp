#include "models/decoder_cache.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "models/batch.h"

namespace models {

using autograd::shape_str;

static void check_no_grad(const char* who) {
    if (autograd::is_grad_enabled())
        throw std::logic_error(std::string(who) + ": decoding with a cache needs autograd::NoGradGuard (rows are written in "
                               "place, under tensors an earlier step's graph would read)");
}

// ---------------------------------------------------------------- attention over the cache

nn::AttentionOutput attend_to_cache(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const Mask& mask,
                                    int64_t length, const std::vector<int64_t>& slot) {
    check_no_grad("attend_to_cache");
    const int64_t n = q.dim() == 3 ? q.size(0) : -1;
    if (q.dim() != 3 || k.dim() != 3 || k.shape() != v.shape() || q.size(2) != k.size(2) || heads <= 0 || q.size(2) % heads != 0)
        throw std::invalid_argument("attend_to_cache: expected q (n, T, D) and k, v (slots, rows, D) with D a multiple of the " +
                                    std::to_string(heads) + " heads, got q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) +
                                    ", v " + shape_str(v.shape()));
    if (length < 0 || length > k.size(1))
        throw std::invalid_argument("attend_to_cache: length " + std::to_string(length) + " is outside [0, " +
                                    std::to_string(k.size(1)) + "] (the rows of k " + shape_str(k.shape()) + ")");
    if (static_cast<int64_t>(slot.size()) != n)
        throw std::invalid_argument("attend_to_cache: " + std::to_string(slot.size()) + " slots for the " + std::to_string(n) +
                                    " rows of q " + shape_str(q.shape()));
    for (int64_t s : slot)
        if (s < 0 || s >= k.size(0))
            throw std::invalid_argument("attend_to_cache: slot " + std::to_string(s) + " of k " + shape_str(k.shape()) + " with " +
                                        std::to_string(k.size(0)) + " slots");
    if (autograd::fused_kernels_enabled()) {   // the kernel reads each row's slot in place
        const autograd::fused::Attention a = autograd::fused::attention(q, k, v, heads, mask, 0.0f, length, slot);
        return {a.out, a.weights};
    }
    // the plain path: each row's keys and values gathered from its slot, the first `length` rows
    const Tokens ids(std::vector<int32_t>(slot.begin(), slot.end()), {n});                    // (n,)
    const Tensor ks = autograd::narrow(autograd::index_select(k, 0, ids), 1, 0, length);      // (n, length, D)
    const Tensor vs = autograd::narrow(autograd::index_select(v, 0, ids), 1, 0, length);      // (n, length, D)
    return nn::scaled_dot_product_attention_with_weights(q, ks, vs, heads, mask);
}

Tensor cached_attention(const nn::MultiHeadAttention& mha, const Tensor& query, const Tensor& key_value, KVCache& cache,
                               const Mask& mask) {
    const Tensor q = mha.w_q->forward(query);                                                   // (n, T, D)
    if (cache.needs_keys()) cache.write(mha.w_k->forward(key_value), mha.w_v->forward(key_value));   // the new rows (., T, D)
    return mha.w_o->forward(attend_to_cache(q, cache.k, cache.v, mha.heads, mask, cache.length, cache.slot).out);   // (n, T, D)
}

// DecoderLayer::forward for the newest position x (n, 1, D): its three sublayers, in its order,
// with the two attentions reading the layer's cache. No target mask: nothing lies in the future
// of the newest position.
static Tensor decoder_layer_step(const DecoderLayer& layer, const Tensor& x, LayerCache& cache, const Tensor& memory,
                                 const Mask& src_mask) {
    Tensor h = layer.sublayer0->forward(x, [&](const Tensor& y) { return cached_attention(*layer.self_attn, y, y, cache.self_attn, Mask()); });
    h = layer.sublayer1->forward(h, [&](const Tensor& y) { return cached_attention(*layer.src_attn, y, memory, cache.src_attn, src_mask); });
    return layer.sublayer2->forward(h, [&](const Tensor& y) { return layer.feed_forward->forward(y); });   // (n, 1, D)
}

// ---------------------------------------------------------------- self-attention: appending

AppendingCache::AppendingCache(int64_t n, int64_t capacity, int64_t d_model, int64_t slots) {
    if (slots < 0) slots = n;
    if (n < 0 || slots < n || capacity < 0)
        throw std::invalid_argument("KVCache: " + std::to_string(n) + " sequences need as many slots, got " + std::to_string(slots) +
                                    " (and capacity " + std::to_string(capacity) + ")");
    k = Tensor::empty({slots, capacity, d_model});       // (slots, capacity, D)
    v = Tensor::empty({slots, capacity, d_model});       // (slots, capacity, D)
    for (int64_t i = 0; i < n; i++) slot.push_back(i);   // sequence i in slot i
}

void AppendingCache::write(const Tensor& k_new, const Tensor& v_new) {
    check_no_grad("KVCache");
    const int64_t n = sequences(), D = k.size(2), T = k_new.dim() == 3 ? k_new.size(1) : 0;
    if (k_new.shape() != autograd::Shape{n, T, D} || v_new.shape() != k_new.shape())
        throw std::invalid_argument("KVCache: new rows must be (n, T, D) = (" + std::to_string(n) + ", T, " + std::to_string(D) +
                                    ") for this cache, got k " + shape_str(k_new.shape()) + " and v " + shape_str(v_new.shape()));
    if (length + T > capacity())
        throw std::out_of_range("KVCache: room for " + std::to_string(capacity()) + " rows, " + std::to_string(length) +
                                " filled: cannot write " + std::to_string(T) + " more (the cache is allocated for the " +
                                "longest sequence its decoding call asked for)");
    // sequence i's rows length..length+T-1, in its slot: the new rows go after the ones already held
    for (int64_t i = 0; i < n; i++) {
        std::copy_n(k_new.data() + i * T * D, T * D, k.data() + (slot[i] * capacity() + length) * D);
        std::copy_n(v_new.data() + i * T * D, T * D, v.data() + (slot[i] * capacity() + length) * D);
    }
    length += T;
}

// Every entry of `from` names one of n sequences.
static void check_from(const std::vector<int64_t>& from, int64_t n) {
    for (int64_t f : from)
        if (f < 0 || f >= n)
            throw std::invalid_argument("KVCache::reorder: sequence " + std::to_string(f) + " of a cache with " +
                                        std::to_string(n) + " sequences");
}

void AppendingCache::reorder(const std::vector<int64_t>& from) {
    const int64_t m = static_cast<int64_t>(from.size()), slots = k.size(0), D = k.size(2);
    check_from(from, sequences());
    if (m > slots)
        throw std::invalid_argument("KVCache::reorder: room for " + std::to_string(slots) + " sequences, asked for " +
                                    std::to_string(m));
    // 1) the first sequence continuing a slot keeps it
    std::vector<int64_t> next(m);   // the new slot map
    std::vector<bool> used(slots, false);
    std::vector<int64_t> copies;    // the other sequences: they need a slot of their own
    for (int64_t i = 0; i < m; i++) {
        const int64_t s = slot[from[i]];
        if (used[s]) {
            copies.push_back(i);
        } else {
            used[s] = true;
            next[i] = s;
        }
    }
    // 2) each other one gets a copy of the filled rows in a slot no sequence uses (not a source)
    int64_t free_slot = 0;
    for (int64_t i : copies) {
        while (used[free_slot]) free_slot++;
        used[free_slot] = true;
        next[i] = free_slot;
        const int64_t src = slot[from[i]];
        std::copy_n(k.data() + src * capacity() * D, length * D, k.data() + free_slot * capacity() * D);   // the filled rows only
        std::copy_n(v.data() + src * capacity() * D, length * D, v.data() + free_slot * capacity() * D);
    }
    slot = std::move(next);
}

// ---------------------------------------------------------------- encoder-decoder attention: computed once

void ComputedOnceCache::write(const Tensor& k_new, const Tensor& v_new) {
    check_no_grad("KVCache");
    if (k_new.dim() != 3 || v_new.shape() != k_new.shape())
        throw std::invalid_argument("KVCache: keys and values must be (slots, S, D) alike, got k " + shape_str(k_new.shape()) +
                                    " and v " + shape_str(v_new.shape()));
    k = k_new;   // (slots, S, D)
    v = v_new;
    length = k.size(1);
    if (slot.empty())
        for (int64_t i = 0; i < k.size(0); i++) slot.push_back(i);   // no reorder yet: sequence i reads slot i
    for (int64_t s : slot)
        if (s < 0 || s >= k.size(0))
            throw std::invalid_argument("KVCache: a sequence reads slot " + std::to_string(s) + " of keys " + shape_str(k.shape()) +
                                        " with " + std::to_string(k.size(0)) + " slots");
}

void ComputedOnceCache::reorder(const std::vector<int64_t>& from) {
    if (slot.empty()) {   // before its first write: sequence i was in slot i
        slot = from;      // write() checks them against the slots it gets
        return;
    }
    check_from(from, static_cast<int64_t>(slot.size()));
    std::vector<int64_t> next(from.size());   // the sentence's memory, read in place by every hypothesis
    for (size_t i = 0; i < from.size(); i++) next[i] = slot[from[i]];
    slot = std::move(next);
}

// ---------------------------------------------------------------- the decoder's cache

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
        cache.layers.push_back({AppendingCache(memory.size(0), max_positions, model.cfg.d_model, max_sequences),   // (slots, L, D) each
                                ComputedOnceCache()});
    return cache;
}

Tensor decode_step(Transformer& model, DecoderCache& cache, const Tokens& tokens) {
    const int64_t n = cache.rows(), D = model.cfg.d_model;
    if (tokens.shape != autograd::Shape{n, 1})
        throw std::invalid_argument("decode_step: tokens must be (n, 1) = (" + std::to_string(n) + ", 1) for this cache, got " +
                                    shape_str(tokens.shape));
    if (cache.layers.size() != model.decoder->layers->size())
        throw std::invalid_argument("decode_step: the cache has " + std::to_string(cache.layers.size()) + " layers, the decoder " +
                                    std::to_string(model.decoder->layers->size()));
    autograd::NoGradGuard no_grad;
    // Transformer::decode on position t alone: its embedding and positional encoding, each layer
    // reading its cache, the final LayerNorm
    Tensor x = model.tgt_pos->forward(model.tgt_embed->forward(tokens), cache.length());   // (n, 1, D)
    for (size_t l = 0; l < cache.layers.size(); l++)
        x = decoder_layer_step((*model.decoder->layers)[l], x, cache.layers[l], cache.memory, cache.src_mask);   // (n, 1, D)
    cache.memory = Tensor();   // every layer's src_attn cache holds its keys and values now
    return model.decoder->norm->forward(x).reshape({n, D});                                // (n, D)
}

// ---------------------------------------------------------------- the Transformer's decoding

namespace {

// The Transformer's rows being decoded (models/seq2seq.h), in either of its two ways: the one
// place where they differ.
class TransformerRows : public NextTokens {
public:
    // memory (n, S, D) from Transformer::encode, src_mask (n, 1, S); the rows start empty, at
    // most max_positions tokens are appended to each, and there are at most max_rows rows at once.
    TransformerRows(Transformer& model, const Tensor& memory, const Mask& src_mask, int64_t max_positions, int64_t max_rows,
                    bool kv_cache, int64_t* positions)
        : model_(model), kv_cache_(kv_cache), positions_(positions), memory_(memory), src_mask_(src_mask),
          prefixes_(memory.size(0)) {
        if (kv_cache) cache_ = start_decoder_cache(model, memory, src_mask, max_positions, max_rows);
    }

    // Appends tokens (n, 1) to the rows -> log p(next token | row so far, src) (n, V).
    Tensor append(const Tokens& tokens) override {
        if (kv_cache_) {
            if (positions_) *positions_ += tokens.size(0);                                        // one per row
            return model_.generator->log_probs(decode_step(model_, cache_, tokens));              // (n, V)
        }
        // recomputing: the decoder over the whole prefix, of which the last position is kept
        for (size_t i = 0; i < prefixes_.size(); i++) prefixes_[i].push_back(tokens[static_cast<int64_t>(i)]);
        const Tokens ys = pad_rows(prefixes_, 0);                                                 // (n, t)
        const int64_t n = ys.size(0), t = ys.size(1);
        if (positions_) *positions_ += n * t;                                                     // t per row
        const Tensor out = model_.decode(memory_, src_mask_, ys, subsequent_mask(t));             // (n, t, D)
        const Tensor last = autograd::narrow(out, 1, t - 1, 1).reshape({n, model_.cfg.d_model});  // (n, D)
        return model_.generator->log_probs(last);                                                 // (n, V)
    }

    // Row i continues row from[i] (beam search keeping other hypotheses); rows may repeat or go.
    void reorder(const std::vector<int64_t>& from) override {
        if (kv_cache_) return cache_.reorder(from);   // no copy of the memory's keys and values
        // recomputing, the reference: the memory's rows are gathered with the hypotheses, as plain as it gets
        const Tokens ids(std::vector<int32_t>(from.begin(), from.end()), {static_cast<int64_t>(from.size())});
        src_mask_ = select_mask_rows(src_mask_, from);                                            // (n', 1, S)
        memory_ = autograd::index_select(memory_, 0, ids);                                        // (n', S, D)
        std::vector<std::vector<int32_t>> prefixes;
        for (int64_t i : from) prefixes.push_back(prefixes_[i]);
        prefixes_ = std::move(prefixes);
    }

private:
    Transformer& model_;
    bool kv_cache_;
    int64_t* positions_;                              // the work done, when the caller counts it
    DecoderCache cache_;                              // cached: keys and values of every layer
    Tensor memory_;                                   // recomputing: (n, S, D), and its mask (n, 1, S)
    Mask src_mask_;
    std::vector<std::vector<int32_t>> prefixes_;      // recomputing: every row's tokens so far
};

}  // namespace

std::unique_ptr<NextTokens> Transformer::start_decoding(const Tokens& src, const Mask& src_mask, const DecodingSetup& setup) {
    const int64_t rows = setup.max_rows < 0 ? src.size(0) : setup.max_rows;
    return std::make_unique<TransformerRows>(*this, encode(src, src_mask), src_mask, setup.max_positions, rows, setup.kv_cache,
                                             setup.positions);
}

}  // namespace models
