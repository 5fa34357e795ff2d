// allocator: where tensor memory comes from, and why a training step pays no page faults.
//
// A training step makes the same tensors, of the same sizes, every step: activations in the
// forward pass, their gradients in the backward pass, and frees them all again. With the C
// library's default settings that is slow in a way a profile shows plainly: glibc's malloc maps
// every big block fresh from the kernel (mmap) and unmaps it at free, and gives the top of its
// heap back when it empties, so every step pays a page fault (and the kernel zeroing a 4 KB page)
// for each page it touches. So the first allocation asks glibc to keep what is freed instead
// (keep_freed_memory in allocator.cpp): every block up to 32 MB comes from its heap, and the heap
// is not trimmed. Freed memory then serves the next request, whatever its size (glibc splits and
// merges free chunks), so
//   - a loop of fixed shapes (the copy task's training) asks the kernel for no new page after
//     its first step (tests/test_allocator.cpp checks this), and
//   - a workload whose shapes keep changing (translation batches of different lengths, decoding
//     after training) holds about its peak live memory, not a block of every shape it has seen.
// The process keeps its peak memory until it exits. On a C library other than glibc the
// setting is skipped: everything still works, with the page faults.
//
// Blocks are 64-byte aligned (one cache line, one AVX-512 vector). tensor_alloc, tensor_free and
// FloatBuffer are declared in float_buffer.h, which autograd/tensor.h includes; this header adds
// the memory statistics.
//
// FloatBuffer is std::vector<float> over this allocator, with one difference on purpose:
// resize(n) and FloatBuffer(n) leave new elements uninitialized (default-, not
// value-initialized), because nearly every op overwrites its whole output; zeroing it first
// would be a second pass over memory. Code that needs zeros asks for them: assign(n, 0.0f).
// Builds with -DAUTOGRAD_POISON_MEMORY (make sanitize) fill every new block with NaNs, so a
// test that reads memory nobody wrote fails instead of passing by luck.
#pragma once
#include <cstddef>

#include "autograd/kernels/float_buffer.h"

namespace autograd::kernels {

struct MemoryStats {
    std::size_t live_bytes = 0;       // in blocks handed out and not yet freed
    std::size_t peak_live_bytes = 0;  // the most live_bytes has ever been
};
MemoryStats memory_stats();
// Starts a new peak from what is live now: the peak of one phase of a run (data, training,
// decoding) instead of the whole run's.
void reset_peak_memory();

// Give the heap's free pages back to the system (glibc's malloc_trim; nothing elsewhere), between
// phases of a run that need different memory. Each thread that allocates has a heap of its own
// (glibc's arenas): after data-parallel training (autograd/data_parallel.h) the second thread's
// heap keeps the free space of its shard's activations, which the calling thread, decoding alone,
// cannot use. The next training step faults the pages in again, so not for every step.
void release_free_memory();

}  // namespace autograd::kernels
