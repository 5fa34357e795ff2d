#include "autograd/runtime.h"

#include <thread>

#include "autograd/kernels/allocator.h"
#include "autograd/kernels/threads.h"

namespace autograd {

int num_threads() { return kernels::max_threads(); }
void set_num_threads(int n) { kernels::set_max_threads(n); }
int available_cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

std::size_t tensor_bytes_live() { return kernels::memory_stats().live_bytes; }
std::size_t tensor_bytes_peak() { return kernels::memory_stats().peak_live_bytes; }
void reset_peak_memory() { kernels::reset_peak_memory(); }
void release_free_memory() { kernels::release_free_memory(); }

}  // namespace autograd
