#include "autograd/kernels/linear_cross_entropy.h"

#include <algorithm>
#include <vector>

#include "autograd/kernels/cross_entropy.h"
#include "autograd/kernels/linear.h"
#include "autograd/kernels/parallel.h"

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

}  // namespace autograd::kernels
