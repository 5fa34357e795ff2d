// One batch of sequence-to-sequence data, as the model trains on it (The Annotated Transformer's
// Batch class). The decoder reads the target shifted right and predicts it shifted left: at
// position t it has seen target tokens 0..t and must name token t+1 ("teacher forcing").
//
//   tgt     = <bos> a  b  c  <eos>
//   tgt_in  = <bos> a  b  c             what the decoder reads
//   tgt_out =       a  b  c  <eos>      what it must predict, one position ahead
//
//   models::Batch b = models::make_batch(src, tgt, PAD);   // src (B, S), tgt (B, T + 1)
//   Tensor logits = model.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask);             // (B, T, V)
//   Tensor loss = nn::cross_entropy(logits, b.tgt_out, {.ignore_index = PAD});
#pragma once
#include <vector>

#include "autograd/tensor.h"

namespace models {

using autograd::Mask;
using autograd::Tokens;

struct Batch {
    Tokens src;            // (B, S)
    Tokens tgt_in;         // (B, T)     tgt without its last column
    Tokens tgt_out;        // (B, T)     tgt without its first column
    Mask src_mask;         // (B, 1, S)  key s is not padding
    Mask tgt_mask;         // (B, T, T)  key s is not padding and not after query t
    int64_t ntokens = 0;   // non-padding tokens of tgt_out: what a per-token loss averages over
    int32_t pad = 0;       // the padding id
    float share = 1.0f;    // of a part (split_batch): its share of the whole batch's tokens, ntokens_p / ntokens
};

// src (B, S) and tgt (B, T + 1) token ids, both padded with `pad` (T + 1 >= 2).
Batch make_batch(const Tokens& src, const Tokens& tgt, int32_t pad);

// The batch's rows in `parts` consecutive slices as even as can be (the first B % parts get one
// more), each a Batch with its own ntokens and its share of the batch's, ntokens_p / ntokens; a
// slice may be empty (B < parts). For data-parallel steps (models/data_parallel.h): the parts'
// per-token losses, each times its share, sum to the batch's.
std::vector<Batch> split_batch(const Batch& b, int parts);

// Rows of any lengths -> (B, longest row), each row padded on the right with `pad`.
Tokens pad_rows(const std::vector<std::vector<int32_t>>& rows, int32_t pad);

// ---- masks (true = may attend) ----
Mask padding_mask(const Tokens& ids, int32_t pad);        // ids (B, S) -> (B, 1, S): key s is not padding
Mask subsequent_mask(int64_t T);                          // (1, T, T): position t sees positions 0..t
Mask target_mask(const Tokens& tgt, int32_t pad);         // (B, T, T): not padding and not in the future

}  // namespace models
