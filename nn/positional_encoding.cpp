#include "nn/positional_encoding.h"

#include <cmath>
#include <stdexcept>

namespace nn {

PositionalEncoding::PositionalEncoding(int64_t d, float dropout, int64_t max_len_) : d_model(d), max_len(max_len_), dropout_p(dropout) {
    if (d <= 0 || max_len <= 0) throw std::invalid_argument("PositionalEncoding: d_model and max_len must be positive");
}

Tensor PositionalEncoding::table(int64_t T, int64_t start) const {
    if (T < 0 || start < 0 || start + T > max_len)
        throw std::invalid_argument("PositionalEncoding: sequence length " + std::to_string(start + T) + " exceeds max_len " +
                                    std::to_string(max_len));
    const int64_t d = d_model;
    Tensor pe = Tensor::zeros({T, d});                                           // (T, D)
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < d; i += 2) {
            // pos / 10000^(i/D), computed in double: the wavelengths span four orders of magnitude
            const double angle = static_cast<double>(start + t) * std::exp(-std::log(10000.0) * static_cast<double>(i) / static_cast<double>(d));
            pe.data()[t * d + i] = static_cast<float>(std::sin(angle));
            if (i + 1 < d) pe.data()[t * d + i + 1] = static_cast<float>(std::cos(angle));
        }
    return pe;
}

Tensor PositionalEncoding::forward(const Tensor& x, int64_t start) const {
    if (x.dim() != 3 || x.size(-1) != d_model || start < 0)
        throw std::invalid_argument("PositionalEncoding: expected (B, T, " + std::to_string(d_model) + ") and start >= 0, got " +
                                    autograd::shape_str(x.shape()) + " and " + std::to_string(start));
    const int64_t T = x.size(1);
    const Tensor pe = table(T, start);                                    // (T, D): positions start..start+T-1
    return dropout(x + pe, dropout_p, is_training());                    // (B, T, D)
}

}  // namespace nn
