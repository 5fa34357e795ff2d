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
//          for ic in M, step MC                3rd loop (split among threads by rows of C)
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
//    get its zero padding.
//
// 3) Register tiling. The micro-kernel keeps an MR x NR tile of C in vector registers for the
//    whole KC-long sum: for each k it loads NR floats of B (NR/16 vectors), broadcasts each of
//    the MR floats of A, and does MR*NR/16 fused multiply-adds. With MR=12, NR=32 on AVX-512
//    that is 24 accumulators + 2 B vectors + 1 broadcast = 27 of the 32 zmm registers, and
//    24 independent FMAs per k: enough to keep both FMA pipes busy despite the FMA latency.
//    (Narrower machines get narrower tiles: see "block sizes" below.)
//
// Determinism: the sum for each C element is always done in the same order (the KC slices in
// order, and within a slice k = 0, 1, ... in one accumulator), whatever thread computes the tile
// and whatever the number of threads. Only the split of *tiles* among threads changes, so the
// result is bit-identical for any OMP_NUM_THREADS.
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/gemm_driver.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>

#include "autograd/kernels/threads.h"

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
// block sizes

namespace {

using namespace gemm_driver;

// The vector width and micro-tile shape follow the instruction set the file is compiled for.
// Only the speed changes between them, never the correctness.
#if defined(__AVX512F__)
constexpr int kVec = 16;          // floats per vector register (512-bit zmm)
constexpr int MR = 12, NR = 32;   // micro-tile: 12 x 2 vectors = 24 accumulators (of 32 registers)
#elif defined(__AVX__)
constexpr int kVec = 8;           // 256-bit ymm
constexpr int MR = 6, NR = 16;    // 6 x 2 vectors = 12 accumulators (of 16 registers)
#else
constexpr int kVec = 4;           // 128-bit (SSE, NEON)
constexpr int MR = 6, NR = 8;     // 6 x 2 vectors = 12 accumulators (of 16 registers)
#endif
constexpr int kRowVectors = NR / kVec;   // vectors per micro-tile row
static_assert(NR % kVec == 0, "a micro-tile row is a whole number of vectors");

// Cache blocks (see the loop nest at the top), sized for a core with 48 KB of L1d, 2 MB of L2 and
// a share of a 32 MB L3 (Zen 5). A bigger KC means fewer passes over C but a B sliver that no
// longer fits L1; MC and NC are as big as their packed blocks can be and still stay in L2 and L3.
// On that machine KC from 256 to 768 and MC from 96 to 384 all run within ~5%. To re-tune for
// another cache, run bench_gemm (make bench) for a few values around these.
constexpr int KC = 512;    // slice of the sum. One Bp sliver (KC x NR floats) = 64 KB: it streams
                           // from L2 (KC = 256 would fit L1, but doubles the passes over C)
constexpr int MC = 192;    // rows of op(A) per packed block: Ap (MC x KC) = 384 KB, stays in L2
constexpr int NC = 4096;   // columns of op(B) per packed panel: Bp (KC x NC) <= 8 MB, in L3
static_assert(MC % MR == 0 && NC % NR == 0, "blocks are whole numbers of slivers");

// Below this many flops (~10 us of work for one core) a thread team costs more than it saves.
// To re-measure: bench_gemm's small shapes with OMP_NUM_THREADS=1 and 2.
constexpr double kMinParallelFlops = 2.0e6;

// GCC/Clang vector extension: a whole SIMD register as one value; + and * work lane by lane,
// and a scalar operand is broadcast to every lane.
typedef float vfloat __attribute__((vector_size(kVec * sizeof(float))));

// ----------------------------------------------------------------------------------------------
// packing buffers

// Each thread's own packing space (gemm_driver.h).

thread_local PackBuffer<float> tls_pack_a;  // this thread's Ap block
thread_local PackBuffer<float> tls_pack_b;  // Bp panel of the gemm() call this thread started
thread_local PackBuffer<float> tls_pack_edge;  // this thread's copy of a last, partial B sliver

// ----------------------------------------------------------------------------------------------
// packing

// All four packing cases (A or B, transposed or not) are one operation: copy `n` (<= W) strands
// of length kc out of a strided matrix into a k-major sliver of width W, zero-padding strands
// n..W-1 so that the micro-kernel never needs to know about edges:
//   dst[k*W + x] = src[k*step_k + x*step_x]   for x < n,   0 for n <= x < W
template <int W>
void pack_sliver(const float* src, idx step_k, idx step_x, int n, int kc, float* dst) {
    if (n == W && step_x == 1) {
        // each k is a contiguous run of W floats: a straight copy (vectorized by the compiler)
        for (int k = 0; k < kc; k++)
            for (int x = 0; x < W; x++) dst[k * W + x] = src[k * step_k + x];
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
void pack_b_sliver(bool trans_b, const float* B, int ldb, int p0, int kc, int j0, int nc, int t,
                   float* Bp) {
    const int j = j0 + t * NR, cols = std::min(NR, nc - t * NR);
    float* dst = Bp + idx(t) * NR * kc;
    if (!trans_b)  // op(B)[k][j] = B[k][j]
        pack_sliver<NR>(B + idx(p0) * ldb + j, ldb, 1, cols, kc, dst);
    else           // op(B)[k][j] = B[j][k]
        pack_sliver<NR>(B + idx(j) * ldb + p0, 1, ldb, cols, kc, dst);
}

// ----------------------------------------------------------------------------------------------
// the micro-kernel: the only code written with explicit vectors

// C[0:m, 0:n] (row stride ldc) = (add_to_c ? C : 0) + A sliver (MR x kc) * Bp_sliver (kc x NR)
// m <= MR and n <= NR say how much of the MR x NR tile is inside C; the packed slivers are
// zero-padded, so the arithmetic is the same for edge tiles, only the final store is narrower.
// The A sliver is packed (kPackedA: A(r, k) = Ap[k*MR + r]) or read in place (A(r, k) =
// Ap[r*lda + k] for op(A) = A, Ap[k*lda + r] for op(A) = A^T): the kernel only broadcasts single
// floats of A, and a broadcast costs the same from any address, so packing A buys nothing but a
// copy when its slivers can be read where they are (see gemm_thread).
// `acc += a * b` compiles to one fused multiply-add (vfmadd231ps) where the ISA has FMA: GCC
// contracts it by default in C++ (-ffp-contract=fast); with -ffp-contract=off it would stay a
// multiply and an add, still correct, just slower.
// B's row k starts b_row_step floats after row k - 1: NR in a packed sliver, ldb when B is read
// in place.
// kComputedVectors < kRowVectors computes only the first vectors of each tile row: for an edge
// tile no wider than that (n <= kComputedVectors * kVec), the rest would be thrown away, so it is
// not computed. The B layout is the same; the kernel just reads fewer vectors of each row.
enum ALayout { kPackedA, kRowsA, kColsA };   // packed; op(A) = A in place; op(A) = A^T in place

template <ALayout kA, int kComputedVectors = kRowVectors>
void micro_kernel(int kc, const float* __restrict Ap, idx lda, const float* __restrict Bp, idx b_row_step,
                  float* C, int ldc, int m, int n, bool add_to_c) {
    vfloat acc[MR][kRowVectors] = {};  // the C tile, in registers
    for (int k = 0; k < kc; k++) {
        vfloat b[kComputedVectors];  // row k of the B sliver (NR floats), 64-byte aligned
        for (int v = 0; v < kComputedVectors; v++) std::memcpy(&b[v], Bp + v * kVec, sizeof(vfloat));
        for (int r = 0; r < MR; r++) {
            const float a = kA == kRowsA ? Ap[r * lda] : Ap[r];  // A(r, k)
            for (int v = 0; v < kComputedVectors; v++) acc[r][v] += a * b[v];  // broadcast a; one FMA per vector
        }
        Ap += kA == kPackedA ? MR : kA == kRowsA ? 1 : lda;
        Bp += b_row_step;
    }

    if (m == MR && n == NR) {  // full tile: straight vector stores into C
        for (int r = 0; r < MR; r++) {
            for (int v = 0; v < kRowVectors; v++) {
                float* c = C + idx(r) * ldc + v * kVec;
                vfloat out = acc[r][v];
                if (add_to_c) {
                    vfloat old;
                    std::memcpy(&old, c, sizeof(vfloat));
                    out = old + out;
                }
                std::memcpy(c, &out, sizeof(vfloat));
            }
        }
    } else {  // edge tile: spill to a local tile, copy the part inside C (same additions)
        alignas(64) float tile[MR][NR];
        std::memcpy(tile, acc, sizeof(tile));
        for (int r = 0; r < m; r++) {
            float* c = C + idx(r) * ldc;
            for (int j = 0; j < n; j++) c[j] = add_to_c ? c[j] + tile[r][j] : tile[r][j];
        }
    }
}

// ----------------------------------------------------------------------------------------------
// the driver

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

// Thread tid's share of the loop nest drawn at the top of this file; nt threads call it at once
// (nt == 1: the whole serial algorithm). Bp is the team's shared B panel.
void gemm_thread(const Args& g, float* Bp, int nt, int tid) {
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

            // When A is transposed (the dW = dy^T x products) and B is not, the kernel reads
            // full NR-wide slivers of B in place (a row of the sliver is NR consecutive floats
            // of a row of B); only a last, partial sliver is packed, by each thread that needs
            // it, privately: no B copy and no barriers. NN products already read A in place,
            // and two unpacked streams are slower at large N, so there, and for transposed B,
            // all threads pack the B panel together, then wait until it is complete. To
            // re-measure: bench_gemm's TN rows (the dW products) against NN and NT.
            const bool b_in_place = g.trans_a && !g.trans_b;
            const int last = ns - 1;
            const float* edge = nullptr;
            if (!b_in_place) {
                const Range my_slivers = part(ns, nt, tid);
                for (int t = my_slivers.begin; t < my_slivers.end; t++)
                    pack_b_sliver(g.trans_b, g.B, g.ldb, pc, kc, jc, nc, t, Bp);
                team_barrier(nt);
            } else if (nc % NR != 0 && my_cols.begin <= last && last < my_cols.end) {
                float* e = tls_pack_edge.get(std::size_t(KC) * NR);
                pack_sliver<NR>(g.B + idx(pc) * g.ldb + jc + last * NR, g.ldb, 1, nc - last * NR, kc, e);
                edge = e;
            }

            for (int s0 = my_rows.begin; s0 < my_rows.end; s0 += block_ms) {  // 3rd loop
                const int i0 = s0 * MR;
                const int mc = std::min(std::min(s0 + block_ms, my_rows.end) * MR, g.M) - i0;
                // Not transposed, op(A)'s rows lie contiguous in memory and the micro-kernel
                // reads full MR-row slivers in place; only a last, partial sliver is packed
                // (zero-padded), so the kernel never reads past row M. Packing would cost a copy
                // of every float of A, which at small N (D = 128) is used by few multiply-adds.
                // Transposed, the MR floats the kernel needs at each k are contiguous too, a row
                // of A apart. Reading them in place saves the copy but reads A once per B sliver
                // (N / NR times) with a stride of lda: it wins while N is small (few re-reads)
                // and rows are close (the strided reads stay in cache), and packing wins beyond.
                // The bounds below are where the two met on the machine these were tuned on
                // (D = 128 dW products: in place faster; N or lda of 2048: packing faster). To
                // re-measure, run bench_gemm's TN rows with each choice forced.
                constexpr int kInPlaceMaxN = 512, kInPlaceMaxLda = 1024;
                const bool a_in_place = !g.trans_a || (g.N <= kInPlaceMaxN && g.lda <= kInPlaceMaxLda);
                const int full = a_in_place ? mc / MR * MR : 0;  // rows read in place
                if (full < mc) pack_a(g.trans_a, g.A, g.lda, i0 + full, mc - full, pc, kc, Ap + idx(full) * kc);

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
                            micro_kernel<kRowsA>(kc, ap, g.lda, bp, b_row_step, c, g.ldc, m, n, add_to_c);
                        } else if (ir < full) {
                            ap = g.A + idx(pc) * g.lda + i0 + ir;
                            micro_kernel<kColsA>(kc, ap, g.lda, bp, b_row_step, c, g.ldc, m, n, add_to_c);
                        } else if (n <= kVec) {  // a narrow edge (an attention head's 10 or 16 columns)
                            micro_kernel<kPackedA, 1>(kc, ap, 0, bp, b_row_step, c, g.ldc, m, n, add_to_c);
                        } else {
                            micro_kernel<kPackedA>(kc, ap, 0, bp, b_row_step, c, g.ldc, m, n, add_to_c);
                        }
                    }
                }
            }
            // nobody may repack Bp for the next slice while others still read this one
            if (!b_in_place) team_barrier(nt);
        }
    }
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int M, int N, int K,
          const float* A, int lda, const float* B, int ldb,
          float* C, int ldc, bool accumulate) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {  // empty sum: C = 0 (or C unchanged when accumulating)
        if (!accumulate)
            for (int i = 0; i < M; i++) std::fill(C + idx(i) * ldc, C + idx(i) * ldc + N, 0.0f);
        return;
    }
    const Args g{trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate};

    // The B panel is shared by the team; it lives in the buffer of the thread that called us.
    const int nc_max = ceil_div(std::min(N, NC), NR) * NR;
    float* const Bp = tls_pack_b.get(std::size_t(std::min(K, KC)) * nc_max);

    if (!use_threads(2.0 * M * N * K, kMinParallelFlops)) {
        gemm_thread(g, Bp, 1, 0);
        return;
    }
#ifdef _OPENMP
    #pragma omp parallel
    gemm_thread(g, Bp, team_size(), team_index());
#endif
}

}  // namespace autograd::kernels
