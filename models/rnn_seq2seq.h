// The recurrent encoder-decoders, the models attention was invented for, each as its paper
// builds it (Context below): Sutskever, Vinyals & Le (2014), Cho et al. (2014), and Bahdanau, Cho
// & Bengio (2014) with soft attention.
//
//   src ids (B, S) -> Embedding -> encoder RNN (L layers) -> states h_1..h_S (B, S, dirs*Hd), final states
//   decoder, one step i at a time:  s_i = cell([embed(y_{i-1}); extra_i], s_{i-1}),  s_0 from the encoder
//                                   logits_i = W_out [s_i; extra_i]
// where s_0 and extra_i are, by the config's context:
//   sutskever:  each decoder layer starts from the final state of the encoder layer of the same
//               depth: (h, c) for an LSTM, h for a GRU or tanh RNN, with no map between (so the
//               encoder reads one way, at the decoder's width). extra_i is nothing: every word has
//               to come out of that state. (The paper: 4 LSTM layers, the source reversed.)
//   cho:        C = tanh(V h_S), from the top encoder layer's last state; s_0 = tanh(V' C) in every
//               decoder layer (an LSTM's c from 0); extra_i = C at every step, beside the previous
//               word and at the output layer. (The paper: one GRU layer a side. Its decoder's gates
//               read C through matrices of their own, here layer 0's input columns for C.)
//   bahdanau:   soft attention: extra_i = C_i = sum_j alpha_ij h_j, nn/soft_attention.h with the
//               query s_{i-1} and the config's score; s_0 = tanh(W_s h_1<-), the backward direction's
//               state at the first source word (a one-way encoder: h_S->), in every decoder layer.
//               The encoder reads both ways, as in the paper, or one way (the dot score needs it).
// Both Cho et al. and Bahdanau et al. make the next word's scores with a maxout layer over the
// state, the previous word and the context; here W_out is one linear layer over [s_i; extra_i].
// Their equations leave out the biases; V, V' and W_s here have them. With L > 1 layers (the two
// papers have one), every decoder layer starts from the same s_0 and extra_i enters layer 0.
// The flaws attention fixes: without it every output word comes from the same fixed-size state,
// whatever part of the source it depends on, and a long source must be squeezed into it.
// reverse_source reads each source sentence backwards (Sutskever et al.'s trick: the first words
// of the output then sit close to the encoder's last steps).
//
// Trained with teacher forcing on the same batches as the Transformer, and decoded by the same
// greedy and beam search (models/seq2seq.h, models/decoding.h).
#pragma once
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "models/seq2seq.h"
#include "nn/nn.h"

namespace models {

enum class Context {   // how the source reaches the decoder: the model of which paper
    sutskever,   // the encoder's final states are the decoder's first states (Sutskever et al. 2014)
    cho,         // C = tanh(V h_S) at every step and at the output layer, s_0 = tanh(V' C) (Cho et al. 2014)
    bahdanau,    // soft attention, C_i at every step and at the output layer, s_0 = tanh(W_s h_1<-) (Bahdanau et al. 2014)
};
// "sutskever", "cho", "bahdanau"; throws std::invalid_argument listing them for any other name.
Context context_from_name(const std::string& name);
const char* context_name(Context c);

// The defaults are Sutskever et al.'s model, one layer a side.
struct RNNSeq2SeqConfig {
    int64_t src_vocab = 11;             // V_src
    int64_t tgt_vocab = 11;             // V_tgt
    int64_t embed = 64;                 // E: the width of a word's embedding
    int64_t hidden = 128;               // Hd: the decoder's state, and each encoder direction's
    int64_t layers = 1;                 // L: stacked layers in the encoder and in the decoder
    nn::CellKind cell = nn::CellKind::lstm;
    Context context = Context::sutskever;   // which paper's model
    bool bidirectional = false;         // the encoder reads both ways: bahdanau only (sutskever and cho read one way)
    nn::Score score = nn::Score::additive;  // bahdanau: the attention's score (dot needs bidirectional = false)
    bool reverse_source = false;        // read each source sentence backwards
    float dropout = 0.1f;               // on the embeddings, between layers, and before the output layer

    bool attention() const { return context == Context::bahdanau; }
    void validate() const;              // throws std::invalid_argument naming the bad field
    std::string describe() const;       // "GRU encoder-decoder, attention (Bahdanau et al.), additive score, E=64 Hd=128 L=1 bidirectional ..."
    // The number of floats in the model's parameters (RNNSeq2Seq(cfg).num_parameters()), from the
    // sizes alone, without building it. INT64_MAX when the count does not fit in 64 bits.
    int64_t parameter_count() const;
    // The number of parameter tensors (RNNSeq2Seq(cfg).named_parameters().size()), as
    // TransformerConfig::parameter_tensors.
    int64_t parameter_tensors() const;
};

class RNNSeq2Seq : public Seq2Seq {
public:
    explicit RNNSeq2Seq(const RNNSeq2SeqConfig& cfg);

    // What the encoder gives the decoder, for B sentences.
    struct Encoded {
        Tensor states;                      // (B, S, dirs*Hd): h_1..h_S, 0 at padded positions
        Tensor keys;                        // (B, S, A): the attention's keys (bahdanau only)
        Tensor context;                     // (B, Hd): C (cho only)
        std::vector<nn::CellState> start;   // L entries of (B, Hd): s_0 of each decoder layer (and its c for an LSTM)
        Mask src_mask;                      // (B, 1, S)
    };
    Encoded encode(const Tokens& src, const Mask& src_mask);
    // One decoder step for n rows: gi_prev (n, G*Hd), the previous word's part of layer 0's gates
    // (its embedding times layer 0's first E input columns, plus b_ih: logits() makes all steps'
    // in one product); state, the cells' states (L entries of (n, Hd)), updated in place; w_extra,
    // layer 0's other input columns (those of extra_i) -> [s_i; extra_i] (n, Hd + X), the output
    // layer's input. weights, if given, gets the attention's alpha (n, S).
    Tensor decode_step(const Tensor& gi_prev, std::vector<nn::CellState>& state, const Encoded& enc, const Tensor& w_extra,
                       Tensor* weights = nullptr);

    // Teacher forcing (tgt_mask is not needed: the decoder reads one position at a time) -> (B, T, V).
    Tensor logits(const Tokens& src, const Tokens& tgt_in, const Mask& src_mask, const Mask& tgt_mask = Mask()) override;
    // Training's loss: the output layer and the loss in one (nn::linear_cross_entropy).
    Tensor loss(const Batch& b, const nn::CrossEntropyOptions& opt) override;
    std::unique_ptr<NextTokens> start_decoding(const Tokens& src, const Mask& src_mask, const DecodingSetup& setup) override;
    int64_t tgt_vocab() const override { return cfg.tgt_vocab; }
    int64_t max_len() const override { return std::numeric_limits<int64_t>::max(); }   // a state carries any length

    RNNSeq2SeqConfig cfg;
    std::shared_ptr<nn::Embedding> src_embed, tgt_embed;
    std::shared_ptr<nn::RNNBase> encoder;                     // nn::GRU, nn::LSTM or nn::RNN
    std::shared_ptr<nn::Linear> to_context;                   // cho: V (Hd, Hd), C = tanh(V h_S)
    std::shared_ptr<nn::Linear> to_start;                     // cho: V' (Hd, Hd), s_0 = tanh(V' C); bahdanau: W_s (Hd, Hd)
    std::shared_ptr<nn::SoftAttention> attention;             // bahdanau only
    std::shared_ptr<nn::ModuleList<nn::RecurrentCell>> cells; // L decoder cells
    std::shared_ptr<nn::Linear> out;                          // (V, Hd [+ extra]): the scores of the next word
    void keep_attention_weights(bool on) override { keep_attention = on; }
    bool keep_attention = false;   // true: logits() keeps alpha in last_attention (bahdanau only)
    Tensor last_attention;         // (B, T, S): alpha of the last logits() call, for pictures, when kept

private:
    // Teacher forcing up to the output layer: its input [s_i; extra_i] at every step, after dropout (B, T, Hd + X).
    Tensor outputs(const Tokens& src, const Tokens& tgt_in, const Mask& src_mask);
    int64_t extra_size() const;   // the width of extra_i: 0, Hd (C) or dirs*Hd (C_i)
};

// Rows of a source batch read backwards, padding left where it is: [5 3 9 0 0] -> [9 3 5 0 0].
Tokens reverse_rows(const Tokens& src, const Mask& src_mask);

}  // namespace models
