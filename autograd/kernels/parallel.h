// When and how a kernel splits its loops over OpenMP threads.
//
// Starting a thread team costs a microsecond or two (much more when its threads are asleep), so
// each kernel splits a loop only when the loop touches more elements than the kernel's threshold
// below; under it, one thread is done before a team would have started. The thresholds trade
// that start-up cost against the second core's help. Loops that do little per element (a copy,
// an add) have the higher threshold (2^16), loops with an exp() or a per-row reduction the lower
// one (2^15): they pay for a team with fewer elements. The values were measured on one machine
// (2 cores, AVX-512). To re-measure a threshold, time the kernel with OMP_NUM_THREADS=1 and 2 at
// sizes around it (e.g. with a loop around the op in a scratch program), and put it where 2
// threads start to win; tests/test_threaded_kernels.cpp sizes its inputs from these names, so
// it follows a moved threshold by itself.
//
// Everything here also compiles without OpenMP (make OPENMP=0): the pragmas are then ignored and
// every loop runs on the calling thread, with the same results (each sum has one fixed order).
#pragma once
#include <atomic>
#include <cstdint>

#include "autograd/kernels/allocator.h"
#include "autograd/kernels/busy_cores.h"
#include "autograd/kernels/grad_out.h"
#include "autograd/kernels/threads.h"   // team_size, team_index, max_threads, ...: OpenMP's runtime calls

namespace autograd::kernels {

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
// Test hook: how many parallel regions the kernels have opened with their threaded path on. A
// test reads it before and after a call to see that the call took the threaded path. Without
// OpenMP it stays 0: the `if` clause that calls worth_threads is part of the ignored pragma.
inline std::atomic<int64_t> threaded_regions{0};
}  // namespace detail

// The `if` clause of a kernel's parallel region: is a loop over `work` elements worth a team?
//     #pragma omp parallel for if (worth_threads(R * C, kSoftmaxParallelMin))
//     #pragma omp parallel for simd if (parallel: worth_threads(n, kElementwiseParallelMin))
// On `parallel for simd` the `parallel:` matters: a plain `if` applies to the simd part as well
// (OpenMP 5.0), so a loop below the threshold would also be asked not to vectorize.
// While another program keeps the cores busy (busy_cores.h), no loop is: one thread does it all.
// Nor is one inside another region (gemm_pair_in's), where no new team can start.
inline bool worth_threads(int64_t work, int64_t min_work) {
    if (work <= min_work || active_level() >= max_active_levels() || cores_busy()) return false;
    detail::threaded_regions.fetch_add(1, std::memory_order_relaxed);
    return true;
}

// ---- the deterministic column-split reduction

// Column sums of a (rows, cols) array whose terms are computed on the fly, for one or two outputs
// at once (layer_norm's gain and bias gradients, linear's bias gradient):
//     out_k[j] (+)= sum over r = 0, 1, ..., rows - 1 of term_k(r, j)
// add_row(r, j0, j1, partial) adds row r's terms for the columns [j0, j1) into partial[k][j - j0].
// Threads split the columns, never the rows: each thread owns the columns [j0, j1), walks the rows
// in order and sums into its own partial sums, so every sum is added in the same order whatever
// the thread count (no atomics, bit-identical results), and each row is read contiguously.
// Each output is stored or added as its GradOut says (grad_out.h); a null output is skipped.
template <int K, class AddRow>
void column_sums(int64_t rows, int64_t cols, [[maybe_unused]] int64_t min_work, const GradOut (&out)[K], AddRow add_row) {
    #pragma omp parallel if (worth_threads(rows * cols, min_work))
    {
        const int64_t j0 = cols * team_index() / team_size(), j1 = cols * (team_index() + 1) / team_size();
        FloatBuffer sums[K];
        float* partial[K];
        for (int k = 0; k < K; k++) {
            sums[k].assign(j1 - j0, 0.0f);
            partial[k] = sums[k].data();
        }
        for (int64_t r = 0; r < rows; r++) add_row(r, j0, j1, partial);
        for (int k = 0; k < K; k++)
            if (float* o = out[k].data)
                for (int64_t j = j0; j < j1; j++) o[j] = (out[k].add ? o[j] : 0.0f) + partial[k][j - j0];
    }
}

}  // namespace autograd::kernels
