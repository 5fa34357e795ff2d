// The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al. 2017), written in
// the paper's order with the paper's names, after The Annotated Transformer.
//
//   src ids (B, S) -> Embeddings + PositionalEncoding -> Encoder (N x EncoderLayer) -> memory (B, S, D)
//   tgt ids (B, T) -> Embeddings + PositionalEncoding -> Decoder (N x DecoderLayer, attending to
//                     memory) -> (B, T, D) -> Generator -> logits or log-probabilities (B, T, V)
#pragma once
#include <functional>
#include <memory>

#include "models/batch.h"   // the masks: padding_mask, subsequent_mask, target_mask
#include "models/seq2seq.h"
#include "nn/nn.h"

namespace models {

using autograd::Mask;
using autograd::Tensor;
using autograd::Tokens;

struct TransformerConfig {
    int64_t src_vocab = 11;   // V_src: number of source token ids
    int64_t tgt_vocab = 11;   // V_tgt: number of target token ids
    int64_t layers = 6;       // N: layers in the encoder and in the decoder (paper: 6)
    int64_t d_model = 512;    // D: width of every token vector (paper: 512)
    int64_t d_ff = 2048;      // F: hidden width of the feed-forward sublayer (paper: 2048)
    int64_t heads = 8;        // H: attention heads; D must be a multiple of H (paper: 8)
    float dropout = 0.1f;     // on sublayer outputs, embeddings + positions, attention weights and the
                              // feed-forward hidden layer (paper: 0.1)
    bool pre_norm = true;     // true: x + sublayer(norm(x)) (The Annotated Transformer; trains more
                              // stably); false: norm(x + sublayer(x)) (the paper's post-norm; the
                              // stacks' final LayerNorm is kept either way)
    int64_t max_len = 5000;   // longest sequence the positional encoding covers
    bool tie_weights = false; // one matrix for both embeddings and the pre-softmax projection
                              // (section 3.4); needs one shared vocabulary: src_vocab == tgt_vocab

    void validate() const;    // throws std::invalid_argument naming the bad field
    // The number of floats in the model's parameters (Transformer(cfg).num_parameters()), from
    // the sizes alone, without building it: a checkpoint's config is checked against the weights
    // its file holds before any allocation. INT64_MAX when the count does not fit in 64 bits.
    int64_t parameter_count() const;
    // The number of parameter tensors (Transformer(cfg).named_parameters().size()): each costs a
    // few hundred bytes of bookkeeping however small, so a file must also list as many as its
    // config asks for. Saturates like parameter_count().
    int64_t parameter_tensors() const;
};   // stored in a checkpoint as JSON: models/checkpoint.h

// Token embeddings scaled by sqrt(D) (section 3.4), so they are not drowned by the positional encoding.
class Embeddings : public nn::Module {
public:
    Embeddings(int64_t d_model, int64_t vocab);
    Tensor forward(const Tokens& ids) const;   // (B, T) -> (B, T, D)
    std::shared_ptr<nn::Embedding> lut;
    int64_t d_model;
};

// A residual connection around a sublayer, with LayerNorm and dropout (section 5.4).
class SublayerConnection : public nn::Module {
public:
    SublayerConnection(int64_t d_model, float dropout, bool pre_norm);
    Tensor forward(const Tensor& x, const std::function<Tensor(const Tensor&)>& sublayer) const;   // (B, T, D)
    std::shared_ptr<nn::LayerNorm> norm;
    float dropout_p;
    bool pre_norm;
};

// Encoder layer: self-attention, then feed-forward (section 3.1).
class EncoderLayer : public nn::Module {
public:
    explicit EncoderLayer(const TransformerConfig& cfg);
    Tensor forward(const Tensor& x, const Mask& src_mask);   // (B, S, D) -> (B, S, D)
    std::shared_ptr<nn::MultiHeadAttention> self_attn;
    std::shared_ptr<nn::PositionwiseFeedForward> feed_forward;
    std::shared_ptr<SublayerConnection> sublayer0, sublayer1;
};

// Decoder layer: masked self-attention, attention over the encoder's output (memory), feed-forward.
class DecoderLayer : public nn::Module {
public:
    explicit DecoderLayer(const TransformerConfig& cfg);
    // x (B, T, D), memory (B, S, D) -> (B, T, D)
    Tensor forward(const Tensor& x, const Tensor& memory, const Mask& src_mask, const Mask& tgt_mask);
    std::shared_ptr<nn::MultiHeadAttention> self_attn, src_attn;
    std::shared_ptr<nn::PositionwiseFeedForward> feed_forward;
    std::shared_ptr<SublayerConnection> sublayer0, sublayer1, sublayer2;
};

class Encoder : public nn::Module {
public:
    explicit Encoder(const TransformerConfig& cfg);
    Tensor forward(Tensor x, const Mask& src_mask);          // (B, S, D) -> (B, S, D)
    std::shared_ptr<nn::ModuleList<EncoderLayer>> layers;
    std::shared_ptr<nn::LayerNorm> norm;                     // final LayerNorm
};

class Decoder : public nn::Module {
public:
    explicit Decoder(const TransformerConfig& cfg);
    Tensor forward(Tensor x, const Tensor& memory, const Mask& src_mask, const Mask& tgt_mask);   // (B, T, D)
    std::shared_ptr<nn::ModuleList<DecoderLayer>> layers;
    std::shared_ptr<nn::LayerNorm> norm;
};

// Generator: the final linear projection to the vocabulary and log-softmax (section 3.4).
class Generator : public nn::Module {
public:
    Generator(int64_t d_model, int64_t vocab);
    Tensor logits(const Tensor& x) const;      // (B, T, D) -> scores before log-softmax (B, T, V)
    Tensor log_probs(const Tensor& x) const;   // (B, T, D) -> log_softmax(logits(x)) (B, T, V)
    // (B, T, D) and targets (B, T) -> cross_entropy(logits(x), targets, opt) (), without the whole logits
    Tensor loss(const Tensor& x, const Tokens& targets, const nn::CrossEntropyOptions& opt) const;
    std::shared_ptr<nn::Linear> proj;
};

class Transformer : public Seq2Seq {
public:
    explicit Transformer(const TransformerConfig& cfg);
    Tensor encode(const Tokens& src, const Mask& src_mask);                                      // (B, S, D)
    Tensor decode(const Tensor& memory, const Mask& src_mask, const Tokens& tgt, const Mask& tgt_mask);   // (B, T, D)
    // The whole model for training: logits (B, T, V). Train with nn::cross_entropy, which fuses
    // the generator's log-softmax into the loss (the same value as nll_loss of log_probs).
    Tensor logits(const Tokens& src, const Tokens& tgt, const Mask& src_mask, const Mask& tgt_mask) override;
    // Training's loss: the decoder's output, then the generator and the loss in one (Generator::loss).
    Tensor loss(const Batch& b, const nn::CrossEntropyOptions& opt) override;
    // Decoding one position per step, or recomputing the prefix (DecodingSetup, models/seq2seq.h;
    // defined with the decoder's machinery in models/).
    std::unique_ptr<NextTokens> start_decoding(const Tokens& src, const Mask& src_mask, const DecodingSetup& setup) override;
    void keep_attention_weights(bool on) override;   // every MultiHeadAttention's keep_attention
    int64_t tgt_vocab() const override { return cfg.tgt_vocab; }
    int64_t max_len() const override { return cfg.max_len; }

    TransformerConfig cfg;
    std::shared_ptr<Embeddings> src_embed, tgt_embed;
    std::shared_ptr<nn::PositionalEncoding> src_pos, tgt_pos;
    std::shared_ptr<Encoder> encoder;
    std::shared_ptr<Decoder> decoder;
    std::shared_ptr<Generator> generator;
};

}  // namespace models
