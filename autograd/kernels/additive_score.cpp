#include "autograd/kernels/additive_score.h"

#include <vector>

#include "autograd/kernels/allocator.h"
#include "autograd/kernels/fast_math.h"
#include "autograd/kernels/parallel.h"

namespace autograd::kernels {

void additive_score_forward(float* e, const float* k, const float* q, const float* v, const AdditiveScoreDims& d) {
    const int64_t S = d.S, A = d.A;
    parallel_for(d.B, worth_threads(d.B * S * A, kAdditiveScoreParallelMin), [=](int64_t b) {   // rows are independent
        const float* qb = q + b * A;
        for (int64_t s = 0; s < S; s++) {
            const float* ks = k + (b * S + s) * A;
            float sum = 0.0f;
            #pragma omp simd reduction(+ : sum)   // a fixed order of partial sums: the same bits on any thread count
            for (int64_t a = 0; a < A; a++) sum += v[a] * tanh_fast(ks[a] + qb[a]);
            e[b * S + s] = sum;
        }
    });
}

void additive_score_backward(GradOut dk, GradOut dq, GradOut dv, const float* de, const float* k, const float* q, const float* v,
                             const AdditiveScoreDims& d) {
    const int64_t B = d.B, S = d.S, A = d.A;
    // In the forward pass this was, with t = tanh(k[b, s, a] + q[b, a]):
    //     e[b, s] = sum_a v[a] t[b, s, a]
    // so, with g = de[b, s] and tanh' = 1 - t^2:
    //     dpre[b, s, a] = g v[a] (1 - t^2)      the gradient of the tanh's argument
    //     dk[b, s, a] = dpre[b, s, a]           dq[b, a] = sum_s dpre[b, s, a]   (q is added to every s)
    //     dv[a] = sum_(b, s) g t[b, s, a]
    // Threads split the rows b: row b's dk and dq are its own. t goes to a scratch buffer, for dv,
    // whose sum over every row runs afterwards, split by columns a (column_sums), in row order.
    FloatBuffer t(B * S * A);
    float* tt = t.data();
    float *dk_out = dk.data, *dq_out = dq.data;
    const bool dk_add = dk.add, dq_add = dq.add;
    parallel_region(worth_threads(B * S * A, kAdditiveScoreParallelMin), [=](int team, int thread) {
        FloatBuffer dpre_row(A);   // this thread's dpre[b, s, :]
        float* dp = dpre_row.data();
        const auto [first, last] = block_of(B, team, thread);
        for (int64_t b = first; b < last; b++) {
            const float* qb = q + b * A;
            float* dqb = dq_out ? dq_out + b * A : nullptr;
            if (dqb && !dq_add)
                for (int64_t a = 0; a < A; a++) dqb[a] = 0.0f;
            for (int64_t s = 0; s < S; s++) {
                const float g = de[b * S + s];
                const float* ks = k + (b * S + s) * A;
                float* ts = tt + (b * S + s) * A;
                #pragma omp simd
                for (int64_t a = 0; a < A; a++) {
                    const float th = tanh_fast(ks[a] + qb[a]);
                    ts[a] = th;
                    dp[a] = g * v[a] * (1.0f - th * th);
                }
                if (float* dks = dk_out ? dk_out + (b * S + s) * A : nullptr) {
                    if (dk_add)
                        for (int64_t a = 0; a < A; a++) dks[a] += dp[a];
                    else
                        for (int64_t a = 0; a < A; a++) dks[a] = dp[a];
                }
                if (dqb)
                    for (int64_t a = 0; a < A; a++) dqb[a] += dp[a];
            }
        }
    });
    if (dv.data)
        column_sums<1>(B * S, A, kAdditiveScoreParallelMin, {dv}, [=](int64_t r, int64_t a0, int64_t a1, float* const* sum) {
            for (int64_t a = a0; a < a1; a++) sum[0][a - a0] += de[r] * tt[r * A + a];
        });
}

}  // namespace autograd::kernels
