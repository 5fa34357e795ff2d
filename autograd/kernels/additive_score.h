// The additive attention's score (Bahdanau et al. 2014), for B rows, each against its S source
// positions:
//     e[b, s] = sum_a v[a] tanh(k[b, s, a] + q[b, a])
// k (B, S, A) the keys W_k h_s + b_k, computed once per sentence; q (B, A) the query's part W_q q_i;
// v (A,). One pass forward and one backward instead of the plain form's broadcast add, tanh over
// every (b, s, a), and a product with v (nn/soft_attention.cpp). No tanh is kept: the backward
// computes it again (kernels/fast_math.h makes that cheap), so the op keeps only its inputs.
// autograd::fused::additive_score (autograd/fused_ops.cpp) records these two as an autograd op;
// nn::SoftAttention::forward calls it when fused kernels are on.
#pragma once
#include <cstdint>

#include "autograd/kernels/grad_out.h"

namespace autograd::kernels {

struct AdditiveScoreDims {
    int64_t B, S, A;   // rows, source positions, the attention's width
};

// e (B, S) from k (B, S, A), q (B, A), v (A,).
void additive_score_forward(float* e, const float* k, const float* q, const float* v, const AdditiveScoreDims& d);

// dk (B, S, A), dq (B, A), dv (A,) from de (B, S) and the forward's inputs; a GradOut with no
// data is skipped. Writes dk and dq row by row, then dv (k, q and v are never one tensor: their
// shapes differ).
void additive_score_backward(GradOut dk, GradOut dq, GradOut dv, const float* de, const float* k, const float* q, const float* v,
                             const AdditiveScoreDims& d);

}  // namespace autograd::kernels
