// exp, tanh and the sigmoid for the fused kernels' loops, written so the compiler vectorizes them.
//
// std::exp and std::tanh are calls into the C library, one element at a time: a loop that calls
// them cannot be vectorized (GCC would need -ffast-math to use glibc's vector versions). In the
// recurrent models' fused kernels (an additive attention's tanh over every (row, source position,
// feature), the GRU's gates) those calls were most of a training step. These are the same
// functions in plain arithmetic on floats and integers, inline, so a loop around them runs 8 or 16
// at once. Two habits make that so on every instruction set GCC and clang build for: a choice
// between two values is a bitwise select (select below), not `c ? a : b`, which GCC 12 leaves as
// a branch on AVX2 and SSE; and rounding is the add-and-subtract of 1.5 * 2^23, not floor(),
// which vectorizes only under -fno-trapping-math. Accuracy against the double-precision
// functions over the whole float range (tests/test_kernels.cpp): exp within 2 ulp, tanh and the
// sigmoid within 4e-7 relative. The plain path (autograd::exp, tanh, sigmoid) keeps std:: and is
// the reference the fused kernels are tested against.
#pragma once
#include <bit>
#include <cstdint>

namespace autograd::kernels {

// c ? a : b, as bits: all ones or all zeros masks each value.
inline float select(bool c, float a, float b) {
    const int32_t m = -static_cast<int32_t>(c);
    return std::bit_cast<float>((std::bit_cast<int32_t>(a) & m) | (std::bit_cast<int32_t>(b) & ~m));
}

// e^x. x = n ln2 + r with n an integer and |r| <= ln2 / 2 (ln2 in two parts, so r is exact to
// float precision); e^r by its Taylor series to r^7 (the next term is below 2^-25 of e^r); 2^n
// written straight into the exponent bits. Saturates outside [-87.3, 88.3] (e^-87.3 is near the
// smallest normal float, e^88.3 near the largest; no caller here needs inf).
inline float exp_fast(float x) {
    x = select(x < -87.3f, -87.3f, x);   // (a NaN compares false: it stays, and the result is NaN)
    x = select(x > 88.3f, 88.3f, x);
    const float t = x * 1.44269504f + 12582912.0f;                             // x / ln2 + 1.5 * 2^23: rounds it
    const float n = t - 12582912.0f;                                           // round(x / ln2)
    const int32_t k = std::bit_cast<int32_t>(t) - 0x4B400000;                  // the same, as an integer
    const float r = (x - n * 0.693145752f) - n * 1.42860677e-6f;               // x - n ln2, ln2 = hi + lo
    float p = 1.98412698e-4f;                                                  // 1/7!
    p = p * r + 1.38888889e-3f;                                                // 1/6!
    p = p * r + 8.33333333e-3f;                                                // 1/5!
    p = p * r + 4.16666667e-2f;                                                // 1/4!
    p = p * r + 1.66666667e-1f;                                                // 1/3!
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;                                                          // e^r
    return p * std::bit_cast<float>((k + 127) << 23);                          // e^r * 2^n
}

// tanh(x) = sign(x) (1 - t) / (1 + t) with t = e^-2|x|. Near 0, 1 - t cancels: there
// 1 - t = -expm1(-2|x|) comes from its own series instead, u - u^2/2! + u^3/3! - ... (u = 2|x| < 0.35).
inline float tanh_fast(float x) {
    const float ax = select(x < 0.0f, -x, x), u = 2.0f * ax;
    const float t = exp_fast(-u);
    float q = -2.48015873e-5f;                                                 // -1/8!
    q = q * u + 1.98412698e-4f;
    q = q * u - 1.38888889e-3f;
    q = q * u + 8.33333333e-3f;
    q = q * u - 4.16666667e-2f;
    q = q * u + 1.66666667e-1f;
    q = q * u - 0.5f;
    q = q * u + 1.0f;
    q = q * u;                                                                 // -expm1(-u)
    const float one_minus_t = select(u < 0.35f, q, 1.0f - t);
    const float y = one_minus_t / (2.0f - one_minus_t);                        // (1 - t) / (1 + t)
    return select(x < 0.0f, -y, y);
}

// σ(x) = 1 / (1 + e^-x), from e = e^-|x| <= 1 as autograd::sigmoid does, so nothing overflows.
inline float sigmoid_fast(float x) {
    const float e = exp_fast(select(x < 0.0f, x, -x));
    const float inv = 1.0f / (1.0f + e);
    return select(x >= 0.0f, inv, e * inv);
}

}  // namespace autograd::kernels
