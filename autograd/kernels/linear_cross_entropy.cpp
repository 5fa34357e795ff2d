#include "autograd/kernels/linear_cross_entropy.h"

#include <algorithm>
#include <vector>

#include "autograd/kernels/cross_entropy.h"
#include "autograd/kernels/linear.h"
#include "autograd/kernels/parallel.h"
#include "autograd/kernels/softmax_rows.h"

namespace autograd::kernels {

int64_t logits_chunk_rows(int64_t V) { return std::max<int64_t>(1, (int64_t{1} << 21) / std::max<int64_t>(V, 1)); }

float linear_cross_entropy_forward(float* dx, float* dw, float* db, float* scratch, const float* x, const float* w, const float* b,
                                   const int32_t* targets, const LinearCrossEntropyDims& d, Precision precision) {
    const int64_t R = d.R, D = d.D, V = d.V;
    const int64_t n = counted_rows(targets, {R, V, d.ignore_index, d.label_smoothing});
    const float per_row = n ? 1.0f / static_cast<float>(n) : 0.0f;   // the mean's weight: dloss / n with dloss = 1
    const bool gradient = dx || dw || db;
    std::vector<float> lse(static_cast<size_t>(std::min(R, d.chunk_rows)));
    double total = 0.0;
    for (int64_t r0 = 0; r0 < R; r0 += d.chunk_rows) {
        const int64_t rows = std::min(d.chunk_rows, R - r0);
        const LinearDims ld{rows, D, V};
        const CrossEntropyDims cd{rows, V, d.ignore_index, d.label_smoothing};
        const float* xc = x + r0 * D;
        linear_forward(scratch, xc, w, b, ld, /*relu=*/false, DropoutDraws(), precision);   // z = x W^T + b  (rows, V)
        cross_entropy_rows(total, lse.data(), scratch, targets + r0, cd);                  // each row's loss, added to total
        if (!gradient) continue;
        // dz = (softmax(z) - q) / n, over z itself: the logits are not needed again
        cross_entropy_rows_backward({scratch, false}, per_row, scratch, lse.data(), targets + r0, cd);
        // then nn::linear's backward with dy = dz: dx = dz W (these rows'), dW += dz^T x, db += sum of dz's rows;
        // the first chunk writes dW and db, the others add
        linear_backward({dx ? dx + r0 * D : nullptr, false}, {dw, r0 > 0}, {b ? db : nullptr, r0 > 0}, scratch, xc, w,
                        /*y=*/nullptr, ld, /*relu=*/false, DropoutDraws(), precision);
    }
    return n ? static_cast<float>(total / static_cast<double>(n)) : 0.0f;
}

void scale_saved_gradient(GradOut out, float dloss, const float* saved, int64_t n) {
    if (!out.data) return;
    float* o = out.data;
    const bool add = out.add;
    parallel_blocks(n, worth_threads(n, kLinearParallelMin), [=](int64_t begin, int64_t end) {
        #pragma omp simd
        for (int64_t i = begin; i < end; i++) o[i] = (add ? o[i] : 0.0f) + dloss * saved[i];
    });
}

// linear_cross_entropy_forward's gradient as plain loops (linear_cross_entropy.h): chunks of one row.
void linear_cross_entropy_backward_reference(float* dx, float* dw, float* db, const float* x, const float* w, const float* b,
                                             const int32_t* targets, const LinearCrossEntropyDims& d) {
    const int64_t R = d.R, D = d.D, V = d.V;
    int64_t n = 0;   // the rows the mean is over
    for (int64_t row = 0; row < R; row++)
        if (targets[row] != d.ignore_index) n++;
    std::vector<float> z(V), dz(V);   // one row of logits, and its gradient
    for (int64_t row = 0; row < R; row++) {
        const float* x_row = x + row * D;
        // 1) the row's logits: z = W x_row + b   (V)
        for (int64_t j = 0; j < V; j++) {
            z[j] = b ? b[j] : 0.0f;
            for (int64_t k = 0; k < D; k++) z[j] += w[j * D + k] * x_row[k];
        }
        // 2) dz = (p − q) / n: cross-entropy's backward for this one row (0 if it is ignored)
        const LogSumExp l = log_sum_exp_row(z.data(), V);
        const float lse = l.max + l.log_sum;
        std::fill(dz.begin(), dz.end(), 0.0f);
        if (n > 0)
            cross_entropy_backward_reference(dz.data(), 1.0f / static_cast<float>(n), z.data(), &lse, targets + row,
                                             {1, V, d.ignore_index, d.label_smoothing});
        // 3) the Linear's backward with dy = dz: dx_row = dz W, dW += dz x_rowᵀ, db += dz
        for (int64_t j = 0; j < V; j++) {
            for (int64_t k = 0; k < D; k++) {
                dx[row * D + k] += dz[j] * w[j * D + k];
                dw[j * D + k] += dz[j] * x_row[k];
            }
            if (db) db[j] += dz[j];
        }
    }
}

}  // namespace autograd::kernels
