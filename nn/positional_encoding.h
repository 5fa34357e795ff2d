// Sinusoidal positional encoding (Vaswani et al. 2017, section 3.5). Attention itself ignores
// order; adding these fixed vectors tells the model where each token sits:
//     PE(pos, 2i) = sin(pos / 10000^(2i/D)),   PE(pos, 2i+1) = cos(pos / 10000^(2i/D))
// Each dimension pair is a sinusoid of a different wavelength (2 pi to 10000 * 2 pi), so a
// fixed offset k is a linear function (a rotation) of PE(pos): relative positions are easy to use.
#pragma once
#include "nn/dropout.h"
#include "nn/module.h"

namespace nn {

class PositionalEncoding : public Module {
public:
    PositionalEncoding(int64_t d_model, float dropout = 0.1f, int64_t max_len = 5000);
    // x (B, T, D) -> dropout(x + PE[start:start+T]) (B, T, D): the rows of positions start..start+T-1.
    // start > 0 continues a sequence, as decoding one position at a time does.
    Tensor forward(const Tensor& x, int64_t start = 0) const;
    // PE rows start..start+T-1 (T, D): a constant, not a parameter. Computed at every call (T x D
    // sines and cosines, little beside the layers that follow), so the module holds no state:
    // a table of all max_len rows would be 10 MB per model side at 5000 x 512, mostly for
    // positions a copy task of length 10 never reaches.
    Tensor table(int64_t T, int64_t start = 0) const;
    int64_t d_model, max_len;
    float dropout_p;
};

}  // namespace nn
