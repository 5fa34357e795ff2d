// The one switch between the lesson and the machinery.
//
// Each layer of nn/ is written twice, in one function: the plain form, composed from the autograd
// ops of chapters 1-7 (matmul, softmax, mean, ...), and one marked line that calls the fused
// kernel (autograd/kernels/) instead, which computes the same values with fewer passes over
// memory. The fused kernels are on by default; turn them off to train through the plain form:
//
//   autograd::FusedKernelsGuard plain(false);   // while alive: every layer runs its plain form
//   Tensor loss = ...forward...;                //   (what --reference does in both examples)
//   loss.backward();                            // each op's backward is the one it recorded
//
// Both forms draw the same dropout masks from the same seed, so a model trains to the same
// numbers either way, up to float rounding (tests/test_fused_kernels.cpp holds them equal).
// An RAII guard over a thread_local flag, like NoGradGuard and MixedPrecisionGuard.
#pragma once

namespace autograd {

// true (the default): nn's layers call their fused kernels; false: their plain forms
bool fused_kernels_enabled();

class FusedKernelsGuard {
public:
    explicit FusedKernelsGuard(bool enabled);
    ~FusedKernelsGuard();
    FusedKernelsGuard(const FusedKernelsGuard&) = delete;
    FusedKernelsGuard& operator=(const FusedKernelsGuard&) = delete;
private:
    bool prev_;
};

}  // namespace autograd
