#include "autograd/mixed_precision.h"

namespace autograd {

static thread_local Precision g_matmul_precision = Precision::fp32;

Precision matmul_precision() { return g_matmul_precision; }
MixedPrecisionGuard::MixedPrecisionGuard(bool enabled) : prev_(g_matmul_precision) {
    if (enabled) g_matmul_precision = Precision::bf16;
}
MixedPrecisionGuard::~MixedPrecisionGuard() { g_matmul_precision = prev_; }

}  // namespace autograd
