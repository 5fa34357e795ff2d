// Tests for autograd::kernels::gemm: the fast kernel must equal the naive three-loop reference on awkward
// shapes, every transpose combination, padded leading dimensions and accumulate on/off; give
// bit-identical results for any thread count; and work inside an outer OpenMP parallel region.
// Each of these runs through every micro-kernel the build contains (gemm_micro_kernel.h: the
// portable one always, AVX2+FMA, AVX-512 or NEON where the compiler flags enable them).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "autograd/kernels/busy_cores.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/gemm_dispatch.h"
#include "autograd/kernels/threads.h"
#include "gemm_problem.h"
#include "tests/hooks.h"

using namespace gemm_test;

TEST_CASE("gemm uses the widest micro-kernel of the build; asking for one it lacks says so") {
    using autograd::kernels::GemmKernel;
    const std::vector<GemmKernel>& built = autograd::kernels::gemm_kernels();
    REQUIRE(!built.empty());
    CHECK(built.back() == GemmKernel::portable);   // always there, and the narrowest
    const Problem p(true, false, 37, 41, 300, 2, 5);
    const std::vector<float> by_default = p.run_fast(true);
    const std::vector<float> first = p.run(kernels_under_test().front().fn, true);
    CHECK(std::memcmp(by_default.data(), first.data(), first.size() * sizeof(float)) == 0);
    for (GemmKernel k : {GemmKernel::avx512, GemmKernel::avx2_fma, GemmKernel::neon, GemmKernel::portable}) {
        if (std::find(built.begin(), built.end(), k) != built.end()) continue;
        float c = 0;
        CHECK_THROWS_WITH(autograd::kernels::gemm_with(k, false, false, 1, 1, 1, &c, 1, &c, 1, &c, 1, false),
                          doctest::Contains("this build has no"));
    }
}

TEST_CASE("gemm equals gemm_naive on awkward shapes, all transposes, padded, accumulate on/off") {
    const int sizes[] = {1, 7, 33, 257};
    for (const KernelUnderTest& kernel : kernels_under_test()) {
        CAPTURE(kernel.name);
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
                            check_against_naive(Problem(ta, tb, M, N, K, pad, seed++), acc, kernel.fn);
                        }
    }
}

TEST_CASE("gemm: products one micro-tile wide (attention heads) equal gemm_naive, and the loop nest's bits") {
    // N <= NR, K <= KC and M up to 4 tiles take gemm_narrow (gemm.cpp): one kernel call per tile,
    // the last tile's kernel of exactly its rows (every count from 1 to the largest MR, 12: each is
    // a kernel of its own), A read in place, B read in place when whole (N = lanes or NR
    // columns), else copied; edge tiles stored with masked vectors. M sweeps one to four tiles of
    // every micro-kernel (MR = 6, 8, 12) and one past (the loop nest); N the widths of all four
    // kernels' tiles and vectors, and one past each.
    const int Ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 23, 24, 25, 31, 32, 33, 47, 48, 49},
              Ns[] = {1, 3, 4, 5, 8, 9, 10, 16, 17, 31, 32}, Ks[] = {1, 10, 16, 64};
    for (const KernelUnderTest& kernel : kernels_under_test()) {
        CAPTURE(kernel.name);
        uint32_t seed = 7;
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int M : Ms)
                    for (int N : Ns)
                        for (int K : Ks) {
                            const int pad = (M + N + K) % 2 ? 3 : 0;
                            const bool acc = (M + N) % 3 == 0;
                            CAPTURE(op_name(ta, tb));
                            CAPTURE(M);
                            CAPTURE(N);
                            CAPTURE(K);
                            CAPTURE(pad);
                            CAPTURE(acc);
                            check_against_naive(Problem(ta, tb, M, N, K, pad, seed++), acc, kernel.fn);
                        }
        // The same rows inside a taller product (60 rows, more than 4 tiles of any kernel: the
        // loop nest) give the same bits: one sum per element, k = 0 .. K-1 in order, either way.
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int N : {10, 16, 32}) {
                    CAPTURE(op_name(ta, tb));
                    CAPTURE(N);
                    const Problem tall(ta, tb, 60, N, 16, 3, seed++);
                    const std::vector<float> whole = tall.run(kernel.fn, true);
                    for (int rows : {6, 20}) {   // one tile of every kernel; 2 to 4 tiles
                        CAPTURE(rows);
                        std::vector<float> part = tall.C0;
                        kernel.fn(ta, tb, rows, N, 16, tall.A.data(), tall.lda, tall.B.data(), tall.ldb, part.data(), tall.ldc, true);
                        CHECK(std::memcmp(part.data(), whole.data(), std::size_t((rows - 1) * tall.ldc + N) * sizeof(float)) == 0);
                    }
                }
    }
}

TEST_CASE("gemm: every transpose and accumulate mode on block-crossing shapes") {
    // shapes that cross the internal block sizes of every micro-kernel: micro-tiles (6 x 8 up to
    // 12 x 32), row blocks (MC = 128 to 192), slices of the sum (KC = 256 or 512: K = 257, 513 and
    // 1100 take two to five slices), column panels (NC = 4096: N = 4099); and N > 512,
    // where a transposed A is packed rather than read in place
    struct Dims { int M, N, K; };
    const Dims shapes[] = {{13, 65, 300}, {100, 31, 513}, {64, 64, 256}, {49, 97, 1}, {5, 40, 1100},
                           {200, 33, 20}, {145, 50, 257}, {7, 4099, 3}, {30, 601, 70}};
    for (const KernelUnderTest& kernel : kernels_under_test()) {
        CAPTURE(kernel.name);
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
                            check_against_naive(Problem(ta, tb, d.M, d.N, d.K, pad, 7), acc, kernel.fn);
                        }
    }
}

TEST_CASE("gemm: the dW products, read in place or packed, on every micro-kernel") {
    // Each instruction set either reads A^T and B where they lie or packs them
    // (kTransposedAInPlace); both ways run here on every kernel. N = 40 and 601 with lda up to
    // 1031 take both sides of the bounds under which a transposed A is read in place.
    struct Dims { int M, N, K; };
    const Dims shapes[] = {{13, 40, 300}, {101, 601, 70}, {1031, 37, 520}, {7, 33, 1}};
    for (int mode : {1, 0}) {
        autograd::kernels::test_hooks::set_gemm_tn_in_place(mode);
        for (const KernelUnderTest& kernel : kernels_under_test())
            for (const Dims& d : shapes)
                for (int acc = 0; acc < 2; acc++) {
                    CAPTURE(mode);
                    CAPTURE(kernel.name);
                    CAPTURE(d.M);
                    CAPTURE(d.N);
                    CAPTURE(d.K);
                    check_against_naive(Problem(true, false, d.M, d.N, d.K, 3, 17), acc, kernel.fn);
                }
    }
    autograd::kernels::test_hooks::set_gemm_tn_in_place(-1);
}

TEST_CASE("gemm with K == 0: zeros, or C unchanged when accumulating") {
    Problem p(false, false, 5, 9, 0, 2, 3);
    for (const KernelUnderTest& kernel : kernels_under_test()) {
        CAPTURE(kernel.name);
        const std::vector<float> zeroed = p.run(kernel.fn, false), kept = p.run(kernel.fn, true);
        for (int i = 0; i < p.M; i++)
            for (int j = 0; j < p.N; j++) {
                CHECK(zeroed[std::size_t(i) * p.ldc + j] == 0.0f);
                CHECK(kept[std::size_t(i) * p.ldc + j] == p.C0[std::size_t(i) * p.ldc + j]);
            }
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
TEST_CASE("gemm is bit-identical whatever the number of threads, and equal to gemm_naive on 2") {
    const int saved = autograd::kernels::max_threads();
    struct Dims { int M, N, K; };
    // A team starts at 2 M N K >= 2e6 flops (kMinParallelFlops in gemm.cpp); the first two shapes
    // are just above it. Threads split C's rows, in MR-row slivers, or its columns, in NR-wide
    // slivers, when C is short and wide, or both; they split the packing of B's slivers; each
    // thread sums over all of K. Every size is prime: each last sliver (MR = 6 to 12 rows, NR = 8
    // to 32 columns) is partial, and most sliver counts are odd, so the threads' shares differ.
    const Dims shapes[] = {
        {101, 103, 97},   // just above the threshold: threads split the rows
        {5, 1031, 197},   // one row of slivers: threads split the columns
        {11, 2017, 97},   // two rows of slivers (MR < 11): a 2 x 2 grid of rectangles on 4 threads
        {809, 37, 83},    // each thread's rows cut into several blocks of at most MC rows
        {61, 47, 521},    // two or three slices of the sum (KC = 512 or 256), B packed for each
    };
    for (const KernelUnderTest& kernel : kernels_under_test())
        for (const Dims& d : shapes)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++) {
                    CAPTURE(kernel.name);
                    CAPTURE(op_name(ta, tb));
                    CAPTURE(d.M);
                    CAPTURE(d.N);
                    CAPTURE(d.K);
                    REQUIRE(2.0 * d.M * d.N * d.K >= 2.0e6);   // a team would start
                    const Problem p(ta, tb, d.M, d.N, d.K, 1, 11);
                    autograd::kernels::set_max_threads(1);
                    const std::vector<float> one = p.run(kernel.fn, true);
                    // 2 threads, and more than there may be cores: legal, and still identical
                    for (int threads : {2, 3, 4}) {
                        CAPTURE(threads);
                        autograd::kernels::set_max_threads(threads);
                        const std::vector<float> many = p.run(kernel.fn, true);
                        CHECK(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)) == 0);
                    }
                    autograd::kernels::set_max_threads(2);
                    check_against_naive(p, true, kernel.fn);
                }
    autograd::kernels::set_max_threads(saved);
}

TEST_CASE("gemm_pair_in: two products side by side on 2 threads give the bits of one after the other") {
    using autograd::kernels::GemmCall;
    const int saved = autograd::kernels::max_threads();
    const bool watching = autograd::kernels::test_hooks::busy_cores_watch();
    autograd::kernels::test_hooks::set_busy_cores_watch(false);   // a loaded test machine must not send it serial
    auto call = [](Problem& p, std::vector<float>& C, bool acc) {
        return GemmCall{p.ta, p.tb, p.M, p.N, p.K, p.A.data(), p.lda, p.B.data(), p.ldb, C.data(), p.ldc, acc};
    };
    // a Linear layer's backward at D = 128: dx = g W (NN) and dW = g^T x (TN), each ~26 Mflop
    Problem dx(false, false, 800, 128, 128, 3, 21), dw(true, false, 128, 128, 800, 0, 22);
    for (bool acc : {false, true}) {
        CAPTURE(acc);
        autograd::kernels::set_max_threads(1);
        const std::vector<float> want_dx = dx.run_fast(acc), want_dw = dw.run_fast(!acc);
        for (int threads : {1, 2, 3}) {
            CAPTURE(threads);
            autograd::kernels::set_max_threads(threads);
            std::vector<float> got_dx = dx.C0, got_dw = dw.C0;
            const int64_t before = autograd::kernels::test_hooks::gemm_pairs_side_by_side();
            int then_ran = 0;   // `then` runs once, after the first product, on either path
            autograd::kernels::gemm_pair_in(autograd::kernels::Precision::fp32, call(dx, got_dx, acc), call(dw, got_dw, !acc), [&] {
                then_ran++;
                CHECK(std::memcmp(got_dx.data(), want_dx.data(), want_dx.size() * sizeof(float)) == 0);
            });
            CHECK(then_ran == 1);
            // side by side only on exactly 2 threads; 3 split each product as gemm() does
            CHECK(autograd::kernels::test_hooks::gemm_pairs_side_by_side() - before == (threads == 2 ? 1 : 0));
            CHECK(std::memcmp(got_dx.data(), want_dx.data(), want_dx.size() * sizeof(float)) == 0);
            CHECK(std::memcmp(got_dw.data(), want_dw.data(), want_dw.size() * sizeof(float)) == 0);
        }
    }
    // With nested regions allowed, the pair takes turns (each product would start its own team
    // inside the pair's), with the same bits.
    {
        autograd::kernels::set_max_threads(2);
        const int saved_levels = autograd::kernels::max_active_levels();
        autograd::kernels::set_max_active_levels(2);
        std::vector<float> got_dx = dx.C0, got_dw = dw.C0;
        const int64_t before = autograd::kernels::test_hooks::gemm_pairs_side_by_side();
        autograd::kernels::gemm_pair_in(autograd::kernels::Precision::fp32, call(dx, got_dx, false), call(dw, got_dw, false));
        autograd::kernels::set_max_active_levels(saved_levels);
        CHECK(autograd::kernels::test_hooks::gemm_pairs_side_by_side() == before);
        autograd::kernels::set_max_threads(1);
        CHECK(got_dx == dx.run_fast(false));
        CHECK(got_dw == dw.run_fast(false));
    }
    // Two products writing one buffer (a Linear called with x and W the same tensor accumulates
    // both gradients into it) run one after the other, and the second adds to the first.
    autograd::kernels::set_max_threads(2);
    Problem a(false, false, 200, 150, 100, 0, 23), b(false, true, 200, 150, 100, 0, 24);
    std::vector<float> shared = a.C0, want = a.run_fast(false);
    b.C0 = want;
    want = b.run_fast(true);
    const int64_t before = autograd::kernels::test_hooks::gemm_pairs_side_by_side();
    autograd::kernels::gemm_pair_in(autograd::kernels::Precision::fp32, call(a, shared, false), call(b, shared, true));
    CHECK(autograd::kernels::test_hooks::gemm_pairs_side_by_side() == before);
    CHECK(std::memcmp(shared.data(), want.data(), want.size() * sizeof(float)) == 0);
    autograd::kernels::set_max_threads(saved);
    autograd::kernels::test_hooks::set_busy_cores_watch(watching);
}

TEST_CASE("gemm inside an outer parallel region (a batch of matmuls, one per thread)") {
    // The caller parallelizes over a batch. With nested parallelism off (the default) each gemm()
    // runs on its calling thread; with it on, each opens its own team. Either way every call
    // must use its own packing buffers. Small (attention-head sized) and large problems.
    struct Dims { int M, N, K; };
    const Dims shapes[] = {{10, 64, 10}, {10, 10, 64}, {200, 150, 300}, {33, 257, 7}};
    const int batch = 8;
    const int saved_levels = autograd::kernels::max_active_levels();
    for (int levels : {1, 2}) {
        autograd::kernels::set_max_active_levels(levels);
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
    autograd::kernels::set_max_active_levels(saved_levels);
}
#else
TEST_CASE("gemm on several threads") {
    MESSAGE("skipped: built without OpenMP (make OPENMP=0), so gemm runs on one thread");
}
#endif
