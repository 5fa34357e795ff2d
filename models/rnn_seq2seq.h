// The recurrent encoder-decoder, the model attention was invented for: Sutskever, Vinyals & Le
// (2014) and Cho et al. (2014), then Bahdanau, Cho & Bengio (2014) with soft attention.
//
//   src ids (B, S) -> Embedding -> encoder RNN (bidirectional, L layers) -> states h_1..h_S (B, S, dirs*Hd)
//                                                                        -> final states -> C = tanh(W_c [h_fwd; h_bwd])
//   decoder, one step i at a time:  s_i = cell([embed(y_{i-1}); extra_i], s_{i-1}),  s_0 = C
//                                   logits_i = W_out [s_i; extra_i]
// where extra_i is, by the config:
//   no attention, context = initial_state:  nothing. C reaches the decoder only as its first state
//                                           (Sutskever et al.): every word has to come out of it.
//   no attention, context = every_step:     C itself, at every step beside the previous word (Cho et al.).
//   attention (dot, cosine, additive):      C_i = sum_j alpha_ij h_j, the soft attention of
//                                           nn/soft_attention.h with the query s_{i-1} (Bahdanau et al.).
// The two flaws attention fixes: without it every output word comes from the same fixed-size C,
// whatever part of the source it depends on, and a long source must be squeezed into C.
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

enum class Context {
    initial_state,   // C is the decoder's first state (Sutskever et al. 2014)
    every_step,      // C is also fed at every step and to the output layer (Cho et al. 2014)
};
// "initial_state", "every_step"; throws std::invalid_argument listing them for any other name.
Context context_from_name(const std::string& name);

struct RNNSeq2SeqConfig {
    int64_t src_vocab = 11;             // V_src
    int64_t tgt_vocab = 11;             // V_tgt
    int64_t embed = 64;                 // E: the width of a word's embedding
    int64_t hidden = 128;               // Hd: the decoder's state, and each encoder direction's
    int64_t layers = 1;                 // L: stacked layers in the encoder and in the decoder
    nn::CellKind cell = nn::CellKind::gru;
    bool bidirectional = true;          // the encoder reads both ways (Bahdanau et al.)
    bool attention = false;             // soft attention, scored by `score`; false: one context vector C
    nn::Score score = nn::Score::additive;
    Context context = Context::initial_state;   // without attention: where C goes
    bool reverse_source = false;        // read each source sentence backwards
    float dropout = 0.1f;               // on the embeddings, between layers, and before the output layer

    void validate() const;              // throws std::invalid_argument naming the bad field
    std::string describe() const;       // "GRU encoder-decoder, additive attention, E=64 Hd=128 L=1 bidirectional"
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
        Tensor states;    // (B, S, dirs*Hd): h_1..h_S, 0 at padded positions
        Tensor keys;      // (B, S, Hd or A): the attention's keys (attention only)
        Tensor context;   // (B, Hd): C, the decoder's first state
        Mask src_mask;    // (B, 1, S)
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
    std::shared_ptr<nn::Linear> bridge;                       // (Hd, dirs*Hd): C = tanh(W_c [h_fwd; h_bwd])
    std::shared_ptr<nn::SoftAttention> attention;             // with attention only
    std::shared_ptr<nn::ModuleList<nn::RecurrentCell>> cells; // L decoder cells
    std::shared_ptr<nn::Linear> out;                          // (V, Hd [+ extra]): the scores of the next word
    void keep_attention_weights(bool on) override { keep_attention = on; }
    bool keep_attention = false;   // true: logits() keeps alpha in last_attention (attention only)
    Tensor last_attention;         // (B, T, S): alpha of the last logits() call, for pictures, when kept

private:
    // Teacher forcing up to the output layer: its input [s_i; extra_i] at every step, after dropout (B, T, Hd + X).
    Tensor outputs(const Tokens& src, const Tokens& tgt_in, const Mask& src_mask);
    int64_t extra_size() const;   // the width of extra_i: 0, Hd (C) or dirs*Hd (C_i)
};

// Rows of a source batch read backwards, padding left where it is: [5 3 9 0 0] -> [9 3 5 0 0].
Tokens reverse_rows(const Tokens& src, const Mask& src_mask);

}  // namespace models
