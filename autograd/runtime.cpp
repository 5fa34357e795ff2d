#include "autograd/runtime.h"

#include <algorithm>
#include <thread>

#ifdef __linux__
#include <sched.h>   // sched_getaffinity
#endif

#include "autograd/kernels/allocator.h"
#include "autograd/kernels/threads.h"

namespace autograd {

int num_threads() { return kernels::max_threads(); }
void set_num_threads(int n) { kernels::set_max_threads(n); }
int available_cores() {
#ifdef __linux__
    cpu_set_t set;   // the cores this process may run on (taskset, a container's limit), not all the machine has
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::size_t tensor_bytes_live() { return kernels::memory_stats().live_bytes; }
std::size_t tensor_bytes_peak() { return kernels::memory_stats().peak_live_bytes; }
std::size_t tensor_bytes_refused() { return kernels::memory_stats().refused_bytes; }
void reset_peak_memory() { kernels::reset_peak_memory(); }
void release_free_memory() { kernels::release_free_memory(); }

}  // namespace autograd
