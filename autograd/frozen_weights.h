// FrozenWeightsGuard: a promise that no weight changes for a while, so that work that depends on
// a weight alone is done once and reused.
//
//   {
//       autograd::FrozenWeightsGuard frozen;   // while alive: the weights stay as they are
//       for (...) log_probs = ...decoder...;   // bf16 Linear products pack each weight once
//   }
//
// One thing uses it: a Linear layer's product under mixed precision (mixed_precision.h). The bf16
// kernel reads its operands rounded to bfloat16 and laid out in pairs (gemm_bf16.h), so every call
// packs the weight W afresh. That is the right thing in training: the optimizer moves every weight
// each step, and a step reads each weight once per direction (x W^T forward, g W backward, two
// layouts), so there is nothing to reuse. Decoding is the other case: the decoder runs once per
// output token, on a few rows, with the same weights, and for one sentence packing them is most of
// a step (bench_decoding --bf16 measures it). Inside the guard the second bf16 call with a weight packs W^T and
// keeps it; later calls read the kept copy and give the same bits. models/decoding.cpp holds one
// while it decodes. The copies cost memory: half of the weights' fp32 bytes (14 MB for the
// --paper decoder), whose pages are new the first time a process decodes.
//
// The promise is checked where weights are written on purpose: Optimizer::step() throws inside
// the guard. Anything else that writes a weight inside it (a load, w.data()[i] = ...) would leave
// the kept copy stale. The guard is per thread, like NoGradGuard; a guard inside another adds
// nothing (the outer one's copies serve both); the copies go with the outermost guard.
#pragma once
#include <memory>

namespace autograd {

class Tensor;
namespace kernels { class PackedBf16B; }

class FrozenWeightsGuard {
public:
    FrozenWeightsGuard();
    ~FrozenWeightsGuard();
    FrozenWeightsGuard(const FrozenWeightsGuard&) = delete;
    FrozenWeightsGuard& operator=(const FrozenWeightsGuard&) = delete;

    struct Cache;   // the packed weights (frozen_weights.cpp)
private:
    std::unique_ptr<Cache> cache_;   // null in a guard inside another
};

// Is a FrozenWeightsGuard alive on this thread?
bool weights_frozen();

namespace detail {
// Inside a FrozenWeightsGuard: W^T (w is (out, in)) packed for gemm_bf16 as the B of x W^T, made
// at the weight's second use and kept until the guard ends. At its first use, and outside a
// guard: nullptr (the call packs W itself).
const kernels::PackedBf16B* frozen_bf16_weight_t(const Tensor& w);
}  // namespace detail

}  // namespace autograd
