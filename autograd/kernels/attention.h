// The scaled dot-product attention kernel, over H heads at once (Vaswani et al. 2017, 3.2.1):
//     out_h = dropout(softmax(Q_h K_h^T / sqrt(Dk), masked keys removed)) V_h   for every head h
// Head h of a token is the slice [h*Dk, (h+1)*Dk) of its D-vector (the (B, T, H, Dk) view of
// (B, T, D)): each head's matrices are read and written in place through gemm's row stride
// (lda = D), so splitting into heads and concatenating them back costs no copies and no
// transposes. nn::scaled_dot_product_attention (nn/attention.cpp) is the autograd op around it.
#pragma once
#include <cstdint>

#include "autograd/kernels/dropout.h"
#include "autograd/mixed_precision.h"
#include "autograd/tensor.h"

namespace autograd::kernels {

struct AttentionDims {
    int64_t B, H, T, S, Dk;   // batch, heads, queries, keys, per-head width
    int64_t D() const { return H * Dk; }
};

// q (B, T, D), k and v (B, S, D) -> out (B, T, D), and the attention weights P (B, H, T, S),
// before dropout (the backward needs them; they are also what a heatmap shows).
// allowed (B, T, S): 1 = query t may attend to key s, or nullptr for no mask. A query with no
// allowed key gets weight 0 everywhere (and output 0). precision: the format the two products
// (Q K^T and P V) read their inputs in; softmax, P and out are fp32 either way.
void attention_forward(float* out, float* P, const float* q, const float* k, const float* v, const uint8_t* allowed,
                       const AttentionDims& d, const DropoutDraws& drop, Precision precision = Precision::fp32);

// Adds (+=) into dq (B, T, D), dk and dv (B, S, D); a nullptr gradient is skipped. Per (b, h),
// with Pd = P * keep (dropout) and out = Pd V:
//   dV += Pd^T dO                          dPd = dO V^T,   dP = dPd * keep
//   dSc = P * (dP - rowsum(dP * P))        (softmax backward; masked P = 0 gives dSc = 0 there)
//   dQ += dSc K / sqrt(Dk),   dK += dSc^T Q / sqrt(Dk)       (Sc = Q K^T / sqrt(Dk))
// The four products use `precision`, as the forward did; the softmax backward is fp32.
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                        const float* v, const float* P, const AttentionDims& d, const DropoutDraws& drop,
                        Precision precision = Precision::fp32);

// The reference, composed from autograd ops step by step as the paper draws it: split the heads
// (reshape + transpose to (B, H, T, Dk)), matmul, masked_fill, softmax, dropout, matmul,
// concatenate. mask broadcasts to (B, T, S) (1 = may attend) or is empty. -> (B, T, D)
Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const Mask& mask = Mask(),
                           const DropoutDraws& drop = {});

}  // namespace autograd::kernels
