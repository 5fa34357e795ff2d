#include "autograd/kernels/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

// AddressSanitizer: a block waiting in the cache of large blocks is marked unreadable, so that a
// use after free is still reported, as it is for the blocks that go back to malloc.
#if defined(__SANITIZE_ADDRESS__)
#define AUTOGRAD_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AUTOGRAD_ASAN 1
#endif
#endif
#ifdef AUTOGRAD_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace autograd::kernels {

namespace {

constexpr std::size_t kAlign = 64;   // every block, and the header in front of it
// A block is [header (kAlign bytes) | the caller's bytes]: the header tells tensor_free how many
// bytes go back, for the live-memory count, and, for a large block, the length of its mapping.
struct Header {
    std::size_t size;     // the caller's bytes, rounded up to whole cache lines
    std::size_t mapped;   // a large block: the length of its own mapping; 0: a block from malloc
};
static_assert(sizeof(Header) <= kAlign);

std::atomic<std::size_t> g_live{0}, g_peak{0};
std::atomic<std::size_t> g_refused{0};   // the last request that failed, for the message of a program out of memory

// From kLargeBlockBytes on (header included) a block has a mapping of its own (LargeBlocks
// below); smaller ones come from malloc (allocator.h says why 1 MB).
constexpr std::size_t kLargeBlock = kLargeBlockBytes;

std::size_t page_size() {
    static const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return page;
}

// A lock held for a few hundred nanoseconds at a time (a lookup in the cache's maps), that the
// two threads of a data-parallel step ask for at the same moments: waiting in a loop costs less
// than std::mutex's sleep and wake-up (bench_training d128's step, against glibc's heap: 1.1%
// slower with std::mutex here, 0.7% with this; bench/RESULTS.md, "The 200 MB goal met").
class SpinLock {
public:
    void lock() {
        for (int spins = 0; flag_.test_and_set(std::memory_order_acquire); spins++)
            if (spins >= 64) std::this_thread::yield();   // the holder may be unmapping: let it run
    }
    void unlock() { flag_.clear(std::memory_order_release); }

private:
    std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

// Large blocks: each one its own mapping from the kernel (mmap), and when freed, kept in a cache
// for the next request instead of unmapped. A request takes
//   1. the smallest cached block of at least its size (of those, the one freed last), split in
//      two when the rest is kLargeBlock or more: the request gets the front, and the rest stays in the cache, a block of its own;
//   2. else, on Linux, the biggest cached block, grown to its size (mremap: the pages it has stay,
//      only the new ones are faulted in);
//   3. else a new mapping.
// Before a block grows or a new one is mapped, the blocks freed longest ago are unmapped, for as
// long as the mapped bytes would otherwise pass 1/8 over the most that was live since the start
// (or reset_peak_memory). So
//   - a loop of fixed shapes finds every block it asks for in the cache from its second step on:
//     no new pages (tests/test_allocator.cpp), and
//   - a loop whose shapes change (translation batches of different lengths) holds at most 9/8 of
//     the peak its live large blocks reach, and faults in only the pages by which a request
//     outgrows the blocks that are free: a block never sits in the middle of a heap, where only
//     requests that fit the hole can use it, as it does in malloc's.
class LargeBlocks {
public:
    // A mapping of at least `bytes` (a multiple of the page size); returns its start and length.
    std::pair<char*, std::size_t> take(std::size_t bytes) {
        std::unique_lock<SpinLock> lock(mutex_);
        const auto above = by_size_.lower_bound(bytes);   // the smallest block >= bytes
        if (above != by_size_.end()) {   // 1.
            char* base = above->second;
            const Free f = remove(base);
            std::size_t length = f.length;
            if (length - bytes >= kLargeBlock) {   // split: the rest stays in the cache, a block of its own
                add(base + bytes, length - bytes, f.freed_at);
                length = bytes;
            }
            UNPOISON(base, length);
            count_live(length);
            return {base, length};
        }
        count_live(bytes);
#if defined(__linux__)
        if (!by_size_.empty()) {   // 2. the biggest block, all < bytes
            char* base = std::prev(by_size_.end())->second;
            const std::size_t length = remove(base).length;
            UNPOISON(base, length);
            make_room(bytes - length);
            void* p = ::mremap(base, length, bytes, MREMAP_MAYMOVE);
            if (p != MAP_FAILED) {
                mapped_ += bytes - length;
                UNPOISON(p, bytes);
                return {static_cast<char*>(p), bytes};
            }
            ::munmap(base, length);   // (it could not grow, e.g. two merged mappings: a new mapping instead)
            mapped_ -= length;
        }
#endif
        make_room(bytes);   // 3.
        mapped_ += bytes;
        lock.unlock();
        void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            lock.lock();
            mapped_ -= bytes;
            live_ -= bytes;
            throw std::bad_alloc();
        }
        UNPOISON(p, bytes);
        return {static_cast<char*>(p), bytes};
    }

    // A freed block joins the cache, merged with the free blocks right before and after it, so
    // that the pieces a split made become one block again.
    void give_back(char* base, std::size_t length) {
        POISON(base, length);
        std::lock_guard<SpinLock> lock(mutex_);
        live_ -= length;
        try {
            if (by_address_.count(base + length)) length += remove(base + length).length;
            if (auto after = by_address_.lower_bound(base); after != by_address_.begin()) {
                if (auto prev = std::prev(after); prev->first + prev->second.length == base) {
                    char* start = prev->first;
                    length += remove(start).length;
                    base = start;
                }
            }
            add(base, length, ++clock_);
        } catch (const std::bad_alloc&) {   // (tensor_free cannot throw): not kept, then
            UNPOISON(base, length);
            ::munmap(base, length);
            mapped_ -= length;
        }
    }

    std::size_t cached() {
        std::lock_guard<SpinLock> lock(mutex_);
        return mapped_ - live_;
    }
    // The cache's bound follows a new peak from here (reset_peak_memory).
    void reset_peak() {
        std::lock_guard<SpinLock> lock(mutex_);
        peak_ = live_;
    }

    // Unmaps every cached block (release_free_memory).
    void release() {
        std::lock_guard<SpinLock> lock(mutex_);
        for (const auto& [base, f] : by_address_) {
            UNPOISON(base, f.length);
            ::munmap(base, f.length);
            mapped_ -= f.length;
        }
        by_address_.clear();
        by_size_.clear();
    }

private:
    using BySize = std::multimap<std::size_t, char*>;
    struct Free {
        std::size_t length;
        std::uint64_t freed_at;    // clock_ when it was freed: the smallest is the oldest
        BySize::iterator in_size;  // its entry in by_size_
    };
    void add(char* base, std::size_t length, std::uint64_t freed_at) {
        const BySize::iterator s = by_size_.emplace_hint(by_size_.lower_bound(length), length, base);   // first of its size: the newest
        by_address_.emplace(base, Free{length, freed_at, s});
    }
    Free remove(char* base) {
        const auto it = by_address_.find(base);
        const Free f = it->second;
        by_size_.erase(f.in_size);
        by_address_.erase(it);
        return f;
    }
    // Unmaps the blocks freed longest ago until `more` bytes can be mapped within the bound.
    void make_room(std::size_t more) {
        const std::size_t limit = peak_ + peak_ / 8;
        while (!by_address_.empty() && mapped_ + more > limit) {
            const auto oldest = std::min_element(by_address_.begin(), by_address_.end(),
                                                 [](const auto& a, const auto& b) { return a.second.freed_at < b.second.freed_at; });
            char* base = oldest->first;
            const std::size_t length = remove(base).length;
            UNPOISON(base, length);
            ::munmap(base, length);
            mapped_ -= length;
        }
    }
    void count_live(std::size_t length) {
        live_ += length;
        peak_ = std::max(peak_, live_);
    }

    SpinLock mutex_;
    // the cache: freed blocks, still mapped, by address (to merge neighbours) and by size (to find
    // the one that fits); a few hundred at most
    std::map<char*, Free> by_address_;
    BySize by_size_;
    std::size_t mapped_ = 0;   // live large blocks and cached ones
    std::size_t live_ = 0, peak_ = 0;
    std::uint64_t clock_ = 0;
};

LargeBlocks& large_blocks() {
    static LargeBlocks* blocks = new LargeBlocks;   // never destroyed: tensors in static objects free into it at exit
    return *blocks;
}

// Blocks from malloc (the smaller ones): glibc, by default, gives the top of its heap back to the
// kernel when 128 KB there are free, and the next training step faults those pages in again.
// Trimming only past 1 GB of free space keeps them. (M_MMAP_THRESHOLD: no block of malloc's is
// mapped apart; the large ones do not reach it.) To see the difference: the minor page faults
// /usr/bin/time -v reports for `bench_training d128 20` and `... d128 100` stay the same with
// this, and grow by hundreds a step without it.
bool keep_freed_memory() {
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    return true;
}

void fill_with_nans([[maybe_unused]] void* p, [[maybe_unused]] std::size_t bytes) {
#ifdef AUTOGRAD_POISON_MEMORY
    float* f = static_cast<float*>(p);
    for (std::size_t i = 0; i < bytes / sizeof(float); i++) f[i] = std::numeric_limits<float>::quiet_NaN();
#endif
}

}  // namespace

void* tensor_alloc(std::size_t bytes) {
    [[maybe_unused]] static const bool kept = keep_freed_memory();   // once, before the first block
    if (bytes > std::numeric_limits<std::size_t>::max() / 2) throw std::bad_alloc();
    bytes = (bytes + kAlign - 1) / kAlign * kAlign;   // whole cache lines, so the header stays aligned
    if (bytes == 0) bytes = kAlign;
    char* base;
    std::size_t mapped = 0;
    try {
        if (kAlign + bytes >= kLargeBlock) {
            const std::size_t page = page_size();
            std::tie(base, mapped) = large_blocks().take((kAlign + bytes + page - 1) / page * page);
        } else {
            base = static_cast<char*>(::operator new(kAlign + bytes, std::align_val_t(kAlign)));
        }
    } catch (const std::bad_alloc&) {
        g_refused.store(bytes, std::memory_order_relaxed);
        throw;
    }
    *reinterpret_cast<Header*>(base) = {bytes, mapped};
    void* p = base + kAlign;
    const std::size_t live = g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::size_t peak = g_peak.load(std::memory_order_relaxed);
    while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
    fill_with_nans(p, bytes);
    return p;
}

void tensor_free(void* p) noexcept {
    if (!p) return;
    char* base = static_cast<char*>(p) - kAlign;
    const Header h = *reinterpret_cast<const Header*>(base);
    g_live.fetch_sub(h.size, std::memory_order_relaxed);
    if (h.mapped)
        large_blocks().give_back(base, h.mapped);
    else
        ::operator delete(base, std::align_val_t(kAlign));
}

MemoryStats memory_stats() { return {g_live.load(), g_peak.load(), large_blocks().cached(), g_refused.load()}; }

void reset_peak_memory() {
    g_peak.store(g_live.load());
    large_blocks().reset_peak();
}

void release_free_memory() {
    large_blocks().release();
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

}  // namespace autograd::kernels
