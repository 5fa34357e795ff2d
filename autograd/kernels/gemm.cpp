// gemm.cpp: single-precision matrix multiply. The contract is in gemm.h.
//
// gemm_naive() is the reference: three loops, one dot product per output element.
// gemm() computes the same thing fast, in the Goto/BLIS way. Three ideas:
//
// 1) Packing. Before multiplying, copy a block of op(A) and a panel of op(B) into small contiguous
//    buffers, laid out in exactly the order the innermost loop reads them. After that the hot loop
//    only ever reads memory sequentially, and transposes (trans_a, trans_b) and leading dimensions
//    are dealt with once, in the packing routines, not in the hot loop.
//
// 2) Cache blocking. The loops are cut so that each packed piece stays in the cache level it is
//    reused from:
//
//      for jc in N, step NC                    5th loop: a panel of NC columns of C and op(B)
//        for pc in K, step KC                  4th loop: a slice of KC of the sum
//          pack op(B)[pc:+KC, jc:+NC] -> Bp    (KC x NC, L3; all threads pack it together)
//          for ic in M, step MC                3rd loop (split among threads by rows of C;
//                                              two threads claim blocks from both ends)
//            pack op(A)[ic:+MC, pc:+KC] -> Ap  (MC x KC, stays in this core's L2)
//            for jr in NC, step NR             2nd loop: one NR-wide sliver of Bp (KC x NR, L1)
//              for ir in MC, step MR           1st loop: one MR-tall sliver of Ap
//                micro_kernel: C[ic+ir:+MR, jc+jr:+NR] += Ap sliver (MR x KC) * Bp sliver (KC x NR)
//
//          op(B) panel, packed:  Bp = [ KC x NR | KC x NR | ... ]  (NC/NR slivers)
//                                          ^ one sliver, k-major: NR floats for k=0, then k=1, ...
//          op(A) block, packed:  Ap = [ MR x KC | MR x KC | ... ]  (MC/MR slivers)
//                                          ^ one sliver, k-major: MR floats for k=0, then k=1, ...
//
//          C (M x N):   +----+----+----+---        each MR x NR cell is one micro-kernel call;
//                       |MRxNR    |    |           a thread owns a rectangle of cells and is the
//                       +----+----+----+---        only one that writes them (no atomics)
//
//    Two exceptions skip a copy that buys nothing: op(A) that is not transposed is read in place
//    (its rows are already contiguous, and the kernel only broadcasts single floats of A), and,
//    for the dW = dy^T x products (transposed A, untransposed B), so are B and, for small
//    problems, A (see gemm_thread). Only the last, partial sliver of a matrix is then packed, to
//    get its zero padding. And a product one tile wide and a few tiles tall (an attention
//    head's, at short lengths) skips the loop nest altogether: gemm_narrow.
//
// 3) Register tiling. The micro-kernel (gemm_micro_kernel.h) keeps an MR x NR tile of C in vector
//    registers for the whole KC-long sum: for each k it loads the NR floats of B's row, broadcasts
//    each of the MR floats of A, and does MR * NR / lanes fused multiply-adds. The tile and the
//    cache blocks follow the instruction set (AVX-512: 12 x 32, AVX2+FMA: 6 x 16, NEON: 8 x 8,
//    portable vectors: 6 x 8); this driver is the same for all of them.
//
// Determinism: the sum for each C element is always done in the same order (the KC slices in
// order, and within a slice k = 0, 1, ... in one accumulator), whatever thread computes the tile
// and whatever the number of threads. Only the split of *tiles* among threads changes, so the
// result is bit-identical for any OMP_NUM_THREADS.
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/gemm_driver.h"
#include "autograd/kernels/gemm_micro_kernel.h"
#include "autograd/kernels/parallel.h"
#include "autograd/kernels/prefetch.h"

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace autograd::kernels {

// ----------------------------------------------------------------------------------------------
// reference

void gemm_naive(bool trans_a, bool trans_b, int M, int N, int K,
                const float* A, int lda, const float* B, int ldb,
                float* C, int ldc, bool accumulate) {
    using idx = std::ptrdiff_t;  // lda * K can overflow an int for big matrices
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double sum = 0.0;  // double: the reference should be more accurate than what it checks
            for (int k = 0; k < K; k++) {
                const float a = trans_a ? A[idx(k) * lda + i] : A[idx(i) * lda + k];  // op(A)[i][k]
                const float b = trans_b ? B[idx(j) * ldb + k] : B[idx(k) * ldb + j];  // op(B)[k][j]
                sum += double(a) * double(b);
            }
            float& c = C[idx(i) * ldc + j];
            c = accumulate ? c + float(sum) : float(sum);
        }
    }
}

// ----------------------------------------------------------------------------------------------
// the driver, the same for every instruction set (Isa: a struct of gemm_micro_kernel.h)

namespace {

using namespace gemm_driver;

// Below this many flops (~10 us of work for one core) a thread team costs more than it saves.
// To re-measure: bench_gemm's small shapes with OMP_NUM_THREADS=1 and 2.
constexpr double kMinParallelFlops = 2.0e6;

// Tests force the dW products' in-place reading on or off (test_hooks::set_gemm_tn_in_place), so that
// both ways run on every instruction set; -1 leaves it to Isa::kTransposedAInPlace.
std::atomic<int> g_tn_in_place{-1};
template <class Isa>
bool tn_in_place() {
    const int forced = g_tn_in_place.load(std::memory_order_relaxed);
    return forced < 0 ? Isa::kTransposedAInPlace : forced == 1;
}

// Each thread's own packing space (gemm_driver.h).
thread_local PackBuffer<float> tls_pack_a;     // this thread's Ap block
thread_local PackBuffer<float> tls_pack_b;     // Bp panel of the gemm() call this thread started
thread_local PackBuffer<float> tls_pack_edge;  // this thread's copy of a last, partial B sliver

// ---- packing

// All four packing cases (A or B, transposed or not) are one operation: copy `n` (<= W) strands
// of length kc out of a strided matrix into a k-major sliver of width W, zero-padding strands
// n..W-1 so that the micro-kernel never needs to know about edges:
//   dst[k*W + x] = src[k*step_k + x*step_x]   for x < n,   0 for n <= x < W
//
// When the strands lie across the sliver's rows (step_x == 1) this is a copy, row by row. When
// they lie along them (each strand contiguous, step_k == 1: op(B) = B^T, the forward products'
// weights and the attention scores' keys) it is a transpose, and a transpose one float at a time
// costs several instructions per float (a load from each of W strands, then an insert into the
// row). With AVX it goes 8 x 8 blocks at a time instead (pack_transposed): 8 vector loads, one
// from each of 8 strands, 24 shuffles, 8 vector stores: a few times faster than float by float
// (bench/RESULTS.md, "Transposes by blocks", has the measurements).
#if defined(__AVX__)
// Rows r[0..7] of an 8 x 8 block in, its columns out: r[j][i] <- r[i][j]. Three rounds, each
// pairing up elements of twice the size: single floats, then pairs, then 128-bit halves.
inline void transpose_8x8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {   // t[i] = r_i0 r_(i+1)0 r_i1 r_(i+1)1 | the same for 4, 5
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);   // ... for columns 2, 3 | 6, 7
    }
    for (int i = 0; i < 8; i += 4) {   // u[i + j] = column j of rows i..i+3 | column j + 4
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {      // column j: rows 0..3 from u[j], rows 4..7 from u[j + 4]
        r[j] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x20);
        r[j + 4] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x31);
    }
}

// The transposing case (step_k == 1) in 8 x 8 blocks, all of the sliver: a strand past n is a
// vector of zeros, so the blocks write the zero padding too, and the last block of k reads and
// writes only the kc % 8 values left (a masked load). An attention head's keys (10 strands of
// 16) are then two blocks, with no fill and no float-by-float tail. `next`: see pack_sliver.
template <int W>
void pack_transposed(const float* src, idx step_x, int n, int kc, float* dst, const float* next) {
    static_assert(W % 8 == 0, "whole blocks of 8 strands");
    alignas(32) static const int32_t kFirst[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int k0 = 0; k0 < kc; k0 += 8) {
        const int kn = std::min(8, kc - k0);   // values of k in this block
        const __m256i first_kn = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kFirst + 8 - kn));
        for (int x0 = 0; x0 < W; x0 += 8) {
            __m256 r[8];   // r[x] = strand x0 + x, values k0 .. k0 + kn - 1
            for (int x = 0; x < 8; x++) {
                const float* strand = src + k0 + idx(x0 + x) * step_x;
                if (next && k0 % kFloatsPerLine == 0) __builtin_prefetch(next + k0 + idx(x0 + x) * step_x);
                r[x] = x0 + x >= n ? _mm256_setzero_ps() : kn == 8 ? _mm256_loadu_ps(strand) : _mm256_maskload_ps(strand, first_kn);
            }
            transpose_8x8(r);   // r[k] = value k0 + k of strands x0 .. x0 + 7
            for (int k = 0; k < kn; k++) _mm256_storeu_ps(dst + idx(k0 + k) * W + x0, r[k]);
        }
    }
}
#endif

// `next`, when not null, is where the next sliver to pack starts (a full one, W strands, the same
// steps and kc): its lines are asked for while this one is copied, so that they are in the cache
// when it comes. A weight's slivers need that: W was last read long before (by the optimizer, for
// the forward's x W^T; by the forward, for the backward's dy W), and a strand of 128 floats is too
// short for the hardware prefetcher to catch up with.
// (At D = 128 the packing of W^T took 2.4% of a step's samples, most of them waiting for memory;
// bench/RESULTS.md, "Prefetching".)
template <int W>
void pack_sliver(const float* src, idx step_k, idx step_x, int n, int kc, float* dst, const float* next = nullptr) {
#if defined(__AVX__)
    if constexpr (W % 8 == 0)
        if (step_k == 1 && step_x != 1) return pack_transposed<W>(src, step_x, n, kc, dst, next);
#endif
    if (n == W && step_x == 1) {
        // each k is a contiguous run of W floats: a straight copy (vectorized by the compiler)
        for (int k = 0; k < kc; k++) {
            if (next)
                for (int x = 0; x < W; x += kFloatsPerLine) __builtin_prefetch(next + k * step_k + x);
            for (int x = 0; x < W; x++) dst[k * W + x] = src[k * step_k + x];
        }
    } else if (n == W) {
        // a transpose: read the W strands side by side (each one contiguous when step_k == 1)
        for (int k = 0; k < kc; k++)
            for (int x = 0; x < W; x++) dst[k * W + x] = src[k * step_k + x * step_x];
    } else {
        // edge sliver (the last one of the matrix): zero it all (a vectorized fill), then copy
        // the n strands in, with the inner loop along whichever index is contiguous in src.
        // Tiny products (an attention head) are nearly all edge slivers, so this copy matters:
        // one fill then a copy beats writing zeros and values interleaved, one float at a time.
        std::fill(dst, dst + idx(kc) * W, 0.0f);
        if (step_x == 1) {
            for (int k = 0; k < kc; k++)
                for (int x = 0; x < n; x++) dst[k * W + x] = src[k * step_k + x];
        } else {
            for (int x = 0; x < n; x++)
                for (int k = 0; k < kc; k++) dst[k * W + x] = src[k * step_k + x * step_x];
        }
    }
}

// Pack rows [i0, i0 + mc) and columns [p0, p0 + kc) of op(A) into Ap as MR-tall slivers:
//   Ap[s*kc + k*MR + r] = op(A)[i0 + s + r][p0 + k]    (s = 0, MR, 2*MR, ...)
template <int MR>
void pack_a(bool trans_a, const float* A, int lda, int i0, int mc, int p0, int kc, float* Ap) {
    for (int s = 0; s < mc; s += MR) {
        const int i = i0 + s, rows = std::min(MR, mc - s);
        if (!trans_a)  // op(A)[i][k] = A[i][k]
            pack_sliver<MR>(A + idx(i) * lda + p0, 1, lda, rows, kc, Ap + idx(s) * kc);
        else           // op(A)[i][k] = A[k][i]
            pack_sliver<MR>(A + idx(p0) * lda + i, lda, 1, rows, kc, Ap + idx(s) * kc);
    }
}

// Pack sliver t (columns [j0 + t*NR, +NR)) of rows [p0, p0 + kc) of op(B) into Bp:
//   Bp[t*NR*kc + k*NR + c] = op(B)[p0 + k][j0 + t*NR + c]
// One sliver per call, so that the caller can spread the slivers of a panel over threads.
// fetch_next: this caller packs sliver t + 1 next (its lines are prefetched if it is a full one).
template <int NR>
void pack_b_sliver(bool trans_b, const float* B, int ldb, int p0, int kc, int j0, int nc, int t, float* Bp, bool fetch_next) {
    const int j = j0 + t * NR, cols = std::min(NR, nc - t * NR);
    const bool next_full = fetch_next && (t + 2) * NR <= nc;
    float* dst = Bp + idx(t) * NR * kc;
    if (!trans_b)  // op(B)[k][j] = B[k][j]
        pack_sliver<NR>(B + idx(p0) * ldb + j, ldb, 1, cols, kc, dst, next_full ? B + idx(p0) * ldb + j + NR : nullptr);
    else           // op(B)[k][j] = B[j][k]
        pack_sliver<NR>(B + idx(j) * ldb + p0, 1, ldb, cols, kc, dst, next_full ? B + idx(j + NR) * ldb + p0 : nullptr);
}

// ---- threads

// Threads are arranged as a tm x tn grid over the (ms x ns) grid of micro-tiles of one panel.
// Splitting by rows is best (threads share one packed B panel, each packs only its own rows of
// A); splitting by columns makes each thread pack the same A rows again. We pick the grid with
// the least work for the busiest thread, counting packing an A sliver as about one tile.
struct ThreadGrid { int tm, tn; };
ThreadGrid choose_grid(int ms, int ns, int nt) {
    ThreadGrid best{nt, 1};
    long best_cost = -1;
    for (int tm = nt; tm >= 1; tm--) {
        if (nt % tm) continue;
        const int tn = nt / tm;
        const long cost = long(ceil_div(ms, tm)) * (ceil_div(ns, tn) + 1);
        if (best_cost < 0 || cost < best_cost) best = {tm, tn}, best_cost = cost;
    }
    return best;
}

// Two threads that split a panel's rows take them from the two ends, a block of slivers at a
// time, until they meet: thread 0 from the top, thread 1 from the bottom. A fixed half each would
// leave one waiting whenever the other is slowed (its core taken away for a while, data in the
// other core's cache): at D = 128 that wait was 3-5% of a training step. Mostly each thread
// still gets the rows it would have had. `ends` packs the first untaken sliver (low 32 bits) and
// one past the last (high 32 bits), so that one compare-and-swap takes a block.
struct RowClaims {
    std::atomic<uint64_t> ends{0};
    void reset(int slivers) { ends.store(uint64_t(uint32_t(slivers)) << 32, std::memory_order_relaxed); }
    // The next block of at most `block` slivers from this end, or an empty range when none are left.
    Range take(int block, bool from_top) {
        uint64_t cur = ends.load(std::memory_order_relaxed);
        for (;;) {
            const int lo = int(uint32_t(cur)), hi = int(cur >> 32);
            if (lo >= hi) return {hi, hi};
            const int n = std::min(block, hi - lo);
            const Range r = from_top ? Range{lo, lo + n} : Range{hi - n, hi};
            const uint64_t next = uint64_t(uint32_t(from_top ? hi : hi - n)) << 32 | uint32_t(from_top ? lo + n : lo);
            if (ends.compare_exchange_weak(cur, next, std::memory_order_relaxed)) return r;
        }
    }
};

// Thread tid's share of the loop nest drawn at the top of this file; nt threads call it at once
// (nt == 1: the whole serial algorithm). Bp is the team's shared B panel, claims its shared row
// claims (used when two threads split the rows).
template <class Isa>
void gemm_thread(const Args& g, float* Bp, RowClaims& claims, int nt, int tid) {
    constexpr int MR = Isa::MR, NR = Isa::NR, KC = Isa::KC, MC = Isa::MC, NC = Isa::NC, kLanes = Isa::kLanes;
    static_assert(NR % kLanes == 0, "a micro-tile row is a whole number of vectors");
    static_assert(MC % MR == 0 && NC % NR == 0, "blocks are whole numbers of slivers");
    float* const Ap = tls_pack_a.get(std::size_t(MC) * KC);  // this thread's A block
    const int ms = ceil_div(g.M, MR);                         // micro-tile rows of C

    for (int jc = 0; jc < g.N; jc += NC) {  // 5th loop
        const int nc = std::min(NC, g.N - jc);
        const int ns = ceil_div(nc, NR);  // micro-tile columns in this panel
        const ThreadGrid grid = choose_grid(ms, ns, nt);
        const Range my_rows = part(ms, grid.tm, tid / grid.tn);  // in MR slivers
        const Range my_cols = part(ns, grid.tn, tid % grid.tn);  // in NR slivers
        // my rows, cut into blocks of at most MC rows, all about the same size
        const int my_ms = my_rows.end - my_rows.begin;
        const int blocks = ceil_div(my_ms, MC / MR);
        const int block_ms = blocks ? ceil_div(my_ms, blocks) : 1;

        for (int pc = 0; pc < g.K; pc += KC) {  // 4th loop
            const int kc = std::min(KC, g.K - pc);
            const bool add_to_c = g.accumulate || pc > 0;  // later slices add to earlier ones

            // When A is transposed (the dW = dy^T x products) and B is not, the kernel can read
            // full NR-wide slivers of B in place (a row of the sliver is NR consecutive floats
            // of a row of B); only a last, partial sliver is packed, by each thread that needs
            // it, privately: no B copy and no barriers. Whether that wins depends on the core
            // (Isa::kTransposedAInPlace, gemm_micro_kernel.h). Otherwise, and always for NN, NT
            // and TT products, all threads pack the B panel together, then wait until it is
            // complete. To re-measure: bench_gemm's TN rows (the dW products) against NN and NT.
            const bool in_place = tn_in_place<Isa>();
            const bool b_in_place = in_place && g.trans_a && !g.trans_b;
            // Two threads splitting the rows claim them from both ends (RowClaims). Not with B
            // read in place: no barrier then orders one slice's claims before the next's.
            const bool claiming = nt == 2 && grid.tn == 1 && !b_in_place;
            const int last = ns - 1;
            const float* edge = nullptr;
            if (!b_in_place) {
                if (claiming && tid == 0) claims.reset(ms);   // the others see it after the barrier
                const Range my_slivers = part(ns, nt, tid);
                for (int t = my_slivers.begin; t < my_slivers.end; t++)
                    pack_b_sliver<NR>(g.trans_b, g.B, g.ldb, pc, kc, jc, nc, t, Bp, t + 1 < my_slivers.end);
                team_barrier(nt);
            } else if (nc % NR != 0 && my_cols.begin <= last && last < my_cols.end) {
                float* e = tls_pack_edge.get(std::size_t(KC) * NR);
                pack_sliver<NR>(g.B + idx(pc) * g.ldb + jc + last * NR, g.ldb, 1, nc - last * NR, kc, e);
                edge = e;
            }

            // claimed blocks: ~1/16 of the rows each, so that the last one is a short wait
            const int claim_ms = std::min(MC / MR, std::max(1, ceil_div(ms, 16)));
            Range rows = claiming ? claims.take(claim_ms, tid == 0) : my_rows;
            for (int s0 = rows.begin; s0 < rows.end;) {  // 3rd loop
                const int s1 = claiming ? rows.end : std::min(s0 + block_ms, my_rows.end);
                const int i0 = s0 * MR;
                const int mc = std::min(s1 * MR, g.M) - i0;
                // Not transposed, op(A)'s rows lie contiguous in memory and the micro-kernel
                // reads full MR-row slivers in place; only a last, partial sliver is packed
                // (zero-padded), so the kernel never reads past row M. Packing would cost a copy
                // of every float of A, which at small N (D = 128) is used by few multiply-adds.
                // Transposed, the MR floats the kernel needs at each k are contiguous too, a row
                // of A apart. Where the core reads that well (Isa::kTransposedAInPlace), they are
                // read in place while N is small (few re-reads) and rows are close (the strided
                // reads stay in cache): the bounds below are where in place and packing met on
                // the machine that was tuned on (D = 128 dW products: in place faster; N or lda
                // of 2048: packing faster). To re-measure, run bench_gemm's TN rows with each
                // choice forced.
                constexpr int kInPlaceMaxN = 512, kInPlaceMaxLda = 1024;
                const bool a_in_place = !g.trans_a || (in_place && g.N <= kInPlaceMaxN && g.lda <= kInPlaceMaxLda);
                const int full = a_in_place ? mc / MR * MR : 0;  // rows read in place
                if (full < mc) pack_a<MR>(g.trans_a, g.A, g.lda, i0 + full, mc - full, pc, kc, Ap + idx(full) * kc);

                for (int t = my_cols.begin; t < my_cols.end; t++) {  // 2nd loop
                    const int j = jc + t * NR;
                    const float* bp = Bp + idx(t) * NR * kc;  // this sliver, packed
                    idx b_row_step = NR;                      // floats from one k to the next
                    if (b_in_place && t == last && edge) {
                        bp = edge;
                    } else if (b_in_place) {
                        bp = g.B + idx(pc) * g.ldb + j;
                        b_row_step = g.ldb;
                    }
                    for (int ir = 0; ir < mc; ir += MR) {  // 1st loop
                        float* c = g.C + idx(i0 + ir) * g.ldc + j;
                        const int m = std::min(MR, mc - ir), n = std::min(NR, g.N - j);
                        const float* ap = Ap + idx(ir) * kc;  // the A sliver, packed
                        if (ir < full && !g.trans_a) {        // ... or read in place
                            ap = g.A + idx(i0 + ir) * g.lda + pc;
                            micro_kernel<Isa, kRowsA>(kc, ap, g.lda, bp, b_row_step, c, g.ldc, m, n, add_to_c);
                        } else if (ir < full) {
                            ap = g.A + idx(pc) * g.lda + i0 + ir;
                            micro_kernel<Isa, kColsA>(kc, ap, g.lda, bp, b_row_step, c, g.ldc, m, n, add_to_c);
                        } else if (n <= kLanes) {  // a narrow edge (an attention head's 10 or 16 columns)
                            micro_kernel<Isa, kPackedA, 1>(kc, ap, 0, bp, b_row_step, c, g.ldc, m, n, add_to_c);
                        } else {
                            micro_kernel<Isa, kPackedA>(kc, ap, 0, bp, b_row_step, c, g.ldc, m, n, add_to_c);
                        }
                    }
                }
                if (claiming) rows = claims.take(claim_ms, tid == 0);
                s0 = claiming ? rows.begin : s1;
            }
            // nobody may repack Bp for the next slice while others still read this one
            if (!b_in_place) team_barrier(nt);
        }
    }
}

// ---- a product one micro-tile wide and a few tall

// The micro-kernel computing only the first `rows` rows of its tile (micro_kernel's kRows), for
// rows = 1 .. MR: a product's row count is known at run time, a kernel's at compile time, so a
// table holds one kernel per row count.
using MicroKernel = void (*)(int kc, const float* A, idx lda, const float* B, idx b_row_step, float* C, idx ldc,
                             int m, int n, bool add_to_c);
template <class Isa, ALayout kA, int kVectors, int... R>
constexpr std::array<MicroKernel, sizeof...(R)> kernels_by_rows(std::integer_sequence<int, R...>) {
    return {&micro_kernel<Isa, kA, kVectors, R + 1>...};
}
template <class Isa, ALayout kA, int kVectors>
MicroKernel micro_kernel_for_rows(int rows) {
    static constexpr auto table = kernels_by_rows<Isa, kA, kVectors>(std::make_integer_sequence<int, Isa::MR>{});
    return table[rows - 1];
}

// N <= NR and K <= KC, and M at most a few tiles (kNarrowMaxTiles): C is one column of micro-tiles,
// and each is one micro-kernel call, without the loop nest. These are an attention head's
// products at short lengths (10 x 10 scores, 10 x 16 outputs), some 23,000 per D = 128 training
// step; through the loop nest each took several times its arithmetic in bookkeeping (thread
// grid, row claims, the NR-wide panel) and in copying A one float at a time. On AVX-512
// a head's 10 rows are one tile (MR = 12); on AVX2 and the portable kernel (MR = 6) two, on NEON
// (MR = 8) two. The last tile's kernel computes exactly its rows (micro_kernel_for_rows), so
// op(A) is always read where it lies, by rows (A) or by columns (A^T). op(B) is copied only when
// the kernel cannot read it in place, once for all the tiles:
//   op(B) = B:    exactly the kernel's width (N = lanes or NR, e.g. a head's Dk = 16 columns):
//                 read in place; else packed row by row into a zero-padded sliver
//   op(B) = B^T:  transposed into a sliver by pack_sliver (the scores' keys)
// The sums are those of the loop nest, k = 0 .. K-1 in one accumulator, so the bits are too.
constexpr int kNarrowMaxTiles = 4;
template <class Isa, int kVectors>
void gemm_narrow(const Args& g) {
    constexpr int MR = Isa::MR, W = kVectors * Isa::kLanes;   // each tile: MR x W
    const int M = g.M, N = g.N, K = g.K;
    const float* b = g.B;
    idx b_row_step = g.ldb;
    if (g.trans_b || N < W) {
        float* const sliver = tls_pack_edge.get(std::size_t(K) * W);
        if (!g.trans_b) pack_sliver<W>(g.B, g.ldb, 1, N, K, sliver);   // op(B)[k][j] = B[k][j]
        else            pack_sliver<W>(g.B, 1, g.ldb, N, K, sliver);   // op(B)[k][j] = B[j][k]
        b = sliver;
        b_row_step = W;
    }
    for (int i0 = 0; i0 < M; i0 += MR) {   // rows i0 .. i0 + rows - 1 of C
        const int rows = std::min(MR, M - i0);
        // Read by rows: op(A)(r, k) at A[r * lda + k]; by columns: at A[k * lda + r]
        const MicroKernel kernel = g.trans_a ? micro_kernel_for_rows<Isa, kColsA, kVectors>(rows)
                                             : micro_kernel_for_rows<Isa, kRowsA, kVectors>(rows);
        const float* a = g.trans_a ? g.A + i0 : g.A + idx(i0) * g.lda;
        kernel(K, a, g.lda, b, b_row_step, g.C + idx(i0) * g.ldc, g.ldc, rows, N, g.accumulate);
    }
}

// The whole product with one instruction set, on a team of threads when it is worth one.
template <class Isa>
void gemm_using(const Args& g) {
    if (g.M <= kNarrowMaxTiles * Isa::MR && g.N <= Isa::NR && g.K <= Isa::KC) {   // a few tiles: never worth a team
        if (g.N <= Isa::kLanes) gemm_narrow<Isa, 1>(g);   // one vector per row of each tile
        else                    gemm_narrow<Isa, Isa::NR / Isa::kLanes>(g);
        return;
    }
    // The B panel is shared by the team; it lives in the buffer of the thread that called us.
    const int nc_max = ceil_div(std::min(g.N, Isa::NC), Isa::NR) * Isa::NR;
    float* const Bp = tls_pack_b.get(std::size_t(std::min(g.K, Isa::KC)) * nc_max);

    RowClaims claims;
    if (!use_threads(2.0 * g.M * g.N * g.K, kMinParallelFlops)) {
        gemm_thread<Isa>(g, Bp, claims, 1, 0);
        return;
    }
    run_team([&](int nt, int tid) { gemm_thread<Isa>(g, Bp, claims, nt, tid); });
}

}  // namespace

// The micro-kernels this build contains, widest first.
const std::vector<GemmKernel>& gemm_kernels() {
    static const std::vector<GemmKernel> built = {
#if defined(__AVX512F__)
        GemmKernel::avx512,
#endif
#if defined(__AVX2__) && defined(__FMA__)
        GemmKernel::avx2_fma,
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
        GemmKernel::neon,
#endif
        GemmKernel::portable,
    };
    return built;
}

const char* gemm_kernel_name(GemmKernel kernel) {
    switch (kernel) {
        case GemmKernel::avx512: return "AVX-512 (12 x 32 tile)";
        case GemmKernel::avx2_fma: return "AVX2+FMA (6 x 16 tile)";
        case GemmKernel::neon: return "NEON (8 x 8 tile)";
        case GemmKernel::portable: return "portable vectors (6 x 8 tile)";
    }
    return "?";
}

namespace test_hooks {
void set_gemm_tn_in_place(int mode) { g_tn_in_place.store(mode, std::memory_order_relaxed); }
}  // namespace test_hooks

void gemm_with(GemmKernel kernel, bool trans_a, bool trans_b, int M, int N, int K,
               const float* A, int lda, const float* B, int ldb,
               float* C, int ldc, bool accumulate) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {  // empty sum: C = 0 (or C unchanged when accumulating)
        if (!accumulate)
            for (int i = 0; i < M; i++) std::fill(C + idx(i) * ldc, C + idx(i) * ldc + N, 0.0f);
        return;
    }
    const Args g{trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate};
    switch (kernel) {
#if defined(__AVX512F__)
        case GemmKernel::avx512: return gemm_using<Avx512>(g);
#endif
#if defined(__AVX2__) && defined(__FMA__)
        case GemmKernel::avx2_fma: return gemm_using<Avx2Fma>(g);
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
        case GemmKernel::neon: return gemm_using<Neon>(g);
#endif
        case GemmKernel::portable: return gemm_using<Portable>(g);
        default: break;
    }
    throw std::invalid_argument(std::string("gemm: this build has no ") + gemm_kernel_name(kernel) +
                                " micro-kernel (compiler flags without its instructions; see make ARCH=...)");
}

void gemm(bool trans_a, bool trans_b, int M, int N, int K,
          const float* A, int lda, const float* B, int ldb,
          float* C, int ldc, bool accumulate) {
    static const GemmKernel widest = gemm_kernels().front();
    gemm_with(widest, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

}  // namespace autograd::kernels
