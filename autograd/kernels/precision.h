// Precision: the number format a matrix product reads its inputs in. Either way the product sums
// in fp32 and writes fp32 (gemm_dispatch.h picks the kernel; autograd/mixed_precision.h is the
// switch a program turns).
#pragma once

namespace autograd::kernels {

enum class Precision { fp32, bf16 };

// The precision this thread's matrix products use now: bf16 inside autograd::MixedPrecisionGuard
// (which sets it), else fp32. An op reads it where it is recorded and keeps it for its backward.
inline Precision& matmul_precision() {
    static thread_local Precision precision = Precision::fp32;
    return precision;
}

}  // namespace autograd::kernels
