// gemm_bf16.cpp: bf16-input, fp32-accumulate matrix multiply. The contract is in gemm_bf16.h.
//
// The fast path follows gemm.cpp (read that first: packing, cache blocking, a register-tiled
// micro-kernel), with two differences that come from the instruction it is built on:
//
//   vdpbf16ps acc, a, b     for each fp32 lane i (16 per zmm register):
//                             acc[i] += a.bf16[2i] * b.bf16[2i] + a.bf16[2i+1] * b.bf16[2i+1]
//
// 1) It consumes k in pairs. Packing therefore rounds each float to bf16 (16 bits) and stores
//    the two values of a pair, k = 2p and 2p + 1, side by side in one 32-bit word: the low half
//    holds k = 2p. A sliver of width W is then W words per pair p, k-major:
//        Bp[p*NR + c] = bf16(op(B)[2p][j + c]) | bf16(op(B)[2p + 1][j + c]) << 16
//        Ap[p*MR + r] = bf16(op(A)[i + r][2p]) | bf16(op(A)[i + r][2p + 1]) << 16
//    An odd K gets a zero partner for its last k (0 * anything adds nothing).
// 2) Packing is never skipped: even an operand already laid out right has to be converted. So
//    both operands are packed whole, once per call, by all threads together (half the bytes of
//    fp32), and the products then only read packed memory.
//
// The micro-kernel keeps a 12 x 32 tile of C in 24 zmm accumulators. For each pair p it loads
// 32 words of B (2 registers: 32 columns, 2 k's each), broadcasts each of the 12 words of A
// (a row's pair) to all lanes and does 24 vdpbf16ps: 12 * 32 * 2 = 768 multiply-adds, twice as
// many as the fp32 kernel's 24 FMAs do for one k.
//
// Determinism: every C element sums its pairs in one fixed order (K slices in order, pairs in
// order within a slice), whichever thread computes its tile, so the result is bit-identical for
// any thread count. It differs from gemm()'s in the last bits: fp32 rounds each product's sum
// once per k, vdpbf16ps once per product inside an instruction that adds two.
#include "autograd/kernels/gemm_bf16.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AUTOGRAD_BF16_X86 1
#endif

#include "autograd/kernels/float_buffer.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/gemm_driver.h"
#include "autograd/kernels/parallel.h"

namespace autograd::kernels {

using idx = std::ptrdiff_t;

// ----------------------------------------------------------------------------------------------
// the conversion

namespace {
// Round-to-nearest-even on the bit pattern: adding 0x7FFF rounds the dropped 16 bits up exactly
// when they are above half (0x8000); adding the kept part's lowest bit as well breaks a tie
// (exactly 0x8000) towards the even neighbour. A carry out of the mantissa bumps the exponent,
// which is the right answer (and gives infinity past bf16's largest finite value). A denormal
// input (below 1.18e-38) becomes a signed zero, as the packing's vcvtne2ps2bf16 makes it: the
// reference and the kernel round the same way, bit for bit.
inline uint16_t to_bf16(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x0040u);   // NaN: keep it a quiet NaN
    if ((u & 0x7F800000u) == 0) u &= 0x80000000u;   // denormal: signed zero, as vcvtne2ps2bf16 does
    u += 0x7FFFu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
}
}  // namespace

uint16_t bf16_bits(float x) { return to_bf16(x); }

float bf16_to_float(uint16_t bits) {
    const uint32_t u = uint32_t(bits) << 16;
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}

bool bf16_dot_supported() {
#if defined(AUTOGRAD_BF16_X86) && (defined(__GNUC__) || defined(__clang__))
    static const bool supported = __builtin_cpu_supports("avx512bf16");
    return supported;
#else
    return false;
#endif
}

// ----------------------------------------------------------------------------------------------
// the reference and the portable path

void gemm_bf16_reference(bool trans_a, bool trans_b, int M, int N, int K,
                         const float* A, int lda, const float* B, int ldb,
                         float* C, int ldc, bool accumulate) {
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double sum = 0.0;
            for (int k = 0; k < K; k++) {
                const float a = round_to_bf16(trans_a ? A[idx(k) * lda + i] : A[idx(i) * lda + k]);  // op(A)[i][k]
                const float b = round_to_bf16(trans_b ? B[idx(j) * ldb + k] : B[idx(k) * ldb + j]);  // op(B)[k][j]
                sum += double(a * b);   // exact: two 8-bit mantissas make at most 16 bits
            }
            float& c = C[idx(i) * ldc + j];
            c = accumulate ? c + float(sum) : float(sum);
        }
    }
}

namespace {
// A stored (rows x cols) matrix, leading dimension ld, rounded to bf16: a compact copy.
std::vector<float> rounded_copy(const float* X, int ld, int rows, int cols) {
    std::vector<float> r(std::size_t(rows) * cols);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) r[std::size_t(i) * cols + j] = round_to_bf16(X[idx(i) * ld + j]);
    return r;
}
}  // namespace

void gemm_bf16_portable(bool trans_a, bool trans_b, int M, int N, int K,
                        const float* A, int lda, const float* B, int ldb,
                        float* C, int ldc, bool accumulate) {
    // rounded, compact copies of the stored matrices, then the fp32 gemm
    const int a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
    const int b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
    const std::vector<float> a = rounded_copy(A, lda, a_rows, a_cols), b = rounded_copy(B, ldb, b_rows, b_cols);
    gemm(trans_a, trans_b, M, N, K, a.data(), std::max(a_cols, 1), b.data(), std::max(b_cols, 1), C, ldc, accumulate);
}

// ----------------------------------------------------------------------------------------------
// the fast path

#ifdef AUTOGRAD_BF16_X86
namespace {

constexpr int MR = 12, NR = 32;   // micro-tile: 12 rows x 2 registers of 16 lanes = 24 accumulators
constexpr int kVec = 16;          // fp32 lanes per zmm register
// K slice, in pairs: one B sliver slice is KCP x NR words = 32 KB and stays in L1 (48 KB) while
// the A slivers of a row block (MC x KCP words = 192 KB) stream from L2. To re-tune, run
// bench_gemm's bf16 rows for a few values around these.
constexpr int KCP = 256;
constexpr int MC = 192;           // rows of C per row block (16 slivers)
constexpr int NCH = 256;          // columns of C per column chunk (8 slivers)
// Below this many flops a thread team costs more than it saves (as kMinParallelFlops in gemm.cpp,
// halved: the bf16 kernel does the same work in about half the time).
constexpr double kMinParallelFlops = 4.0e6;

using namespace gemm_driver;
thread_local PackBuffer<uint32_t> tls_pack_a, tls_pack_b;   // this thread's packed operands

// Pack n (<= W) strands of length K into one pair-interleaved sliver of width W (kp = ceil(K/2)
// pairs), zero-padded past n and past K:
//     dst[p*W + x] = bf16(X(x, 2p)) | bf16(X(x, 2p + 1)) << 16,   X(x, k) = src[k*step_k + x*step_x]
// One of the two steps is 1, and the loads run along it. vcvtne2ps2bf16 does the rounding, 32
// floats per instruction, with the same bits as to_bf16 (nearest even, NaN kept, denormal to 0).
// Masked loads read nothing past n or K and give zeros there, which is the padding.
inline __mmask16 first_lanes(int count) { return count >= 16 ? __mmask16(0xFFFF) : count <= 0 ? 0 : __mmask16((1u << count) - 1); }

// Transpose 16 x 16 32-bit words in 16 registers: lane q of rows[x] goes to lane x of rows[q].
// The recursive way: swap the two off-diagonal 8 x 8 blocks, then the off-diagonal 4 x 4 blocks
// inside each 8 x 8 one, and so on down to single words. A round of block size b pairs row i
// (bit b of i clear) with row i + b; lane j's bit b says which block it is in.
struct TransposeIndex {   // the lanes permutex2var takes, per round: 0-15 from row i, 16-31 from row i + b
    alignas(64) int32_t low[4][16], high[4][16];
    constexpr TransposeIndex() : low{}, high{} {
        for (int round = 0, b = 8; b >= 1; round++, b /= 2)
            for (int j = 0; j < 16; j++) {
                low[round][j] = (j & b) ? 16 + j - b : j;   // row i keeps its left block, takes row i+b's left block
                high[round][j] = (j & b) ? 16 + j : j + b;  // row i+b takes row i's right block, keeps its right block
            }
    }
};
constexpr TransposeIndex kTranspose;

__attribute__((target("avx512f"), always_inline))
inline void transpose_16x16(__m512i rows[16]) {
    for (int round = 0, b = 8; b >= 1; round++, b /= 2) {
        const __m512i low = _mm512_load_si512(kTranspose.low[round]), high = _mm512_load_si512(kTranspose.high[round]);
        for (int i = 0; i < 16; i++)
            if ((i & b) == 0) {
                const __m512i a = rows[i], c = rows[i + b];
                rows[i] = _mm512_permutex2var_epi32(a, low, c);
                rows[i + b] = _mm512_permutex2var_epi32(a, high, c);
            }
    }
}

template <int W>
__attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl")))
void pack_pairs(const float* src, idx step_k, idx step_x, int n, int K, uint32_t* dst) {
    const int kp = (K + 1) / 2;
    if (step_x == 1) {   // a row of src holds one k of all n strands: convert rows 2p and 2p+1, interleave
        // after the conversion, bf16 j < 16 is row 2p's x = j and bf16 16 + j is row 2p+1's x = j;
        // the word for x wants them side by side: bf16 2x <- x, bf16 2x+1 <- 16 + x
        alignas(64) static constexpr uint16_t kInterleave[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                                                 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
        const __m512i interleave = _mm512_load_si512(kInterleave);
        for (int p = 0; p < kp; p++) {
            const float* r0 = src + idx(2 * p) * step_k;
            const bool odd_end = 2 * p + 1 == K;   // row 2p+1 is past K: its half of the words is 0
            for (int x = 0; x < W; x += 16) {
                const __mmask16 in = first_lanes(n - x);
                const __m512 lo = _mm512_maskz_loadu_ps(in, r0 + x);
                const __m512 hi = odd_end ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(in, r0 + step_k + x);
                const __m512i words = _mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
                _mm512_mask_storeu_epi32(dst + idx(p) * W + x, first_lanes(W - x), words);
            }
        }
    } else {             // step_k == 1, a strand is contiguous: 32 floats of it are 16 words, in order
        for (int p0 = 0; p0 < kp; p0 += 16) {
            const int floats = K - 2 * p0;   // left in each strand (more than 32: take 32)
            const __mmask16 lo_in = first_lanes(floats), hi_in = first_lanes(floats - 16);
            const int pairs = std::min(16, kp - p0);
            for (int x0 = 0; x0 < W; x0 += 16) {   // 16 strands at a time
                __m512i words[16];                 // words[x]: strand x0 + x, pairs p0 .. p0 + 15
                for (int x = 0; x < 16; x++) {
                    const float* s = src + (x0 + x) * step_x + 2 * p0;
                    words[x] = x0 + x >= n ? _mm512_setzero_si512()
                        : (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi_in, s + 16), _mm512_maskz_loadu_ps(lo_in, s));
                }
                transpose_16x16(words);            // words[q]: pair p0 + q, strands x0 .. x0 + 15
                for (int q = 0; q < pairs; q++) _mm512_mask_storeu_epi32(dst + idx(p0 + q) * W + x0, first_lanes(W - x0), words[q]);
            }
        }
    }
}

// C[0:m, 0:n] = (add_to_c ? C : 0) + A sliver (MR x 2kp) * B sliver (2kp x NR), both packed.
// kVectors = 1 computes only the left 16 columns: for an edge tile no wider than that (an
// attention head's few keys), the right half would be thrown away.
template <int kVectors>
__attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl")))
void micro_kernel(int kp, const uint32_t* __restrict Ap, const uint32_t* __restrict Bp, float* C, int ldc, int m,
                  int n, bool add_to_c) {
    __m512 acc[MR][kVectors];
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < kVectors; v++) acc[r][v] = _mm512_setzero_ps();
    for (int p = 0; p < kp; p++) {
        __m512bh b[kVectors];   // pair p of 16 (or 32) columns
        for (int v = 0; v < kVectors; v++) b[v] = (__m512bh)_mm512_loadu_si512(Bp + v * kVec);
        for (int r = 0; r < MR; r++) {
            const __m512bh a = (__m512bh)_mm512_set1_epi32(int(Ap[r]));   // row r's pair, in every lane
            for (int v = 0; v < kVectors; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], a, b[v]);
        }
        Ap += MR;
        Bp += NR;
    }
    if (m == MR && n == NR && kVectors * kVec == NR) {   // full tile: vector stores
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < kVectors; v++) {
                float* c = C + idx(r) * ldc + v * kVec;
                const __m512 out = add_to_c ? _mm512_add_ps(_mm512_loadu_ps(c), acc[r][v]) : acc[r][v];
                _mm512_storeu_ps(c, out);
            }
    } else {   // edge tile: spill, copy the part inside C (same additions)
        alignas(64) float tile[MR][kVectors * kVec];
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < kVectors; v++) _mm512_store_ps(&tile[r][v * kVec], acc[r][v]);
        for (int r = 0; r < m; r++) {
            float* c = C + idx(r) * ldc;
            for (int j = 0; j < n; j++) c[j] = add_to_c ? c[j] + tile[r][j] : tile[r][j];
        }
    }
}

// Thread tid of nt packs its share of op(B)'s ns slivers, each to kp pairs, into Bp.
void pack_b_share(const Args& g, uint32_t* Bp, int nt, int tid) {
    const int kp = (g.K + 1) / 2;
    const Range my_b = part(ceil_div(g.N, NR), nt, tid);
    for (int t = my_b.begin; t < my_b.end; t++) {
        const int j = t * NR, cols = std::min(NR, g.N - j);
        uint32_t* dst = Bp + idx(t) * kp * NR;
        if (!g.trans_b) pack_pairs<NR>(g.B + j, g.ldb, 1, cols, g.K, dst);                  // op(B)[k][j] = B[k][j]
        else            pack_pairs<NR>(g.B + idx(j) * g.ldb, 1, g.ldb, cols, g.K, dst);     // op(B)[k][j] = B[j][k]
    }
}

// Thread tid of nt: pack its share of the slivers, wait for the others, then compute its share
// of the (row block, column chunk) work items. nt == 1: the whole serial algorithm. Bp: op(B)'s
// slivers; b_dst: where this call packs them (Bp itself), or nullptr when a PackedBf16B holds
// them already.
void gemm_bf16_thread(const Args& g, uint32_t* Ap, const uint32_t* Bp, uint32_t* b_dst, int nt, int tid) {
    const int kp = (g.K + 1) / 2, ms = ceil_div(g.M, MR), ns = ceil_div(g.N, NR);
    // 1) pack: the ms slivers of op(A) and the ns of op(B), each to kp pairs. Each thread packs
    //    its share of each operand (not of their slivers counted together: a B sliver is NR/MR
    //    times the work of an A sliver, and the barrier waits for the slowest thread).
    const Range my_a = part(ms, nt, tid);
    for (int s = my_a.begin; s < my_a.end; s++) {
        const int i = s * MR, rows = std::min(MR, g.M - i);
        uint32_t* dst = Ap + idx(s) * kp * MR;
        if (!g.trans_a) pack_pairs<MR>(g.A + idx(i) * g.lda, 1, g.lda, rows, g.K, dst);   // op(A)[i][k] = A[i][k]
        else            pack_pairs<MR>(g.A + i, g.lda, 1, rows, g.K, dst);                  // op(A)[i][k] = A[k][i]
    }
    if (b_dst) pack_b_share(g, b_dst, nt, tid);
    team_barrier(nt);

    // 2) multiply: work items are (row block, column chunk) rectangles of C, each written by one
    //    thread. Row blocks shrink below MC when there would be too few items to share; they
    //    are near-equal parts of the rows, and as many as make the items divide evenly among
    //    the threads, so that each thread gets the same number of rows to multiply.
    const int chunk_ns = NCH / NR, chunks = ceil_div(ns, chunk_ns);
    int blocks = std::min(ms, std::max(ceil_div(ms, MC / MR), ceil_div(4 * nt, chunks)));
    while ((blocks * chunks) % nt != 0 && blocks < ms) blocks++;
    const Range items = part(blocks * chunks, nt, tid);
    for (int item = items.begin; item < items.end; item++) {
        const Range block = part(ms, blocks, item / chunks);
        const int s0 = block.begin, s1 = block.end;
        const int t0 = (item % chunks) * chunk_ns, t1 = std::min(ns, t0 + chunk_ns);
        for (int pc = 0; pc < kp; pc += KCP) {   // K slices, in order
            const int kcp = std::min(KCP, kp - pc);
            const bool add_to_c = g.accumulate || pc > 0;
            for (int t = t0; t < t1; t++) {       // one B sliver slice stays in L1 ...
                const int j = t * NR, n = std::min(NR, g.N - j);
                const uint32_t* bp = Bp + (idx(t) * kp + pc) * NR;
                for (int s = s0; s < s1; s++) {   // ... while the row block's A slivers pass by
                    const int i = s * MR, m = std::min(MR, g.M - i);
                    const uint32_t* ap = Ap + (idx(s) * kp + pc) * MR;
                    float* c = g.C + idx(i) * g.ldc + j;
                    if (n <= kVec) micro_kernel<1>(kcp, ap, bp, c, g.ldc, m, n, add_to_c);
                    else           micro_kernel<2>(kcp, ap, bp, c, g.ldc, m, n, add_to_c);
                }
            }
        }
    }
}

// packed_b: op(B)'s slivers packed before (PackedBf16B), or nullptr to pack them here.
void gemm_bf16_fast(const Args& g, const uint32_t* packed_b) {
    const int kp = (g.K + 1) / 2;
    // The packed operands live in the calling thread's buffers; the team shares them.
    uint32_t* const Ap = tls_pack_a.get(std::size_t(ceil_div(g.M, MR)) * MR * kp);
    uint32_t* const b_dst = packed_b ? nullptr : tls_pack_b.get(std::size_t(ceil_div(g.N, NR)) * NR * kp);
    const uint32_t* const Bp = packed_b ? packed_b : b_dst;
    if (!use_threads(2.0 * g.M * g.N * g.K, kMinParallelFlops)) {
        gemm_bf16_thread(g, Ap, Bp, b_dst, 1, 0);
        return;
    }
    run_team([&](int nt, int tid) { gemm_bf16_thread(g, Ap, Bp, b_dst, nt, tid); });
}

}  // namespace
#endif  // AUTOGRAD_BF16_X86

void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K,
               const float* A, int lda, const float* B, int ldb,
               float* C, int ldc, bool accumulate) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {   // empty sum: as gemm()
        gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
        return;
    }
#ifdef AUTOGRAD_BF16_X86
    if (bf16_dot_supported()) {
        gemm_bf16_fast({trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate}, nullptr);
        return;
    }
#endif
    gemm_bf16_portable(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

// ----------------------------------------------------------------------------------------------
// op(B) packed once

PackedBf16B::PackedBf16B(bool trans_b, int N, int K, const float* B, int ldb)
    : PackedBf16B(trans_b, N, K, B, ldb, bf16_dot_supported()) {}

PackedBf16B PackedBf16B::for_portable_path(bool trans_b, int N, int K, const float* B, int ldb) {
    return PackedBf16B(trans_b, N, K, B, ldb, false);
}

PackedBf16B::PackedBf16B(bool trans_b, int N, int K, const float* B, int ldb, bool fast)
    : N_(std::max(N, 0)), K_(std::max(K, 0)), trans_b_(trans_b), fast_(fast) {
    if (N_ == 0 || K_ == 0) return;   // nothing to multiply: gemm_bf16 below never reads the pack
#ifdef AUTOGRAD_BF16_X86
    if (fast_) {
        // the slivers gemm_bf16_fast would pack, by the same code, with a team when there are many
        const std::size_t words = std::size_t(gemm_driver::ceil_div(N_, NR)) * NR * ((K_ + 1) / 2);
        // from the tensors' allocator: the memory a decoding call frees serves the next one without page faults
        words_ = static_cast<uint32_t*>(tensor_alloc(words * sizeof(uint32_t)));
        const gemm_driver::Args g{false, trans_b, 0, N_, K_, nullptr, 0, B, ldb, nullptr, 0, false};
        if (!gemm_driver::use_threads(8.0 * N_ * K_, kMinParallelFlops)) pack_b_share(g, words_, 1, 0);
        else gemm_driver::run_team([&](int nt, int tid) { pack_b_share(g, words_, nt, tid); });
        return;
    }
#endif
    fast_ = false;   // no AVX512_BF16 code in this build: the portable path
    rounded_ = trans_b ? rounded_copy(B, ldb, N_, K_) : rounded_copy(B, ldb, K_, N_);   // B as stored
}

PackedBf16B::PackedBf16B(PackedBf16B&& o) noexcept
    : N_(o.N_), K_(o.K_), trans_b_(o.trans_b_), fast_(o.fast_), words_(o.words_), rounded_(std::move(o.rounded_)) {
    o.words_ = nullptr;
}

PackedBf16B::~PackedBf16B() {
    tensor_free(words_);
}

void gemm_bf16(bool trans_a, int M, const float* A, int lda, const PackedBf16B& b, float* C, int ldc, bool accumulate) {
    const int N = b.N_, K = b.K_;
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {   // empty sum: as gemm()
        gemm(trans_a, false, M, N, K, A, lda, nullptr, N, C, ldc, accumulate);
        return;
    }
#ifdef AUTOGRAD_BF16_X86
    if (b.fast_) {
        gemm_bf16_fast({trans_a, b.trans_b_, M, N, K, A, lda, nullptr, 0, C, ldc, accumulate}, b.words_);
        return;
    }
#endif
    // the portable path with B's rounded copy made already: gemm_bf16_portable's arithmetic
    const int a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
    const std::vector<float> a = rounded_copy(A, lda, a_rows, a_cols);
    const int b_cols = b.trans_b_ ? K : N;
    gemm(trans_a, b.trans_b_, M, N, K, a.data(), std::max(a_cols, 1), b.rounded_.data(), std::max(b_cols, 1), C, ldc, accumulate);
}

}  // namespace autograd::kernels
