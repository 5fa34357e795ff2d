#include "models/batch.h"

#include <algorithm>
#include <stdexcept>


namespace models {

using autograd::shape_str;

Batch make_batch(const Tokens& src, const Tokens& tgt, int32_t pad) {
    if (src.dim() != 2 || tgt.dim() != 2 || src.size(0) != tgt.size(0) || tgt.size(1) < 2)
        throw std::invalid_argument("make_batch: needs src (B, S) and tgt (B, T + 1) with T >= 1, got src " +
                                    shape_str(src.shape) + " and tgt " + shape_str(tgt.shape));
    const int64_t B = tgt.size(0), T = tgt.size(1) - 1;
    Batch b;
    b.pad = pad;
    b.src = src;
    b.tgt_in = Tokens::full({B, T}, pad);    // (B, T)
    b.tgt_out = Tokens::full({B, T}, pad);   // (B, T)
    for (int64_t r = 0; r < B; r++)
        for (int64_t t = 0; t < T; t++) {
            b.tgt_in[r * T + t] = tgt[r * (T + 1) + t];
            b.tgt_out[r * T + t] = tgt[r * (T + 1) + t + 1];
            b.ntokens += b.tgt_out[r * T + t] != pad;
        }
    b.src_mask = padding_mask(b.src, pad);      // (B, 1, S)
    b.tgt_mask = target_mask(b.tgt_in, pad);    // (B, T, T)
    return b;
}

// Rows [r0, r1) of a (B, ...) array.
template <typename T>
static autograd::IntArray<T> rows_of(const autograd::IntArray<T>& a, int64_t r0, int64_t r1) {
    autograd::Shape shape = a.shape;
    const int64_t row = shape[0] > 0 ? a.numel() / shape[0] : 0;   // elements per row (a batch of 0 rows has none)
    shape[0] = r1 - r0;
    return {std::vector<T>(a.data.begin() + r0 * row, a.data.begin() + r1 * row), shape};
}

std::vector<Batch> split_batch(const Batch& b, int parts) {
    if (parts < 1) throw std::invalid_argument("split_batch: needs at least 1 part, got " + std::to_string(parts));
    const int64_t B = b.tgt_out.size(0);
    std::vector<Batch> out(static_cast<size_t>(parts));
    int64_t r0 = 0;
    for (int p = 0; p < parts; p++) {
        const int64_t r1 = r0 + B / parts + (p < B % parts);
        Batch& s = out[static_cast<size_t>(p)];
        s.src = rows_of(b.src, r0, r1);            // (r1 - r0, S)
        s.tgt_in = rows_of(b.tgt_in, r0, r1);      // (r1 - r0, T)
        s.tgt_out = rows_of(b.tgt_out, r0, r1);    // (r1 - r0, T)
        s.src_mask = rows_of(b.src_mask, r0, r1);  // (r1 - r0, 1, S)
        s.tgt_mask = rows_of(b.tgt_mask, r0, r1);  // (r1 - r0, T, T)
        s.pad = b.pad;
        s.ntokens = static_cast<int64_t>(std::count_if(s.tgt_out.data.begin(), s.tgt_out.data.end(), [&](int32_t t) { return t != b.pad; }));
        s.share = b.ntokens > 0 ? b.share * static_cast<float>(s.ntokens) / static_cast<float>(b.ntokens) : 0.0f;
        r0 = r1;
    }
    return out;
}

Tokens pad_rows(const std::vector<std::vector<int32_t>>& rows, int32_t pad) {
    size_t L = 0;
    for (const auto& row : rows) L = std::max(L, row.size());
    const int64_t B = static_cast<int64_t>(rows.size());
    Tokens out = Tokens::full({B, static_cast<int64_t>(L)}, pad);   // (B, L)
    for (size_t r = 0; r < rows.size(); r++) std::copy(rows[r].begin(), rows[r].end(), out.data.begin() + r * L);
    return out;
}

// ---------------------------------------------------------------- masks

Mask padding_mask(const Tokens& ids, int32_t pad) {
    if (ids.dim() != 2) throw std::invalid_argument("padding_mask: ids must be (B, S), got " + shape_str(ids.shape));
    Mask m = Mask::full({ids.size(0), 1, ids.size(1)}, 0);   // (B, 1, S)
    for (int64_t i = 0; i < ids.numel(); i++) m[i] = ids[i] != pad;
    return m;
}

Mask subsequent_mask(int64_t T) {
    Mask m = Mask::full({1, T, T}, 0);   // (1, T, T), lower triangular
    for (int64_t t = 0; t < T; t++)
        for (int64_t s = 0; s <= t; s++) m[t * T + s] = 1;
    return m;
}

Mask target_mask(const Tokens& tgt, int32_t pad) {
    if (tgt.dim() != 2) throw std::invalid_argument("target_mask: tgt must be (B, T), got " + shape_str(tgt.shape));
    const int64_t B = tgt.size(0), T = tgt.size(1);
    Mask m = Mask::full({B, T, T}, 0);   // (B, T, T)
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t s = 0; s <= t; s++) m[(b * T + t) * T + s] = tgt[b * T + s] != pad;
    return m;
}

}  // namespace models
