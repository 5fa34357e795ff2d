// gemm_in: the one place that picks the kernel for a matrix product by its precision.
//
//   fp32 -> gemm()       (gemm.h: fp32 inputs, fp32 accumulation)
//   bf16 -> gemm_bf16()  (gemm_bf16.h: inputs rounded to bfloat16, fp32 accumulation)
//
// Every product that mixed precision may change calls this: autograd::matmul (the plain path)
// and the fused linear and attention kernels. The op that calls it reads the precision once,
// where it is recorded (autograd::matmul_precision()), and keeps it for its backward.
#pragma once
#include <cstdint>
#include <functional>

#include "autograd/kernels/gemm.h"
#include "autograd/kernels/precision.h"

namespace autograd::kernels {

// C (M x N) = op(A) op(B) [+ C], the contract of gemm() (gemm.h), in the given precision.
void gemm_in(Precision precision, bool trans_a, bool trans_b, int M, int N, int K,
             const float* A, int lda, const float* B, int ldb,
             float* C, int ldc, bool accumulate);

void gemm_in(Precision precision, const GemmCall& g);   // the same, its arguments in one struct (gemm.h)

// Two independent products (neither reads what the other writes), such as a Linear layer's
// backward: dx = g W and dW = g^T x, the same number of multiply-adds. With two threads each
// product runs on a thread of its own, start to finish: one parallel region instead of two, no
// barriers inside, no B panel packed together, and at small sizes (D = 128) the two threads
// stay busier than when they split each product. Otherwise (one thread, more than two, small
// products, busy cores) the two run one after the other, each on the whole team. C gets the
// same bits either way: a product's sums do not depend on the thread that computes them.
// `then`, if given, is more work that touches neither product's output (the bias gradient): side
// by side, the first product's thread does it after its product, while the other thread is still
// on the second (dW, which packs both of its operands, is the slower of the two); else it runs last.
void gemm_pair_in(Precision precision, const GemmCall& first, const GemmCall& second,
                  const std::function<void()>& then = {});

}  // namespace autograd::kernels
