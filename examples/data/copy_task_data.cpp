#include "examples/data/copy_task_data.h"

#include <stdexcept>

namespace data {

autograd::Tokens random_sequences(autograd::Rng& rng, int64_t V, int64_t B, int64_t L) {
    if (V < 3 || B < 1 || L < 2) throw std::invalid_argument("random_sequences: needs V >= 3, B >= 1, L >= 2");
    autograd::Tokens s = autograd::Tokens::full({B, L}, COPY_START);   // (B, L)
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 1; t < L; t++) s[b * L + t] = 1 + static_cast<int32_t>(rng.below(static_cast<uint32_t>(V - 1)));
    return s;
}

models::Batch make_copy_batch(autograd::Rng& rng, int64_t V, int64_t B, int64_t L) {
    const autograd::Tokens seq = random_sequences(rng, V, B, L);   // (B, L)
    return models::make_batch(seq, seq, COPY_PAD);
}

models::Batch make_reverse_batch(autograd::Rng& rng, int64_t V, int64_t B, int64_t L) {
    const autograd::Tokens src = random_sequences(rng, V, B, L);   // (B, L)
    autograd::Tokens tgt = src;                                       // (B, L): column 0 stays COPY_START
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 1; t < L; t++) tgt[b * L + t] = src[b * L + L - t];   // t = 1 takes the last symbol, L-1 the first after the start
    return models::make_batch(src, tgt, COPY_PAD);
}

}  // namespace data
