#include "autograd/fused_kernels.h"

namespace autograd {

static thread_local bool g_fused_kernels = true;

bool fused_kernels_enabled() { return g_fused_kernels; }
FusedKernelsGuard::FusedKernelsGuard(bool enabled) : prev_(g_fused_kernels) { g_fused_kernels = enabled; }
FusedKernelsGuard::~FusedKernelsGuard() { g_fused_kernels = prev_; }

}  // namespace autograd
