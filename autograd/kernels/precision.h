// Precision: the number format a matrix product reads its inputs in. Either way the product sums
// in fp32 and writes fp32 (gemm_dispatch.h picks the kernel; autograd/mixed_precision.h is the
// switch a program turns).
#pragma once

namespace autograd::kernels {

enum class Precision { fp32, bf16 };

}  // namespace autograd::kernels
