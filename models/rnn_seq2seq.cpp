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
    if (name == "sutskever") return Context::sutskever;
    if (name == "cho") return Context::cho;
    if (name == "bahdanau") return Context::bahdanau;
    throw std::invalid_argument("unknown context '" + name + "' (sutskever, cho or bahdanau)");
}

const char* context_name(Context c) {
    switch (c) {
        case Context::sutskever: return "sutskever";
        case Context::cho: return "cho";
        case Context::bahdanau: return "bahdanau";
    }
    return "?";
}

void RNNSeq2SeqConfig::validate() const {
    auto need = [](bool ok, const std::string& what) {
        if (!ok) throw std::invalid_argument("RNNSeq2SeqConfig: " + what);
    };
    need(src_vocab > 0 && tgt_vocab > 0, "vocab sizes must be positive");
    need(embed > 0 && hidden > 0, "embed and hidden must be positive, got " + std::to_string(embed) + " and " + std::to_string(hidden));
    need(layers > 0, "layers must be positive, got " + std::to_string(layers));
    need(context != Context::sutskever || !bidirectional,
         "context sutskever hands each encoder layer's final state to the decoder layer of the same depth, so the encoder must "
         "read one way, at the decoder's width (bidirectional = false); a bidirectional encoder is the attention model's (bahdanau)");
    need(context != Context::cho || !bidirectional,
         "context cho makes C from the last state of an encoder that reads one way, as Cho et al.'s does (bidirectional = false); "
         "a bidirectional encoder is the attention model's (bahdanau)");
    need(context != Context::bahdanau || score != nn::Score::dot || !bidirectional,
         "the dot score compares the decoder's state (Hd = " + std::to_string(hidden) + ") with the encoder's states (dirs*Hd = " +
             std::to_string(2 * hidden) + ") directly, s . h_j, so they must be equally wide: make the encoder read one way " +
             "(bidirectional = false; --unidirectional in the examples), or use the general score, whose W maps one width to " +
             "the other");
    nn::check_dropout_p(dropout, "RNNSeq2SeqConfig");
}

std::string RNNSeq2SeqConfig::describe() const {
    const char* kind = cell == CellKind::gru ? "GRU" : cell == CellKind::lstm ? "LSTM" : "RNN";
    std::string s = std::string(kind) + " encoder-decoder, ";
    if (context == Context::sutskever) s += "the encoder's final states start the decoder (Sutskever et al.)";
    else if (context == Context::cho) s += "C at every step (Cho et al.)";
    else s += "attention (Bahdanau et al.), " + std::string(nn::score_name(score)) + " score";
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
    const long double map = Hd * Hd + Hd;   // an (Hd, Hd) Linear and its bias: V, V' or W_s
    // X, the width of extra_i (RNNSeq2Seq::extra_size): C_i (dirs*Hd), C (Hd) or nothing
    const long double X = attention() ? dirs * Hd : context == Context::cho ? Hd : 0;
    const long double embeddings = V_src * E + V_tgt * E;
    const long double encoder = dirs * (cell_of(E) + (L - 1) * cell_of(dirs * Hd));   // layers above the first read both directions
    const long double maps = context == Context::cho ? 2 * map : context == Context::bahdanau ? map : 0;   // V and V', or W_s
    long double soft_attention = 0;
    if (attention()) {
        if (score == nn::Score::general) soft_attention = Hd * dirs * Hd;                       // w_key (Hd, dirs*Hd), no bias
        if (score == nn::Score::cosine) soft_attention = Hd * dirs * Hd + Hd + 1;               // w_key and its bias; log_temperature
        if (score == nn::Score::additive) soft_attention = Hd * dirs * Hd + Hd + Hd * Hd + Hd;  // w_key and its bias; w_query, no bias; v
    }
    const long double decoder = cell_of(E + X) + (L - 1) * cell_of(Hd);
    const long double out = V_tgt * (Hd + X) + V_tgt;
    const long double total = embeddings + encoder + maps + soft_attention + decoder + out;
    return total >= 0x1p63L ? INT64_MAX : static_cast<int64_t>(total);
}

int64_t RNNSeq2SeqConfig::parameter_tensors() const {
    // four per cell (weight_ih, weight_hh, bias_ih, bias_hh): L x dirs in the encoder, L in the
    // decoder; two embeddings; the output layer's weight and bias; V and V' (cho) or W_s
    // (bahdanau), a weight and a bias each; the attention's w_key (general 1, cosine and additive
    // 2), w_query and v (additive) or log_temperature (cosine)
    const long double L = layers, dirs = bidirectional ? 2 : 1;
    const long double maps = context == Context::cho ? 4 : context == Context::bahdanau ? 2 : 0;
    long double soft_attention = 0;
    if (attention()) soft_attention = score == nn::Score::dot ? 0 : score == nn::Score::general ? 1 : score == nn::Score::cosine ? 3 : 4;
    const long double total = 4 * L * dirs + 4 * L + 2 + 2 + maps + soft_attention;
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
    if (cfg.attention()) return (cfg.bidirectional ? 2 : 1) * cfg.hidden;   // C_i, as wide as an encoder state
    return cfg.context == Context::cho ? cfg.hidden : 0;                    // C, or nothing
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
    if (cfg.context == Context::cho) to_context = register_module("to_context", std::make_shared<nn::Linear>(Hd, Hd));   // V
    if (cfg.context != Context::sutskever) to_start = register_module("to_start", std::make_shared<nn::Linear>(Hd, Hd)); // V' or W_s
    if (cfg.attention())   // the query is s_{i-1} (Hd), the values the encoder's states (dirs*Hd)
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
    const int64_t L = cfg.layers, dirs = cfg.bidirectional ? 2 : 1;
    const Tokens ids = cfg.reverse_source ? reverse_rows(src, src_mask) : src;                // (B, S)
    const Tensor x = nn::dropout(src_embed->forward(ids), cfg.dropout, is_training());         // (B, S, E)
    nn::RecurrentOutput r;
    if (cfg.cell == CellKind::gru) r = static_cast<nn::GRU&>(*encoder).forward(x, lengths);
    else if (cfg.cell == CellKind::lstm) r = static_cast<nn::LSTM&>(*encoder).forward(x, lengths);
    else r = static_cast<nn::RNN&>(*encoder).forward(x, lengths);
    // the final state of encoder layer l, direction d (h_n's row l*dirs + d), (B, Hd)
    auto final_h = [&](int64_t l, int64_t d) { return squeeze(narrow(r.h_n, 0, l * dirs + d, 1), 0); };
    auto final_c = [&](int64_t l, int64_t d) { return squeeze(narrow(r.c_n, 0, l * dirs + d, 1), 0); };
    Encoded enc{r.output, Tensor(), Tensor(), {}, src_mask};                                  // states (B, S, dirs*Hd)
    if (cfg.context == Context::sutskever) {   // decoder layer l starts where encoder layer l stopped, (h, c) for an LSTM
        for (int64_t l = 0; l < L; l++)
            enc.start.push_back({final_h(l, 0), cfg.cell == CellKind::lstm ? final_c(l, 0) : Tensor()});   // (B, Hd) each
        return enc;
    }
    Tensor s0;   // cho and bahdanau: one first state s_0 through a map, for every decoder layer
    if (cfg.context == Context::cho) {   // C = tanh(V h_S), s_0 = tanh(V' C)
        enc.context = tanh(to_context->forward(final_h(L - 1, 0)));                 // (B, Hd)
        s0 = tanh(to_start->forward(enc.context));                                  // (B, Hd)
    } else {   // bahdanau: s_0 = tanh(W_s h_1<-), the backward direction's final state, at the first word (one way: h_S->)
        s0 = tanh(to_start->forward(final_h(L - 1, dirs - 1)));                     // (B, Hd)
        enc.keys = attention->keys(r.output);                                       // (B, S, A)
    }
    for (int64_t l = 0; l < L; l++) enc.start.push_back({s0, cfg.cell == CellKind::lstm ? Tensor::zeros(s0.shape()) : Tensor()});   // an LSTM's c from 0
    return enc;
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
    if (cfg.attention()) {
        const nn::SoftAttention::Output a = attention->forward(state.back().h, enc.keys, enc.states, enc.src_mask);
        extra = a.context;                                         // (n, dirs*Hd)
        if (weights) *weights = a.weights;                         // (n, S)
    } else if (cfg.context == Context::cho) {
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
    // 2) the decoder, one step at a time, from s_0
    std::vector<CellState> state = enc.start;
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
          w_(split_layer_zero((*model.cells)[0], model.cfg.embed)), state_(std::move(enc_.start)) {}   // state_ carries s_0 on

    Tensor append(const Tokens& tokens) override {
        const int64_t n = tokens.size(0);
        if (tokens.shape != Shape{state_[0].h.size(0), 1})
            throw std::invalid_argument("RNNSeq2Seq decoding: tokens must be (n, 1) for its " + std::to_string(state_[0].h.size(0)) +
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
