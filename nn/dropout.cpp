#include "nn/dropout.h"

#include <stdexcept>

#include "autograd/kernels/parallel.h"
#include "autograd/random.h"

namespace nn {

using autograd::Node;

Tensor dropout(const Tensor& x, float p, bool training) {
    if (!(p >= 0.0f && p < 1.0f)) throw std::invalid_argument("dropout: p must be in [0, 1), got " + std::to_string(p));
    if (!training || p == 0.0f) return x;
    const int64_t n = x.numel();
    const float scale = 1.0f / (1.0f - p);
    const uint64_t seed = autograd::default_rng().next_u64();
    Tensor y = Tensor::empty(x.shape());
    const float* px = x.data();
    float* py = y.data();
    #pragma omp parallel for simd if (parallel: autograd::worth_threads(n, autograd::kDropoutParallelMin))
    for (int64_t i = 0; i < n; i++) py[i] = counter_uniform(seed, i) < p ? 0.0f : px[i] * scale;
    // backward: y = x * keep * scale, so dx = dy * keep * scale, with the same keep decisions
    autograd::record(y, {x}, "dropout", [seed, n, p, scale](Node& self) {
        bool fresh = false;   // x has no gradient yet: store instead of zeroing and adding
        float* dx = self.parent_grad_for_write(0, &fresh);
        const float* dy = self.grad.data();
        #pragma omp parallel for simd if (parallel: autograd::worth_threads(n, autograd::kDropoutParallelMin))   // branch-free: the mask is random
        for (int64_t i = 0; i < n; i++) dx[i] = (fresh ? 0.0f : dx[i]) + (counter_uniform(seed, i) >= p ? dy[i] * scale : 0.0f);
    });
    return y;
}

Dropout::Dropout(float p_) : p(p_) {
    if (!(p >= 0.0f && p < 1.0f)) throw std::invalid_argument("Dropout: p must be in [0, 1), got " + std::to_string(p));
}

}  // namespace nn
