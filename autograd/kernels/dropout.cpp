#include "autograd/kernels/dropout.h"

#include "autograd/detail.h"
#include "autograd/kernels/parallel.h"
#include "autograd/ops.h"

namespace autograd::kernels {

DropoutDraws draw_dropout(float p) { return p > 0.0f ? DropoutDraws{p, default_rng().next_u64()} : DropoutDraws{}; }

void dropout_forward(float* y, const float* x, int64_t n, const DropoutDraws& drop) {
    const DropoutDraws d = drop;   // a local copy: no store below can change it, so the loop vectorizes
    parallel_blocks(n, worth_threads(n, kDropoutParallelMin), [=](int64_t begin, int64_t end) {
        #pragma omp simd   // branch-free: the mask is random
        for (int64_t i = begin; i < end; i++) y[i] = x[i] * d.kept_factor(i);
    });
}

void dropout_backward(GradOut dx, const float* dy, int64_t n, const DropoutDraws& drop) {
    if (!dx.data) return;
    const DropoutDraws d = drop;
    float* g = dx.data;
    const bool add = dx.add;
    // In the forward pass this was y = x * keep, keep = 0 or 1/(1-p) per element; so
    // dx = dy * keep, with the same keep decisions drawn again from the seed.
    parallel_blocks(n, worth_threads(n, kDropoutParallelMin), [=](int64_t begin, int64_t end) {
        #pragma omp simd
        for (int64_t i = begin; i < end; i++) g[i] = (add ? g[i] : 0.0f) + dy[i] * d.kept_factor(i);
    });
}

Tensor dropout(const Tensor& x, float p) {
    const DropoutDraws drop = draw_dropout(p);
    if (!drop.active()) return x;
    Tensor y = Tensor::empty(x.shape());   // same shape as x
    dropout_forward(y.data(), x.data(), x.numel(), drop);
    record(y, {x}, "dropout", [drop](Node& self) {
        dropout_backward(autograd::detail::parent_grad_to_write(self, 0), self.grad.data(), self.numel(), drop);
    });
    return y;
}

}  // namespace autograd::kernels

namespace autograd {

// The plain path's dropout: the keep factors as a constant tensor (a plain loop over keep(i)),
// so a layer applies dropout as one elementwise multiply, y = x * factors.
Tensor dropout_keep(const Shape& shape, float p) {
    const kernels::DropoutDraws drop = kernels::draw_dropout(p);
    Tensor keep = Tensor::empty(shape);   // same shape as the tensor it drops
    for (int64_t i = 0; i < keep.numel(); i++) keep.data()[i] = drop.keep(static_cast<uint64_t>(i));
    return keep;
}

}  // namespace autograd
