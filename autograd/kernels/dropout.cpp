#include "autograd/kernels/dropout.h"

#include "autograd/kernels/parallel.h"

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

// out[i] = x[i] + y[i] * keep(i) for i in [begin, end), with y[i] * keep(i) rounded to a float
// before the add, as the separate dropout op rounds it when it stores it. GCC would otherwise
// fuse the multiply and the add into one multiply-add (rounded once: other bits), even across
// statements (its default, -ffp-contract=fast), hence the attribute; Clang fuses only within
// one expression.
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
static void add_dropped(float* out, const float* x, const float* y, int64_t begin, int64_t end, const DropoutDraws d) {
    #pragma omp simd
    for (int64_t i = begin; i < end; i++) {
        const float dropped = y[i] * d.kept_factor(i);
        out[i] = x[i] + dropped;
    }
}

void add_dropout_forward(float* out, const float* x, const float* y, int64_t n, const DropoutDraws& drop) {
    const DropoutDraws d = drop;   // a local copy, as in dropout_forward
    parallel_blocks(n, worth_threads(n, kDropoutParallelMin),
                    [=](int64_t begin, int64_t end) { add_dropped(out, x, y, begin, end, d); });
}

void add_dropout_backward(GradOut dx, GradOut dy, const float* dout, int64_t n, const DropoutDraws& drop) {
    // In the forward pass this was out = x + y * keep, so dx = dout and dy = dout * keep.
    if (float* gx = dx.data) {
        const bool add = dx.add;
        parallel_blocks(n, worth_threads(n, kDropoutParallelMin), [=](int64_t begin, int64_t end) {
            #pragma omp simd
            for (int64_t i = begin; i < end; i++) gx[i] = (add ? gx[i] : 0.0f) + dout[i];
        });
    }
    dropout_backward(dy, dout, n, drop);
}

}  // namespace autograd::kernels
