#include "autograd/kernels/gemm_dispatch.h"

#include <algorithm>
#include <atomic>

#include "autograd/kernels/gemm.h"
#include "autograd/kernels/gemm_bf16.h"
#include "autograd/kernels/gemm_driver.h"

namespace autograd::kernels {

void gemm_in(Precision precision, bool trans_a, bool trans_b, int M, int N, int K,
             const float* A, int lda, const float* B, int ldb,
             float* C, int ldc, bool accumulate) {
    if (precision == Precision::bf16) gemm_bf16(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    else                              gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

void gemm_in(Precision precision, const GemmCall& g) {
    gemm_in(precision, g.trans_a, g.trans_b, g.M, g.N, g.K, g.A, g.lda, g.B, g.ldb, g.C, g.ldc, g.accumulate);
}

namespace {
std::atomic<int64_t> g_pairs_side_by_side{0};   // how many pairs ran one product per thread (tests/hooks.h)

double flops(const GemmCall& g) { return 2.0 * g.M * g.N * g.K; }

// The floats a (rows x cols) matrix with leading dimension ld occupies, [begin, end).
struct Span { const float *begin, *end; };
Span span(const float* p, int rows, int cols, int ld) {
    if (!p || rows == 0 || cols == 0) return {p, p};
    return {p, p + gemm_driver::idx(rows - 1) * ld + cols};
}
bool overlap(Span a, Span b) { return a.begin < b.end && b.begin < a.end; }
// Does g write memory that h reads or writes? Then they cannot run at once.
bool writes_into(const GemmCall& g, const GemmCall& h) {
    const Span c = span(g.C, g.M, g.N, g.ldc);
    return overlap(c, span(h.C, h.M, h.N, h.ldc)) ||
           overlap(c, h.trans_a ? span(h.A, h.K, h.M, h.lda) : span(h.A, h.M, h.K, h.lda)) ||
           overlap(c, h.trans_b ? span(h.B, h.N, h.K, h.ldb) : span(h.B, h.K, h.N, h.ldb));
}
}  // namespace

void gemm_pair_in(Precision precision, const GemmCall& first, const GemmCall& second, const std::function<void()>& then) {
    // Each product must be worth a thread: the bound of gemm.cpp's own teams (kMinParallelFlops).
    constexpr double kMinFlopsEach = 2.0e6;
    const bool independent = !writes_into(first, second) && !writes_into(second, first);   // e.g. x and W one tensor
    // With nested regions allowed (OMP_MAX_ACTIVE_LEVELS > 1) each product would start a team of
    // its own inside the pair's: more threads than cores. Then the products take turns instead.
    const bool nested_teams = max_active_levels() > active_level() + 1;
    if (!independent || nested_teams || max_threads() != 2 ||
        !gemm_driver::use_threads(std::min(flops(first), flops(second)), kMinFlopsEach)) {
        gemm_in(precision, first);
        gemm_in(precision, second);
        if (then) then();
        return;
    }
    // Inside the region each gemm() sees an active parallel region and runs on its own thread
    // (gemm_driver::use_threads); run_team times the pair for busy_cores.h like any GEMM team.
    gemm_driver::run_team([&](int nt, int tid) {
        if (nt == 2) {
            if (tid == 0) g_pairs_side_by_side.fetch_add(1, std::memory_order_relaxed);
            gemm_in(precision, tid == 0 ? first : second);
            if (tid == 0 && then) then();   // inside the region: any loop in it runs on this thread
        } else {   // the runtime gave one thread after all
            gemm_in(precision, first);
            gemm_in(precision, second);
            if (then) then();
        }
    });
}

namespace test_hooks {
int64_t gemm_pairs_side_by_side() { return g_pairs_side_by_side.load(std::memory_order_relaxed); }
}  // namespace test_hooks

}  // namespace autograd::kernels
