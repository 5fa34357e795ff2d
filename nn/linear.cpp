#include "nn/linear.h"

#include <omp.h>

#include <stdexcept>

#include "autograd/kernels/parallel.h"
#include "nn/dropout.h"
#include "nn/init.h"

namespace nn {

using autograd::gemm;
using autograd::Node;
using autograd::shape_str;

// acc[j] += sum over rows r of g[r, j], for g (rows, cols); with `store`, acc[j] = that sum.
// Threads split the columns, and each walks the rows in order, so every sum has the same order
// whatever the thread count; the inner loop runs along a row, so memory is read contiguously.
static void column_sums_add(const float* g, int64_t rows, int64_t cols, float* acc, bool store) {
    #pragma omp parallel if (autograd::worth_threads(rows * cols, autograd::kLinearParallelMin))
    {
        const int nt = omp_get_num_threads(), id = omp_get_thread_num();
        const int64_t j0 = cols * id / nt, j1 = cols * (id + 1) / nt;
        autograd::FloatBuffer s(j1 - j0, 0.0f);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = j0; j < j1; j++) s[j - j0] += g[r * cols + j];
        for (int64_t j = j0; j < j1; j++) acc[j] = (store ? 0.0f : acc[j]) + s[j - j0];
    }
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act, float dropout_p, bool training) {
    if (weight.dim() != 2 || x.dim() < 1 || x.size(-1) != weight.size(1))
        throw std::invalid_argument("linear: input " + shape_str(x.shape()) + " does not match weight " +
                                    shape_str(weight.shape()) + " (expected input (..., " +
                                    (weight.dim() == 2 ? std::to_string(weight.size(1)) : "?") + "))");
    const int64_t in = weight.size(1), out = weight.size(0), rows = x.numel() / std::max<int64_t>(in, 1);
    if (bias.defined() && bias.shape() != Shape{out})
        throw std::invalid_argument("linear: bias " + shape_str(bias.shape()) + " does not match weight " + shape_str(weight.shape()));
    Shape ys = x.shape();
    ys.back() = out;
    Tensor y = Tensor::empty(ys);                                                   // (..., out)
    float* py = y.data();
    gemm(false, true, rows, out, in, x.data(), in, weight.data(), in, py, out, false);   // x W^T
    if (!(dropout_p >= 0.0f && dropout_p < 1.0f)) throw std::invalid_argument("linear: dropout must be in [0, 1)");
    const bool drop = training && dropout_p > 0.0f;
    const uint64_t seed = drop ? autograd::default_rng().next_u64() : 0;
    const float scale = drop ? 1.0f / (1.0f - dropout_p) : 1.0f;   // inverted dropout
    const float* pb = bias.defined() ? bias.data() : nullptr;
    const bool relu = act == Activation::relu;
    const float p = dropout_p;
    #pragma omp parallel for if (autograd::worth_threads(rows * out, autograd::kLinearParallelMin))
    for (int64_t r = 0; r < rows; r++) {
        float* yr = py + r * out;
        #pragma omp simd   // every test below is a select, not a branch: the loop vectorizes
        for (int64_t j = 0; j < out; j++) {
            float v = yr[j] + (pb ? pb[j] : 0.0f);
            v = relu && v < 0.0f ? 0.0f : v;
            if (drop) v = counter_uniform(seed, r * out + j) < p ? 0.0f : v * scale;
            yr[j] = v;
        }
    }

    // backward: first g = dL/d(x W^T + b). With ReLU, y > 0 exactly where the unit was on and the
    // element kept, so g = dy * scale there and 0 elsewhere; without ReLU, g = dy * keep * scale.
    // Then  dx = g W  (rows, in),   dW += g^T x  (out, in),   db += sum over rows of g.
    std::vector<Tensor> inputs = {x, weight};
    if (bias.defined()) inputs.push_back(bias);
    const char* name = act == Activation::relu ? (drop ? "linear_relu_dropout" : "linear_relu") : (drop ? "linear_dropout" : "linear");
    autograd::record(y, inputs, name, [rows, in, out, act, drop, seed, dropout_p, scale](Node& self) {
        const float *px = self.parent_data(0), *pw = self.parent_data(1), *py = self.data->data();
        autograd::FloatBuffer masked;   // from the allocator cache, like tensors
        const float* g = self.grad.data();
        if (act == Activation::relu || drop) {
            masked.resize(rows * out);
            float* m = masked.data();
            const int64_t n = rows * out;
            const float s = scale, p = dropout_p;   // locals: lets the loops below vectorize
            // Two branch-free loops rather than one with a test inside: a ReLU mask is ~50%
            // random, and a mispredicted branch per element cost more than the rest of the loop.
            if (act == Activation::relu) {
                #pragma omp parallel for simd if (parallel: autograd::worth_threads(n, autograd::kLinearParallelMin))
                for (int64_t i = 0; i < n; i++) m[i] = py[i] > 0.0f ? g[i] * s : 0.0f;
            } else {
                #pragma omp parallel for simd if (parallel: autograd::worth_threads(n, autograd::kLinearParallelMin))
                for (int64_t i = 0; i < n; i++) m[i] = counter_uniform(seed, i) >= p ? g[i] * s : 0.0f;
            }
            g = m;
        }
        bool fresh = false;   // an empty gradient: store into it instead of adding
        if (float* dx = self.parent_grad_for_write(0, &fresh)) gemm(false, false, rows, in, out, g, out, pw, in, dx, in, !fresh);
        if (float* dw = self.parent_grad_for_write(1, &fresh)) gemm(true, false, out, in, rows, g, out, px, in, dw, in, !fresh);
        if (self.parents.size() > 2)
            if (float* db = self.parent_grad_for_write(2, &fresh)) column_sums_add(g, rows, out, db, fresh);
    });
    return y;
}

Linear::Linear(int64_t in_features, int64_t out_features, LinearOptions opt) {
    if (in_features <= 0 || out_features <= 0)
        throw std::invalid_argument("Linear: features must be positive, got in=" + std::to_string(in_features) +
                                    " out=" + std::to_string(out_features));
    weight = register_parameter("weight", Tensor::empty({out_features, in_features}));
    init::xavier_uniform_(weight);
    if (opt.bias) bias = register_parameter("bias", Tensor::zeros({out_features}));
}

}  // namespace nn
