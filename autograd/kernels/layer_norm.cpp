#include "autograd/kernels/layer_norm.h"

#include <cmath>

#include "autograd/kernels/allocator.h"
#include "autograd/kernels/parallel.h"

namespace autograd::kernels {

void layer_norm_forward(float* y, float* mean, float* rstd, const float* x, const float* gain, const float* bias,
                        const LayerNormDims& d, float eps) {
    const int64_t R = d.R, C = d.C;
    parallel_for(R, worth_threads(R * C, kLayerNormParallelMin), [=](int64_t r) {
        const float* xr = x + r * C;
        float m = 0.0f, var = 0.0f;
        // `omp simd reduction` lets the compiler keep one partial sum per vector lane (a fixed
        // order, so still deterministic); a plain float sum must be added strictly in sequence
        #pragma omp simd reduction(+ : m)
        for (int64_t i = 0; i < C; i++) m += xr[i];
        m /= static_cast<float>(C);
        #pragma omp simd reduction(+ : var)
        for (int64_t i = 0; i < C; i++) var += (xr[i] - m) * (xr[i] - m);
        const float rs = 1.0f / std::sqrt(var / static_cast<float>(C) + eps);
        for (int64_t i = 0; i < C; i++) y[r * C + i] = (xr[i] - m) * rs * gain[i] + bias[i];
        mean[r] = m;
        rstd[r] = rs;
    });
}

void layer_norm_backward(GradOut dx, GradOut dgain, GradOut dbias, const float* dy, const float* x, const float* mean,
                         const float* rstd, const float* gain, const LayerNormDims& d) {
    const int64_t R = d.R, C = d.C;
    // In the forward pass this was, per row, xhat = (x - mean) * rstd and y = xhat * gain + bias.
    // With g = dy * gain = dL/dxhat, and mean and rstd both functions of the whole row:
    //     dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
    // (the two mean terms are the gradient flowing through the row's mean and its variance), and
    //     dgain = sum over rows of dy * xhat,    dbias = sum over rows of dy.
    if (float* out = dx.data) {
        const bool add = dx.add;
        parallel_for(R, worth_threads(R * C, kLayerNormParallelMin), [=](int64_t r) {
            const float m = mean[r], rs = rstd[r];
            const float *xr = x + r * C, *gr = dy + r * C;
            float mg = 0.0f, mgx = 0.0f;   // mean(g), mean(g * xhat)
            #pragma omp simd reduction(+ : mg, mgx)
            for (int64_t i = 0; i < C; i++) {
                const float g = gr[i] * gain[i];
                mg += g;
                mgx += g * (xr[i] - m) * rs;
            }
            mg /= static_cast<float>(C);
            mgx /= static_cast<float>(C);
            float* dxr = out + r * C;
            for (int64_t i = 0; i < C; i++)
                dxr[i] = (add ? dxr[i] : 0.0f) + rs * (gr[i] * gain[i] - mg - (xr[i] - m) * rs * mgx);
        });
    }
    if (dgain.data || dbias.data)
        column_sums<2>(R, C, kLayerNormParallelMin, {dgain, dbias}, [&](int64_t r, int64_t i0, int64_t i1, float* const* sum) {
            const float m = mean[r], rs = rstd[r];
            for (int64_t i = i0; i < i1; i++) {
                sum[0][i - i0] += dy[r * C + i] * (x[r * C + i] - m) * rs;   // dgain: dy * xhat
                sum[1][i - i0] += dy[r * C + i];                             // dbias: dy
            }
        });
}

// layer_norm_backward's plain twin (layer_norm.h): the chapter's formulas, one row at a time.
void layer_norm_backward_reference(float* dx, float* dgain, float* dbias, const float* dy, const float* x, const float* mean,
                                   const float* rstd, const float* gain, const LayerNormDims& d) {
    const int64_t R = d.R, C = d.C;
    for (int64_t row = 0; row < R; row++) {
        const float mu = mean[row], r = rstd[row];
        const float *x_row = x + row * C, *dy_row = dy + row * C;
        // x̂_j = (x_j − μ)·r and g = dy ⊙ γ; μ and r depend on every x_j of the row, so
        //     dx_j = r · (g_j − mean(g) − x̂_j · mean(g ⊙ x̂))
        //     dγ  += dy ⊙ x̂          dβ += dy          (summed over the rows)
        float mean_g = 0.0f, mean_g_xhat = 0.0f;
        for (int64_t j = 0; j < C; j++) {
            const float xhat = (x_row[j] - mu) * r, g = dy_row[j] * gain[j];
            mean_g += g;
            mean_g_xhat += g * xhat;
        }
        mean_g /= static_cast<float>(C);
        mean_g_xhat /= static_cast<float>(C);
        for (int64_t j = 0; j < C; j++) {
            const float xhat = (x_row[j] - mu) * r, g = dy_row[j] * gain[j];
            dx[row * C + j] += r * (g - mean_g - xhat * mean_g_xhat);
            dgain[j] += dy_row[j] * xhat;
            dbias[j] += dy_row[j];
        }
    }
}

}  // namespace autograd::kernels
