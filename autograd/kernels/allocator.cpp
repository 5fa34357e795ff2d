#include "autograd/kernels/allocator.h"

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <vector>

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

namespace autograd::kernels {

namespace {

constexpr std::size_t kAlign = 64;   // every block, and the header in front of it
// A block is [header (kAlign bytes, holding the block's size) | the caller's bytes]: the header
// tells cached_free how big the block is, which may be more than was asked (a cache hit with slack).
struct Header { std::size_t size; };
static_assert(sizeof(Header) <= kAlign);

struct Cached {
    void* p;                  // the caller's pointer
    std::uint64_t freed_at;   // the cache's clock (requests served) when the block came back
};

// A block nobody has taken for this many requests goes back to the system. A training step
// makes a few thousand requests and reuses its blocks every step, so in a steady loop nothing is
// ever this idle; but when sizes keep changing (translation batches of different lengths, or
// decoding after training), blocks of sizes no longer asked for would otherwise pile up.
constexpr std::uint64_t kIdleRequests = std::uint64_t(1) << 14;

struct Cache {
    std::mutex mutex;
    std::multimap<std::size_t, Cached> free_blocks;   // size -> block, smallest first
    std::size_t limit = std::size_t(1) << 30;
    std::uint64_t requests = 0;                       // the clock: cached_alloc calls so far
    std::uint64_t last_sweep = 0;
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

// Take the blocks idle for more than kIdleRequests out of the cache (the caller frees them,
// outside the lock). Runs every kIdleRequests / 4 requests, so it costs little.
std::vector<std::pair<std::size_t, void*>> take_idle_blocks(Cache& c) {
    std::vector<std::pair<std::size_t, void*>> idle;
    if (c.requests - c.last_sweep < kIdleRequests / 4) return idle;
    c.last_sweep = c.requests;
    auto is_idle = [&](const Cached& b) { return c.requests - b.freed_at > kIdleRequests; };
    std::size_t n = 0;
    for (const auto& [size, b] : c.free_blocks) n += is_idle(b);
    idle.reserve(n);   // may throw; the cache is still untouched then
    for (auto it = c.free_blocks.begin(); it != c.free_blocks.end();) {
        if (is_idle(it->second)) {
            idle.emplace_back(it->first, it->second.p);
            c.stats.cached_bytes -= it->first;
            it = c.free_blocks.erase(it);
        } else {
            ++it;
        }
    }
    return idle;
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
    std::vector<std::pair<std::size_t, void*>> idle;
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        c.requests++;
        idle = take_idle_blocks(c);
        auto it = c.free_blocks.lower_bound(bytes);     // smallest block that is big enough
        if (it != c.free_blocks.end() && it->first <= bytes + bytes / 8) {
            void* p = it->second.p;
            c.stats.cached_bytes -= it->first;
            c.stats.live_bytes += it->first;
            c.stats.peak_live_bytes = std::max(c.stats.peak_live_bytes, c.stats.live_bytes);
            c.stats.hits++;
            c.free_blocks.erase(it);
            CACHE_UNPOISON(p, bytes);
            fill_with_nans(p, bytes);
            for (auto& [size, q] : idle) system_free(q, size);
            return p;
        }
    }
    for (auto& [size, q] : idle) system_free(q, size);
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
                c.free_blocks.emplace(size, Cached{p, c.requests});
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
    std::multimap<std::size_t, Cached> blocks;
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        blocks.swap(c.free_blocks);
        c.stats.cached_bytes = 0;
    }
    for (auto& [size, b] : blocks) system_free(b.p, size);
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

}  // namespace autograd::kernels
