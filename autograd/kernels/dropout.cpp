#include "autograd/kernels/dropout.h"

#include "autograd/kernels/parallel.h"
#include "autograd/ops.h"

namespace autograd::kernels {

void dropout_forward(float* y, const float* x, int64_t n, const DropoutDraws& drop) {
    const float p = drop.p, scale = drop.scale;   // locals: lets the loop vectorize
    const uint64_t seed = drop.seed;
    #pragma omp parallel for simd if (parallel: worth_threads(n, kDropoutParallelMin))   // branch-free: the mask is random
    for (int64_t i = 0; i < n; i++) y[i] = counter_uniform(seed, i) < p ? 0.0f : x[i] * scale;
}

// y = x * keep, so dx = dy * keep, with the same keep decisions
void dropout_backward(GradOut dx, const float* dy, int64_t n, const DropoutDraws& drop) {
    if (!dx.data) return;
    const float p = drop.p, scale = drop.scale;
    const uint64_t seed = drop.seed;
    float* g = dx.data;
    const bool add = dx.add;
    #pragma omp parallel for simd if (parallel: worth_threads(n, kDropoutParallelMin))
    for (int64_t i = 0; i < n; i++) g[i] = (add ? g[i] : 0.0f) + (counter_uniform(seed, i) >= p ? dy[i] * scale : 0.0f);
}

Tensor dropout_keep_factors(const Shape& shape, const DropoutDraws& drop) {
    Tensor keep = Tensor::empty(shape);
    for (int64_t i = 0; i < keep.numel(); i++) keep.data()[i] = drop.keep(i);
    return keep;
}

Tensor dropout_reference(const Tensor& x, const DropoutDraws& drop) { return x * dropout_keep_factors(x.shape(), drop); }

}  // namespace autograd::kernels
