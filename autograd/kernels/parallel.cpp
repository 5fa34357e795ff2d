#include "autograd/kernels/parallel.h"

#include <atomic>

namespace autograd::kernels {

// How many loops have taken their threaded path: a test reads it (tests/hooks.h) to see that a
// call it makes just above a threshold really split its work.
static std::atomic<int64_t> g_teams_started{0};

bool worth_threads(int64_t work, int64_t min_work) {
    if (work <= min_work || active_level() >= max_active_levels() || cores_busy()) return false;
    g_teams_started.fetch_add(1, std::memory_order_relaxed);
    return true;
}

namespace test_hooks {
int64_t threaded_regions() { return g_teams_started.load(std::memory_order_relaxed); }
}  // namespace test_hooks

}  // namespace autograd::kernels
