// The OpenMP thread count for one scope: ThreadCount two(2); ... the count before comes back at the
// end of the scope. Shared by the tests that run the same work on several thread counts.
#pragma once
#include "autograd/kernels/threads.h"

struct ThreadCount {
    int saved = autograd::kernels::max_threads();
    explicit ThreadCount(int n) { autograd::kernels::set_max_threads(n); }
    ~ThreadCount() { autograd::kernels::set_max_threads(saved); }
};
