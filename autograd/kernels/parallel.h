// When and how a kernel splits its loops over OpenMP threads.
//
// Starting a thread team costs a microsecond or two (much more when its threads are asleep), so
// each kernel splits a loop only when the loop touches more elements than the kernel's threshold
// below; under it, one thread is done before a team would have started. The thresholds trade
// that start-up cost against the second core's help. Loops that do little per element (a copy,
// an add) have the higher threshold (2^16), loops with an exp() or a per-row reduction the lower
// one (2^15): they pay for a team with fewer elements. The GRU cell's forward, with two exp()
// and a tanh per element, pays from ~2^11 elements, its backward, plain arithmetic, from ~2^13;
// the forward costs ten times the backward, so its one threshold lies between (2^12). The values
// were measured on one machine (2 cores, AVX-512). To re-measure a threshold, time the kernel with OMP_NUM_THREADS=1 and 2 at
// sizes around it (e.g. with a loop around the op in a scratch program), and put it where 2
// threads start to win; tests/test_threaded_kernels.cpp sizes its inputs from these names, so
// it follows a moved threshold by itself.
//
// Everything here also compiles without OpenMP (make OPENMP=0): the pragmas are then ignored and
// every loop runs on the calling thread, with the same results (each sum has one fixed order).
#pragma once
#include <cstdint>

#include "autograd/kernels/allocator.h"
#include "autograd/kernels/busy_cores.h"
#include "autograd/kernels/grad_out.h"
#include "autograd/kernels/threads.h"   // team_size, team_index, max_threads, ...: OpenMP's runtime calls

namespace autograd::kernels {

inline constexpr int64_t kElementwiseParallelMin = int64_t{1} << 16;   // a plain add per element: the shards' gradient sums
inline constexpr int64_t kCrossEntropyParallelMin = int64_t{1} << 15;  // cross_entropy rows (R * V)
inline constexpr int64_t kLayerNormParallelMin = int64_t{1} << 15;     // layer_norm rows and its gain/bias column sums
inline constexpr int64_t kAdditiveScoreParallelMin = int64_t{1} << 14;  // additive_score (B * S * A): a vectorized tanh each
inline constexpr int64_t kGruCellParallelMin = int64_t{1} << 12;       // gru_cell rows (B * Hd): forward and backward
inline constexpr int64_t kLinearParallelMin = int64_t{1} << 16;        // linear's bias/ReLU/dropout epilogue, bias gradient
inline constexpr int64_t kDropoutParallelMin = int64_t{1} << 16;       // dropout forward and backward
inline constexpr int64_t kAttentionParallelMin = int64_t{1} << 14;     // attention: B * H * T * S * Dk multiply-adds
inline constexpr int64_t kOptimizerParallelMin = int64_t{1} << 15;     // Adam/SGD update of one parameter

// Is a loop over `work` elements worth a thread team? The first argument of the loops below:
//     parallel_for(R, worth_threads(R * C, kLayerNormParallelMin), [=](int64_t r) { ...row r... });
// While another program keeps the cores busy (busy_cores.h), no loop is: one thread does it all.
// Nor is one inside another region (a shard's of data_parallel.h, gemm_pair_in's), where no new
// team can start. Without OpenMP, never (max_active_levels() is 0). (parallel.cpp)
bool worth_threads(int64_t work, int64_t min_work);

// ---- the loops: a team when `threaded`, else a plain loop on the calling thread
//
// Why not `#pragma omp parallel for if (threaded)`: a region whose `if` is false still starts a
// team of one thread. In libgomp that costs a microsecond or more (inside another thread's region,
// a new team and a futex system call at its end), more than many of these loops take, and a
// D = 128 training step runs hundreds of such loops per shard.
//
// The body is a lambda; give it its values by copy ([=]), and each thread of a team works on its
// own copy of it (`local` below). Then the compiler knows that no store of the loop changes a
// captured scale or pointer, keeps them in registers and vectorizes; reached by reference they
// may be changed by any store to a float, and a ReLU mask loop did not vectorize.

// Thread t's block of [0, n) when `team` threads split it: [n t / team, n (t + 1) / team).
struct Block { int64_t begin, end; };
inline Block block_of(int64_t n, int team, int t) { return {n * t / team, n * (t + 1) / team}; }

// body(i) for i = 0 .. n-1, split into one contiguous block per thread.
template <class Body>
void parallel_for(int64_t n, [[maybe_unused]] bool threaded, Body body) {
#ifdef _OPENMP
    if (threaded) {
        #pragma omp parallel
        {
            Body local = body;
            #pragma omp for schedule(static)
            for (int64_t i = 0; i < n; i++) local(i);
        }
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) body(i);
}

// The calling thread's whole loop of parallel_blocks, kept a call of its own: inlined into the
// kernel, GCC 12 lost the vectorization of the dropout loops ("control flow in loop": the select
// became a branch).
template <class Body>
[[gnu::noinline]] void run_block(Body body, int64_t n) { body(0, n); }

// body(begin, end) once per thread, for its block [begin, end) of [0, n); body(0, n) without a
// team. For a loop the compiler should vectorize: the caller writes it, `#pragma omp simd` on
// top, in the body. (An `omp simd` loop around body(i) did not vectorize: GCC 12 left a
// dropout mask loop scalar, with a branch per element.)
template <class Body>
void parallel_blocks(int64_t n, [[maybe_unused]] bool threaded, Body body) {
#ifdef _OPENMP
    if (threaded) {
        #pragma omp parallel
        {
            Body local = body;
            const auto [begin, end] = block_of(n, team_size(), team_index());
            local(begin, end);
        }
        return;
    }
#endif
    run_block(body, n);
}

// body(team, thread) once on each thread of a team (thread = 0 .. team-1), or body(1, 0) on the
// calling thread: for kernels that split their work themselves (block_of above).
template <class Body>
void parallel_region([[maybe_unused]] bool threaded, Body body) {
#ifdef _OPENMP
    if (threaded) {
        #pragma omp parallel
        {
            Body local = body;
            local(team_size(), team_index());
        }
        return;
    }
#endif
    body(1, 0);
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
void column_sums(int64_t rows, int64_t cols, int64_t min_work, const GradOut (&out)[K], AddRow add_row) {
    parallel_region(worth_threads(rows * cols, min_work), [&](int team, int thread) {
        const auto [j0, j1] = block_of(cols, team, thread);
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
    });
}

}  // namespace autograd::kernels
