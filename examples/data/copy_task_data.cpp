#include "examples/data/copy_task_data.h"

#include <stdexcept>

#include "models/transformer.h"

namespace data {

autograd::Tokens random_sequences(autograd::Rng& rng, int64_t V, int64_t B, int64_t L) {
    if (V < 3 || B < 1 || L < 2) throw std::invalid_argument("random_sequences: needs V >= 3, B >= 1, L >= 2");
    autograd::Tokens s = autograd::Tokens::full({B, L}, COPY_START);   // (B, L)
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 1; t < L; t++) s[b * L + t] = 1 + static_cast<int32_t>(rng.below(static_cast<uint32_t>(V - 1)));
    return s;
}

CopyBatch make_copy_batch(autograd::Rng& rng, int64_t V, int64_t B, int64_t L) {
    CopyBatch b;
    b.src = random_sequences(rng, V, B, L);
    b.tgt_in = autograd::Tokens::full({B, L - 1}, COPY_PAD);
    b.tgt_out = autograd::Tokens::full({B, L - 1}, COPY_PAD);
    for (int64_t i = 0; i < B; i++)
        for (int64_t t = 0; t < L - 1; t++) {
            b.tgt_in[i * (L - 1) + t] = b.src[i * L + t];
            b.tgt_out[i * (L - 1) + t] = b.src[i * L + t + 1];
        }
    b.src_mask = models::padding_mask(b.src, COPY_PAD);
    b.tgt_mask = models::target_mask(b.tgt_in, COPY_PAD);
    return b;
}

}  // namespace data
