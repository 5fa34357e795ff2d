#include "nn/init.h"

#include <cmath>
#include <stdexcept>

#include "autograd/random.h"

namespace nn::init {

using autograd::default_rng;

void xavier_uniform_(autograd::Tensor& t, float gain) {
    if (t.dim() < 2)
        throw std::invalid_argument("xavier_uniform_: needs a tensor with at least 2 dims, got shape " +
                                    autograd::shape_str(t.shape()));
    const int64_t receptive = t.numel() / (t.size(0) * t.size(1));
    const double fan_out = static_cast<double>(t.size(0) * receptive), fan_in = static_cast<double>(t.size(1) * receptive);
    const float a = gain * static_cast<float>(std::sqrt(6.0 / (fan_in + fan_out)));
    uniform_(t, -a, a);
}

void normal_(autograd::Tensor& t, float mean, float std) {
    for (int64_t i = 0; i < t.numel(); i++) t.data()[i] = mean + std * default_rng().normal();
}

void uniform_(autograd::Tensor& t, float lo, float hi) {
    for (int64_t i = 0; i < t.numel(); i++) t.data()[i] = default_rng().uniform(lo, hi);
}

void zeros_(autograd::Tensor& t) { std::fill(t.data(), t.data() + t.numel(), 0.0f); }
void ones_(autograd::Tensor& t) { std::fill(t.data(), t.data() + t.numel(), 1.0f); }

}  // namespace nn::init
