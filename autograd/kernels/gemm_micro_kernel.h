// gemm_micro_kernel.h: the innermost loop of gemm (gemm.cpp), and the instruction sets it runs on.
//
// The micro-kernel computes one MR x NR tile of C over one slice of the sum (kc values of k),
// keeping the whole tile in vector registers:
//
//     for k in 0 .. kc-1:
//         b[v] = row k of the B sliver, NR floats in NR / lanes vectors
//         for r in 0 .. MR-1:
//             a = A(r, k) copied to every lane (a broadcast)
//             acc[r][v] = acc[r][v] + a * b[v]       one fused multiply-add per vector
//
// The algorithm is written once (micro_kernel, at the bottom). What changes from one instruction
// set to another is the width of a vector register, how many registers there are, and the
// instructions that load, broadcast and multiply-add; so the tile shape and the cache blocks
// change with them. Each instruction set is one struct, found by its name:
//
//   struct      lanes  registers  tile MR x NR   accumulators + B vectors + 1 broadcast
//   Avx512        16     32 zmm     12 x 32        24 + 2 + 1 = 27 registers
//   Avx2Fma        8     16 ymm      6 x 16        12 + 2 + 1 = 15
//   Neon           4     32 q        8 x 8         16 + 2 + 8 = 26      (aarch64: A's 8 values loaded
//                                                                        at once; 8 x 12 spilled)
//   Portable       4      -          6 x 8         12 + 2 + 1 = 15      (any compiler, any CPU)
//
// Why so many accumulators: a fused multiply-add takes about 4 cycles to give its result and a
// core starts two per cycle, so 8 or more independent sums must be in flight to keep both units
// busy; each accumulator is one such sum. Why a broadcast of A and vectors of B: each A value is
// used NR times and each B vector MR times per k, so one k costs MR broadcasts + NR / lanes loads
// for MR * NR / lanes multiply-adds.
//
// Portable is written with the GCC/Clang vector extension (a vector type whose + and * work lane
// by lane): the compiler picks the instructions, SSE on an x86-64 without AVX, NEON or anything
// else it knows elsewhere, and whether `acc + a * b` becomes one fused instruction (it does where
// the target has FMA). The others name their instructions (Intel's and ARM's intrinsics), and
// always fuse: acc + a * b rounded once.
//
// Which ones a build contains depends on its compiler flags (make ARCH=...): Portable always, the
// others when the flags enable their instructions. gemm() uses the widest; the tests run gemm
// through every one the build contains (gemm.h: gemm_kernels, detail::gemm_with).
#pragma once
#include <cstddef>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif

namespace autograd::kernels::gemm_driver {

using idx = std::ptrdiff_t;

// The first n lanes of a vector of 4 floats from or to memory, through a small array, for the
// instruction sets without masked loads and stores (NEON, portable); the other lanes read as 0.
template <class V>
inline V lanes_in(const float* p, int n) {
    static_assert(sizeof(V) == 4 * sizeof(float), "a vector of 4 floats");
    float t[4] = {};
    for (int i = 0; i < n; i++) t[i] = p[i];
    V x;
    std::memcpy(&x, t, sizeof x);
    return x;
}
template <class V>
inline void lanes_out(float* p, V x, int n) {
    static_assert(sizeof(V) == 4 * sizeof(float), "a vector of 4 floats");
    float t[4];
    std::memcpy(t, &x, sizeof t);
    for (int i = 0; i < n; i++) p[i] = t[i];
}

// ---- the instruction sets. Besides the vector operations, each names its cache blocks (the
// loop nest in gemm.cpp): KC values of k per slice (a B sliver, KC x NR floats, should stay in L1
// while the A slivers of a row block pass by), MC rows of A per packed block (MC x KC floats, in
// L2), NC columns of B per packed panel (KC x NC floats, in L3); and kTransposedAInPlace: whether
// the dW = dy^T x products (A transposed, B not) read their operands where they lie instead of
// packing them (gemm.cpp says when). Both were measured with bench_gemm on one machine per
// instruction set; to re-tune for another cache, run it for a few values around these.

#if defined(__AVX512F__)
struct Avx512 {
    static constexpr const char* name = "AVX-512";
    using V = __m512;
    static constexpr int kLanes = 16, MR = 12, NR = 32;
    static constexpr int KC = 512, MC = 192, NC = 4096;   // tuned for a 48 KB L1d, 1 MB L2
    static constexpr bool kTransposedAInPlace = true;     // the D = 128 dW products were faster so
    static V zero() { return _mm512_setzero_ps(); }
    static V load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, V x) { _mm512_storeu_ps(p, x); }
    static V broadcast(const float* p) { return _mm512_set1_ps(*p); }
    static V fma(V a, V b, V acc) { return _mm512_fmadd_ps(a, b, acc); }   // vfmadd231ps: acc + a * b
    static V add(V a, V b) { return _mm512_add_ps(a, b); }
    // the first n < 16 lanes only (masked: the others are neither read nor written)
    static V load_first(const float* p, int n) { return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p); }
    static void store_first(float* p, V x, int n) { _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), x); }
};
#endif

#if defined(__AVX2__) && defined(__FMA__)
struct Avx2Fma {
    static constexpr const char* name = "AVX2+FMA";
    using V = __m256;
    static constexpr int kLanes = 8, MR = 6, NR = 16;
    static constexpr int KC = 512, MC = 192, NC = 4096;   // for a 32 KB L1d: no KC in 256-768 or
                                                          // MC in 96-288 was faster
    static constexpr bool kTransposedAInPlace = false;    // in place was slower (no masked loads)
    static V zero() { return _mm256_setzero_ps(); }
    static V load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, V x) { _mm256_storeu_ps(p, x); }
    // vbroadcastss. Not _mm256_broadcast_ss(p): GCC treats that builtin's read as one that might
    // touch the accumulators, and then stores all of them to memory at every k.
    static V broadcast(const float* p) { return _mm256_set1_ps(*p); }
    static V fma(V a, V b, V acc) { return _mm256_fmadd_ps(a, b, acc); }    // vfmadd231ps: acc + a * b
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    // the first n < 8 lanes only (vmaskmovps: a lane whose mask is clear is neither read nor written)
    static __m256i first(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }
    static V load_first(const float* p, int n) { return _mm256_maskload_ps(p, first(n)); }
    static void store_first(float* p, V x, int n) { _mm256_maskstore_ps(p, first(n), x); }
};
#endif

#if defined(__aarch64__) && defined(__ARM_NEON)
struct Neon {
    static constexpr const char* name = "NEON";
    using V = float32x4_t;
    static constexpr int kLanes = 4, MR = 8, NR = 8;
    static constexpr int KC = 256, MC = 128, NC = 4096;   // not tuned on real hardware (tested under an emulator)
    static constexpr bool kTransposedAInPlace = false;
    static V zero() { return vdupq_n_f32(0.0f); }
    static V load(const float* p) { return vld1q_f32(p); }
    static void store(float* p, V x) { vst1q_f32(p, x); }
    static V broadcast(const float* p) { return vdupq_n_f32(*p); }   // ld1r (see Avx2Fma::broadcast)
    // fmla, written as an expression: with vfmaq_f32 GCC 12 stores every accumulator to memory at
    // every k, as with _mm256_broadcast_ss. GCC and Clang fuse `acc + a * b` into one fmla.
    static V fma(V a, V b, V acc) { return acc + a * b; }
    static V add(V a, V b) { return vaddq_f32(a, b); }
    static V load_first(const float* p, int n) { return lanes_in<V>(p, n); }
    static void store_first(float* p, V x, int n) { lanes_out(p, x, n); }
};
#endif

struct Portable {
    static constexpr const char* name = "portable";
    typedef float V __attribute__((vector_size(4 * sizeof(float))));
    static constexpr int kLanes = 4, MR = 6, NR = 8;
    static constexpr int KC = 512, MC = 192, NC = 4096;   // as Avx2Fma's, not tuned separately
    static constexpr bool kTransposedAInPlace = false;
    static V zero() { return V{}; }
    static V load(const float* p) { V x; std::memcpy(&x, p, sizeof x); return x; }
    static void store(float* p, V x) { std::memcpy(p, &x, sizeof x); }
    static V broadcast(const float* p) { return V{} + *p; }   // a scalar operand goes to every lane
    static V fma(V a, V b, V acc) { return acc + a * b; }
    static V add(V a, V b) { return a + b; }
    static V load_first(const float* p, int n) { return lanes_in<V>(p, n); }
    static void store_first(float* p, V x, int n) { lanes_out(p, x, n); }
};

// ---- the micro-kernel

// Where the A values come from. Packed (gemm.cpp packs a sliver k-major: A(r, k) = A[k*MR + r]),
// or read in place from op(A) = A (rows: A(r, k) = A[r*lda + k]) or op(A) = A^T (columns:
// A(r, k) = A[k*lda + r]). The kernel only broadcasts single floats of A, and a broadcast costs
// the same from any address, so reading in place saves a copy wherever the addresses stay cached.
enum ALayout { kPackedA, kRowsA, kColsA };

// C[0:m, 0:n] (row stride ldc) = (add_to_c ? C : 0) + A sliver (MR x kc) * B sliver (kc x NR).
// m <= MR and n <= NR say how much of the tile is inside C (an edge tile's last vector of a row
// is stored with a mask, store_first). The B sliver's row k starts
// b_row_step floats after row k - 1 (NR when packed, ldb when read in place). Slivers at an edge
// are zero-padded, so the arithmetic never changes, only the final store is narrower.
// kVectors < NR / lanes computes only the first vectors of each tile row: an edge tile no wider
// than that (an attention head's 10 keys) would throw the rest away. Likewise kRows < MR computes
// only the first rows, and reads no A value of the others: a product with fewer rows than MR (an
// attention head's 10 queries) then reads A in place instead of copying it into MR zero-padded rows.
// Each C element is summed in the order k = 0, 1, ..., kc - 1 in one accumulator: the same bits
// whichever thread runs the kernel, and whatever kVectors and kRows.
template <class Isa, ALayout kA, int kVectors = Isa::NR / Isa::kLanes, int kRows = Isa::MR>
inline void micro_kernel(int kc, const float* __restrict A, idx lda, const float* __restrict B, idx b_row_step,
                         float* C, idx ldc, int m, int n, bool add_to_c) {
    using V = typename Isa::V;
    constexpr int W = Isa::kLanes;
    V acc[kRows][kVectors];   // the C tile, in registers
    // The loops over the tile's rows are unrolled in full (GCC and Clang read this pragma), so
    // that each acc[r][v] is a register: a loop left rolled indexes acc at run time, which puts
    // the whole tile in memory (GCC 12 did so for one-vector tiles of 9 rows or more).
    #pragma GCC unroll 16
    for (int r = 0; r < kRows; r++)
        for (int v = 0; v < kVectors; v++) acc[r][v] = Isa::zero();

    // The tile of C is read (when adding to it) and written after the sum: ask for its cache
    // lines now, so that they arrive while the sum runs (2-10% on the large products).
    for (int r = 0; r < kRows; r++) {
        __builtin_prefetch(C + r * ldc, 1);
        __builtin_prefetch(C + r * ldc + kVectors * W - 1, 1);
    }
    // Every caller has kc >= 1. Saying so lets the compiler keep the tile in registers from the
    // zeros to the stores (otherwise GCC keeps a copy on the stack for the case of no k at all).
    if (kc < 1) __builtin_unreachable();
    for (int k = 0; k < kc; k++) {
        V b[kVectors];   // row k of the B sliver
        for (int v = 0; v < kVectors; v++) b[v] = Isa::load(B + v * W);
        for (int r = 0; r < kRows; r++) {
            const V a = Isa::broadcast(kA == kRowsA ? A + r * lda : A + r);   // A(r, k) in every lane
            for (int v = 0; v < kVectors; v++) acc[r][v] = Isa::fma(a, b[v], acc[r][v]);
        }
        A += kA == kPackedA ? Isa::MR : kA == kRowsA ? 1 : lda;   // to A(0, k + 1)
        B += b_row_step;
    }

    if (m == kRows && n == kVectors * W) {   // a full tile: straight vector stores
        #pragma GCC unroll 16
        for (int r = 0; r < kRows; r++)
            for (int v = 0; v < kVectors; v++) {
                float* c = C + r * ldc + v * W;
                Isa::store(c, add_to_c ? Isa::add(Isa::load(c), acc[r][v]) : acc[r][v]);
            }
    } else {   // an edge tile: only its rows r < m and columns j < n are inside C
        #pragma GCC unroll 16
        for (int r = 0; r < kRows; r++) {
            if (r >= m) break;   // the rows past C's last
            for (int v = 0; v < kVectors; v++) {
                const int inside = n - v * W;   // columns of this vector inside C
                float* c = C + r * ldc + v * W;
                if (inside >= W) Isa::store(c, add_to_c ? Isa::add(Isa::load(c), acc[r][v]) : acc[r][v]);
                else if (inside > 0) Isa::store_first(c, add_to_c ? Isa::add(Isa::load_first(c, inside), acc[r][v]) : acc[r][v], inside);
            }
        }
    }
}

}  // namespace autograd::kernels::gemm_driver
