#include "autograd/mixed_precision.h"

#include "autograd/kernels/gemm_bf16.h"

namespace autograd {

// The flag is the kernels' (kernels/precision.h): autograd::matmul reads it there.
Precision matmul_precision() { return kernels::matmul_precision(); }
MixedPrecisionGuard::MixedPrecisionGuard(bool enabled) : prev_(kernels::matmul_precision()) {
    if (enabled) kernels::matmul_precision() = Precision::bf16;
}
MixedPrecisionGuard::~MixedPrecisionGuard() { kernels::matmul_precision() = prev_; }

float round_to_bf16(float x) { return kernels::round_to_bf16(x); }
bool bf16_products_native() { return kernels::bf16_dot_supported(); }

}  // namespace autograd
