#include "autograd/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/kernels/allocator.h"
#include "autograd/kernels/gemm_dispatch.h"
#include "autograd/kernels/parallel.h"
#include "autograd/kernels/prefetch.h"
#include "autograd/kernels/softmax_rows.h"

namespace autograd::kernels {

// attention_forward and attention_backward ask for the next (b, h) pair's rows (prefetch_rows) while they compute this
// one's. A head's rows are short and far apart (Dk floats of each row of D), too scattered for
// the hardware prefetcher, so without it the products wait for each row in turn.

void attention_forward(float* out, float* P, const float* q, const float* k, const float* v, const uint8_t* allowed,
                       const AttentionDims& d, const DropoutDraws& draws, Precision precision, const int64_t* kv_slot) {
    const int64_t B = d.B, H = d.H, T = d.T, S = d.S, Dk = d.Dk, D = d.D(), KV = d.kv_rows;
    const float scale = 1.0f / std::sqrt(static_cast<float>(Dk));
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    parallel_region(worth_threads(B * H * T * S * Dk, kAttentionParallelMin), [=](int team, int thread) {
        // Each thread's own copy of the draws: the compiler then knows no store in the loops below
        // changes them, and vectorizes the keep-factor loop (through the shared reference it
        // does not, and the loop costs about as much as the rest of the kernel).
        const DropoutDraws drop = draws;
        FloatBuffer dropped(drop.active() ? T * S : 0);   // per-thread scratch
        const auto [first, last] = block_of(B * H, team, thread);   // this thread's (b, h) pairs
        for (int64_t bh = first; bh < last; bh++) {
            const int64_t b = bh / H, h = bh % H, slot = kv_slot ? kv_slot[b] : b;   // where b's keys and values are
            const float *Q = q + b * T * D + h * Dk, *K = k + slot * KV * D + h * Dk, *V = v + slot * KV * D + h * Dk;
            float* Pbh = P + bh * T * S;
            if (bh + 1 < last) {   // the next pair's rows, on their way while this one computes
                const int64_t nb = (bh + 1) / H, nh = (bh + 1) % H, ns = kv_slot ? kv_slot[nb] : nb;
                prefetch_rows(q + nb * T * D + nh * Dk, T, Dk, D);
                prefetch_rows(k + ns * KV * D + nh * Dk, S, Dk, D);
                prefetch_rows(v + ns * KV * D + nh * Dk, S, Dk, D);
            }
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
                for (int64_t i = 0; i < T * S; i++) dropped[i] = Pbh[i] * drop.kept_factor(bh * T * S + i);
                Pused = dropped.data();
            }
            gemm_in(precision, false, false, T, Dk, S, Pused, S, V, D, out + b * T * D + h * Dk, D, false);
        }
    });
}

// The backward of attention, one head at a time, in plain loops: the formulas the chapter
// (docs/07) derives, and the reference attention_backward is tested against (tests/test_kernels.cpp).
// In the forward pass this was, for head h of batch element b, query t and key s:
//     Sc[t][s] = sum_i Q[t][i] K[s][i] / sqrt(Dk)       (-inf where the mask forbids key s)
//     P[t][s]  = e^Sc[t][s] / sum_j e^Sc[t][j]          (softmax over the keys)
//     Pd[t][s] = P[t][s] keep[t][s]                     (dropout: keep = 0 or 1/(1-p); 1 without)
//     O[t][i]  = sum_s Pd[t][s] V[s][i]
// Walking back from dO = dL/dO, each line the chain rule through one line above:
//     dV[s][i]  += sum_t Pd[t][s] dO[t][i]              (O is a product: chapter 2's matmul rule)
//     dPd[t][s]  = sum_i dO[t][i] V[s][i],   dP[t][s] = dPd[t][s] keep[t][s]
//     dSc[t][s]  = sum_j dP[t][j] P[t][j] (delta_js - P[t][s])     (softmax's Jacobian, chapter 4)
//                = P[t][s] (dP[t][s] - sum_j dP[t][j] P[t][j])
//     dQ[t][i]  += sum_s dSc[t][s] K[s][i] / sqrt(Dk)
//     dK[s][i]  += sum_t dSc[t][s] Q[t][i] / sqrt(Dk)
// A masked key has P[t][s] = 0, so dSc[t][s] = 0: no gradient flows through it.
void attention_backward_reference(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                                  const float* v, const float* P, int64_t B, int64_t H, int64_t T, int64_t S, int64_t Dk,
                                  const DropoutDraws& drop) {
    const int64_t D = H * Dk;
    const float scale = 1.0f / std::sqrt(static_cast<float>(Dk));
    std::vector<float> dP(S);   // row t of dP
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            // head h of batch element b: columns [h*Dk, (h+1)*Dk) of each row; row t starts at t * D
            const float* Q = q + b * T * D + h * Dk;       // (T, Dk)
            const float* K = k + b * S * D + h * Dk;       // (S, Dk)
            const float* V = v + b * S * D + h * Dk;       // (S, Dk)
            const float* dO = dout + b * T * D + h * Dk;   // (T, Dk)
            const float* Pbh = P + (b * H + h) * T * S;    // (T, S); row t starts at t * S
            float* dQ = dq + b * T * D + h * Dk;           // (T, Dk)
            float* dK = dk + b * S * D + h * Dk;           // (S, Dk)
            float* dV = dv + b * S * D + h * Dk;           // (S, Dk)
            for (int64_t t = 0; t < T; t++) {
                for (int64_t s = 0; s < S; s++) {   // dV and dP, through O = Pd V and the dropout
                    const float keep = drop.keep(((b * H + h) * T + t) * S + s);
                    const float Pd = Pbh[t * S + s] * keep;
                    float dPd = 0.0f;
                    for (int64_t i = 0; i < Dk; i++) {
                        dV[s * D + i] += Pd * dO[t * D + i];
                        dPd += dO[t * D + i] * V[s * D + i];
                    }
                    dP[s] = dPd * keep;
                }
                float dot = 0.0f;   // sum_j dP[t][j] P[t][j]
                for (int64_t j = 0; j < S; j++) dot += dP[j] * Pbh[t * S + j];
                for (int64_t s = 0; s < S; s++) {   // dSc through the softmax, then dQ and dK through Sc = Q K^T / sqrt(Dk)
                    const float dSc = Pbh[t * S + s] * (dP[s] - dot);
                    for (int64_t i = 0; i < Dk; i++) {
                        dQ[t * D + i] += dSc * K[s * D + i] * scale;
                        dK[s * D + i] += dSc * Q[t * D + i] * scale;
                    }
                }
            }
        }
}

void attention_backward(GradOut dq, GradOut dk, GradOut dv, const float* dout, const float* q, const float* k,
                        const float* v, const float* P, const AttentionDims& d, const DropoutDraws& draws,
                        Precision precision) {
    const int64_t B = d.B, H = d.H, T = d.T, S = d.S, Dk = d.Dk, D = d.D(), KV = d.kv_rows;
    const float scale = 1.0f / std::sqrt(static_cast<float>(Dk));
    const bool dropping = draws.active();
    // attention_backward_reference's formulas (derived above it), per (b, h) as whole matrices:
    //     dV = Pd^T dO,   dP = (dO V^T) * keep,   dSc = P * (dP - rowsum(dP * P)),
    //     dQ = dSc K / sqrt(Dk),   dK = dSc^T Q / sqrt(Dk)
    // run as four gemm calls and one loop over the rows.
    // Each (b, h) writes its own columns [h*Dk, (h+1)*Dk) of dq, dk and dv: the threads never collide.
    parallel_region(worth_threads(B * H * T * S * Dk, kAttentionParallelMin), [=](int team, int thread) {
        const DropoutDraws drop = draws;   // each thread's own copy, as in the forward
        FloatBuffer dP(T * S), Pd(dropping ? T * S : 0), keep(dropping ? T * S : 0);   // per-thread scratch
        const auto [first, last] = block_of(B * H, team, thread);   // this thread's (b, h) pairs
        for (int64_t bh = first; bh < last; bh++) {
            const int64_t b = bh / H, h = bh % H, qo = b * T * D + h * Dk, ko = b * KV * D + h * Dk;
            const float *Pbh = P + bh * T * S, *dO = dout + qo;
            if (bh + 1 < last) {   // the next pair's rows, as in the forward
                const int64_t nb = (bh + 1) / H, nh = (bh + 1) % H, nqo = nb * T * D + nh * Dk, nko = nb * KV * D + nh * Dk;
                prefetch_rows(dout + nqo, T, Dk, D);
                prefetch_rows(q + nqo, T, Dk, D);
                prefetch_rows(k + nko, S, Dk, D);
                prefetch_rows(v + nko, S, Dk, D);
                prefetch_floats(P + (bh + 1) * T * S, T * S);
            }
            const float* Pused = Pbh;
            if (dropping) {   // the keep factors, drawn again from the seed, once for both uses
                #pragma omp simd
                for (int64_t i = 0; i < T * S; i++) {
                    keep[i] = drop.kept_factor(bh * T * S + i);
                    Pd[i] = Pbh[i] * keep[i];
                }
                Pused = Pd.data();
            }
            if (dv.data) gemm_in(precision, true, false, S, Dk, T, Pused, S, dO, D, dv.data + ko, D, dv.add);   // dV = Pd^T dO
            if (!dq.data && !dk.data) continue;
            gemm_in(precision, false, true, T, S, Dk, dO, D, v + ko, D, dP.data(), S, false);                   // dPd = dO V^T
            for (int64_t t = 0; t < T; t++) {
                float* g = dP.data() + t * S;
                const float* p = Pbh + t * S;
                if (dropping)
                    for (int64_t s = 0; s < S; s++) g[s] *= keep[t * S + s];           // dP = dPd * keep
                float dot = 0.0f;
                for (int64_t s = 0; s < S; s++) dot += g[s] * p[s];
                for (int64_t s = 0; s < S; s++) g[s] = p[s] * (g[s] - dot) * scale;   // dSc, with the 1/sqrt(Dk)
            }
            if (dq.data) gemm_in(precision, false, false, T, Dk, S, dP.data(), S, k + ko, D, dq.data + qo, D, dq.add);   // dQ = dSc K
            if (dk.data) gemm_in(precision, true, false, S, Dk, T, dP.data(), S, q + qo, D, dk.data + ko, D, dk.add);    // dK = dSc^T Q
        }
    });
}

}  // namespace autograd::kernels
