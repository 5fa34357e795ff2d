// The scaled dot-product attention kernel, over H heads at once (Vaswani et al. 2017, 3.2.1):
//     out_h = dropout(softmax(Q_h K_h^T / sqrt(Dk), masked keys removed)) V_h   for every head h
// Head h of a token is the slice [h*Dk, (h+1)*Dk) of its D-vector (the (B, T, H, Dk) view of
// (B, T, D)): each head's matrices are read and written in place through gemm's row stride
// (lda = D), so splitting into heads and concatenating them back costs no copies and no
// transposes. autograd::fused::attention (autograd/fused_ops.cpp) records these two as an
// autograd op; nn::scaled_dot_product_attention (nn/attention.cpp) calls it when fused kernels are on.
#pragma once
#include <cstdint>

#include "autograd/kernels/dropout.h"
#include "autograd/kernels/grad_out.h"
#include "autograd/kernels/precision.h"

namespace autograd::kernels {

struct AttentionDims {
    int64_t B, H, T, S, Dk;   // batch, heads, queries, keys attended to, per-head width
    int64_t kv_rows;          // rows of k and v per batch element as stored (>= S); the first S are read
    int64_t D() const { return H * Dk; }
};

// q (B, T, D), k and v (B, kv_rows, D) -> out (B, T, D), and the attention weights P (B, H, T, S),
// before dropout (the backward needs them; they are also what a heatmap shows). Only the first S
// rows of k and v are read. allowed (B, T, S): 1 = query t may attend to key s, or nullptr for
// no mask. A query with no allowed key gets weight 0 everywhere (and output 0). precision: the
// format the two products (Q K^T and P V) read their inputs in; softmax, P and out are fp32.
// kv_slot (B entries), or nullptr: batch element b reads k and v at slot kv_slot[b], their first
// index, instead of at b, so k and v may hold fewer (or more) than B sequences: beam search's
// hypotheses share their sentence's memory keys and values without a copy (models/kv_cache.h).
void attention_forward(float* out, float* P, const float* q, const float* k, const float* v, const uint8_t* allowed,
                       const AttentionDims& d, const DropoutDraws& drop, Precision precision = Precision::fp32,
                       const int64_t* kv_slot = nullptr);

// dq (B, T, D), dk and dv (B, kv_rows, D) from dout (B, T, D) and the forward's P; only the first
// S rows of dk and dv are written, so with kv_rows > S they must add (GradOut::add), and so must
// any two that are one buffer (each head's columns are written in turn). A GradOut with no data
// is skipped. The four products use `precision`, as the forward did; the softmax backward is fp32.
void attention_backward(GradOut dq, GradOut dk, GradOut dv, const float* dout, const float* q, const float* k,
                        const float* v, const float* P, const AttentionDims& d, const DropoutDraws& drop,
                        Precision precision = Precision::fp32);

// The same gradients in plain loops, one head at a time, fp32, with the derivation above it in
// attention.cpp: what the chapter reads, and what the test holds attention_backward equal to.
// q and dout (B, T, D), k and v (B, S, D) with D = H * Dk, P (B, H, T, S) the forward's weights,
// drop the forward's draws. Adds (+=) into dq (B, T, D), dk and dv (B, S, D): fill them with zeros.
void attention_backward_reference(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                                  const float* v, const float* P, int64_t B, int64_t H, int64_t T, int64_t S, int64_t Dk,
                                  const DropoutDraws& drop);

}  // namespace autograd::kernels
