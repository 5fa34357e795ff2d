#include "examples/common/training_work.h"

#include <stdexcept>

#include "models/rnn_seq2seq.h"
#include "models/transformer.h"

namespace common {

namespace {

// The time model's constants (estimated_step_seconds), fitted by bench/fit_translation_cost.py to
// bench/bench_translation_cost's steps of the translation --data defaults on 2 cores of a Zen 4
// (bench/RESULTS.md): the rate of the products (the output layer's apart: a softmax over V
// follows it), the seconds of an attention score, of a sequential step and of a batch.
struct TimeModel {
    double products_per_second, output_per_second, seconds_per_score, seconds_per_step, seconds_per_batch;
};
constexpr TimeModel kTransformerTime{1.981e11, 7.977e10, 4.378e-9, 0.0, 0.0};
constexpr TimeModel kRecurrentTime{2.171e11, 1.575e11, 5.258e-9, 0.0, 0.0};

// The Transformer (models/transformer.h), N layers a side. Per row:
//   encoder layer: Q, K, V and the output projection 4 S D^2; scores Q K^T and the weighted sum
//                  of V, S^2 D each; the feed-forward 2 S D F
//   decoder layer: self-attention 4 T D^2 + 2 T^2 D; cross-attention's Q and output T D^2 each,
//                  its K and V over the memory S D^2 each, its scores and sum 2 T S D; 2 T D F
//   generator:     T D V
StepWork transformer_work(const models::TransformerConfig& c, double B, double S, double T) {
    const double N = static_cast<double>(c.layers), D = static_cast<double>(c.d_model), F = static_cast<double>(c.d_ff),
                 V = static_cast<double>(c.tgt_vocab), H = static_cast<double>(c.heads);
    const double encoder_layer = 4 * S * D * D + 2 * S * S * D + 2 * S * D * F;
    const double decoder_layer = 4 * T * D * D + 2 * T * T * D + 2 * T * D * D + 2 * S * D * D + 2 * T * S * D + 2 * T * D * F;
    const double output = T * D * V;
    return {B * (N * (encoder_layer + decoder_layer) + output), B * output, B * N * H * (S * S + T * T + T * S), 0.0};
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
    double bridge = 0, step = 0, scores = 0;
    if (c.context == models::Context::cho) bridge = 2 * Hd * Hd;
    if (c.attention()) {
        bridge = Hd * Hd + (c.score == nn::Score::dot ? 0 : S * X * A);
        step = (c.score == nn::Score::additive ? Hd * A : 0) + S * A + S * X;
        scores = T * S * (c.score == nn::Score::additive ? A : 1);   // additive: tanh(W_q s + k_j) is A wide for each score
    }
    step += X * G * Hd + L * Hd * G * Hd + (L - 1) * Hd * G * Hd;
    const double output = T * (Hd + X) * V;
    const double decoder = T * E * G * Hd + T * step + output;
    return {B * (encoder + bridge + decoder), B * output, B * scores, dirs * L * S + T};
}

}  // namespace

StepWork forward_work(const models::Seq2Seq& model, int64_t B, int64_t S, int64_t T) {
    if (const auto* t = dynamic_cast<const models::Transformer*>(&model))
        return transformer_work(t->cfg, static_cast<double>(B), static_cast<double>(S), static_cast<double>(T));
    if (const auto* r = dynamic_cast<const models::RNNSeq2Seq*>(&model))
        return rnn_work(r->cfg, static_cast<double>(B), static_cast<double>(S), static_cast<double>(T));
    throw std::invalid_argument("forward_work: the model is neither a models::Transformer nor a models::RNNSeq2Seq");
}

double estimated_step_seconds(const models::Seq2Seq& model, const BatchShape& b) {
    const bool recurrent = dynamic_cast<const models::RNNSeq2Seq*>(&model) != nullptr;
    const TimeModel& t = recurrent ? kRecurrentTime : kTransformerTime;
    const StepWork w = forward_work(model, b.rows, b.src_len, b.tgt_len);
    // a training step does 3 times the forward pass's products: the backward pass twice as many
    return 3 * (w.multiply_adds - w.output_multiply_adds) / t.products_per_second + 3 * w.output_multiply_adds / t.output_per_second +
           w.attention_scores * t.seconds_per_score + w.sequential_steps * t.seconds_per_step + t.seconds_per_batch;
}

double estimated_epoch_seconds(const models::Seq2Seq& model, const std::vector<BatchShape>& batches) {
    double seconds = 0;
    for (const BatchShape& b : batches) seconds += estimated_step_seconds(model, b);
    return seconds;
}

}  // namespace common
