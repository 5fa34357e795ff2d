// What a program can ask of the machinery that runs its ops: how many threads the kernels use,
// and how much memory tensors hold. The machinery itself is autograd/kernels/; a program needs
// only these.
//
//   autograd::set_num_threads(1);                          // --threads 1
//   std::printf("%zu bytes\n", autograd::tensor_bytes_live());
#pragma once
#include <cstddef>
#include <cstdint>

namespace autograd {

// Threads a kernel's team gets: OMP_NUM_THREADS, or every core; 1 in a build without OpenMP.
int num_threads();
// Use n >= 1 threads from now on (nothing in a build without OpenMP). Results do not change:
// every kernel gives the same bits on any number of threads.
void set_num_threads(int n);
// Cores this process may run on: on Linux its affinity (taskset, a container), else every core
// the machine has.
int available_cores();

// Tensor memory (values and gradients; autograd/kernels/allocator.h): the bytes held now, and
// the most held since the start or the last reset_peak_memory().
std::size_t tensor_bytes_live();
std::size_t tensor_bytes_peak();
// The size of the last tensor the system could not give memory for (std::bad_alloc), 0 before one.
std::size_t tensor_bytes_refused();
void reset_peak_memory();
// Give the heap's free pages back to the system, between phases of a run that need different
// memory: after data-parallel training each thread's heap keeps its shard's free activation
// space, which the next phase (decoding on one thread) cannot use. Not for every step: the next
// step would fault the pages in again.
void release_free_memory();

}  // namespace autograd
