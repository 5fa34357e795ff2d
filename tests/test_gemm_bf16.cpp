// Tests for autograd::kernels::gemm_bf16: the bf16 conversion rounds to nearest even; the kernel
// equals its reference (inputs rounded to bf16, products summed exactly) on awkward shapes,
// every transpose, odd K, padded leading dimensions and accumulate on/off, on the hardware path
// and on the portable one; it is bit-identical for any number of threads; and the worked
// examples of docs/16-mixed-precision.md hold.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "autograd/kernels/gemm_bf16.h"
#include "autograd/kernels/gemm_dispatch.h"
#include "autograd/kernels/threads.h"
#include "gemm_problem.h"

using namespace gemm_test;
namespace kernels = autograd::kernels;

TEST_CASE("bf16 rounding: docs/16 worked examples (round to nearest, ties to even)") {
    // bf16 keeps 7 mantissa bits: between 1 and 2 its numbers are 2^-7 = 0.0078125 apart
    CHECK(kernels::bf16_bits(1.0f) == 0x3F80);
    CHECK(kernels::round_to_bf16(1.0078125f) == 1.0078125f);            // representable: unchanged
    CHECK(kernels::round_to_bf16(1.005f) == 1.0078125f);                // nearer the upper neighbour
    CHECK(kernels::round_to_bf16(1.00390625f) == 1.0f);                 // tie (1 + 2^-8): to even (mantissa 0)
    CHECK(kernels::round_to_bf16(1.01171875f) == 1.015625f);            // tie (1 + 3 * 2^-8): to even (mantissa 2)
    CHECK(kernels::round_to_bf16(3.14159265f) == 3.140625f);            // pi keeps 3 significant digits
    CHECK(kernels::round_to_bf16(-0.1f) == -0.10009765625f);
    CHECK(kernels::round_to_bf16(1e-30f) == doctest::Approx(1e-30).epsilon(0.004));   // fp32's range: no underflow
    CHECK(kernels::bf16_bits(3.0e38f) == 0x7F62);   // near fp32's largest, still finite: 3e38 = 1.763 * 2^127,
                                                      // exponent 0xFE, mantissa round(0.763 * 128) = 98 = 0x62
    CHECK(std::isinf(kernels::round_to_bf16(3.4e38f)));                 // past bf16's largest: rounds to infinity
    CHECK(std::isnan(kernels::round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
    CHECK(kernels::bf16_to_float(0x7F7F) == 3.3895314e38f);             // bf16's largest finite value
    // a denormal (exponent bits 0) becomes a zero of its sign, whatever its low bits, as
    // vcvtne2ps2bf16 makes it; the smallest normal float is kept
    for (const uint32_t bits : {0x00000001u, 0x0000FFFFu, 0x00408000u, 0x007FFFFFu}) {
        CAPTURE(bits);
        float x, minus_x;
        const uint32_t negative = bits | 0x80000000u;
        std::memcpy(&x, &bits, sizeof x);
        std::memcpy(&minus_x, &negative, sizeof minus_x);
        CHECK(kernels::bf16_bits(x) == 0x0000);
        CHECK(kernels::bf16_bits(minus_x) == 0x8000);
    }
    CHECK(kernels::bf16_bits(std::numeric_limits<float>::min()) == 0x0080);   // 2^-126, the smallest normal
    // stagnation: near 0.1, bf16's neighbours are 2^-11 apart, so an Adam-sized step of 1e-4 vanishes
    CHECK(kernels::round_to_bf16(0.1f + 1e-4f) == kernels::round_to_bf16(0.1f));
    CHECK(0.1f + 1e-4f != 0.1f);                                        // fp32 keeps it
}

TEST_CASE("bf16 dot product: docs/16 worked example, one pair per lane") {
    // vdpbf16ps adds a pair of products to an fp32 lane: 1 + (1.5 * 3 + 2 * 0.25) = 6
    const float a[] = {1.5f, 2.0f}, b[] = {3.0f, 0.25f};
    float c = 1.0f;
    kernels::gemm_bf16(false, false, 1, 1, 2, a, 2, b, 1, &c, 1, /*accumulate=*/true);
    CHECK(c == 6.0f);
    // the inputs are rounded first: 1.00390625 becomes 1 (a tie, to even), where fp32 keeps it
    const float x[] = {1.00390625f, 0.0f}, y[] = {1.0f, 0.0f};
    float bf = 0.0f, fp = 0.0f;
    kernels::gemm_bf16(false, false, 1, 1, 2, x, 2, y, 1, &bf, 1, false);
    kernels::gemm(false, false, 1, 1, 2, x, 2, y, 1, &fp, 1, false);
    CHECK(bf == 1.0f);
    CHECK(fp == 1.00390625f);
}

TEST_CASE("gemm_bf16 equals gemm_bf16_reference on awkward shapes, all transposes, odd K, padded") {
    const char* path = kernels::bf16_dot_supported() ? "this CPU has AVX512_BF16: the vdpbf16ps kernel runs"
                                                     : "no AVX512_BF16 here: the portable path runs";
    MESSAGE(std::string(path));
    // 12 x 32 micro-tiles, 16-wide narrow edges, K slices of 512, one-element and odd sums
    const int sizes[] = {1, 7, 33, 100};
    uint32_t seed = 1;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int M : sizes)
                for (int N : sizes)
                    for (int K : sizes) {
                        const int pad = (M + N + K) % 3 == 0 ? 0 : 5;
                        const bool acc = (M + 2 * N + K) % 2 == 0;
                        CAPTURE(op_name(ta, tb));
                        CAPTURE(M);
                        CAPTURE(N);
                        CAPTURE(K);
                        CAPTURE(acc);
                        const Problem p(ta, tb, M, N, K, pad, seed++);
                        check_against_naive(p, acc, kernels::gemm_bf16, kernels::gemm_bf16_reference);
                        check_against_naive(p, acc, kernels::gemm_bf16_portable, kernels::gemm_bf16_reference);
                    }
    struct Dims { int M, N, K; };
    const Dims big[] = {{13, 65, 1025}, {200, 31, 513}, {5, 300, 1100}, {197, 47, 64}};   // several K slices, row blocks
    for (const Dims& d : big)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                CAPTURE(op_name(ta, tb));
                CAPTURE(d.M);
                CAPTURE(d.N);
                CAPTURE(d.K);
                check_against_naive(Problem(ta, tb, d.M, d.N, d.K, 3, 9), ta == tb, kernels::gemm_bf16,
                                    kernels::gemm_bf16_reference);
            }
}

// C after gemm_bf16 with op(B) packed beforehand (PackedBf16B), for this CPU's path or the portable one.
static std::vector<float> run_packed(const Problem& p, bool acc, bool portable) {
    const kernels::PackedBf16B b = portable ? kernels::PackedBf16B::for_portable_path(p.tb, p.N, p.K, p.B.data(), p.ldb)
                                            : kernels::PackedBf16B(p.tb, p.N, p.K, p.B.data(), p.ldb);
    CHECK(b.fast() == (!portable && kernels::bf16_dot_supported()));
    std::vector<float> C = p.C0;
    kernels::gemm_bf16(p.ta, p.M, p.A.data(), p.lda, b, C.data(), p.ldc, acc);
    return C;
}

TEST_CASE("gemm_bf16 with op(B) packed once gives the bits of gemm_bf16 packing it, and reads only the packed copy") {
    // the shapes of the test above, one call per problem each way; on both paths
    const int sizes[] = {1, 7, 33, 100};
    uint32_t seed = 500;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int M : sizes)
                for (int N : sizes)
                    for (int K : sizes) {
                        const bool acc = (M + N + 2 * K) % 2 == 0;
                        CAPTURE(op_name(ta, tb));
                        CAPTURE(M);
                        CAPTURE(N);
                        CAPTURE(K);
                        CAPTURE(acc);
                        const Problem p(ta, tb, M, N, K, (M + N) % 2 == 0 ? 0 : 3, seed++);
                        CHECK(run_packed(p, acc, false) == p.run(kernels::gemm_bf16, acc));
                        CHECK(run_packed(p, acc, true) == p.run(kernels::gemm_bf16_portable, acc));
                    }
    // several K slices, row blocks and column chunks; the Linear layer's shape (B = W, transposed)
    const Problem big(false, true, 37, 300, 1100, 2, 77);
    CHECK(run_packed(big, false, false) == big.run(kernels::gemm_bf16, false));
    CHECK(run_packed(big, true, true) == big.run(kernels::gemm_bf16_portable, true));
    // the pack is a copy: B changed after packing does not change the product
    for (bool portable : {false, true}) {
        CAPTURE(portable);
        Problem p(false, true, 20, 70, 45, 0, 91);
        const std::vector<float> before = portable ? p.run(kernels::gemm_bf16_portable, false) : p.run(kernels::gemm_bf16, false);
        const kernels::PackedBf16B b = portable ? kernels::PackedBf16B::for_portable_path(true, p.N, p.K, p.B.data(), p.ldb)
                                                : kernels::PackedBf16B(true, p.N, p.K, p.B.data(), p.ldb);
        for (float& v : p.B) v = -v;
        std::vector<float> C = p.C0;
        kernels::gemm_bf16(false, p.M, p.A.data(), p.lda, b, C.data(), p.ldc, false);
        CHECK(C == before);
    }
    // empty products: M == 0 leaves C alone, K == 0 writes the empty sum (0), as gemm_bf16
    for (bool portable : {false, true}) {
        const float B[] = {1.0f, 2.0f};
        const kernels::PackedBf16B empty_k = portable ? kernels::PackedBf16B::for_portable_path(false, 2, 0, B, 2)
                                                      : kernels::PackedBf16B(false, 2, 0, B, 2);
        float C[] = {5.0f, 6.0f};
        kernels::gemm_bf16(false, 0, B, 1, empty_k, C, 2, false);
        CHECK(C[0] == 5.0f);
        kernels::gemm_bf16(false, 1, B, 1, empty_k, C, 2, false);
        CHECK(C[0] == 0.0f);
        CHECK(C[1] == 0.0f);
    }
}

TEST_CASE("gemm_bf16's packing rounds every input as bf16_bits does: ties, denormals, any bits") {
    // Times an identity, a product is its input rounded (one nonzero term per sum, exact), so C
    // shows what the packing made of each value. Both packing layouts run: the input as op(A)
    // and as op(B), stored plain and transposed. K = 37 is odd and spans two blocks of 16 pairs.
    const int R = 13, K = 37;
    std::vector<float> values(std::size_t(R) * K);
    uint32_t seed = 7;
    for (std::size_t i = 0; i < values.size(); i++) {
        seed = seed * 1664525u + 1013904223u;
        uint32_t bits = seed;
        if (i % 4 == 1) bits = (seed & 0x807FFFFFu);                                  // a denormal (or zero)
        if (i % 4 == 2) bits = (seed & 0xFFFF0000u) | 0x8000u;                        // a tie: exactly half dropped
        if ((bits & 0x7F800000u) >= 0x7F000000u) bits &= 0xBFFFFFFFu;                 // finite after rounding
        std::memcpy(&values[i], &bits, sizeof bits);
    }
    std::vector<float> eye(std::size_t(K) * K, 0.0f);
    for (int k = 0; k < K; k++) eye[std::size_t(k) * K + k] = 1.0f;
    auto bits_of = [](float x) { uint32_t u; std::memcpy(&u, &x, sizeof u); return u; };
    for (int transposed = 0; transposed < 2; transposed++) {
        // values as op(A) (R x K): stored R x K, or K x R when transposed
        std::vector<float> stored(values.size());
        for (int r = 0; r < R; r++)
            for (int k = 0; k < K; k++) stored[transposed ? std::size_t(k) * R + r : std::size_t(r) * K + k] = values[std::size_t(r) * K + k];
        const int ld = transposed ? R : K;
        std::vector<float> left(std::size_t(R) * K), right(std::size_t(K) * R);
        kernels::gemm_bf16(transposed, false, R, K, K, stored.data(), ld, eye.data(), K, left.data(), K, false);   // op(A) I
        // the same values as op(B) (K x R), i.e. op(B)[k][r] = values[r][k]: stored B is R x K
        // when transposed (op(B) = B^T), else K x R
        std::vector<float> b_stored(values.size());
        for (int r = 0; r < R; r++)
            for (int k = 0; k < K; k++) b_stored[transposed ? std::size_t(r) * K + k : std::size_t(k) * R + r] = values[std::size_t(r) * K + k];
        kernels::gemm_bf16(false, transposed, K, R, K, eye.data(), K, b_stored.data(), transposed ? K : R, right.data(), R, false);   // I op(B)
        int wrong = 0;
        for (int r = 0; r < R; r++)
            for (int k = 0; k < K; k++) {
                const uint32_t want = bits_of(kernels::round_to_bf16(values[std::size_t(r) * K + k]));
                const float as_a = left[std::size_t(r) * K + k], as_b = right[std::size_t(k) * R + r];
                // a zero may come out as -0 + 0 = +0 from the sum: compare zeros by value
                auto same = [&](float got) { return got == 0.0f ? (want & 0x7FFFFFFFu) == 0 : bits_of(got) == want; };
                if (!same(as_a) || !same(as_b)) wrong++;
            }
        CAPTURE(transposed);
        CHECK(wrong == 0);
    }
}

TEST_CASE("gemm_bf16 is not gemm: its error against fp32 is bf16's, not fp32's") {
    // A test that rounding really happens: the relative difference from the fp32 product is
    // around 2^-9 per input, far above fp32's 2^-24 and far below 1.
    const Problem p(false, true, 40, 50, 60, 0, 5);
    const std::vector<float> bf = p.run(kernels::gemm_bf16, false), fp = p.run(kernels::gemm_naive, false);
    const std::vector<float> mag = p.magnitude(false);
    double worst = 0;
    for (std::size_t i = 0; i < bf.size(); i++) worst = std::max(worst, double(std::fabs(bf[i] - fp[i]) / mag[i]));
    CHECK(worst > 1e-4);
    CHECK(worst < 8e-3);
}

TEST_CASE("gemm_bf16 with K == 0 or M == 0: as gemm") {
    Problem p(false, false, 5, 9, 0, 2, 3);
    CHECK(p.run(kernels::gemm_bf16, false) == p.run_fast(false));
    CHECK(p.run(kernels::gemm_bf16, true) == p.C0);
    float a = 1, b = 2, c = 42;
    kernels::gemm_bf16(false, false, 0, 1, 1, &a, 1, &b, 1, &c, 1, false);
    CHECK(c == 42.0f);
}

TEST_CASE("gemm_in: fp32 is gemm, bf16 is gemm_bf16") {
    const Problem p(true, false, 30, 40, 50, 1, 8);
    auto in = [&](autograd::kernels::Precision precision) {
        std::vector<float> C = p.C0;
        kernels::gemm_in(precision, p.ta, p.tb, p.M, p.N, p.K, p.A.data(), p.lda, p.B.data(), p.ldb, C.data(), p.ldc, true);
        return C;
    };
    CHECK(in(autograd::kernels::Precision::fp32) == p.run_fast(true));
    CHECK(in(autograd::kernels::Precision::bf16) == p.run(kernels::gemm_bf16, true));
}

#ifdef _OPENMP
TEST_CASE("gemm_bf16 is bit-identical whatever the number of threads, also inside a parallel region") {
    const int saved = kernels::max_threads();
    struct Dims { int M, N, K; };
    // The vdpbf16ps path starts a team at 2 M N K >= 4e6 flops (kMinParallelFlops in
    // gemm_bf16.cpp; the portable path is gemm's, at 2e6); the first two shapes are just above
    // it. Its threads split the packing of A's 12-row and B's 32-column slivers, then the
    // (row block, column chunk) rectangles of C; each sums over all of K. Every size is prime, so
    // slivers, blocks and rectangles split unevenly, and the last sliver is partial.
    const Dims shapes[] = {
        {127, 131, 127},   // just above the threshold: 11 row slivers, 1 column chunk
        {7, 2053, 149},    // one row sliver: 9 column chunks of 8 slivers, the last of 1
        {809, 37, 83},     // row blocks of several slivers
        {61, 47, 1031},    // three slices of the sum (of at most 256 pairs)
    };
    for (const Dims& d : shapes)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                CAPTURE(op_name(ta, tb));
                CAPTURE(d.M);
                CAPTURE(d.N);
                CAPTURE(d.K);
                REQUIRE(2.0 * d.M * d.N * d.K >= 4.0e6);   // a team would start
                const Problem p(ta, tb, d.M, d.N, d.K, 1, 11);
                kernels::set_max_threads(1);
                const std::vector<float> one = p.run(kernels::gemm_bf16, true);
                for (int threads : {2, 3}) {
                    CAPTURE(threads);
                    kernels::set_max_threads(threads);
                    CHECK(p.run(kernels::gemm_bf16, true) == one);
                }
                kernels::set_max_threads(2);
                if (ta == tb)   // NN and TT: the reference is slow, and the split is the same for all four
                    check_against_naive(p, true, kernels::gemm_bf16, kernels::gemm_bf16_reference);
            }
    // op(B) packed beforehand: packed by a team of 1, 2 or 3 threads (8 N K >= 4e6 starts one),
    // used by one of 1, 2 or 3; a decoding step's shape, few rows and many columns
    {
        const Problem p(false, true, 7, 2053, 301, 1, 12);
        kernels::set_max_threads(1);
        const std::vector<float> one = p.run(kernels::gemm_bf16, true);
        for (int pack_threads : {1, 2, 3})
            for (int threads : {1, 2, 3}) {
                CAPTURE(pack_threads);
                CAPTURE(threads);
                kernels::set_max_threads(pack_threads);
                const kernels::PackedBf16B b(true, p.N, p.K, p.B.data(), p.ldb);
                kernels::set_max_threads(threads);
                std::vector<float> C = p.C0;
                kernels::gemm_bf16(false, p.M, p.A.data(), p.lda, b, C.data(), p.ldc, true);
                CHECK(C == one);
            }
    }
    kernels::set_max_threads(saved);
    // a batch of small products, one per thread: each call packs into its own thread's buffers
    std::vector<Problem> problems;
    for (int b = 0; b < 8; b++) problems.emplace_back(b % 2 == 1, b % 3 == 0, 10 + b, 64, 33, b % 2, 100 + b);
    std::vector<std::vector<float>> serial(8), parallel(8);
    for (int b = 0; b < 8; b++) serial[b] = problems[b].run(kernels::gemm_bf16, false);
    #pragma omp parallel for num_threads(2) schedule(dynamic)
    for (int b = 0; b < 8; b++) parallel[b] = problems[b].run(kernels::gemm_bf16, false);
    CHECK(serial == parallel);
}
#endif
