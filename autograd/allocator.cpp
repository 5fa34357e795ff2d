#include "autograd/allocator.h"

#include <limits>
#include <map>
#include <mutex>

// Under AddressSanitizer a block waiting in the cache is marked unreadable, so a use after free
// of a tensor's memory is still caught, although the block was never returned to the system.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define CACHE_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define CACHE_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define CACHE_POISON(p, n) ((void)(p), (void)(n))
#define CACHE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace autograd {

namespace {

constexpr std::size_t kAlign = 64;   // every block, and the header in front of it
// A block is [header (kAlign bytes, holding the block's size) | the caller's bytes]: the header
// tells cached_free how big the block is, which may be more than was asked (a cache hit with slack).
struct Header { std::size_t size; };
static_assert(sizeof(Header) <= kAlign);

struct Cache {
    std::mutex mutex;
    std::multimap<std::size_t, void*> free_blocks;   // size -> caller pointer, smallest first
    std::size_t limit = std::size_t(1) << 30;
    MemoryStats stats;
};

// Never destroyed: tensors in static storage may be freed after any other static object is gone.
Cache& cache() {
    static Cache* c = new Cache;
    return *c;
}

Header* header_of(void* p) { return reinterpret_cast<Header*>(static_cast<char*>(p) - kAlign); }

void system_free(void* p, std::size_t size) {
    CACHE_UNPOISON(p, size);   // (a no-op unless it was cached under ASan)
    ::operator delete(header_of(p), std::align_val_t(kAlign));
}

void fill_with_nans([[maybe_unused]] void* p, [[maybe_unused]] std::size_t bytes) {
#ifdef AUTOGRAD_POISON_MEMORY
    float* f = static_cast<float*>(p);
    for (std::size_t i = 0; i < bytes / sizeof(float); i++) f[i] = std::numeric_limits<float>::quiet_NaN();
#endif
}

}  // namespace

void* cached_alloc(std::size_t bytes) {
    if (bytes > std::numeric_limits<std::size_t>::max() / 2) throw std::bad_alloc();
    bytes = (bytes + kAlign - 1) / kAlign * kAlign;   // whole cache lines, so the header stays aligned
    if (bytes == 0) bytes = kAlign;
    Cache& c = cache();
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        auto it = c.free_blocks.lower_bound(bytes);     // smallest block that is big enough
        if (it != c.free_blocks.end() && it->first <= bytes + bytes / 8) {
            void* p = it->second;
            c.stats.cached_bytes -= it->first;
            c.stats.live_bytes += it->first;
            c.stats.peak_live_bytes = std::max(c.stats.peak_live_bytes, c.stats.live_bytes);
            c.stats.hits++;
            c.free_blocks.erase(it);
            CACHE_UNPOISON(p, bytes);
            fill_with_nans(p, bytes);
            return p;
        }
    }
    // a miss: ask the system, outside the lock
    void* base = ::operator new(kAlign + bytes, std::align_val_t(kAlign));
    static_cast<Header*>(base)->size = bytes;
    void* p = static_cast<char*>(base) + kAlign;
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        c.stats.live_bytes += bytes;
        c.stats.peak_live_bytes = std::max(c.stats.peak_live_bytes, c.stats.live_bytes);
        c.stats.misses++;
    }
    fill_with_nans(p, bytes);
    return p;
}

void cached_free(void* p) noexcept {
    if (!p) return;
    const std::size_t size = header_of(p)->size;
    Cache& c = cache();
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        c.stats.live_bytes -= size;
        if (c.stats.cached_bytes + size <= c.limit) {
            try {
                c.free_blocks.emplace(size, p);
                c.stats.cached_bytes += size;
                CACHE_POISON(p, size);
                return;
            } catch (...) {   // no memory for the map node: give the block back instead
            }
        }
    }
    system_free(p, size);
}

MemoryStats memory_stats() {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    return c.stats;
}

void empty_cache() {
    Cache& c = cache();
    std::multimap<std::size_t, void*> blocks;
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        blocks.swap(c.free_blocks);
        c.stats.cached_bytes = 0;
    }
    for (auto& [size, p] : blocks) system_free(p, size);
}

void set_cache_limit(std::size_t bytes) {
    Cache& c = cache();
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        c.limit = bytes;
        if (c.stats.cached_bytes <= bytes) return;
    }
    empty_cache();   // simplest way to get under a lowered limit
}

}  // namespace autograd
