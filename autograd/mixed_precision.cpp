#include "autograd/mixed_precision.h"

#include "autograd/kernels/gemm_bf16.h"

namespace autograd {

static thread_local Precision g_matmul_precision = Precision::fp32;

Precision matmul_precision() { return g_matmul_precision; }
MixedPrecisionGuard::MixedPrecisionGuard(bool enabled) : prev_(g_matmul_precision) {
    if (enabled) g_matmul_precision = Precision::bf16;
}
MixedPrecisionGuard::~MixedPrecisionGuard() { g_matmul_precision = prev_; }

float round_to_bf16(float x) { return kernels::round_to_bf16(x); }
bool bf16_products_native() { return kernels::bf16_dot_supported(); }

}  // namespace autograd
