// Tests for autograd::kernels::gemm: the fast kernel must equal the naive three-loop reference on awkward
// shapes, every transpose combination, padded leading dimensions and accumulate on/off; give
// bit-identical results for any thread count; and work inside an outer OpenMP parallel region.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "autograd/kernels/gemm.h"

namespace {

// Deterministic fill in [-1, 1): a 32-bit linear congruential generator.
std::vector<float> lcg_fill(std::size_t n, uint32_t seed) {
    std::vector<float> v(n);
    for (float& x : v) {
        seed = seed * 1664525u + 1013904223u;
        x = float(seed >> 8) / float(1 << 23) - 1.0f;
    }
    return v;
}

// Floats needed to store `rows` rows of `cols` floats at row stride ld: exactly that, no slack
// past the last element, so that AddressSanitizer catches any read beyond it.
std::size_t stored_size(int rows, int cols, int ld) {
    return rows == 0 ? 0 : std::size_t(rows - 1) * ld + cols;
}

// One gemm problem with its operands stored as gemm expects, leading dimensions padded by `pad`
// floats (the padding holds garbage that must never be read into the result, nor written).
struct Problem {
    bool ta, tb;
    int M, N, K, lda, ldb, ldc;
    std::vector<float> A, B, C0;  // C0: C's contents before the call

    Problem(bool ta_, bool tb_, int M_, int N_, int K_, int pad, uint32_t seed)
        : ta(ta_), tb(tb_), M(M_), N(N_), K(K_) {
        lda = (ta ? M : K) + pad;  // stored A is K x M if transposed, else M x K
        ldb = (tb ? K : N) + pad;  // stored B is N x K if transposed, else K x N
        ldc = N + pad;
        A = lcg_fill(ta ? stored_size(K, M, lda) : stored_size(M, K, lda), seed);
        B = lcg_fill(tb ? stored_size(N, K, ldb) : stored_size(K, N, ldb), seed + 1);
        C0 = lcg_fill(stored_size(M, N, ldc), seed + 2);
    }
    std::vector<float> run_fast(bool acc) const {
        std::vector<float> C = C0;
        autograd::kernels::gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc, acc);
        return C;
    }
    std::vector<float> run_naive(bool acc) const {
        std::vector<float> C = C0;
        autograd::kernels::gemm_naive(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc, acc);
        return C;
    }
    // sum_k |op(A)[i][k]| * |op(B)[k][j]| (+ |C0|): the scale of the rounding error allowed
    std::vector<float> magnitude(bool acc) const {
        std::vector<float> absA(A.size()), absB(B.size()), C(C0.size());
        for (std::size_t i = 0; i < A.size(); i++) absA[i] = std::fabs(A[i]);
        for (std::size_t i = 0; i < B.size(); i++) absB[i] = std::fabs(B[i]);
        for (std::size_t i = 0; i < C.size(); i++) C[i] = std::fabs(C0[i]);
        autograd::kernels::gemm_naive(ta, tb, M, N, K, absA.data(), lda, absB.data(), ldb, C.data(), ldc,
                             acc);
        return C;
    }
};

// gemm() vs gemm_naive(): every element within float rounding of a K-term sum, and the padding
// between rows of C left untouched.
void check_against_naive(const Problem& p, bool acc) {
    const std::vector<float> fast = p.run_fast(acc), ref = p.run_naive(acc);
    const std::vector<float> mag = p.magnitude(acc);
    const float tol = 1e-6f * float(p.K + 1) + 1e-6f;  // relative to mag: ~8x float eps per term
    int bad = 0;
    for (int i = 0; i < p.M; i++) {
        for (int j = 0; j < p.ldc && std::size_t(i) * p.ldc + j < fast.size(); j++) {
            const std::size_t at = std::size_t(i) * p.ldc + j;
            const bool ok = j < p.N ? std::fabs(fast[at] - ref[at]) <= tol * mag[at]
                                    : fast[at] == p.C0[at];  // padding: not written
            if (!ok && bad++ < 3)
                FAIL_CHECK("C[" << i << "][" << j << "] = " << fast[at] << ", expected "
                                << (j < p.N ? ref[at] : p.C0[at]));
        }
    }
    CHECK(bad == 0);
}

const char* op_name(bool ta, bool tb) {
    return ta ? (tb ? "TT" : "TN") : (tb ? "NT" : "NN");
}

}  // namespace

TEST_CASE("gemm equals gemm_naive on awkward shapes, all transposes, padded, accumulate on/off") {
    const int sizes[] = {1, 7, 33, 257};
    uint32_t seed = 1;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int M : sizes)
                for (int N : sizes)
                    for (int K : sizes) {
                        // big 257^3 cases are slow in the naive loops: do them once per op
                        if (M == 257 && N == 257 && K == 257 && (ta || tb)) continue;
                        const int pad = (M + N + K) % 3 == 0 ? 0 : 5;
                        const bool acc = (M + 2 * N + K) % 2 == 0;
                        CAPTURE(op_name(ta, tb));
                        CAPTURE(M);
                        CAPTURE(N);
                        CAPTURE(K);
                        CAPTURE(pad);
                        CAPTURE(acc);
                        check_against_naive(Problem(ta, tb, M, N, K, pad, seed++), acc);
                    }
}

TEST_CASE("gemm: every transpose and accumulate mode on block-crossing shapes") {
    // shapes that cross the internal block sizes: micro-tiles (12 x 32 with AVX-512), row blocks
    // (192), slices of the sum (KC = 512, so K = 513 and 1100 take two and three slices)
    struct Dims { int M, N, K; };
    const Dims shapes[] = {{13, 65, 300}, {100, 31, 513}, {64, 64, 256}, {49, 97, 1}, {5, 40, 1100},
                           {200, 33, 20}};
    for (const Dims& d : shapes)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int acc = 0; acc < 2; acc++)
                    for (int pad : {0, 3}) {
                        CAPTURE(op_name(ta, tb));
                        CAPTURE(d.M);
                        CAPTURE(d.N);
                        CAPTURE(d.K);
                        CAPTURE(acc);
                        CAPTURE(pad);
                        check_against_naive(Problem(ta, tb, d.M, d.N, d.K, pad, 7), acc);
                    }
}

TEST_CASE("gemm with K == 0: zeros, or C unchanged when accumulating") {
    Problem p(false, false, 5, 9, 0, 2, 3);
    const std::vector<float> zeroed = p.run_fast(false), kept = p.run_fast(true);
    for (int i = 0; i < p.M; i++)
        for (int j = 0; j < p.N; j++) {
            CHECK(zeroed[std::size_t(i) * p.ldc + j] == 0.0f);
            CHECK(kept[std::size_t(i) * p.ldc + j] == p.C0[std::size_t(i) * p.ldc + j]);
        }
}

TEST_CASE("gemm with M == 0 or N == 0 touches nothing") {
    float a = 1, b = 2, c = 42;
    autograd::kernels::gemm(false, false, 0, 1, 1, &a, 1, &b, 1, &c, 1, false);
    autograd::kernels::gemm(false, false, 1, 0, 1, &a, 1, &b, 1, &c, 1, false);
    CHECK(c == 42.0f);
    autograd::kernels::gemm(false, false, 1, 1, 1, &a, 1, &b, 1, &c, 1, true);
    CHECK(c == 44.0f);
}

TEST_CASE("gemm: a small known product") {
    // [1 2 3]   [ 7  8]   [ 58  64]
    // [4 5 6] * [ 9 10] = [139 154]
    //           [11 12]
    const float A[] = {1, 2, 3, 4, 5, 6}, B[] = {7, 8, 9, 10, 11, 12};
    float C[4] = {};
    autograd::kernels::gemm(false, false, 2, 2, 3, A, 3, B, 2, C, 2, false);
    CHECK(C[0] == 58.0f);
    CHECK(C[1] == 64.0f);
    CHECK(C[2] == 139.0f);
    CHECK(C[3] == 154.0f);
    // the same with both operands stored transposed: A^T is 3 x 2, B^T is 2 x 3
    const float At[] = {1, 4, 2, 5, 3, 6}, Bt[] = {7, 9, 11, 8, 10, 12};
    float Ct[4] = {};
    autograd::kernels::gemm(true, true, 2, 2, 3, At, 2, Bt, 3, Ct, 2, false);
    CHECK(std::memcmp(C, Ct, sizeof(C)) == 0);
}

#ifdef _OPENMP
TEST_CASE("gemm is bit-identical whatever the number of threads") {
    const int saved = omp_get_max_threads();
    struct Dims { int M, N, K; };
    // big enough to start a thread team; odd sizes so tiles split unevenly between threads
    // Wide, short shapes make threads split C by columns instead of rows ({12, 2000, 100} with
    // 2 threads), or as a 2 x 2 grid of rectangles ({24, 2000, 100} with 4 threads).
    const Dims shapes[] = {{301, 203, 517}, {37, 1031, 300}, {800, 64, 96}, {12, 2000, 100},
                           {24, 2000, 100}};
    for (const Dims& d : shapes)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                CAPTURE(op_name(ta, tb));
                CAPTURE(d.M);
                CAPTURE(d.N);
                CAPTURE(d.K);
                const Problem p(ta, tb, d.M, d.N, d.K, 1, 11);
                omp_set_num_threads(1);
                const std::vector<float> one = p.run_fast(true);
                // 2 threads, and more than there may be cores: legal, and still identical
                for (int threads : {2, 3, 4}) {
                    CAPTURE(threads);
                    omp_set_num_threads(threads);
                    const std::vector<float> many = p.run_fast(true);
                    CHECK(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)) == 0);
                }
            }
    omp_set_num_threads(saved);
}

TEST_CASE("gemm inside an outer parallel region (a batch of matmuls, one per thread)") {
    // The caller parallelizes over a batch. With nested parallelism off (the default) each gemm()
    // runs on its calling thread; with it on, each opens its own team. Either way every call
    // must use its own packing buffers. Small (attention-head sized) and large problems.
    struct Dims { int M, N, K; };
    const Dims shapes[] = {{10, 64, 10}, {10, 10, 64}, {200, 150, 300}, {33, 257, 7}};
    const int batch = 8;
    const int saved_levels = omp_get_max_active_levels();
    for (int levels : {1, 2}) {
        omp_set_max_active_levels(levels);
        for (const Dims& d : shapes) {
            CAPTURE(levels);
            CAPTURE(d.M);
            CAPTURE(d.N);
            CAPTURE(d.K);
            std::vector<Problem> problems;
            for (int b = 0; b < batch; b++)
                problems.emplace_back(b % 2 == 1, b % 3 == 0, d.M, d.N, d.K, b % 2, 100 + b);
            std::vector<std::vector<float>> serial(batch), parallel(batch);
            for (int b = 0; b < batch; b++) serial[b] = problems[b].run_fast(b % 4 == 0);
            #pragma omp parallel for num_threads(2) schedule(dynamic)
            for (int b = 0; b < batch; b++) parallel[b] = problems[b].run_fast(b % 4 == 0);
            for (int b = 0; b < batch; b++) {
                CAPTURE(b);
                CHECK(serial[b] == parallel[b]);  // same thread-independent summation order
                if (levels == 1) check_against_naive(problems[b], b % 4 == 0);
            }
        }
    }
    omp_set_max_active_levels(saved_levels);
}
#else
TEST_CASE("gemm on several threads") {
    MESSAGE("skipped: built without OpenMP (make OPENMP=0), so gemm runs on one thread");
}
#endif
