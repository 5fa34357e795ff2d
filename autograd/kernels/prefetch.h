// Asking for memory before the code reaches it (docs/15, "Asking for memory ahead: prefetching").
//
// A load that misses the caches waits for memory. The core's hardware prefetcher hides that for a
// long run of consecutive addresses, not for short, scattered ones: an attention head's rows (16
// floats of each row of D), a weight's slivers, an optimizer's four arrays at once after a step
// has flushed them. __builtin_prefetch(address) starts the load of address's cache line and
// returns at once; it is a hint, so it changes no result, and a line asked for twice costs
// little. Each use here was measured (bench/RESULTS.md, "Prefetching"): a hint in the wrong place
// only costs instructions.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace autograd::kernels {

inline constexpr int64_t kLineBytes = 64, kFloatsPerLine = kLineBytes / 4;

// Asks for the lines of p[0 .. n), each once; kWrite: they are to be written too (the line then
// comes ready for a store, not only a load). (Asking for a line twice is not free: Adam's pass
// with one more request per chunk, for a line already asked for, lost most of its gain.)
template <bool kWrite = false>
inline void prefetch_floats(const float* p, int64_t n) {
    if (n <= 0) return;
    const uintptr_t first = reinterpret_cast<uintptr_t>(p) / kLineBytes * kLineBytes;
    const uintptr_t last = reinterpret_cast<uintptr_t>(p + n - 1);
    for (uintptr_t line = first; line <= last; line += kLineBytes) __builtin_prefetch(reinterpret_cast<const void*>(line), kWrite);
}

// Asks for the lines of `rows` rows of `width` floats, `stride` floats apart.
inline void prefetch_rows(const float* p, int64_t rows, int64_t width, int64_t stride) {
    for (int64_t r = 0; r < rows; r++) prefetch_floats(p + r * stride, width);
}

// body(c, c_end) for the chunks [c, c_end) of [begin, end), 64 elements each, in order; before
// each chunk, the lines of every array 128 elements ahead are asked for (those of the
// chunk after next), where they are still inside [begin, end). For a pass over several arrays
// that is bound by memory (Adam's update, adam.cpp: farther ahead did no better, and much farther
// worse; bench/RESULTS.md, "Prefetching"). body's loop over a whole chunk vectorizes as the plain
// loop would.
// `read` are only read, `written` read and written.
template <class Body>
void in_chunks_fetching_ahead(int64_t begin, int64_t end, std::initializer_list<const float*> read,
                              std::initializer_list<float*> written, Body body) {
    constexpr int64_t kChunk = 64, kAhead = 128;
    for (int64_t c = begin; c < end; c += kChunk) {
        if (c + kAhead + kChunk <= end) {
            for (const float* a : read) prefetch_floats(a + c + kAhead, kChunk);
            for (float* a : written) prefetch_floats<true>(a + c + kAhead, kChunk);
        }
        body(c, std::min(end, c + kChunk));
    }
}

}  // namespace autograd::kernels
