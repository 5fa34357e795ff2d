#include "autograd/kernels/linear.h"

#include "autograd/kernels/allocator.h"
#include "autograd/kernels/gemm_bf16.h"
#include "autograd/kernels/parallel.h"
#include "autograd/ops.h"

namespace autograd::kernels {

void linear_forward(float* y, const float* x, const float* w, const float* b, const LinearDims& d, bool relu,
                    const DropoutDraws& drop, Precision precision) {
    const int64_t rows = d.rows, out = d.out;
    gemm_in(precision, false, true, rows, out, d.in, x, d.in, w, d.in, y, out, false);   // y = x W^T
    // the epilogue: bias, ReLU, dropout, in one pass over y
    const bool dropping = drop.active();
    const float p = drop.p, scale = drop.scale;   // locals: lets the loop vectorize
    const uint64_t seed = drop.seed;
    #pragma omp parallel for if (worth_threads(rows * out, kLinearParallelMin))
    for (int64_t r = 0; r < rows; r++) {
        float* yr = y + r * out;
        #pragma omp simd   // every test below is a select, not a branch: the loop vectorizes
        for (int64_t j = 0; j < out; j++) {
            float v = yr[j] + (b ? b[j] : 0.0f);
            v = relu && v < 0.0f ? 0.0f : v;
            if (dropping) v = counter_uniform(seed, r * out + j) < p ? 0.0f : v * scale;
            yr[j] = v;
        }
    }
}

// In the forward pass this was y = dropout(act(z)), z = x W^T + b. First g = dL/dz: with ReLU,
// y > 0 exactly where the unit was on and the element kept, so g = dy * scale there and 0
// elsewhere; without ReLU, g = dy * keep. Then the three products.
void linear_backward(GradOut dx, GradOut dw, GradOut db, const float* dy, const float* x, const float* w,
                     const float* y, const LinearDims& d, bool relu, const DropoutDraws& drop, Precision precision) {
    const int64_t rows = d.rows, in = d.in, out = d.out, n = rows * out;
    FloatBuffer masked;   // g, when it differs from dy
    const float* g = dy;
    if (relu || drop.active()) {
        masked.resize(n);
        float* m = masked.data();
        const float p = drop.p, s = drop.scale;   // locals: lets the loops below vectorize
        const uint64_t seed = drop.seed;
        // Two branch-free loops rather than one with a test inside: a ReLU mask is ~50% random,
        // and a mispredicted branch per element costs more than the rest of the loop.
        if (relu) {
            #pragma omp parallel for simd if (parallel: worth_threads(n, kLinearParallelMin))
            for (int64_t i = 0; i < n; i++) m[i] = y[i] > 0.0f ? dy[i] * s : 0.0f;
        } else {
            #pragma omp parallel for simd if (parallel: worth_threads(n, kLinearParallelMin))
            for (int64_t i = 0; i < n; i++) m[i] = counter_uniform(seed, i) >= p ? dy[i] * s : 0.0f;
        }
        g = m;
    }
    if (dx.data) gemm_in(precision, false, false, rows, in, out, g, out, w, in, dx.data, in, dx.add);   // dx = g W
    if (dw.data) gemm_in(precision, true, false, out, in, rows, g, out, x, in, dw.data, in, dw.add);    // dW = g^T x
    if (db.data)   // db = sum over rows of g
        column_sums<1>(rows, out, kLinearParallelMin, {db}, [g, out](int64_t r, int64_t j0, int64_t j1, float* const* sum) {
            for (int64_t j = j0; j < j1; j++) sum[0][j - j0] += g[r * out + j];
        });
}

Tensor linear_reference(const Tensor& x, const Tensor& w, const Tensor& b, bool relu, const DropoutDraws& drop) {
    Tensor y = matmul(x, w, false, true);   // (..., out)
    if (b.defined()) y = y + b;
    if (relu) y = autograd::relu(y);
    return drop.active() ? dropout_reference(y, drop) : y;
}

}  // namespace autograd::kernels
