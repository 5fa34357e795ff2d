#include "models/rnn_seq2seq.h"

#include <stdexcept>

namespace models {

using autograd::Shape;
using autograd::cat;
using autograd::shape_str;
using nn::CellKind;
using nn::CellState;
using nn::linear;

// ---------------------------------------------------------------- config

Context context_from_name(const std::string& name) {
    if (name == "initial_state") return Context::initial_state;
    if (name == "every_step") return Context::every_step;
    throw std::invalid_argument("unknown context '" + name + "' (initial_state or every_step)");
}

void RNNSeq2SeqConfig::validate() const {
    auto need = [](bool ok, const std::string& what) {
        if (!ok) throw std::invalid_argument("RNNSeq2SeqConfig: " + what);
    };
    need(src_vocab > 0 && tgt_vocab > 0, "vocab sizes must be positive");
    need(embed > 0 && hidden > 0, "embed and hidden must be positive, got " + std::to_string(embed) + " and " + std::to_string(hidden));
    need(layers > 0, "layers must be positive, got " + std::to_string(layers));
    nn::check_dropout_p(dropout, "RNNSeq2SeqConfig");
}

std::string RNNSeq2SeqConfig::describe() const {
    const char* kind = cell == CellKind::gru ? "GRU" : cell == CellKind::lstm ? "LSTM" : "RNN";
    std::string s = std::string(kind) + " encoder-decoder, ";
    if (attention) s += std::string(nn::score_name(score)) + " attention";
    else s += context == Context::initial_state ? "C as the first state" : "C at every step";
    s += reverse_source ? ", source reversed" : "";
    return s + ", E=" + std::to_string(embed) + " Hd=" + std::to_string(hidden) + " L=" + std::to_string(layers) +
           (bidirectional ? " bidirectional" : "") + " dropout=" + std::to_string(dropout).substr(0, 4);
}

int64_t RNNSeq2SeqConfig::parameter_count() const {
    // In long double, as TransformerConfig::parameter_count: exact below 2^64, no overflow.
    const long double E = embed, Hd = hidden, L = layers, V_src = src_vocab, V_tgt = tgt_vocab;
    const long double G = nn::gate_count(cell), dirs = bidirectional ? 2 : 1;
    // a cell reading `in` floats: weight_ih (G*Hd, in), weight_hh (G*Hd, Hd), bias_ih and bias_hh (G*Hd)
    auto cell_of = [&](long double in) { return G * Hd * in + G * Hd * Hd + 2 * G * Hd; };
    // X, the width of extra_i (RNNSeq2Seq::extra_size): C_i (dirs*Hd), C (Hd) or nothing
    const long double X = attention ? dirs * Hd : context == Context::every_step ? Hd : 0;
    const long double embeddings = V_src * E + V_tgt * E;
    const long double encoder = dirs * (cell_of(E) + (L - 1) * cell_of(dirs * Hd));   // layers above the first read both directions
    const long double bridge = Hd * dirs * Hd + Hd;                                     // (Hd, dirs*Hd) and its bias
    long double soft_attention = 0;
    if (attention) {
        soft_attention = Hd * dirs * Hd + Hd;                                  // w_key (Hd, dirs*Hd) and its bias
        if (score == nn::Score::additive) soft_attention += Hd * Hd + Hd;      // w_query (Hd, Hd), no bias; v (Hd)
        if (score == nn::Score::cosine) soft_attention += 1;                   // log_temperature
    }
    const long double decoder = cell_of(E + X) + (L - 1) * cell_of(Hd);
    const long double out = V_tgt * (Hd + X) + V_tgt;
    const long double total = embeddings + encoder + bridge + soft_attention + decoder + out;
    return total >= 0x1p63L ? INT64_MAX : static_cast<int64_t>(total);
}

int64_t RNNSeq2SeqConfig::parameter_tensors() const {
    // four per cell (weight_ih, weight_hh, bias_ih, bias_hh): L x dirs in the encoder, L in the
    // decoder; two embeddings; the bridge's and the output layer's weight and bias; the attention's
    // w_key (2), w_query and v (additive) or log_temperature (cosine)
    const long double L = layers, dirs = bidirectional ? 2 : 1;
    const long double soft_attention = !attention ? 0 : score == nn::Score::additive ? 4 : score == nn::Score::cosine ? 3 : 2;
    const long double total = 4 * L * dirs + 4 * L + 2 + 2 + 2 + soft_attention;
    return total >= 0x1p63L ? INT64_MAX : static_cast<int64_t>(total);
}

// ---------------------------------------------------------------- helpers

namespace {

// One step of a cell of `kind` from the input part of its gates, gi = x W_ih^T + b_ih (nn/recurrent.h).
CellState cell_step(CellKind kind, const nn::RecurrentCell& cell, const Tensor& gi, const CellState& s) {
    if (kind == CellKind::gru) return {nn::gru_step(gi, s.h, cell.weight_hh, cell.bias_hh), Tensor()};
    if (kind == CellKind::lstm) return nn::lstm_step(gi, s, cell.weight_hh, cell.bias_hh);
    return {nn::rnn_tanh_step(gi, s.h, cell.weight_hh, cell.bias_hh), Tensor()};
}

// n tensors of one shape -> one with a new dim of size n at `dim`.
Tensor stack(const std::vector<Tensor>& ts, int64_t dim) {
    std::vector<Tensor> parts;
    for (const Tensor& t : ts) parts.push_back(unsqueeze(t, dim));
    return cat(parts, dim);
}

// The number of real positions of each row of a (B, 1, S) padding mask, whose real positions
// must come first (as models/batch.h makes them).
std::vector<int64_t> lengths_of(const Mask& src_mask, const char* who) {
    const int64_t B = src_mask.shape[0], S = src_mask.shape[2];
    std::vector<int64_t> lengths(B, 0);
    for (int64_t b = 0; b < B; b++) {
        while (lengths[b] < S && src_mask[b * S + lengths[b]]) lengths[b]++;
        for (int64_t s = lengths[b]; s < S; s++)
            if (src_mask[b * S + s])
                throw std::invalid_argument(std::string(who) + ": row " + std::to_string(b) + " of the source mask has a real " +
                                            "position after padding; the recurrent encoder reads each row's real tokens first");
        if (lengths[b] == 0)
            throw std::invalid_argument(std::string(who) + ": row " + std::to_string(b) + " of the source is all padding");
    }
    return lengths;
}

// Rows `ids` of every tensor the decoder carries along (beam search keeping other hypotheses).
Tensor rows(const Tensor& t, const Tokens& ids) { return t.defined() ? index_select(t, 0, ids) : t; }

}  // namespace

Tokens reverse_rows(const Tokens& src, const Mask& src_mask) {
    const std::vector<int64_t> lengths = lengths_of(src_mask, "reverse_rows");
    Tokens out = src;   // (B, S)
    const int64_t S = src.size(1);
    for (size_t b = 0; b < lengths.size(); b++)
        for (int64_t s = 0; s < lengths[b]; s++) out[b * S + s] = src[b * S + lengths[b] - 1 - s];
    return out;
}

// ---------------------------------------------------------------- the model

int64_t RNNSeq2Seq::extra_size() const {
    if (cfg.attention) return (cfg.bidirectional ? 2 : 1) * cfg.hidden;   // C_i, as wide as an encoder state
    return cfg.context == Context::every_step ? cfg.hidden : 0;           // C
}

RNNSeq2Seq::RNNSeq2Seq(const RNNSeq2SeqConfig& c) : cfg(c) {
    cfg.validate();
    const int64_t E = cfg.embed, Hd = cfg.hidden, dirs = cfg.bidirectional ? 2 : 1;
    src_embed = register_module("src_embed", std::make_shared<nn::Embedding>(cfg.src_vocab, E));
    tgt_embed = register_module("tgt_embed", std::make_shared<nn::Embedding>(cfg.tgt_vocab, E));
    const nn::RecurrentOptions eo{.input_size = E, .hidden_size = Hd, .num_layers = cfg.layers,
                                  .bidirectional = cfg.bidirectional, .dropout = cfg.dropout};
    if (cfg.cell == CellKind::gru) encoder = register_module("encoder", std::make_shared<nn::GRU>(eo));
    else if (cfg.cell == CellKind::lstm) encoder = register_module("encoder", std::make_shared<nn::LSTM>(eo));
    else encoder = register_module("encoder", std::make_shared<nn::RNN>(eo));
    bridge = register_module("bridge", std::make_shared<nn::Linear>(dirs * Hd, Hd));
    if (cfg.attention)   // the query is s_{i-1} (Hd), the values the encoder's states (dirs*Hd)
        attention = register_module("attention", std::make_shared<nn::SoftAttention>(cfg.score, Hd, dirs * Hd, Hd));
    cells = register_module("cells", std::make_shared<nn::ModuleList<nn::RecurrentCell>>());
    for (int64_t l = 0; l < cfg.layers; l++) {
        const int64_t in = l == 0 ? E + extra_size() : Hd;   // layer 0 reads [embed(y_{i-1}); extra_i]
        if (cfg.cell == CellKind::gru) cells->push_back(std::make_shared<nn::GRUCell>(in, Hd));
        else if (cfg.cell == CellKind::lstm) cells->push_back(std::make_shared<nn::LSTMCell>(in, Hd));
        else cells->push_back(std::make_shared<nn::RNNCell>(in, Hd));
    }
    out = register_module("out", std::make_shared<nn::Linear>(Hd + extra_size(), cfg.tgt_vocab));
}

RNNSeq2Seq::Encoded RNNSeq2Seq::encode(const Tokens& src, const Mask& src_mask) {
    if (src.dim() != 2 || src_mask.shape != Shape{src.size(0), 1, src.size(1)})
        throw std::invalid_argument("RNNSeq2Seq::encode: expected src (B, S) and src_mask (B, 1, S), got " + shape_str(src.shape) +
                                    " and " + shape_str(src_mask.shape));
    const std::vector<int64_t> lengths = lengths_of(src_mask, "RNNSeq2Seq::encode");
    const int64_t dirs = cfg.bidirectional ? 2 : 1, top = (cfg.layers - 1) * dirs;   // top: the last layer's first row of h_n
    const Tokens ids = cfg.reverse_source ? reverse_rows(src, src_mask) : src;                // (B, S)
    const Tensor x = nn::dropout(src_embed->forward(ids), cfg.dropout, is_training());         // (B, S, E)
    nn::RecurrentOutput r;
    if (cfg.cell == CellKind::gru) r = static_cast<nn::GRU&>(*encoder).forward(x, lengths);
    else if (cfg.cell == CellKind::lstm) r = static_cast<nn::LSTM&>(*encoder).forward(x, lengths);
    else r = static_cast<nn::RNN&>(*encoder).forward(x, lengths);
    // C: the top layer's final states of both directions, through the bridge
    std::vector<Tensor> finals;
    for (int64_t d = 0; d < dirs; d++) finals.push_back(squeeze(narrow(r.h_n, 0, top + d, 1), 0));   // (B, Hd) each
    const Tensor context = tanh(bridge->forward(cat(finals, -1)));                                   // (B, Hd)
    Encoded enc{r.output, Tensor(), context, src_mask};                                              // states (B, S, dirs*Hd)
    if (attention) enc.keys = attention->keys(r.output);                                             // (B, S, Hd)
    return enc;
}

// The decoder's first state: every layer starts from C (the LSTM's memory cell from zeros).
static std::vector<CellState> first_state(const RNNSeq2SeqConfig& cfg, const Tensor& context) {
    std::vector<CellState> state;
    for (int64_t l = 0; l < cfg.layers; l++)
        state.push_back({context, cfg.cell == CellKind::lstm ? Tensor::zeros(context.shape()) : Tensor()});   // (n, Hd)
    return state;
}

// Layer 0 of the decoder reads [embed(y_{i-1}); extra_i]. Its input weights split by those two
// parts: the previous word's columns multiply every step's embedding in one product before the
// loop (in training all T steps are known), extra's only the step's own extra_i.
struct LayerZero {
    Tensor w_prev, w_extra;   // (G*Hd, E), (G*Hd, X) or undefined
};
static LayerZero split_layer_zero(const nn::RecurrentCell& cell, int64_t E) {
    const int64_t X = cell.input_size - E;
    return {narrow(cell.weight_ih, 1, 0, E), X > 0 ? narrow(cell.weight_ih, 1, E, X) : Tensor()};
}

Tensor RNNSeq2Seq::decode_step(const Tensor& gi_prev, std::vector<CellState>& state, const Encoded& enc, const Tensor& w_extra,
                               Tensor* weights) {
    // extra_i: the attention's context C_i (queried with s_{i-1}), or C itself, or nothing
    Tensor extra;
    if (attention) {
        const nn::SoftAttention::Output a = attention->forward(state.back().h, enc.keys, enc.states, enc.src_mask);
        extra = a.context;                                         // (n, dirs*Hd)
        if (weights) *weights = a.weights;                         // (n, S)
    } else if (cfg.context == Context::every_step) {
        extra = enc.context;                                       // (n, Hd)
    }
    Tensor gi = extra.defined() ? gi_prev + linear(extra, w_extra, Tensor()) : gi_prev;   // (n, G*Hd): layer 0's gates' input part
    for (int64_t l = 0; l < cfg.layers; l++) {
        if (l > 0) gi = (*cells)[l].input_part(nn::dropout(state[l - 1].h, cfg.dropout, is_training()));   // (n, G*Hd)
        state[l] = cell_step(cfg.cell, (*cells)[l], gi, state[l]);   // s_i of layer l, (n, Hd)
    }
    return extra.defined() ? cat({state.back().h, extra}, -1) : state.back().h;   // (n, Hd + X): the output layer's input
}

Tensor RNNSeq2Seq::logits(const Tokens& src, const Tokens& tgt_in, const Mask& src_mask, const Mask&) {
    return out->forward(outputs(src, tgt_in, src_mask));   // (B, T, V)
}

Tensor RNNSeq2Seq::loss(const Batch& b, const nn::CrossEntropyOptions& opt) {
    return nn::linear_cross_entropy(outputs(b.src, b.tgt_in, b.src_mask), out->weight, out->bias, b.tgt_out, opt);   // ()
}

Tensor RNNSeq2Seq::outputs(const Tokens& src, const Tokens& tgt_in, const Mask& src_mask) {
    if (tgt_in.dim() != 2 || src.dim() != 2 || tgt_in.size(0) != src.size(0))
        throw std::invalid_argument("RNNSeq2Seq::logits: expected src (B, S) and tgt_in (B, T), got " + shape_str(src.shape) +
                                    " and " + shape_str(tgt_in.shape));
    const Encoded enc = encode(src, src_mask);
    const int64_t T = tgt_in.size(1);
    const LayerZero w = split_layer_zero((*cells)[0], cfg.embed);
    // 1) the previous words' part of layer 0's gates, for all T steps in one product
    const Tensor prev = nn::dropout(tgt_embed->forward(tgt_in), cfg.dropout, is_training());   // (B, T, E)
    const Tensor gi_prev = linear(prev, w.w_prev, (*cells)[0].bias_ih);                        // (B, T, G*Hd)
    // 2) the decoder, one step at a time, from s_0 = C
    std::vector<CellState> state = first_state(cfg, enc.context);
    std::vector<Tensor> step_outputs, alphas;
    for (int64_t t = 0; t < T; t++) {
        Tensor weights;
        step_outputs.push_back(decode_step(squeeze(narrow(gi_prev, 1, t, 1), 1), state, enc, w.w_extra, &weights));   // (B, Hd + X)
        if (weights.defined()) alphas.push_back(weights);                                                     // (B, S)
    }
    if (keep_attention && !alphas.empty()) last_attention = stack(alphas, 1);   // (B, T, S), for pictures
    // 3) the output layer's input at every step; logits() makes every step's next-word scores from it in one product
    return nn::dropout(stack(step_outputs, 1), cfg.dropout, is_training());                                         // (B, T, Hd + X)
}

// ---------------------------------------------------------------- decoding

namespace {

// The rows being decoded: each carries its decoder state and its sentence's encoding.
class RNNRows : public NextTokens {
public:
    RNNRows(RNNSeq2Seq& model, RNNSeq2Seq::Encoded enc, int64_t* positions)
        : model_(model), enc_(std::move(enc)), positions_(positions),
          w_(split_layer_zero((*model.cells)[0], model.cfg.embed)), state_(first_state(model.cfg, enc_.context)) {}

    Tensor append(const Tokens& tokens) override {
        const int64_t n = tokens.size(0);
        if (tokens.shape != Shape{enc_.context.size(0), 1})
            throw std::invalid_argument("RNNSeq2Seq decoding: tokens must be (n, 1) for its " + std::to_string(enc_.context.size(0)) +
                                        " rows, got " + shape_str(tokens.shape));
        if (positions_) *positions_ += n;                                                      // one position per row
        const Tensor prev = model_.tgt_embed->forward(tokens).reshape({n, model_.cfg.embed});  // (n, E)
        const Tensor gi_prev = linear(prev, w_.w_prev, (*model_.cells)[0].bias_ih);             // (n, G*Hd)
        const Tensor o = model_.decode_step(gi_prev, state_, enc_, w_.w_extra);                 // (n, Hd + X)
        return autograd::log_softmax(model_.out->forward(o));                                   // (n, V)
    }

    void reorder(const std::vector<int64_t>& from) override {
        const Tokens ids(std::vector<int32_t>(from.begin(), from.end()), {static_cast<int64_t>(from.size())});   // (n',)
        for (CellState& s : state_) s = {rows(s.h, ids), rows(s.c, ids)};
        enc_.states = rows(enc_.states, ids);
        enc_.keys = rows(enc_.keys, ids);
        enc_.context = rows(enc_.context, ids);
        Mask m = Mask::full({ids.numel(), 1, enc_.src_mask.shape[2]}, 0);   // (n', 1, S)
        const int64_t S = enc_.src_mask.shape[2];
        for (int64_t i = 0; i < ids.numel(); i++)
            for (int64_t s = 0; s < S; s++) m[i * S + s] = enc_.src_mask[ids[i] * S + s];
        enc_.src_mask = m;
    }

private:
    RNNSeq2Seq& model_;
    RNNSeq2Seq::Encoded enc_;
    int64_t* positions_;
    LayerZero w_;
    std::vector<CellState> state_;
};

}  // namespace

std::unique_ptr<NextTokens> RNNSeq2Seq::start_decoding(const Tokens& src, const Mask& src_mask, const DecodingSetup& setup) {
    return std::make_unique<RNNRows>(*this, encode(src, src_mask), setup.positions);
}

}  // namespace models
