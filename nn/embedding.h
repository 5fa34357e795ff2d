// Embedding: a lookup table of learned vectors, one row per token id.
#pragma once
#include "nn/module.h"

namespace nn {

class Embedding : public Module {
public:
    Embedding(int64_t num_embeddings, int64_t embedding_dim);
    // ids (...) -> (..., D). An id outside [0, num_embeddings) throws, naming the id and where it was.
    // Backward adds each output row's gradient into its id's row; repeated ids accumulate.
    Tensor forward(const Tokens& ids) const;
    int64_t num_embeddings, embedding_dim;
    Tensor weight;   // (V, D), N(0, 1) as in PyTorch
};

}  // namespace nn
