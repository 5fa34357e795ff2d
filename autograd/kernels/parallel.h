// When a kernel splits its loop over OpenMP threads.
//
// Starting a thread team costs a microsecond or two (much more when its threads are asleep), so
// each kernel splits a loop only when the loop touches more elements than the kernel's threshold
// below; under it, one thread is done before a team would have started. Loops that do little per
// element (a copy, an add) have the higher threshold (2^16), loops with an exp() or a per-row
// reduction the lower one (2^15): they pay for a team with fewer elements. To re-measure a
// threshold, time the kernel with OMP_NUM_THREADS=1 and 2 at sizes around it, and put it where
// 2 threads start to win.
//
// The kernels and their tests share these names: the tests size their inputs just above them, so
// the threaded paths are really exercised (and stay exercised if a threshold moves).
#pragma once
#include <atomic>
#include <cstdint>

namespace autograd {

inline constexpr int64_t kElementwiseParallelMin = int64_t{1} << 16;   // add, mul, exp, relu, ...: forward and backward
inline constexpr int64_t kShapeCopyParallelMin = int64_t{1} << 16;     // permute's copy, reshape's gradient copy
inline constexpr int64_t kSoftmaxParallelMin = int64_t{1} << 15;       // softmax and log_softmax rows
inline constexpr int64_t kCrossEntropyParallelMin = int64_t{1} << 15;  // cross_entropy rows (R * V)
inline constexpr int64_t kLayerNormParallelMin = int64_t{1} << 15;     // layer_norm rows and its gain/bias column sums
inline constexpr int64_t kLinearParallelMin = int64_t{1} << 16;        // linear's bias/ReLU/dropout epilogue, bias gradient
inline constexpr int64_t kDropoutParallelMin = int64_t{1} << 16;       // dropout forward and backward
inline constexpr int64_t kAttentionParallelMin = int64_t{1} << 14;     // attention: B * H * T * S * Dk multiply-adds
inline constexpr int64_t kOptimizerParallelMin = int64_t{1} << 15;     // Adam/SGD update of one parameter

namespace detail {
// Test hook: how many parallel regions the kernels have opened with their threaded path on.
// A test reads it before and after a call to see that the call took the threaded path.
inline std::atomic<int64_t> threaded_regions{0};
}  // namespace detail

// The `if` clause of a kernel's parallel region: is a loop over `work` elements worth a team?
//     #pragma omp parallel for if (worth_threads(R * C, kSoftmaxParallelMin))
//     #pragma omp parallel for simd if (parallel: worth_threads(n, kElementwiseParallelMin))
// On `parallel for simd` the `parallel:` matters: a plain `if` applies to the simd part as well
// (OpenMP 5.0), so a loop below the threshold would also be asked not to vectorize.
inline bool worth_threads(int64_t work, int64_t min_work) {
    if (work <= min_work) return false;
    detail::threaded_regions.fetch_add(1, std::memory_order_relaxed);
    return true;
}

}  // namespace autograd
