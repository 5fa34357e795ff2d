// allocator: a caching allocator for tensor memory, so a training step allocates nothing new.
//
// A training step makes the same tensors, of the same sizes, every step: activations in the
// forward pass, their gradients in the backward pass, and frees them all again. Asking the
// system for that memory each time is slow in a way a profile shows plainly: big blocks come
// from mmap, so every step pays a page fault (and the kernel zeroing a page) for each 4 KB it
// touches, then munmap at free. So freed blocks are not returned; they wait in a cache, sorted
// by size, and the next request of about the same size takes one (as PyTorch's CUDA caching
// allocator does). After the first few steps, every tensor of a step comes from the cache.
//
//   request n bytes -> smallest cached block of size in [n, n + n/8]   (hit: no system call)
//                      otherwise a new 64-byte aligned block of n bytes (miss)
//   free            -> back into the cache (or to the system, past the cache limit)
//   idle            -> a cached block nobody took for 16,384 requests goes back to the system
//
// Blocks are 64-byte aligned (one cache line, one AVX-512 vector). The 1/8 slack lets a batch
// that is a little shorter reuse the blocks of a longer one without wasting much memory.
//
// FloatBuffer is std::vector<float> over this allocator, with one difference on purpose:
// resize(n) and FloatBuffer(n) leave new elements uninitialized (default-, not
// value-initialized), because nearly every op overwrites its whole output; zeroing it first
// was a second pass over memory. Code that needs zeros asks for them: assign(n, 0.0f).
// Builds with -DAUTOGRAD_POISON_MEMORY (make sanitize) fill every new block with NaNs, so a
// test that reads memory nobody wrote fails instead of passing by luck.
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace autograd::kernels {

void* cached_alloc(std::size_t bytes);    // 64-byte aligned; throws std::bad_alloc
void cached_free(void* p) noexcept;       // p from cached_alloc (or nullptr)

struct MemoryStats {
    std::size_t live_bytes = 0;       // in blocks handed out and not yet freed
    std::size_t peak_live_bytes = 0;  // the most live_bytes has ever been
    std::size_t cached_bytes = 0;     // in free blocks kept for reuse
    std::uint64_t hits = 0;           // requests served from the cache
    std::uint64_t misses = 0;         // requests that went to the system
};
MemoryStats memory_stats();
// Return every cached free block to the system (live tensors are untouched).
void empty_cache();
// Free blocks beyond this many cached bytes go back to the system (default 1 GiB). 0 turns the
// cache off: for workloads whose tensor shapes keep changing, where it holds memory for little
// gain (examples/translation.cpp does this).
void set_cache_limit(std::size_t bytes);

// std::allocator interface over cached_alloc, for std::vector.
template <typename T>
struct CachingAllocator {
    using value_type = T;
    CachingAllocator() = default;
    template <typename U>
    CachingAllocator(const CachingAllocator<U>&) noexcept {}

    T* allocate(std::size_t n) {
        if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
        return static_cast<T*>(cached_alloc(n * sizeof(T)));
    }
    void deallocate(T* p, std::size_t) noexcept { cached_free(p); }

    // default-initialize: `new (p) U` leaves a float uninitialized, where std::allocator's
    // `new (p) U()` would zero it
    template <typename U>
    void construct(U* p) noexcept { ::new (static_cast<void*>(p)) U; }
    template <typename U, typename... Args>
    void construct(U* p, Args&&... args) { ::new (static_cast<void*>(p)) U(static_cast<Args&&>(args)...); }

    template <typename U>
    bool operator==(const CachingAllocator<U>&) const noexcept { return true; }
};

using FloatBuffer = std::vector<float, CachingAllocator<float>>;

}  // namespace autograd::kernels
