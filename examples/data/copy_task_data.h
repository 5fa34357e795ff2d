// Data of the copy task (The Annotated Transformer's first example): random symbol sequences
// whose first symbol is the start symbol; the model learns to output its input.
#pragma once
#include "autograd/random.h"
#include "autograd/tensor.h"
#include "models/batch.h"

namespace data {

constexpr int32_t COPY_PAD = 0;     // never generated; there is no padding, but the masks use it
constexpr int32_t COPY_START = 1;   // every sequence begins with symbol 1, the decoder's start symbol

// (B, L) symbols drawn uniformly from 1..V-1, first column COPY_START.
autograd::Tokens random_sequences(autograd::Rng& rng, int64_t V, int64_t B, int64_t L);

// B fresh sequences as a batch whose target is its source:
//   src (B, L) = 1 x x ... x,  tgt_in (B, L - 1) = src without its last symbol,
//   tgt_out (B, L - 1) = src without its first symbol.
models::Batch make_copy_batch(autograd::Rng& rng, int64_t V, int64_t B, int64_t L);

}  // namespace data
