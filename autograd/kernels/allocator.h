// allocator: where tensor memory comes from, and why a training step pays no page faults and
// holds little more than its peak.
//
// A training step makes the same tensors, of the same sizes, every step: activations in the
// forward pass, their gradients in the backward pass, and frees them all again. Left to the C
// library's defaults that is slow in a way a profile shows plainly: glibc's malloc maps every big
// block fresh from the kernel (mmap) and unmaps it at free, so every step pays a page fault (and
// the kernel zeroing a 4 KB page) for each page it touches. Serving the big blocks from malloc's
// heap instead costs memory: a freed block in the middle of a heap serves only requests that fit
// in it, and with batches of changing shapes (translation) the heaps of the two data-parallel
// threads grew to 2.5-3 times the tensors' peak (bench/RESULTS.md, "Real-text memory again").
// So the allocator keeps the big blocks itself (allocator.cpp):
//   - a block of 1 MB and more is a mapping of its own; when freed it waits in a cache, and
//     serves the next request it can: whole, split (the rest stays in the cache), or grown (on
//     Linux: only the added pages are new). The blocks freed longest ago are unmapped when the
//     mapped total would pass 9/8 of the most the big blocks held in this phase of the run;
//   - smaller blocks come from malloc, which is asked to keep its heap (not trim it). Each thread
//     allocates from a heap of its own there (glibc's arenas), and a step on such blocks ran
//     faster than on mappings: at D = 128 (every activation between 128 KB and 1 MB), 1.13 times
//     the time with its blocks mapped from 128 KB up, 1.00 with them from malloc (bench_training
//     d128, 8 alternated pairs; bench/RESULTS.md, "Where the speed went"). Which effect costs the
//     time (mappings freed on one shard's thread and taken on the other's, page-table walks) is
//     not settled: preferring a block the same thread took, varying each block's start within
//     its first page, reusing the newest free block and huge pages each recovered 1% or less.
// So
//   - a loop of fixed shapes (the copy task's training) asks the kernel for no new page after
//     its first step (tests/test_allocator.cpp checks this), and
//   - a loop whose shapes keep changing holds about its peak live memory, not a block of every
//     shape it has seen.
// The process keeps its peak memory until it exits, or until release_free_memory().

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

// From this size on (the 64-byte header included) a block is a mapping of its own.
inline constexpr std::size_t kLargeBlockBytes = std::size_t{1} << 20;

struct MemoryStats {
    std::size_t live_bytes = 0;       // in blocks handed out and not yet freed
    std::size_t peak_live_bytes = 0;  // the most live_bytes has ever been
    std::size_t cached_bytes = 0;     // big blocks freed and kept for reuse, still mapped
    std::size_t refused_bytes = 0;    // the last request the system could not meet (std::bad_alloc), 0 before one
};
MemoryStats memory_stats();
// Starts a new peak from what is live now: the peak of one phase of a run (data, training,
// decoding) instead of the whole run's. The cache of big blocks then keeps at most 9/8 of the new
// phase's peak.
void reset_peak_memory();

// Give the free memory back to the system, between phases of a run that need different memory:
// the cached big blocks, and the heap's free pages (glibc's malloc_trim). Each thread that
// allocates has a heap of its own (glibc's arenas): after data-parallel training
// (autograd/data_parallel.h) the second thread's heap keeps the free space of its shard's small
// activations, which the calling thread, decoding alone, cannot use. The next training step
// faults the pages in again, so not for every step.
void release_free_memory();

}  // namespace autograd::kernels
