#include "examples/common/training_work.h"

#include <stdexcept>

#include "models/rnn_seq2seq.h"
#include "models/transformer.h"

namespace common {

namespace {

// The Transformer (models/transformer.h), N layers a side. Per row:
//   encoder layer: Q, K, V and the output projection 4 S D^2; scores Q K^T and the weighted sum
//                  of V, S^2 D each; the feed-forward 2 S D F
//   decoder layer: self-attention 4 T D^2 + 2 T^2 D; cross-attention's Q and output T D^2 each,
//                  its K and V over the memory S D^2 each, its scores and sum 2 T S D; 2 T D F
//   generator:     T D V
StepWork transformer_work(const models::TransformerConfig& c, double B, double S, double T) {
    const double N = static_cast<double>(c.layers), D = static_cast<double>(c.d_model), F = static_cast<double>(c.d_ff),
                 V = static_cast<double>(c.tgt_vocab);
    const double encoder_layer = 4 * S * D * D + 2 * S * S * D + 2 * S * D * F;
    const double decoder_layer = 4 * T * D * D + 2 * T * T * D + 2 * T * D * D + 2 * S * D * D + 2 * T * S * D + 2 * T * D * F;
    return {B * (N * (encoder_layer + decoder_layer) + T * D * V), 0.0};
}

// A recurrent encoder-decoder (models/rnn_seq2seq.h): G gates of Hd (GRU 3, LSTM 4, tanh RNN 1),
// L layers, the encoder in `dirs` directions, extra_i X wide (C_i: dirs Hd; C: Hd; or nothing).
// Per row:
//   encoder, each layer and direction: its input's part of the gates S I G Hd (I = E, then
//          dirs Hd), the recurrence S Hd G Hd
//   s_0 and C: Hd^2 for each map (W_s; or V and V'); the attention's keys S (dirs Hd) A
//   decoder: the previous words' part of layer 0's gates in one product T E G Hd; at each of
//          the T steps the score (additive: its query map Hd A, then S A; dot, general, cosine:
//          S A), the context S X, extra's part of the gates X G Hd, each layer's recurrence
//          Hd G Hd and each deeper layer's input Hd G Hd
//   output layer: T (Hd + X) V
StepWork rnn_work(const models::RNNSeq2SeqConfig& c, double B, double S, double T) {
    const double E = static_cast<double>(c.embed), Hd = static_cast<double>(c.hidden), L = static_cast<double>(c.layers),
                 V = static_cast<double>(c.tgt_vocab), dirs = c.bidirectional ? 2 : 1;
    const double G = c.cell == nn::CellKind::gru ? 3 : c.cell == nn::CellKind::lstm ? 4 : 1;
    const double X = c.attention() ? dirs * Hd : c.context == models::Context::cho ? Hd : 0, A = Hd;
    double encoder = 0;
    for (int64_t l = 0; l < c.layers; l++) encoder += dirs * S * ((l == 0 ? E : dirs * Hd) + Hd) * G * Hd;
    double bridge = 0, step = 0;
    if (c.context == models::Context::cho) bridge = 2 * Hd * Hd;
    if (c.attention()) {
        bridge = Hd * Hd + (c.score == nn::Score::dot ? 0 : S * X * A);
        step = (c.score == nn::Score::additive ? Hd * A : 0) + S * A + S * X;
    }
    step += X * G * Hd + L * Hd * G * Hd + (L - 1) * Hd * G * Hd;
    const double decoder = T * E * G * Hd + T * step + T * (Hd + X) * V;
    return {B * (encoder + bridge + decoder), dirs * L * S + T};
}

}  // namespace

StepWork forward_work(const models::Seq2Seq& model, int64_t B, int64_t S, int64_t T) {
    if (const auto* t = dynamic_cast<const models::Transformer*>(&model))
        return transformer_work(t->cfg, static_cast<double>(B), static_cast<double>(S), static_cast<double>(T));
    if (const auto* r = dynamic_cast<const models::RNNSeq2Seq*>(&model))
        return rnn_work(r->cfg, static_cast<double>(B), static_cast<double>(S), static_cast<double>(T));
    throw std::invalid_argument("forward_work: the model is neither a models::Transformer nor a models::RNNSeq2Seq");
}

}  // namespace common
