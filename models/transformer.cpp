#include "models/transformer.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>

namespace models {

using autograd::shape_str;

// ---------------------------------------------------------------- config

// The longest positional table a config may ask for: 2^20 positions, far beyond any sentence.
constexpr int64_t kMaxLen = int64_t{1} << 20;

void TransformerConfig::validate() const {
    auto need = [](bool ok, const std::string& what) {
        if (!ok) throw std::invalid_argument("TransformerConfig: " + what);
    };
    need(src_vocab > 0 && tgt_vocab > 0, "vocab sizes must be positive");
    need(layers > 0, "layers must be positive, got " + std::to_string(layers));
    need(d_model > 0 && d_ff > 0, "d_model and d_ff must be positive");
    need(heads > 0 && d_model % heads == 0,
         "d_model (" + std::to_string(d_model) + ") must be a multiple of heads (" + std::to_string(heads) + ")");
    nn::check_dropout_p(dropout, "TransformerConfig");
    // the positional table grows up to max_len x D floats: bounded here, since max_len is no parameter
    // and a checkpoint's weights say nothing about it
    need(max_len > 0 && max_len <= kMaxLen, "max_len must be in [1, " + std::to_string(kMaxLen) + "] (the positional table is " +
                                                "max_len x d_model floats), got " + std::to_string(max_len));
    need(!tie_weights || src_vocab == tgt_vocab, "tie_weights needs one shared vocabulary, got src_vocab " +
                                                     std::to_string(src_vocab) + " and tgt_vocab " + std::to_string(tgt_vocab));
}

int64_t TransformerConfig::parameter_count() const {
    // In long double: exact for every count below 2^64 on x86-64 and ARM64 Linux, and sizes read
    // from a file that would overflow int64_t give a huge number instead of a wrapped one.
    const long double D = d_model, F = d_ff, N = layers, V_src = src_vocab, V_tgt = tgt_vocab;
    const long double linear = D * D + D;                         // a (D, D) Linear: weight and bias
    const long double norm = 2 * D;                               // LayerNorm: gain and bias
    const long double feed_forward = (D * F + F) + (F * D + D);    // w_1 (F, D), w_2 (D, F)
    const long double encoder_layer = 4 * linear + feed_forward + 2 * norm;   // self-attention: w_q, w_k, w_v, w_o
    const long double decoder_layer = 8 * linear + feed_forward + 3 * norm;   // self- and source attention
    const long double stacks = N * (encoder_layer + decoder_layer) + 2 * norm; // each stack's final LayerNorm
    // embeddings (V, D) each, the generator's (V_tgt, D) weight and its bias; one shared matrix when tied
    const long double vocab = tie_weights ? V_src * D + V_tgt : V_src * D + V_tgt * D + (V_tgt * D + V_tgt);
    const long double total = stacks + vocab;
    return total >= 0x1p63L ? INT64_MAX : static_cast<int64_t>(total);
}

int64_t TransformerConfig::parameter_tensors() const {
    // a Linear and a LayerNorm have two tensors each: encoder layer 4 + 2 Linears and 2 norms,
    // decoder layer 8 + 2 Linears and 3 norms, each stack a final norm; two embeddings and the
    // generator's weight and bias, or one shared matrix and the bias
    const long double total = static_cast<long double>(layers) * (2 * (6 + 2) + 2 * (10 + 3)) + 2 * 2 + (tie_weights ? 2 : 4);
    return total >= 0x1p63L ? INT64_MAX : static_cast<int64_t>(total);
}

// ---------------------------------------------------------------- building blocks

Embeddings::Embeddings(int64_t d, int64_t vocab) : d_model(d) {
    lut = register_module("lut", std::make_shared<nn::Embedding>(vocab, d));
}

Tensor Embeddings::forward(const Tokens& ids) const {
    return lut->forward(ids) * std::sqrt(static_cast<float>(d_model));   // (B, T, D)
}

SublayerConnection::SublayerConnection(int64_t d_model, float dropout, bool pre) : dropout_p(dropout), pre_norm(pre) {
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(d_model));
}

Tensor SublayerConnection::forward(const Tensor& x, const std::function<Tensor(const Tensor&)>& sublayer) const {
    // pre-norm: x + dropout(sublayer(norm(x)));  post-norm: norm(x + dropout(sublayer(x))).
    // nn::add_dropout(x, y) is x + dropout(y), in one pass with fused kernels on.
    if (pre_norm) return nn::add_dropout(x, sublayer(norm->forward(x)), dropout_p, is_training());   // (B, T, D)
    return norm->forward(nn::add_dropout(x, sublayer(x), dropout_p, is_training()));
}

EncoderLayer::EncoderLayer(const TransformerConfig& c) {
    self_attn = register_module("self_attn", std::make_shared<nn::MultiHeadAttention>(c.d_model, c.heads, c.dropout));
    feed_forward = register_module("feed_forward", std::make_shared<nn::PositionwiseFeedForward>(c.d_model, c.d_ff, c.dropout));
    sublayer0 = register_module("sublayer0", std::make_shared<SublayerConnection>(c.d_model, c.dropout, c.pre_norm));
    sublayer1 = register_module("sublayer1", std::make_shared<SublayerConnection>(c.d_model, c.dropout, c.pre_norm));
}

Tensor EncoderLayer::forward(const Tensor& x, const Mask& src_mask) {
    // 1) every source position attends to every (non-padding) source position
    Tensor h = sublayer0->forward(x, [&](const Tensor& y) { return self_attn->forward(y, y, y, src_mask); });
    // 2) the same two-layer MLP at every position
    return sublayer1->forward(h, [&](const Tensor& y) { return feed_forward->forward(y); });   // (B, S, D)
}

DecoderLayer::DecoderLayer(const TransformerConfig& c) {
    self_attn = register_module("self_attn", std::make_shared<nn::MultiHeadAttention>(c.d_model, c.heads, c.dropout));
    src_attn = register_module("src_attn", std::make_shared<nn::MultiHeadAttention>(c.d_model, c.heads, c.dropout));
    feed_forward = register_module("feed_forward", std::make_shared<nn::PositionwiseFeedForward>(c.d_model, c.d_ff, c.dropout));
    sublayer0 = register_module("sublayer0", std::make_shared<SublayerConnection>(c.d_model, c.dropout, c.pre_norm));
    sublayer1 = register_module("sublayer1", std::make_shared<SublayerConnection>(c.d_model, c.dropout, c.pre_norm));
    sublayer2 = register_module("sublayer2", std::make_shared<SublayerConnection>(c.d_model, c.dropout, c.pre_norm));
}

Tensor DecoderLayer::forward(const Tensor& x, const Tensor& memory, const Mask& src_mask, const Mask& tgt_mask) {
    // 1) masked self-attention: position t sees only target positions <= t
    Tensor h = sublayer0->forward(x, [&](const Tensor& y) { return self_attn->forward(y, y, y, tgt_mask); });
    // 2) encoder-decoder attention: queries from the decoder, keys and values from memory
    h = sublayer1->forward(h, [&](const Tensor& y) { return src_attn->forward(y, memory, memory, src_mask); });
    // 3) feed-forward
    return sublayer2->forward(h, [&](const Tensor& y) { return feed_forward->forward(y); });   // (B, T, D)
}

Encoder::Encoder(const TransformerConfig& c) {
    layers = register_module("layers", std::make_shared<nn::ModuleList<EncoderLayer>>());
    for (int64_t i = 0; i < c.layers; i++) layers->push_back(std::make_shared<EncoderLayer>(c));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(c.d_model));
}

Tensor Encoder::forward(Tensor x, const Mask& src_mask) {
    for (auto& layer : *layers) x = layer->forward(x, src_mask);
    return norm->forward(x);   // (B, S, D)
}

Decoder::Decoder(const TransformerConfig& c) {
    layers = register_module("layers", std::make_shared<nn::ModuleList<DecoderLayer>>());
    for (int64_t i = 0; i < c.layers; i++) layers->push_back(std::make_shared<DecoderLayer>(c));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(c.d_model));
}

Tensor Decoder::forward(Tensor x, const Tensor& memory, const Mask& src_mask, const Mask& tgt_mask) {
    for (auto& layer : *layers) x = layer->forward(x, memory, src_mask, tgt_mask);   // (B, T, D)
    return norm->forward(x);   // (B, T, D)
}

Generator::Generator(int64_t d_model, int64_t vocab) {
    proj = register_module("proj", std::make_shared<nn::Linear>(d_model, vocab));
}

Tensor Generator::logits(const Tensor& x) const { return proj->forward(x); }                       // (B, T, V)
Tensor Generator::log_probs(const Tensor& x) const { return autograd::log_softmax(logits(x)); }   // (B, T, V)
Tensor Generator::loss(const Tensor& x, const Tokens& targets, const nn::CrossEntropyOptions& opt) const {
    return nn::linear_cross_entropy(x, proj->weight, proj->bias, targets, opt);   // ()
}

// ---------------------------------------------------------------- the model

Transformer::Transformer(const TransformerConfig& c) : cfg(c) {
    cfg.validate();
    encoder = register_module("encoder", std::make_shared<Encoder>(cfg));
    decoder = register_module("decoder", std::make_shared<Decoder>(cfg));
    src_embed = register_module("src_embed", std::make_shared<Embeddings>(cfg.d_model, cfg.src_vocab));
    tgt_embed = register_module("tgt_embed", std::make_shared<Embeddings>(cfg.d_model, cfg.tgt_vocab));
    src_pos = register_module("src_pos", std::make_shared<nn::PositionalEncoding>(cfg.d_model, cfg.dropout, cfg.max_len));
    tgt_pos = register_module("tgt_pos", std::make_shared<nn::PositionalEncoding>(cfg.d_model, cfg.dropout, cfg.max_len));
    generator = register_module("generator", std::make_shared<Generator>(cfg.d_model, cfg.tgt_vocab));
    if (cfg.tie_weights) {
        // Section 3.4: "we share the same weight matrix between the two embedding layers and the
        // pre-softmax linear transformation". One (V, D) tensor used three times: its gradient is
        // the sum of the three uses', and it is one parameter (listed, updated and saved once).
        const Tensor& shared = src_embed->lut->weight;                                   // (V, D)
        tgt_embed->lut->weight = tgt_embed->lut->share_parameter("weight", shared);
        generator->proj->weight = generator->proj->share_parameter("weight", shared);    // (V, D): logits = x W^T + b
    }
    // As in The Annotated Transformer: Xavier-uniform for every matrix (embeddings included).
    for (Tensor& p : parameters())
        if (p.dim() > 1) nn::init::xavier_uniform_(p);
}

Tensor Transformer::encode(const Tokens& src, const Mask& src_mask) {
    if (src.dim() != 2) throw std::invalid_argument("Transformer::encode: src must be (B, S), got " + shape_str(src.shape));
    return encoder->forward(src_pos->forward(src_embed->forward(src)), src_mask);   // (B, S, D)
}

Tensor Transformer::decode(const Tensor& memory, const Mask& src_mask, const Tokens& tgt, const Mask& tgt_mask) {
    if (tgt.dim() != 2) throw std::invalid_argument("Transformer::decode: tgt must be (B, T), got " + shape_str(tgt.shape));
    return decoder->forward(tgt_pos->forward(tgt_embed->forward(tgt)), memory, src_mask, tgt_mask);   // (B, T, D)
}

Tensor Transformer::logits(const Tokens& src, const Tokens& tgt, const Mask& src_mask, const Mask& tgt_mask) {
    return generator->logits(decode(encode(src, src_mask), src_mask, tgt, tgt_mask));   // (B, T, V)
}

void Transformer::keep_attention_weights(bool on) {
    for (auto& layer : *encoder->layers) layer->self_attn->keep_attention = on;
    for (auto& layer : *decoder->layers) layer->self_attn->keep_attention = layer->src_attn->keep_attention = on;
}

Tensor Transformer::loss(const Batch& b, const nn::CrossEntropyOptions& opt) {
    const Tensor out = decode(encode(b.src, b.src_mask), b.src_mask, b.tgt_in, b.tgt_mask);   // (B, T, D)
    return generator->loss(out, b.tgt_out, opt);                                              // ()
}

}  // namespace models
