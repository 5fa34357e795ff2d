#include "autograd/kernels/linear.h"

#include <algorithm>

#include "autograd/kernels/allocator.h"
#include "autograd/kernels/gemm_dispatch.h"
#include "autograd/kernels/parallel.h"

namespace autograd::kernels {

void linear_forward(float* y, const float* x, const float* w, const float* b, const LinearDims& d, bool relu,
                    const DropoutDraws& drop, Precision precision, const PackedBf16B* packed_w_t) {
    const int64_t rows = d.rows, out = d.out;
    if (precision == Precision::bf16 && packed_w_t) gemm_bf16(false, rows, x, d.in, *packed_w_t, y, out, false);   // y = x W^T
    else gemm_in(precision, false, true, rows, out, d.in, x, d.in, w, d.in, y, out, false);                          // y = x W^T
    // the epilogue: bias, ReLU, dropout, in one pass over y
    const bool dropping = drop.active();
    const DropoutDraws dr = drop;   // a local copy: lets the loop vectorize
    parallel_for(rows, worth_threads(rows * out, kLinearParallelMin), [=](int64_t r) {
        float* yr = y + r * out;
        #pragma omp simd   // every test below is a select, not a branch: the loop vectorizes
        for (int64_t j = 0; j < out; j++) {
            float v = yr[j] + (b ? b[j] : 0.0f);
            v = relu && v < 0.0f ? 0.0f : v;
            if (dropping) v *= dr.kept_factor(r * out + j);
            yr[j] = v;
        }
    });
}

void linear_backward(GradOut dx, GradOut dw, GradOut db, const float* dy, const float* x, const float* w,
                     const float* y, const LinearDims& d, bool relu, const DropoutDraws& drop, Precision precision) {
    const int64_t rows = d.rows, in = d.in, out = d.out, n = rows * out;
    // In the forward pass this was y = dropout(act(z)), z = x W^T + b. So first g = dL/dz: with
    // ReLU, y > 0 exactly where the unit was on and the element kept, so g = dy * scale there and
    // 0 elsewhere (y alone tells, no mask kept); without ReLU, g = dy * keep. Then, from z = x W^T + b:
    //     dx = g W    (rows, in)      dW = g^T x    (out, in)      db = sum over rows of g
    FloatBuffer masked;   // g, when it differs from dy
    const float* g = dy;
    if (relu || drop.active()) {
        masked.resize(n);
        float* m = masked.data();
        const DropoutDraws dr = drop;   // a local copy: lets the loops below vectorize
        const float s = drop.scale;
        // Two branch-free loops rather than one with a test inside: a ReLU mask is ~50% random,
        // and a mispredicted branch per element costs more than the rest of the loop. Each
        // multiplies dy by a selected factor (dropout.h says why that form).
        if (relu) {
            parallel_blocks(n, worth_threads(n, kLinearParallelMin), [=](int64_t begin, int64_t end) {
                #pragma omp simd
                for (int64_t i = begin; i < end; i++) m[i] = dy[i] * (y[i] > 0.0f ? s : 0.0f);
            });
        } else {
            parallel_blocks(n, worth_threads(n, kLinearParallelMin), [=](int64_t begin, int64_t end) {
                #pragma omp simd
                for (int64_t i = begin; i < end; i++) m[i] = dy[i] * dr.kept_factor(i);
            });
        }
        g = m;
    }
    const GemmCall dx_gemm{false, false, int(rows), int(in), int(out), g, int(out), w, int(in), dx.data, int(in), dx.add},   // dx = g W
                   dw_gemm{true, false, int(out), int(in), int(rows), g, int(out), x, int(in), dw.data, int(in), dw.add};   // dW = g^T x
    auto bias_gradient = [&] {   // db = sum over rows of g
        column_sums<1>(rows, out, kLinearParallelMin, {db}, [g, out](int64_t r, int64_t j0, int64_t j1, float* const* sum) {
            for (int64_t j = j0; j < j1; j++) sum[0][j - j0] += g[r * out + j];
        });
    };
    if (dx.data && dw.data) {   // side by side on two threads, db on dx's thread while dW finishes
        gemm_pair_in(precision, dx_gemm, dw_gemm, db.data ? std::function<void()>(bias_gradient) : nullptr);
        return;
    }
    if (dx.data) gemm_in(precision, dx_gemm);
    if (dw.data) gemm_in(precision, dw_gemm);
    if (db.data) bias_gradient();
}

}  // namespace autograd::kernels
