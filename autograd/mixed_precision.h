// Mixed precision: which number format matrix products read: autograd::matmul, and so the
// Linear layers and attention of both paths (the plain one and the fused kernels).
//
//   autograd::MixedPrecisionGuard bf16;   // while alive: their products read bfloat16 inputs
//   Tensor loss = ...forward...;          //   and accumulate in fp32
//   loss.backward();                      // the backward products use what the forward used
//
// Only the products' *inputs* are rounded to bf16 (8 bits of mantissa instead of 24); each
// product still sums in fp32 and writes fp32. Everything else stays fp32: the master weights,
// the gradients, Adam's moments, LayerNorm, softmax, the loss, embeddings and residual adds.
// bf16 keeps fp32's 8-bit exponent, so gradients do not underflow as they would in fp16, and no
// loss scaling is needed. docs/16-mixed-precision.md tells the whole story.
//
// The switch is an RAII guard over a thread_local flag, like NoGradGuard: read where a matmul,
// linear or attention op is *recorded*, and kept in its backward closure, so backward() needs no
// guard and a model built under the guard trains the same whichever thread calls backward().
#pragma once
#include "autograd/kernels/precision.h"

namespace autograd {

// The format a matrix product reads its inputs in, fp32 or bf16; accumulation and output are
// always fp32 (kernels/precision.h).
using kernels::Precision;

// What matrix products use now: bf16 inside a MixedPrecisionGuard, else fp32.
Precision matmul_precision();

// While alive, matrix products read bf16 inputs. With enabled =
// false it changes nothing, so a flag can decide: MixedPrecisionGuard mixed(o.bf16);
class MixedPrecisionGuard {
public:
    explicit MixedPrecisionGuard(bool enabled = true);
    ~MixedPrecisionGuard();
    MixedPrecisionGuard(const MixedPrecisionGuard&) = delete;
    MixedPrecisionGuard& operator=(const MixedPrecisionGuard&) = delete;
private:
    Precision prev_;
};

// x rounded to the nearest bf16 (ties to even), as a float: what a bf16 product reads in place of x.
// bf16 is fp32's top 16 bits: the sign, the same 8 exponent bits, 7 of the 23 mantissa bits.
float round_to_bf16(float x);

// Does this CPU multiply bf16 pairs in hardware (AVX512_BF16's vdpbf16ps)? Elsewhere bf16
// products are rounded copies multiplied in fp32: correct, but slower than fp32.
bool bf16_products_native();

}  // namespace autograd
