// Data of the copy task (The Annotated Transformer's first example): random symbol sequences
// whose first symbol is the start symbol; the model learns to output its input.
#pragma once
#include "autograd/random.h"
#include "autograd/tensor.h"

namespace data {

constexpr int32_t COPY_PAD = 0;     // never generated; there is no padding, but the masks use it
constexpr int32_t COPY_START = 1;   // every sequence begins with symbol 1, the decoder's start symbol

struct CopyBatch {
    autograd::Tokens src;       // (B, L)      1 x x x ... x
    autograd::Tokens tgt_in;    // (B, L - 1)  src without its last symbol: what the decoder reads
    autograd::Tokens tgt_out;   // (B, L - 1)  src without its first symbol: what it must predict
    autograd::Mask src_mask;    // (B, 1, L)
    autograd::Mask tgt_mask;    // (B, L - 1, L - 1)
};

// (B, L) symbols drawn uniformly from 1..V-1, first column COPY_START.
autograd::Tokens random_sequences(autograd::Rng& rng, int64_t V, int64_t B, int64_t L);
CopyBatch make_copy_batch(autograd::Rng& rng, int64_t V, int64_t B, int64_t L);

}  // namespace data
