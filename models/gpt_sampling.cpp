#include "models/gpt_sampling.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "models/decoder_cache.h"
#include "models/decoding.h"

namespace models {

using autograd::shape_str;

int64_t window_start(int64_t length, int64_t start, int64_t block_size, bool prompt) {
    if (length - start <= block_size) return start;               // the window still has room
    if (prompt) return length - block_size;                       // a long prompt: its last whole window
    return length - std::max<int64_t>(1, block_size / 2);         // full: a new window from the last half
}

namespace {

// Each row's text so far, and where the window the next token is predicted from starts (the
// same for every row: all grow alike).
struct Rows {
    std::vector<std::vector<int32_t>> tokens;   // B rows
    int64_t start = 0;

    int64_t length() const { return static_cast<int64_t>(tokens[0].size()); }
    Tokens window(int64_t from) const {          // (B, length - from): the tokens from position `from`
        const int64_t B = static_cast<int64_t>(tokens.size()), W = length() - from;
        Tokens out = Tokens::full({B, W}, 0);
        for (int64_t b = 0; b < B; b++) std::copy_n(tokens[b].begin() + from, W, out.data.begin() + b * W);
        return out;
    }
    Tokens column(int64_t t) const {             // (B, 1): every row's token at position t
        Tokens out = Tokens::full({static_cast<int64_t>(tokens.size()), 1}, 0);
        for (size_t b = 0; b < tokens.size(); b++) out.data[b] = tokens[b][t];
        return out;
    }
};

// ---------------------------------------------------------------- the cached step

// Block::forward for the tokens at one position of the window, x (n, 1, D): self-attention
// reads this layer's cache, where this position's key and value are appended first.
Tensor block_step(const Block& block, const Tensor& x, AppendingCache& cache) {
    const Tensor a = block.ln_1->forward(x);                                      // (n, 1, D)
    const Tensor h = x + cached_attention(*block.attn, a, a, cache, Mask());      // (n, 1, D): nothing lies after the newest
    return h + block.mlp->forward(block.ln_2->forward(h));                        // (n, 1, D)
}

// GPT::logits for tokens (n, 1) at position `length` of the caches' window -> (n, V).
Tensor gpt_step(GPT& model, std::vector<AppendingCache>& caches, const Tokens& tokens) {
    const int64_t n = tokens.size(0);
    const Tokens position = Tokens::full({1, 1}, static_cast<int32_t>(caches[0].length));   // (1, 1)
    Tensor x = model.wte->forward(tokens) + model.wpe->forward(position);                  // (n, 1, D)
    for (size_t l = 0; l < caches.size(); l++) x = block_step((*model.h)[l], x, caches[l]);
    return model.lm_head->forward(model.ln_f->forward(x)).reshape({n, model.cfg.vocab});  // (n, V)
}

// A cache of every layer, empty, for n rows of up to block_size positions.
std::vector<AppendingCache> fresh_caches(const GPT& model, int64_t n) {
    std::vector<AppendingCache> caches;   // each its own k and v (copies of one would share them)
    for (int64_t l = 0; l < model.cfg.layers; l++) caches.emplace_back(n, model.cfg.block_size, model.cfg.d_model);
    return caches;
}

// The window from `rows.start` run through fresh caches, one position at a time -> the last
// position's logits (B, V).
Tensor fill_caches(GPT& model, std::vector<AppendingCache>& caches, const Rows& rows, int64_t* positions) {
    const int64_t B = static_cast<int64_t>(rows.tokens.size());
    caches = fresh_caches(model, B);
    Tensor logits;
    for (int64_t t = rows.start; t < rows.length(); t++) {
        logits = gpt_step(model, caches, rows.column(t));   // (B, V)
        if (positions) *positions += B;
    }
    return logits;
}

}  // namespace

Tokens generate(GPT& model, const Tokens& prompt, const GenerateOptions& opt) {
    const int64_t V = model.cfg.vocab, W = model.cfg.block_size;
    if (prompt.dim() != 2 || prompt.size(0) < 1 || prompt.size(1) < 1)
        throw std::invalid_argument("generate: prompt must be (B, T0) with B, T0 >= 1, got " + shape_str(prompt.shape));
    for (int32_t id : prompt.data)
        if (id < 0 || id >= V)
            throw std::invalid_argument("generate: prompt token " + std::to_string(id) + " is outside the vocabulary [0, " +
                                        std::to_string(V) + ")");
    if (opt.new_tokens < 0) throw std::invalid_argument("generate: new_tokens must be >= 0, got " + std::to_string(opt.new_tokens));
    const SampleOptions sampling{.temperature = opt.temperature, .top_k = opt.top_k, .top_p = opt.top_p};
    std::vector<float> probe(V, 0.0f);
    sampling_probs(probe.data(), V, sampling);   // throws on a bad temperature, top_k or top_p, naming it
    autograd::NoGradGuard no_grad;

    const int64_t B = prompt.size(0), T0 = prompt.size(1);
    Rows rows;
    for (int64_t b = 0; b < B; b++) rows.tokens.emplace_back(prompt.data.begin() + b * T0, prompt.data.begin() + (b + 1) * T0);
    rows.start = window_start(T0, 0, W, /*prompt=*/true);
    std::vector<AppendingCache> caches;
    Tensor logits;   // (B, V): the next token's scores
    if (opt.kv_cache) logits = fill_caches(model, caches, rows, opt.positions);
    for (int64_t i = 0; i < opt.new_tokens; i++) {
        if (!opt.kv_cache) {   // the plain way: the whole window through the whole model, the last position kept
            const Tokens window = rows.window(rows.start);                                       // (B, t)
            const int64_t t = window.size(1);
            logits = autograd::narrow(model.logits(window), 1, t - 1, 1).reshape({B, V});      // (B, V)
            if (opt.positions) *opt.positions += B * t;
        }
        Tokens next = Tokens::full({B, 1}, 0);   // (B, 1)
        for (int64_t b = 0; b < B; b++) {
            const float u = autograd::counter_uniform(opt.seed, static_cast<uint64_t>(b * opt.new_tokens + i));
            next[b] = sample_token(sampling_probs(logits.data() + b * V, V, sampling), u);
            rows.tokens[b].push_back(next[b]);
        }
        if (i + 1 == opt.new_tokens) break;
        const int64_t start = window_start(rows.length(), rows.start, W);
        if (start != rows.start) {   // a new window: it starts from the last half of the text
            rows.start = start;
            if (opt.kv_cache) logits = fill_caches(model, caches, rows, opt.positions);
        } else if (opt.kv_cache) {
            logits = gpt_step(model, caches, next);
            if (opt.positions) *opt.positions += B;
        }
    }
    return rows.window(0);   // (B, T0 + new_tokens)
}

}  // namespace models
