#include "models/gpt.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "models/batch.h"   // subsequent_mask

namespace models {

using autograd::shape_str;

void GPTConfig::validate() const {
    auto need = [](bool ok, const std::string& what) {
        if (!ok) throw std::invalid_argument("GPTConfig: " + what);
    };
    need(vocab > 0, "vocab must be positive, got " + std::to_string(vocab));
    need(block_size > 0, "block_size must be positive, got " + std::to_string(block_size));
    need(layers > 0, "layers must be positive, got " + std::to_string(layers));
    need(d_model > 0 && heads > 0 && d_model % heads == 0,
         "d_model (" + std::to_string(d_model) + ") must be a positive multiple of heads (" + std::to_string(heads) + ")");
    nn::check_dropout_p(dropout, "GPTConfig");
}

Block::Block(const GPTConfig& c) : dropout_p(c.dropout) {
    ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(c.d_model));
    attn = register_module("attn", std::make_shared<nn::MultiHeadAttention>(c.d_model, c.heads, c.dropout));
    ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(c.d_model));
    mlp = register_module("mlp", std::make_shared<nn::PositionwiseFeedForward>(c.d_model, 4 * c.d_model, 0.0f, nn::Activation::gelu));
}

Tensor Block::forward(const Tensor& x, const Mask& causal) {
    // 1) causal self-attention: position t reads positions 0..t, and nothing else
    const Tensor a = ln_1->forward(x);                                                          // (B, T, D)
    const Tensor h = nn::add_dropout(x, attn->forward(a, a, a, causal), dropout_p, is_training());   // (B, T, D)
    // 2) the feed-forward, GELU(x W_1ᵀ + b_1) W_2ᵀ + b_2, at every position alone
    return nn::add_dropout(h, mlp->forward(ln_2->forward(h)), dropout_p, is_training());         // (B, T, D)
}

GPT::GPT(const GPTConfig& c) : cfg(c) {
    cfg.validate();
    wte = register_module("wte", std::make_shared<nn::Embedding>(cfg.vocab, cfg.d_model));
    wpe = register_module("wpe", std::make_shared<nn::Embedding>(cfg.block_size, cfg.d_model));
    h = register_module("h", std::make_shared<nn::ModuleList<Block>>());
    for (int64_t i = 0; i < cfg.layers; i++) h->push_back(std::make_shared<Block>(cfg));
    ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(cfg.d_model));
    lm_head = register_module("lm_head", std::make_shared<nn::Linear>(cfg.d_model, cfg.vocab, nn::LinearOptions{.bias = false}));
    // The output layer is the token embedding (Press & Wolf 2017): one (V, D) matrix, read by the
    // first layer as rows and by the last as scores x W_teᵀ; its gradient is the two uses' sum.
    lm_head->weight = lm_head->share_parameter("weight", wte->weight);
    // GPT-2's initialization: every matrix N(0, 0.02); the projections back into the residual
    // stream N(0, 0.02 / sqrt(2N)), so the sum of 2N of them starts as wide as one; biases 0.
    for (auto& [name, p] : named_parameters()) {
        const bool into_residual = name.ends_with("attn.w_o.weight") || name.ends_with("mlp.w_2.weight");
        if (p.dim() > 1) nn::init::normal_(p, 0.0f, 0.02f / (into_residual ? std::sqrt(2.0f * cfg.layers) : 1.0f));
    }
}

Tensor GPT::forward(const Tokens& idx) {
    const int64_t T = idx.dim() == 2 ? idx.size(1) : 0;
    if (T < 1 || T > cfg.block_size)
        throw std::invalid_argument("GPT: idx must be (B, T) with 1 <= T <= block_size = " + std::to_string(cfg.block_size) +
                                    ", got " + shape_str(idx.shape));
    Tokens positions = Tokens::full({1, T}, 0);   // (1, T): 0, 1, ..., T-1
    for (int64_t t = 0; t < T; t++) positions[t] = static_cast<int32_t>(t);
    Tensor x = nn::dropout(wte->forward(idx) + wpe->forward(positions), cfg.dropout, is_training());   // (B, T, D)
    const Mask causal = subsequent_mask(T);                                                          // (1, T, T)
    for (auto& block : *h) x = block->forward(x, causal);                                            // (B, T, D)
    return ln_f->forward(x);                                                                         // (B, T, D)
}

Tensor GPT::logits(const Tokens& idx) { return lm_head->forward(forward(idx)); }   // (B, T, V)

Tensor GPT::loss(const Tokens& idx, const Tokens& targets) {
    if (targets.shape != idx.shape)
        throw std::invalid_argument("GPT::loss: targets " + shape_str(targets.shape) + " must be shaped as idx " + shape_str(idx.shape));
    return nn::linear_cross_entropy(forward(idx), lm_head->weight, Tensor(), targets);   // (): the mean over B x T
}

}  // namespace models
