// What training and decoding need from a sequence-to-sequence model, whatever is inside it: the
// Transformer (models/transformer.h) and the recurrent encoder-decoders (models/rnn_seq2seq.h).
// Both train on the same batches (models/batch.h) and decode through the same greedy and beam
// search (models/decoding.h), so the two can be run and compared side by side.
//
//   Tensor logits = model.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask);       // (B, T, V): teacher forcing
//   Tensor loss = model.loss(b, {.ignore_index = PAD});                           // (): the same, with its loss
//   std::unique_ptr<models::NextTokens> rows = model.start_decoding(src, src_mask, {.max_positions = L});
//   Tensor lp = rows->append(Tokens::full({B, 1}, BOS));                          // (B, V): log p(first token)
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "models/batch.h"
#include "nn/loss.h"
#include "nn/module.h"

namespace models {

using autograd::Mask;
using autograd::Tensor;
using autograd::Tokens;

// The rows being decoded, each growing by one token per step, and what the model says the next
// token is after each: a model's decoder state (its hidden state, its cached keys and values).
class NextTokens {
public:
    virtual ~NextTokens() = default;
    // Appends tokens (n, 1), one to each row -> log p(next token | row so far, src) (n, V).
    virtual Tensor append(const Tokens& tokens) = 0;
    // Row i continues row from[i] (beam search keeping other hypotheses); rows may repeat or go.
    virtual void reorder(const std::vector<int64_t>& from) = 0;
};

struct DecodingSetup {
    int64_t max_positions = 0;      // tokens appended to each row at most
    int64_t max_rows = -1;          // rows at once at most (beam search: B x K); -1: B
    bool kv_cache = true;           // the Transformer: false recomputes the whole prefix every step
    int64_t* positions = nullptr;   // when set, gets the decoder's work added: the positions it ran
};

class Seq2Seq : public nn::Module {
public:
    // Teacher forcing: src (B, S), the decoder's input tgt_in (B, T), src_mask (B, 1, S) and
    // tgt_mask (B, T, T) (models/batch.h) -> the next token's scores at every position (B, T, V).
    // Train with nn::cross_entropy, which fuses the log-softmax into the loss.
    virtual Tensor logits(const Tokens& src, const Tokens& tgt_in, const Mask& src_mask, const Mask& tgt_mask) = 0;
    // Teacher forcing's loss on batch b: the cross-entropy of b.tgt_out under the logits above,
    // the mean over its counted tokens (opt: the padding to ignore, label smoothing). In value and
    // gradient it is the line below; the models override it with their last layer, a projection
    // to the vocabulary, fused into the loss (nn::linear_cross_entropy), so that the (B, T, V)
    // logits, the biggest tensor of a training step on real text, are never held whole.
    virtual Tensor loss(const Batch& b, const nn::CrossEntropyOptions& opt) {
        return nn::cross_entropy(logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask), b.tgt_out, opt);
    }
    // Decoding without gradients: one row per sentence of src (B, S), src_mask (B, 1, S).
    virtual std::unique_ptr<NextTokens> start_decoding(const Tokens& src, const Mask& src_mask, const DecodingSetup& setup) = 0;
    // true: each forward keeps its attention weights in the model's last_attention members, to
    // draw them (off by default: training does not need them).
    virtual void keep_attention_weights(bool /*on*/) {}   // a model without attention keeps nothing
    virtual int64_t tgt_vocab() const = 0;
    // The longest sequence it reads or writes, in tokens (<bos> and <eos> included): the
    // Transformer's positional table; a recurrent model has no bound (INT64_MAX).
    virtual int64_t max_len() const = 0;
};

}  // namespace models
