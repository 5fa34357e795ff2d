#include "nn/positional_encoding.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace nn {

PositionalEncoding::PositionalEncoding(int64_t d, float dropout, int64_t max_len_) : d_model(d), max_len(max_len_), dropout_p(dropout) {
    if (d <= 0 || max_len <= 0) throw std::invalid_argument("PositionalEncoding: d_model and max_len must be positive");
}

Tensor PositionalEncoding::table(int64_t T) const {
    if (T < 0 || T > max_len)
        throw std::invalid_argument("PositionalEncoding: sequence length " + std::to_string(T) + " exceeds max_len " +
                                    std::to_string(max_len));
    const std::lock_guard<std::mutex> lock(grow_);
    const int64_t have = pe_.defined() ? pe_.size(0) : 0, d = d_model;
    if (T > have) {
        const int64_t rows = std::min(max_len, std::max<int64_t>({T, 2 * have, 64}));
        Tensor pe = Tensor::zeros({rows, d});                                    // (rows, D)
        for (int64_t pos = 0; pos < rows; pos++)
            for (int64_t i = 0; i < d; i += 2) {
                // 1 / 10000^(i/D), computed in double: the wavelengths span four orders of magnitude
                const double angle = static_cast<double>(pos) * std::exp(-std::log(10000.0) * static_cast<double>(i) / static_cast<double>(d));
                pe.data()[pos * d + i] = static_cast<float>(std::sin(angle));
                if (i + 1 < d) pe.data()[pos * d + i + 1] = static_cast<float>(std::cos(angle));
            }
        pe_ = pe;
    }
    return autograd::narrow(pe_, 0, 0, T);                                       // (T, D)
}

Tensor PositionalEncoding::forward(const Tensor& x, int64_t start) const {
    if (x.dim() != 3 || x.size(-1) != d_model || start < 0)
        throw std::invalid_argument("PositionalEncoding: expected (B, T, " + std::to_string(d_model) + ") and start >= 0, got " +
                                    autograd::shape_str(x.shape()) + " and " + std::to_string(start));
    const int64_t T = x.size(1);
    const Tensor pe = autograd::narrow(table(start + T), 0, start, T);   // (T, D): positions start..start+T-1
    return dropout(x + pe, dropout_p, is_training());                    // (B, T, D)
}

}  // namespace nn
