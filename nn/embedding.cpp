#include "nn/embedding.h"

#include <stdexcept>

#include "nn/init.h"

namespace nn {

Embedding::Embedding(int64_t n, int64_t d) : num_embeddings(n), embedding_dim(d) {
    if (n <= 0 || d <= 0)
        throw std::invalid_argument("Embedding: sizes must be positive, got " + std::to_string(n) + " x " + std::to_string(d));
    weight = register_parameter("weight", Tensor::empty({n, d}));
    init::normal_(weight);
}

Tensor Embedding::forward(const Tokens& ids) const {
    for (int64_t i = 0; i < ids.numel(); i++)
        if (ids[i] < 0 || ids[i] >= num_embeddings)
            throw std::out_of_range("Embedding: token id " + std::to_string(ids[i]) + " at flat position " + std::to_string(i) +
                                    " of ids " + autograd::shape_str(ids.shape) + " is outside the vocabulary [0, " +
                                    std::to_string(num_embeddings) + ")");
    return autograd::index_select(weight, 0, ids);   // (..., D)
}

}  // namespace nn
