#include "nn/dropout.h"

#include <stdexcept>

#include "autograd/random.h"

namespace nn {

using autograd::Node;

Tensor dropout(const Tensor& x, float p, bool training) {
    if (!(p >= 0.0f && p < 1.0f)) throw std::invalid_argument("dropout: p must be in [0, 1), got " + std::to_string(p));
    if (!training || p == 0.0f) return x;
    const int64_t n = x.numel();
    const float scale = 1.0f / (1.0f - p);
    auto keep = std::make_shared<std::vector<float>>(n);   // 0 or 1/(1-p) per element
    autograd::Generator& gen = autograd::default_generator();
    for (int64_t i = 0; i < n; i++) (*keep)[i] = gen.uniform() < p ? 0.0f : scale;   // serial: fixed stream order
    Tensor y = Tensor::empty(x.shape());
    const float* px = x.data();
    float* py = y.data();
    for (int64_t i = 0; i < n; i++) py[i] = px[i] * (*keep)[i];
    // backward: y = x * keep, so dx = dy * keep (the same elements are dropped)
    autograd::record(y, {x}, "dropout", [keep, n](Node& self) {
        float* dx = self.parent_grad(0);
        for (int64_t i = 0; i < n; i++) dx[i] += self.grad[i] * (*keep)[i];
    });
    return y;
}

Dropout::Dropout(float p_) : p(p_) {
    if (!(p >= 0.0f && p < 1.0f)) throw std::invalid_argument("Dropout: p must be in [0, 1), got " + std::to_string(p));
}

}  // namespace nn
