#include "nn/layer_norm.h"

#include <omp.h>

#include <cmath>
#include <stdexcept>

#include "autograd/kernels/parallel.h"

namespace nn {

using autograd::Node;
using autograd::shape_str;

Tensor layer_norm(const Tensor& x, const Tensor& gain, const Tensor& bias, float eps) {
    const int64_t C = x.dim() ? x.size(-1) : 0;
    if (C == 0 || gain.shape() != Shape{C} || bias.shape() != Shape{C})
        throw std::invalid_argument("layer_norm: input " + shape_str(x.shape()) + " needs gain and bias of shape (" +
                                    std::to_string(C) + ",), got " + shape_str(gain.shape()) + " and " + shape_str(bias.shape()));
    const int64_t R = x.numel() / C;
    Tensor y = Tensor::empty(x.shape());                        // (..., C)
    auto stats = std::make_shared<autograd::FloatBuffer>(2 * R);   // per row: mean, 1/std
    const float *px = x.data(), *pg = gain.data(), *pb = bias.data();
    float* py = y.data();
    #pragma omp parallel for if (autograd::worth_threads(R * C, autograd::kLayerNormParallelMin))
    for (int64_t r = 0; r < R; r++) {
        const float* xr = px + r * C;
        float mean = 0.0f, var = 0.0f;
        // `omp simd reduction` lets the compiler keep one partial sum per vector lane (a fixed
        // order, so still deterministic); a plain float sum must be added strictly in sequence
        #pragma omp simd reduction(+ : mean)
        for (int64_t i = 0; i < C; i++) mean += xr[i];
        mean /= static_cast<float>(C);
        #pragma omp simd reduction(+ : var)
        for (int64_t i = 0; i < C; i++) var += (xr[i] - mean) * (xr[i] - mean);
        const float rstd = 1.0f / std::sqrt(var / static_cast<float>(C) + eps);
        for (int64_t i = 0; i < C; i++) py[r * C + i] = (xr[i] - mean) * rstd * pg[i] + pb[i];
        (*stats)[2 * r] = mean;
        (*stats)[2 * r + 1] = rstd;
    }
    // backward, per row, with xhat = (x - mean) * rstd and g = dy * gain:
    //   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
    // (the two mean terms are the gradient flowing through the row's mean and variance),
    //   dgain += sum over rows of dy * xhat,   dbias += sum over rows of dy.
    autograd::record(y, {x, gain, bias}, "layer_norm", [R, C, stats](Node& self) {
        const float *px = self.parent_data(0), *pg = self.parent_data(1), *dy = self.grad.data();
        const float* st = stats->data();
        bool fresh = false;   // dx has no gradient yet: store into it instead of adding
        if (float* dx = self.parent_grad_for_write(0, &fresh)) {
            #pragma omp parallel for if (autograd::worth_threads(R * C, autograd::kLayerNormParallelMin))
            for (int64_t r = 0; r < R; r++) {
                const float mean = st[2 * r], rstd = st[2 * r + 1];
                const float *xr = px + r * C, *gr = dy + r * C;
                float mg = 0.0f, mgx = 0.0f;
                #pragma omp simd reduction(+ : mg, mgx)
                for (int64_t i = 0; i < C; i++) {
                    const float g = gr[i] * pg[i];
                    mg += g;
                    mgx += g * (xr[i] - mean) * rstd;
                }
                mg /= static_cast<float>(C);
                mgx /= static_cast<float>(C);
                float* dxr = dx + r * C;
                for (int64_t i = 0; i < C; i++)
                    dxr[i] = (fresh ? 0.0f : dxr[i]) + rstd * (gr[i] * pg[i] - mg - (xr[i] - mean) * rstd * mgx);
            }
        }
        float* dg = self.parent_grad(1);
        float* db = self.parent_grad(2);
        if (dg || db) {
            // column sums over rows; threads split the columns and walk rows in order (fixed
            // summation order), reading each row contiguously
            #pragma omp parallel if (autograd::worth_threads(R * C, autograd::kLayerNormParallelMin))
            {
                const int nt = omp_get_num_threads(), id = omp_get_thread_num();
                const int64_t i0 = C * id / nt, i1 = C * (id + 1) / nt;
                autograd::FloatBuffer sg(i1 - i0, 0.0f), sb(i1 - i0, 0.0f);
                for (int64_t r = 0; r < R; r++) {
                    const float mean = st[2 * r], rstd = st[2 * r + 1];
                    for (int64_t i = i0; i < i1; i++) {
                        sg[i - i0] += dy[r * C + i] * (px[r * C + i] - mean) * rstd;
                        sb[i - i0] += dy[r * C + i];
                    }
                }
                for (int64_t i = i0; i < i1; i++) {
                    if (dg) dg[i] += sg[i - i0];
                    if (db) db[i] += sb[i - i0];
                }
            }
        }
    });
    return y;
}

LayerNorm::LayerNorm(int64_t features, float eps_) : eps(eps_) {
    if (features <= 0) throw std::invalid_argument("LayerNorm: features must be positive, got " + std::to_string(features));
    gain = register_parameter("gain", Tensor::ones({features}));
    bias = register_parameter("bias", Tensor::zeros({features}));
}

}  // namespace nn
