// Recurrent networks: a cell reads a sequence one step at a time, carrying a hidden state h from
// each step to the next; a layer runs a cell over a whole sequence. The three cells of torch.nn:
//   RNNCell   the tanh RNN (Elman 1990)
//   GRUCell   the gated recurrent unit (Cho et al. 2014)
//   LSTMCell  long short-term memory (Hochreiter & Schmidhuber 1997, with the forget gate of
//             Gers, Schmidhuber & Cummins 2000)
// and the layers RNN, GRU, LSTM: batch first, stacked, optionally bidirectional, with padding.
// Everything follows PyTorch exactly (gate order, the GRU's reset gate after the hidden product,
// parameter names and shapes, initialization, what padding does), so a torch state_dict loads by
// name; tests/test_recurrent.cpp holds outputs and gradients to torch.nn.GRU and torch.nn.LSTM.
//
// Dimension letters of this file: B batch, T steps (the sequence's length), I input size,
// Hd hidden size (the width of the state; H is taken, it counts attention heads), G gates stacked
// in one weight (1 for the tanh RNN, 3 for the GRU, 4 for the LSTM), L layers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/module.h"

namespace nn {

// ---- one step of each cell, as plain functions (the cells and layers below call them) ----
//
// The input's part of every gate, gi = x W_ih^T + b_ih (B, G*Hd), does not depend on the state,
// so a layer computes it for all T steps in one matmul before its time loop. Each step function
// starts from it and adds the state's part, h W_hh^T + b_hh. The gates sit side by side in the
// last dim, in PyTorch's order: gate k is columns [k*Hd, (k+1)*Hd) of gi, of weight_hh's rows
// and of bias_hh. Each throws std::invalid_argument naming itself and every shape unless
// gi is (B, G*Hd), h (and c) (B, Hd), weight_hh (G*Hd, Hd) and bias_hh (G*Hd,).

// tanh RNN, G = 1:  h' = tanh(W_ih x + b_ih + W_hh h + b_hh).   gi (B, Hd), h (B, Hd) -> h' (B, Hd)
Tensor rnn_tanh_step(const Tensor& gi, const Tensor& h, const Tensor& weight_hh, const Tensor& bias_hh);

// GRU, G = 3, in the order r (reset), z (update), n (new state candidate):
//   r  = σ(W_ir x + b_ir + W_hr h + b_hr)
//   z  = σ(W_iz x + b_iz + W_hz h + b_hz)
//   n  = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))   r scales the hidden product (PyTorch, cuDNN); Cho et al.'s
//                                                     (2014) own GRU scales h before it: tanh(W x + U (r ⊙ h))
//   h' = (1 − z) ⊙ n + z ⊙ h                          z = 1 keeps the old state
// gi (B, 3Hd), h (B, Hd) -> h' (B, Hd)
Tensor gru_step(const Tensor& gi, const Tensor& h, const Tensor& weight_hh, const Tensor& bias_hh);

// The state a cell carries: h, and for the LSTM also its cell state c (undefined for RNN and GRU).
struct CellState {
    Tensor h;   // (B, Hd)
    Tensor c;   // (B, Hd): LSTM only
};

// LSTM, G = 4, in the order i (input gate), f (forget gate), g (candidate), o (output gate):
//   i  = σ(W_ii x + b_ii + W_hi h + b_hi)      f = σ(W_if x + b_if + W_hf h + b_hf)
//   g  = tanh(W_ig x + b_ig + W_hg h + b_hg)   o = σ(W_io x + b_io + W_ho h + b_ho)
//   c' = f ⊙ c + i ⊙ g                          keep some of the old memory, write some new
//   h' = o ⊙ tanh(c')                           show some of it
// gi (B, 4Hd), state.h and state.c (B, Hd) -> {h', c'} (B, Hd) each
CellState lstm_step(const Tensor& gi, const CellState& state, const Tensor& weight_hh, const Tensor& bias_hh);

// ---- cells: one step, with their own weights ----

// The weights every cell has, named and shaped as in torch.nn.RNNCell / GRUCell / LSTMCell, each
// initialized U(-1/sqrt(Hd), 1/sqrt(Hd)) as PyTorch does.
class RecurrentCell : public Module {
public:
    // x (B, I) -> gi (B, G*Hd) = x W_ih^T + b_ih, the input's part of every gate (what step() takes)
    Tensor input_part(const Tensor& x) const;

    int64_t input_size, hidden_size;   // I, Hd
    Tensor weight_ih;   // (G*Hd, I): the gates' input weights stacked, e.g. W_ir; W_iz; W_in for the GRU
    Tensor weight_hh;   // (G*Hd, Hd): the gates' state weights stacked
    Tensor bias_ih;     // (G*Hd,)
    Tensor bias_hh;     // (G*Hd,)

protected:
    RecurrentCell(const char* name, int64_t gates, int64_t input_size, int64_t hidden_size);
    // An undefined h means zeros (B, Hd), as in PyTorch.
    Tensor state_or_zeros(const Tensor& h, const Tensor& x) const;
    const char* name_;
};

// Each cell: forward(x, h) runs one step from the input x (B, I); step(gi, h) runs it from the
// input part gi = input_part(x) computed already, e.g. for all steps at once. h undefined: zeros.
class RNNCell : public RecurrentCell {
public:
    RNNCell(int64_t input_size, int64_t hidden_size) : RecurrentCell("RNNCell", 1, input_size, hidden_size) {}
    Tensor forward(const Tensor& x, const Tensor& h = Tensor()) const;   // x (B, I), h (B, Hd) -> h' (B, Hd)
    Tensor step(const Tensor& gi, const Tensor& h) const { return rnn_tanh_step(gi, h, weight_hh, bias_hh); }
};

class GRUCell : public RecurrentCell {
public:
    GRUCell(int64_t input_size, int64_t hidden_size) : RecurrentCell("GRUCell", 3, input_size, hidden_size) {}
    Tensor forward(const Tensor& x, const Tensor& h = Tensor()) const;   // x (B, I), h (B, Hd) -> h' (B, Hd)
    Tensor step(const Tensor& gi, const Tensor& h) const { return gru_step(gi, h, weight_hh, bias_hh); }
};

class LSTMCell : public RecurrentCell {
public:
    LSTMCell(int64_t input_size, int64_t hidden_size) : RecurrentCell("LSTMCell", 4, input_size, hidden_size) {}
    CellState forward(const Tensor& x, const CellState& state = {}) const;   // x (B, I), h and c (B, Hd) -> {h', c'}
    CellState step(const Tensor& gi, const CellState& state) const { return lstm_step(gi, state, weight_hh, bias_hh); }
};

// ---- layers: a cell run over a sequence ----

struct RecurrentOptions {
    int64_t input_size = 0;       // I: width of each input vector (required)
    int64_t hidden_size = 0;      // Hd: width of the state (required)
    int64_t num_layers = 1;       // L: stacked layers; layer l > 0 reads layer l-1's output (B, T, dirs*Hd)
    bool bidirectional = false;   // also read each layer's input backwards; the two directions' outputs
                                  // are concatenated on the last dim, forward first (dirs = 2)
    float dropout = 0.0f;         // on each layer's output except the last, in training only (as torch)
};

struct RecurrentOutput {
    Tensor output;   // (B, T, dirs*Hd): the last layer's state after each step; 0 at padded steps
    Tensor h_n;      // (L*dirs, B, Hd): the final state of layer l, direction d in row l*dirs + d;
                     // the reverse direction's is its state after reading position 0
    Tensor c_n;      // (L*dirs, B, Hd): the LSTM's final cell states; undefined for RNN and GRU
};

enum class CellKind { rnn_tanh, gru, lstm };
// "gru", "lstm", "rnn" (the tanh RNN); throws std::invalid_argument listing them for any other name.
CellKind cell_kind_from_name(const std::string& name);
// G, the gates stacked in a cell's weights: 1 (tanh RNN), 3 (GRU: r, z, n), 4 (LSTM: i, f, g, o).
int64_t gate_count(CellKind kind);

// One cell's four parameters inside a layer: handles to the tensors named_parameters() lists.
struct CellWeights {
    Tensor weight_ih;   // (G*Hd, I) in layer 0, (G*Hd, dirs*Hd) above it
    Tensor weight_hh;   // (G*Hd, Hd)
    Tensor bias_ih;     // (G*Hd,)
    Tensor bias_hh;     // (G*Hd,)
};

// What RNN, GRU and LSTM share (torch.nn.RNNBase). Parameters, per layer l and direction, named as
// torch.nn.GRU names them: weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, then
// weight_ih_l0_reverse, ... when bidirectional, then l1, ...; each initialized
// U(-1/sqrt(Hd), 1/sqrt(Hd)) as PyTorch does.
//
// forward's arguments, besides x (B, T, I):
//   lengths  optional, B entries in [1, T]: row b is x[b, :lengths[b]], the rest padding. Its state
//            stops changing after its last real step and its outputs there are 0; the reverse
//            direction starts at its last real step, lengths[b] - 1. So a padded batch gives
//            each row the outputs and final states it gets alone (torch's pack_padded_sequence).
//   h0, c0   optional initial states (L*dirs, B, Hd), in h_n's order; undefined: zeros.
// Each throws std::invalid_argument naming the layer and the shapes for an input of the wrong
// width, bad lengths, or an initial state of the wrong shape.
class RNNBase : public Module {
public:
    const CellKind kind;
    const RecurrentOptions options;
    int64_t directions() const { return options.bidirectional ? 2 : 1; }   // dirs
    // The weights of layer l, direction d (0 forward, 1 reverse).
    const CellWeights& cell(int64_t layer, int64_t direction) const { return cells_.at(layer * directions() + direction); }

protected:
    RNNBase(CellKind kind, const RecurrentOptions& options);
    RecurrentOutput run(const Tensor& x, const std::vector<int64_t>& lengths, const Tensor& h0, const Tensor& c0) const;

private:
    const char* name() const;   // "RNN", "GRU" or "LSTM", for error messages
    CellState step(const Tensor& gi, const CellState& state, const CellWeights& w) const;
    struct Pass { Tensor output; CellState last; };   // (B, T, Hd) and the state after the last step read
    Pass run_direction(const Tensor& input, const CellWeights& w, bool reverse, const std::vector<Tensor>& real,
                       CellState state) const;
    std::vector<CellWeights> cells_;   // L*dirs, layer l direction d at l*dirs + d
};

// The layers. forward: x (B, T, I) -> {output (B, T, dirs*Hd), h_n (L*dirs, B, Hd)}, and the
// LSTM's c_n (L*dirs, B, Hd). E.g.
//   nn::GRU gru({.input_size = I, .hidden_size = Hd, .num_layers = 2, .bidirectional = true});
//   nn::RecurrentOutput r = gru.forward(x, lengths);   // r.output (B, T, 2Hd), r.h_n (4, B, Hd)
class RNN : public RNNBase {   // the tanh RNN
public:
    explicit RNN(const RecurrentOptions& options) : RNNBase(CellKind::rnn_tanh, options) {}
    RecurrentOutput forward(const Tensor& x, const std::vector<int64_t>& lengths = {}, const Tensor& h0 = Tensor()) const {
        return run(x, lengths, h0, Tensor());
    }
};

class GRU : public RNNBase {
public:
    explicit GRU(const RecurrentOptions& options) : RNNBase(CellKind::gru, options) {}
    RecurrentOutput forward(const Tensor& x, const std::vector<int64_t>& lengths = {}, const Tensor& h0 = Tensor()) const {
        return run(x, lengths, h0, Tensor());
    }
};

class LSTM : public RNNBase {
public:
    explicit LSTM(const RecurrentOptions& options) : RNNBase(CellKind::lstm, options) {}
    RecurrentOutput forward(const Tensor& x, const std::vector<int64_t>& lengths = {}, const Tensor& h0 = Tensor(),
                            const Tensor& c0 = Tensor()) const {
        return run(x, lengths, h0, c0);
    }
};

}  // namespace nn
