// Data of the copy task (The Annotated Transformer's first example): random symbol sequences
// whose first symbol is the start symbol; the model learns to output its input. And of its
// mirror, the reverse task (examples/compare_models.cpp): the same sources, output backwards.
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

// The same sources (the same draws from rng), with the start symbol and then the source's other
// symbols in reverse order as the target:
//   src = 1 a b c d   ->   tgt = 1 d c b a,   tgt_in = 1 d c b,   tgt_out = d c b a
// so output position t (which has read tgt_in[0..t]) must name source symbol L-1-t.
models::Batch make_reverse_batch(autograd::Rng& rng, int64_t V, int64_t B, int64_t L);

}  // namespace data
