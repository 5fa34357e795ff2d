// The pieces gemm.cpp and gemm_bf16.cpp share (internal to the two GEMM kernels): thread-local
// packing buffers, splitting work among the threads of a team, the team's barrier, and the
// decision to start a team at all.
#pragma once
#include <cstddef>
#include <new>

#include "autograd/kernels/busy_cores.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/threads.h"

namespace autograd::kernels::gemm_driver {

using idx = std::ptrdiff_t;

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

// A growable, 64-byte aligned buffer of T. Each thread has its own (thread_local), so concurrent
// GEMM calls never share packing space, and a buffer only reallocates when a bigger problem
// than any before comes along: no allocation per call in steady state.
template <class T>
struct PackBuffer {
    T* data = nullptr;
    std::size_t capacity = 0;

    T* get(std::size_t n) {
        if (n > capacity) {
            release();
            data = static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64)));
            capacity = n;
        }
        return data;
    }
    void release() {
        if (data) ::operator delete(data, std::align_val_t(64));
        data = nullptr;
        capacity = 0;
    }
    ~PackBuffer() { release(); }
};

// Part p of P near-equal parts of [0, n).
struct Range { int begin, end; };
inline Range part(int n, int P, int p) { return {int(idx(n) * p / P), int(idx(n) * (p + 1) / P)}; }

// Where this thread adds up its time in team_barrier, while it runs a share of run_team's team.
inline thread_local int64_t* tl_barrier_ns = nullptr;

// Wait for the other threads of this GEMM's own team. Only reached with nt > 1, that is inside
// the parallel region the GEMM opened: an orphaned barrier binds to the innermost parallel
// region, and when the GEMM runs on one thread that could be a region of the caller's. The wait
// is timed: a thread that is off its core in the middle of a product keeps the others here.
inline void team_barrier([[maybe_unused]] int nt) {
#ifdef _OPENMP
    if (nt > 1) {
        const int64_t before = now_ns();
        #pragma omp barrier
        if (tl_barrier_ns) *tl_barrier_ns += now_ns() - before;
    }
#endif
}

// Is a thread team worth starting for `flops` of work? Not below min_flops: a team costs about a
// microsecond even when its threads are awake, far more when they sleep. Nor when no more
// threads can come (OMP_NUM_THREADS=1, or inside a caller's parallel region with nesting off),
// nor while another program keeps the cores busy (busy_cores.h).
inline bool use_threads([[maybe_unused]] double flops, [[maybe_unused]] double min_flops) {
#ifdef _OPENMP
    return flops >= min_flops && max_threads() > 1 && active_level() < max_active_levels() && !cores_busy();
#else
    return false;
#endif
}

// Runs thread(nt, tid) on every thread of a new team, and tells busy_cores how long the team's
// threads waited for one another (the clock costs a few tens of nanoseconds per reading).
template <class ThreadFn>
void run_team(ThreadFn thread) {
    constexpr int kTimed = 64;   // threads whose times are kept: plenty to see a late one
    int64_t arrive[kTimed], at_barriers[kTimed] = {}, finish[kTimed];
    int team = 1;
    const int64_t start = now_ns();
    #pragma omp parallel
    {
        const int nt = team_size(), tid = team_index();
        if (tid < kTimed) arrive[tid] = now_ns(), tl_barrier_ns = &at_barriers[tid];
        thread(nt, tid);
        if (tid < kTimed) finish[tid] = now_ns(), tl_barrier_ns = nullptr;
        if (tid == 0) team = nt;
    }
    report_team(start, arrive, at_barriers, finish, team < kTimed ? team : kTimed);
}

using Args = GemmCall;  // one gemm() or gemm_bf16() call's arguments (gemm.h)

}  // namespace autograd::kernels::gemm_driver
