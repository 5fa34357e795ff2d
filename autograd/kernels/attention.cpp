#include "autograd/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/kernels/allocator.h"
#include "autograd/kernels/gemm_bf16.h"
#include "autograd/kernels/parallel.h"
#include "autograd/kernels/softmax_rows.h"
#include "autograd/ops.h"

namespace autograd::kernels {

void attention_forward(float* out, float* P, const float* q, const float* k, const float* v, const uint8_t* allowed,
                       const AttentionDims& d, const DropoutDraws& draws, Precision precision) {
    const int64_t B = d.B, H = d.H, T = d.T, S = d.S, Dk = d.Dk, D = d.D();
    const float scale = 1.0f / std::sqrt(static_cast<float>(Dk));
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    #pragma omp parallel if (worth_threads(B * H * T * S * Dk, kAttentionParallelMin))
    {
        // Each thread's own copy of the draws: the compiler then knows no store in the loops below
        // changes them, and vectorizes the keep-factor loop (through the shared reference it
        // does not: measured, 2x the kernel's time at D=128).
        const DropoutDraws drop = draws;
        FloatBuffer dropped(drop.active() ? T * S : 0);   // per-thread scratch
        #pragma omp for schedule(static)
        for (int64_t bh = 0; bh < B * H; bh++) {
            const int64_t b = bh / H, h = bh % H;
            const float *Q = q + b * T * D + h * Dk, *K = k + b * S * D + h * Dk, *V = v + b * S * D + h * Dk;
            float* Pbh = P + bh * T * S;
            // 1) scores = Q K^T                                                    (T, S)
            gemm_in(precision, false, true, T, S, Dk, Q, D, K, D, Pbh, S, false);
            // 2) scale by 1/sqrt(Dk); a masked key's score becomes -inf, which softmax sends to
            //    exactly 0 (a select, not a branch per element: a branch on the mask mispredicts).
            //    The same pass finds the row's max, which softmax needs.
            for (int64_t t = 0; t < T; t++) {
                float* row = Pbh + t * S;
                const uint8_t* ok = allowed ? allowed + (b * T + t) * S : nullptr;
                float m = kNegInf;
                for (int64_t s = 0; s < S; s++) {
                    row[s] = !ok || ok[s] ? row[s] * scale : kNegInf;
                    m = std::max(m, row[s]);
                }
                softmax_row_with_max(row, row, S, m);
            }
            // 3) out_h = dropout(P) V_h, written into columns [h*Dk, (h+1)*Dk) of out      (T, Dk)
            const float* Pused = Pbh;
            if (drop.active()) {
                #pragma omp simd
                for (int64_t i = 0; i < T * S; i++) dropped[i] = Pbh[i] * drop.keep(bh * T * S + i);
                Pused = dropped.data();
            }
            gemm_in(precision, false, false, T, Dk, S, Pused, S, V, D, out + b * T * D + h * Dk, D, false);
        }
    }
}

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                        const float* v, const float* P, const AttentionDims& d, const DropoutDraws& draws,
                        Precision precision) {
    const int64_t B = d.B, H = d.H, T = d.T, S = d.S, Dk = d.Dk, D = d.D();
    const float scale = 1.0f / std::sqrt(static_cast<float>(Dk));
    const bool dropping = draws.active();
    #pragma omp parallel if (worth_threads(B * H * T * S * Dk, kAttentionParallelMin))
    {
        const DropoutDraws drop = draws;   // each thread's own copy, as in the forward
        FloatBuffer dP(T * S), Pd(dropping ? T * S : 0), keep(dropping ? T * S : 0);   // per-thread scratch
        #pragma omp for schedule(static)
        for (int64_t bh = 0; bh < B * H; bh++) {
            const int64_t b = bh / H, h = bh % H, qo = b * T * D + h * Dk, ko = b * S * D + h * Dk;
            const float *Pbh = P + bh * T * S, *dO = dout + qo;
            const float* Pused = Pbh;
            if (dropping) {   // the keep factors, drawn again from the seed, once for both uses
                #pragma omp simd
                for (int64_t i = 0; i < T * S; i++) {
                    keep[i] = drop.keep(bh * T * S + i);
                    Pd[i] = Pbh[i] * keep[i];
                }
                Pused = Pd.data();
            }
            if (dv) gemm_in(precision, true, false, S, Dk, T, Pused, S, dO, D, dv + ko, D, true);   // dV += Pd^T dO
            if (!dq && !dk) continue;
            gemm_in(precision, false, true, T, S, Dk, dO, D, v + ko, D, dP.data(), S, false);       // dPd = dO V^T
            for (int64_t t = 0; t < T; t++) {
                float* g = dP.data() + t * S;
                const float* p = Pbh + t * S;
                if (dropping)
                    for (int64_t s = 0; s < S; s++) g[s] *= keep[t * S + s];           // dP = dPd * keep
                float dot = 0.0f;
                for (int64_t s = 0; s < S; s++) dot += g[s] * p[s];
                for (int64_t s = 0; s < S; s++) g[s] = p[s] * (g[s] - dot) * scale;   // dSc, with the 1/sqrt(Dk)
            }
            if (dq) gemm_in(precision, false, false, T, Dk, S, dP.data(), S, k + ko, D, dq + qo, D, true);   // dQ += dSc K
            if (dk) gemm_in(precision, true, false, S, Dk, T, dP.data(), S, q + qo, D, dk + ko, D, true);    // dK += dSc^T Q
        }
    }
}

Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, int64_t H, const Mask& mask,
                           const DropoutDraws& drop) {
    const int64_t B = q.size(0), T = q.size(1), S = k.size(1), D = q.size(2), Dk = D / H;
    // 1) split the heads: (B, T, D) -> (B, T, H, Dk) -> (B, H, T, Dk)
    const Tensor qh = transpose(q.reshape({B, T, H, Dk}), 1, 2);
    const Tensor kh = transpose(k.reshape({B, S, H, Dk}), 1, 2);
    const Tensor vh = transpose(v.reshape({B, S, H, Dk}), 1, 2);
    // 2) scores, masked, softmax, dropout, weighted sum of values
    Tensor scores = matmul(qh, kh, false, true) * (1.0f / std::sqrt(static_cast<float>(Dk)));   // (B, H, T, S)
    if (!mask.data.empty()) {
        Mask blocked = mask;                                                   // masked_fill fills where true
        for (auto& m : blocked.data) m = !m;
        if (blocked.dim() == 3) blocked.shape.insert(blocked.shape.begin() + 1, 1);   // (B, 1, T, S): all heads
        scores = masked_fill(scores, blocked, -std::numeric_limits<float>::infinity());
    }
    Tensor weights = softmax(scores);                                          // (B, H, T, S)
    if (drop.active()) weights = dropout_reference(weights, drop);
    const Tensor x = matmul(weights, vh);                                      // (B, H, T, Dk)
    // 3) concatenate the heads: (B, H, T, Dk) -> (B, T, H, Dk) -> (B, T, D)
    return transpose(x, 1, 2).reshape({B, T, D});
}

}  // namespace autograd::kernels
