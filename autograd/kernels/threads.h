// The OpenMP runtime calls the project makes (library, examples, tests), each with its serial
// answer when the build has no OpenMP (a compiler without it, or make OPENMP=0). This is the one
// file that includes <omp.h>, so such a build needs no OpenMP header or library: its pragmas are
// ignored and every loop runs on the calling thread, with the same results.
#pragma once

#ifdef _OPENMP
#include <omp.h>
#endif

namespace autograd::kernels {

inline constexpr bool kOpenMP =   // was the build compiled with OpenMP?
#ifdef _OPENMP
    true;
#else
    false;
#endif

inline int team_size() {      // threads in the current parallel region (1 outside one)
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}
inline int team_index() {     // this thread's number in it, 0 .. team_size() - 1
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}
inline int max_threads() {    // threads a new parallel region would get (OMP_NUM_THREADS)
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}
inline void set_max_threads([[maybe_unused]] int n) {   // omp_set_num_threads; nothing without OpenMP
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
}
inline int region_depth() {  // parallel regions around the caller, a team of 1 counted too (0 outside any)
#ifdef _OPENMP
    return omp_get_level();
#else
    return 0;
#endif
}
inline int active_level() {   // parallel regions with a team of 2+ threads around the caller (0 outside any)
#ifdef _OPENMP
    return omp_get_active_level();
#else
    return 0;
#endif
}
inline int max_active_levels() {   // how deep regions may nest and still get a team; 0 without OpenMP: none does
#ifdef _OPENMP
    return omp_get_max_active_levels();
#else
    return 0;
#endif
}
inline void set_max_active_levels([[maybe_unused]] int n) {   // omp_set_max_active_levels; nothing without OpenMP
#ifdef _OPENMP
    omp_set_max_active_levels(n);
#endif
}

// Ends the runtime's idle threads (omp_pause_resource_all, OpenMP 5.0); the next team starts new
// ones. An idle OpenMP thread spins for a while before it sleeps (libgomp: 300,000 pauses, which in
// a virtual machine can take longer than a training step; libomp: 200 ms), taking CPU time from
// the thread that works while the cores are busy. Nothing inside a parallel region, or without OpenMP.
inline void release_idle_threads() {
#ifdef _OPENMP
    if (!omp_in_parallel()) omp_pause_resource_all(omp_pause_soft);
#endif
}

}  // namespace autograd::kernels
