// GPT: the Transformer's decoder alone, trained to predict the next token (Radford et al. 2018,
// "Improving Language Understanding by Generative Pre-Training"; GPT-2's pre-norm blocks, 2019),
// in the names of nanoGPT's model.py.
//
//   ids (B, T) -> token embedding + learned position embedding -> N x Block (causal
//   self-attention, GELU feed-forward of 4D, each pre-norm and residual) -> final LayerNorm
//   -> x W_teᵀ, the token embedding again -> logits (B, T, V)
//
// No encoder, no cross-attention, no padding: every position of every row is a training example,
// and the causal mask is all that keeps position t from reading the token it must predict.
#pragma once
#include <memory>

#include "nn/nn.h"

namespace models {

using autograd::Mask;
using autograd::Tensor;
using autograd::Tokens;

struct GPTConfig {
    int64_t vocab = 65;        // V: token ids (Tiny Shakespeare has 65 characters)
    int64_t block_size = 64;   // T_max: the longest context; the learned positions end there
    int64_t layers = 4;        // N: blocks
    int64_t heads = 4;         // H: attention heads; D must be a multiple of H
    int64_t d_model = 128;     // D: width of every token vector; the feed-forward is 4D wide
    float dropout = 0.0f;      // on embeddings, attention weights and each block's two outputs

    void validate() const;     // throws std::invalid_argument naming the bad field
};

// A decoder block without the encoder: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class Block : public nn::Module {
public:
    explicit Block(const GPTConfig& cfg);
    Tensor forward(const Tensor& x, const Mask& causal);   // (B, T, D) -> (B, T, D)
    std::shared_ptr<nn::LayerNorm> ln_1, ln_2;
    std::shared_ptr<nn::MultiHeadAttention> attn;
    std::shared_ptr<nn::PositionwiseFeedForward> mlp;
    float dropout_p;
};

class GPT : public nn::Module {
public:
    explicit GPT(const GPTConfig& cfg);
    Tensor forward(const Tokens& idx);   // (B, T) ids, T <= block_size -> (B, T, D), after ln_f
    Tensor logits(const Tokens& idx);    // (B, T) -> (B, T, V): the next token's scores at every position
    // The mean cross-entropy of targets (B, T) under logits(idx), without the whole logits.
    Tensor loss(const Tokens& idx, const Tokens& targets);

    GPTConfig cfg;
    std::shared_ptr<nn::Embedding> wte, wpe;   // tokens (V, D), positions (T_max, D)
    std::shared_ptr<nn::ModuleList<Block>> h;
    std::shared_ptr<nn::LayerNorm> ln_f;
    std::shared_ptr<nn::Linear> lm_head;       // (V, D), no bias: its weight is wte's
};

}  // namespace models
