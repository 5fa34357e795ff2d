#include "nn/recurrent.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "nn/dropout.h"
#include "nn/init.h"
#include "nn/linear.h"

namespace nn {

using autograd::shape_str;

namespace {

std::string shape_of(const Tensor& t) { return t.defined() ? shape_str(t.shape()) : "(undefined)"; }

// Gate k of a tensor whose last dim holds the gates side by side: columns [k*Hd, (k+1)*Hd).
Tensor gate(const Tensor& t, int64_t k, int64_t Hd) { return narrow(t, -1, k * Hd, Hd); }   // (B, Hd)

// The shapes every step function needs (recurrent.h); c only for the LSTM.
void check_step(const char* op, int64_t G, const Tensor& gi, const Tensor& h, const Tensor& weight_hh, const Tensor& bias_hh,
                const Tensor* c = nullptr) {
    const bool defined = gi.defined() && h.defined() && weight_hh.defined() && bias_hh.defined() && (!c || c->defined());
    const int64_t Hd = defined && h.dim() == 2 ? h.size(1) : 0;
    if (Hd > 0 && gi.dim() == 2 && gi.size(0) == h.size(0) && gi.size(1) == G * Hd && weight_hh.shape() == Shape{G * Hd, Hd} &&
        bias_hh.shape() == Shape{G * Hd} && (!c || c->shape() == h.shape()))
        return;
    const std::string g = G == 1 ? "" : std::to_string(G) + " ";
    throw std::invalid_argument(std::string(op) + ": gi " + shape_of(gi) + ", h " + shape_of(h) + (c ? ", c " + shape_of(*c) : "") +
                                ", weight_hh " + shape_of(weight_hh) + " and bias_hh " + shape_of(bias_hh) +
                                " do not fit: expected gi (B, " + g + "Hd), h" + (c ? " and c" : "") + " (B, Hd), weight_hh (" + g +
                                "Hd, Hd), bias_hh (" + g + "Hd,)");
}

// A parameter drawn U(-1/sqrt(Hd), 1/sqrt(Hd)): PyTorch's init of every recurrent weight and bias.
Tensor recurrent_init(const Shape& shape, int64_t Hd) {
    Tensor t = Tensor::empty(shape);
    const float k = 1.0f / std::sqrt(static_cast<float>(Hd));
    init::uniform_(t, -k, k);
    return t;
}

// n tensors of one shape -> one tensor with a new dim of size n at `dim` (torch.stack).
Tensor stack(const std::vector<Tensor>& ts, int64_t dim) {
    std::vector<Tensor> parts;
    for (const Tensor& t : ts) parts.push_back(unsqueeze(t, dim));
    return cat(parts, dim);
}

// lengths (B entries) -> one mask per step t, (B, 1): 1 where row b is real at step t (t < lengths[b]),
// 0 where it is padding. No lengths: no masks, every row is real at every step.
std::vector<Tensor> step_masks(const std::vector<int64_t>& lengths, int64_t B, int64_t T, const std::string& op) {
    if (lengths.empty()) return {};
    if (static_cast<int64_t>(lengths.size()) != B)
        throw std::invalid_argument(op + ": lengths has " + std::to_string(lengths.size()) + " entries for a batch of " +
                                    std::to_string(B) + " rows");
    for (size_t b = 0; b < lengths.size(); b++)
        if (lengths[b] < 1 || lengths[b] > T)
            throw std::invalid_argument(op + ": lengths[" + std::to_string(b) + "] = " + std::to_string(lengths[b]) +
                                        " is outside [1, T] = [1, " + std::to_string(T) + "]");
    std::vector<Tensor> real;
    for (int64_t t = 0; t < T; t++) {
        Tensor m = Tensor::empty({B, 1});   // (B, 1)
        for (int64_t b = 0; b < B; b++) m.data()[b] = t < lengths[b] ? 1.0f : 0.0f;
        real.push_back(m);
    }
    return real;
}

// The new state in rows where m = 1, the old one where m = 0: m ⊙ next + (1 − m) ⊙ prev, m (B, 1).
// Written with the ops, so each row's gradient goes to the state it took.
Tensor where_real(const Tensor& m, const Tensor& next, const Tensor& prev) { return m * next + (1.0f - m) * prev; }

// Row k of an initial state (L*dirs, B, Hd), or zeros when there is none.
Tensor initial(const Tensor& s0, int64_t k, int64_t B, int64_t Hd) {
    return s0.defined() ? squeeze(narrow(s0, 0, k, 1), 0) : Tensor::zeros({B, Hd});   // (B, Hd)
}

void check_initial(const Tensor& s0, const char* what, const Shape& want, const std::string& op) {
    if (s0.defined() && s0.shape() != want)
        throw std::invalid_argument(op + ": " + what + " " + shape_str(s0.shape()) + " should be (layers*directions, B, Hd) = " +
                                    shape_str(want));
}

}  // namespace

CellKind cell_kind_from_name(const std::string& name) {
    if (name == "gru") return CellKind::gru;
    if (name == "lstm") return CellKind::lstm;
    if (name == "rnn") return CellKind::rnn_tanh;
    throw std::invalid_argument("unknown recurrent cell '" + name + "' (gru, lstm or rnn)");
}

int64_t gate_count(CellKind kind) { return kind == CellKind::rnn_tanh ? 1 : kind == CellKind::gru ? 3 : 4; }

// ---------------------------------------------------------------- one step of each cell

Tensor rnn_tanh_step(const Tensor& gi, const Tensor& h, const Tensor& weight_hh, const Tensor& bias_hh) {
    check_step("rnn_tanh_step", 1, gi, h, weight_hh, bias_hh);
    return tanh(gi + linear(h, weight_hh, bias_hh));   // (B, Hd): h' = tanh(W_ih x + b_ih + W_hh h + b_hh)
}

Tensor gru_step(const Tensor& gi, const Tensor& h, const Tensor& weight_hh, const Tensor& bias_hh) {
    check_step("gru_step", 3, gi, h, weight_hh, bias_hh);
    if (autograd::fused_kernels_enabled()) return autograd::fused::gru_cell(gi, linear(h, weight_hh, bias_hh), h);   // fused: one pass after gh
    const int64_t Hd = h.size(1);
    const Tensor gh = linear(h, weight_hh, bias_hh);                // (B, 3Hd): W_h* h + b_h* for r, z, n
    const Tensor r = sigmoid(gate(gi, 0, Hd) + gate(gh, 0, Hd));    // (B, Hd): r = σ(W_ir x + b_ir + W_hr h + b_hr)
    const Tensor z = sigmoid(gate(gi, 1, Hd) + gate(gh, 1, Hd));    // (B, Hd): z = σ(W_iz x + b_iz + W_hz h + b_hz)
    const Tensor n = tanh(gate(gi, 2, Hd) + r * gate(gh, 2, Hd));   // (B, Hd): n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))
    return (1.0f - z) * n + z * h;                                  // (B, Hd): h' = (1 − z) ⊙ n + z ⊙ h
}

CellState lstm_step(const Tensor& gi, const CellState& state, const Tensor& weight_hh, const Tensor& bias_hh) {
    check_step("lstm_step", 4, gi, state.h, weight_hh, bias_hh, &state.c);
    const int64_t Hd = state.h.size(1);
    const Tensor gates = gi + linear(state.h, weight_hh, bias_hh);   // (B, 4Hd): W_i* x + b_i* + W_h* h + b_h* for i, f, g, o
    const Tensor i = sigmoid(gate(gates, 0, Hd));                    // (B, Hd): i, how much of g to write
    const Tensor f = sigmoid(gate(gates, 1, Hd));                    // (B, Hd): f, how much of c to keep
    const Tensor g = tanh(gate(gates, 2, Hd));                       // (B, Hd): g, the values to write
    const Tensor o = sigmoid(gate(gates, 3, Hd));                    // (B, Hd): o, how much of the memory to show
    const Tensor c = f * state.c + i * g;                            // (B, Hd): c' = f ⊙ c + i ⊙ g
    return {o * tanh(c), c};                                         // (B, Hd) each: h' = o ⊙ tanh(c'), and c'
}

// ---------------------------------------------------------------- cells

RecurrentCell::RecurrentCell(const char* name, int64_t gates, int64_t input_size_, int64_t hidden_size_)
    : input_size(input_size_), hidden_size(hidden_size_), name_(name) {
    if (input_size <= 0 || hidden_size <= 0)
        throw std::invalid_argument(std::string(name) + ": sizes must be positive, got input_size=" + std::to_string(input_size) +
                                    " hidden_size=" + std::to_string(hidden_size));
    const int64_t G = gates, Hd = hidden_size;
    weight_ih = register_parameter("weight_ih", recurrent_init({G * Hd, input_size}, Hd));
    weight_hh = register_parameter("weight_hh", recurrent_init({G * Hd, Hd}, Hd));
    bias_ih = register_parameter("bias_ih", recurrent_init({G * Hd}, Hd));
    bias_hh = register_parameter("bias_hh", recurrent_init({G * Hd}, Hd));
}

Tensor RecurrentCell::input_part(const Tensor& x) const {
    if (!x.defined() || x.dim() != 2 || x.size(1) != input_size)
        throw std::invalid_argument(std::string(name_) + ": input " + shape_of(x) + " does not match input_size " +
                                    std::to_string(input_size) + " (expected (B, " + std::to_string(input_size) + "))");
    return linear(x, weight_ih, bias_ih);   // (B, G*Hd)
}

Tensor RecurrentCell::state_or_zeros(const Tensor& h, const Tensor& x) const {
    return h.defined() ? h : Tensor::zeros({x.size(0), hidden_size});   // (B, Hd)
}

Tensor RNNCell::forward(const Tensor& x, const Tensor& h) const { return step(input_part(x), state_or_zeros(h, x)); }

Tensor GRUCell::forward(const Tensor& x, const Tensor& h) const { return step(input_part(x), state_or_zeros(h, x)); }

CellState LSTMCell::forward(const Tensor& x, const CellState& state) const {
    const Tensor gi = input_part(x);   // (B, 4Hd); checks x before x.size(0) is read below
    return step(gi, {state_or_zeros(state.h, x), state_or_zeros(state.c, x)});
}

// ---------------------------------------------------------------- layers

RNNBase::RNNBase(CellKind kind_, const RecurrentOptions& options_) : kind(kind_), options(options_) {
    const RecurrentOptions& o = options;
    if (o.input_size <= 0 || o.hidden_size <= 0 || o.num_layers <= 0)
        throw std::invalid_argument(std::string(name()) + ": input_size, hidden_size and num_layers must be positive, got " +
                                    std::to_string(o.input_size) + ", " + std::to_string(o.hidden_size) + ", " +
                                    std::to_string(o.num_layers));
    check_dropout_p(o.dropout, name());
    const int64_t G = gate_count(kind), Hd = o.hidden_size, dirs = directions();
    for (int64_t l = 0; l < o.num_layers; l++) {
        const int64_t in = l == 0 ? o.input_size : dirs * Hd;   // a deeper layer reads both directions of the one below
        for (int64_t d = 0; d < dirs; d++) {
            const std::string suffix = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
            CellWeights w;
            w.weight_ih = register_parameter("weight_ih" + suffix, recurrent_init({G * Hd, in}, Hd));
            w.weight_hh = register_parameter("weight_hh" + suffix, recurrent_init({G * Hd, Hd}, Hd));
            w.bias_ih = register_parameter("bias_ih" + suffix, recurrent_init({G * Hd}, Hd));
            w.bias_hh = register_parameter("bias_hh" + suffix, recurrent_init({G * Hd}, Hd));
            cells_.push_back(w);
        }
    }
}

const char* RNNBase::name() const { return kind == CellKind::rnn_tanh ? "RNN" : kind == CellKind::gru ? "GRU" : "LSTM"; }

CellState RNNBase::step(const Tensor& gi, const CellState& state, const CellWeights& w) const {
    switch (kind) {
        case CellKind::rnn_tanh: return {rnn_tanh_step(gi, state.h, w.weight_hh, w.bias_hh), Tensor()};
        case CellKind::gru: return {gru_step(gi, state.h, w.weight_hh, w.bias_hh), Tensor()};
        case CellKind::lstm: break;
    }
    return lstm_step(gi, state, w.weight_hh, w.bias_hh);
}

RNNBase::Pass RNNBase::run_direction(const Tensor& input, const CellWeights& w, bool reverse, const std::vector<Tensor>& real,
                                     CellState state) const {
    const int64_t T = input.size(1);
    // 1) the input's part of every gate at every step, in one matmul: gi[b, t] = input[b, t] W_ih^T + b_ih
    const Tensor gi = linear(input, w.weight_ih, w.bias_ih);   // (B, T, G*Hd)
    // 2) the recurrence, one step at a time in reading order: t = 0 .. T-1, or T-1 .. 0 in reverse
    std::vector<Tensor> out(static_cast<size_t>(T));   // out[t] (B, Hd): the output at position t
    for (int64_t k = 0; k < T; k++) {
        const int64_t t = reverse ? T - 1 - k : k;
        const CellState next = step(squeeze(narrow(gi, 1, t, 1), 1), state, w);   // (B, Hd) each, from gi[:, t] (B, G*Hd)
        if (real.empty()) {   // no padding
            state = next;
            out[t] = next.h;
            continue;
        }
        // A row that is padding at position t keeps its state and outputs 0 there. Reading in
        // reverse, a row so keeps its initial state through the padding at its end, and its
        // first real step is its last token, position lengths[b] - 1.
        const Tensor& m = real[t];                                          // (B, 1): 1 real, 0 padding
        state.h = where_real(m, next.h, state.h);                           // (B, Hd)
        if (kind == CellKind::lstm) state.c = where_real(m, next.c, state.c);   // (B, Hd)
        out[t] = m * next.h;                                                // (B, Hd): 0 at padding
    }
    return {stack(out, 1), state};   // (B, T, Hd), and the state after the last step read
}

RecurrentOutput RNNBase::run(const Tensor& x, const std::vector<int64_t>& lengths, const Tensor& h0, const Tensor& c0) const {
    const std::string op = name();
    const RecurrentOptions& o = options;
    if (!x.defined() || x.dim() != 3 || x.size(2) != o.input_size || x.size(1) == 0)
        throw std::invalid_argument(op + ": input " + shape_of(x) + " does not match input_size " + std::to_string(o.input_size) +
                                    " (expected (B, T, " + std::to_string(o.input_size) + ") with T >= 1)");
    const int64_t B = x.size(0), T = x.size(1), Hd = o.hidden_size, L = o.num_layers, dirs = directions();
    check_initial(h0, "h0", {L * dirs, B, Hd}, op);
    check_initial(c0, "c0", {L * dirs, B, Hd}, op);
    const std::vector<Tensor> real = step_masks(lengths, B, T, op);   // T masks (B, 1); none without lengths

    Tensor input = x;                // (B, T, I), then each layer's output (B, T, dirs*Hd)
    std::vector<Tensor> h_n, c_n;    // each cell's last state (B, Hd), in h0's order
    for (int64_t l = 0; l < L; l++) {
        if (l > 0) input = dropout(input, o.dropout, is_training());   // (B, T, dirs*Hd): between layers only, as torch
        std::vector<Tensor> outputs;   // one per direction, (B, T, Hd)
        for (int64_t d = 0; d < dirs; d++) {
            const int64_t k = l * dirs + d;   // this cell's row of h0 and h_n
            const CellState start{initial(h0, k, B, Hd), kind == CellKind::lstm ? initial(c0, k, B, Hd) : Tensor()};   // (B, Hd)
            const Pass pass = run_direction(input, cells_[k], /*reverse=*/d == 1, real, start);
            outputs.push_back(pass.output);
            h_n.push_back(pass.last.h);
            if (kind == CellKind::lstm) c_n.push_back(pass.last.c);
        }
        input = cat(outputs, -1);   // (B, T, dirs*Hd): forward direction first
    }
    return {input, stack(h_n, 0), kind == CellKind::lstm ? stack(c_n, 0) : Tensor()};   // (B, T, dirs*Hd); (L*dirs, B, Hd)
}

}  // namespace nn
