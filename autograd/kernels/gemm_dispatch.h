// gemm_in: the one place that picks the kernel for a matrix product by its precision.
//
//   fp32 -> gemm()       (gemm.h: fp32 inputs, fp32 accumulation)
//   bf16 -> gemm_bf16()  (gemm_bf16.h: inputs rounded to bfloat16, fp32 accumulation)
//
// Every product that mixed precision may change calls this: autograd::matmul (the plain path)
// and the fused linear and attention kernels. The precision is read once, where the op is
// recorded (autograd::matmul_precision()), and kept for its backward.
#pragma once

#include "autograd/mixed_precision.h"

namespace autograd::kernels {

// C (M x N) = op(A) op(B) [+ C], the contract of gemm() (gemm.h), in the given precision.
void gemm_in(Precision precision, bool trans_a, bool trans_b, int M, int N, int K,
             const float* A, int lda, const float* B, int ldb,
             float* C, int ldc, bool accumulate);

}  // namespace autograd::kernels
