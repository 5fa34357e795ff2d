// A gemm problem for the tests of gemm() and gemm_bf16(): operands filled deterministically and
// stored with padded leading dimensions, and the check that holds a fast kernel equal to its
// reference (test_gemm.cpp, test_gemm_bf16.cpp).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/kernels/gemm.h"

namespace gemm_test {

// the signature gemm, gemm_naive, gemm_bf16 and gemm_bf16_reference share
using GemmFn = void (*)(bool, bool, int, int, int, const float*, int, const float*, int, float*, int, bool);


// Deterministic fill in [-1, 1): a 32-bit linear congruential generator.
inline std::vector<float> lcg_fill(std::size_t n, uint32_t seed) {
    std::vector<float> v(n);
    for (float& x : v) {
        seed = seed * 1664525u + 1013904223u;
        x = float(seed >> 8) / float(1 << 23) - 1.0f;
    }
    return v;
}

// Floats needed to store `rows` rows of `cols` floats at row stride ld: exactly that, no slack
// past the last element, so that AddressSanitizer catches any read beyond it.
inline std::size_t stored_size(int rows, int cols, int ld) {
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
    // C after calling f (gemm, gemm_naive, gemm_bf16, ...) on this problem
    std::vector<float> run(GemmFn f, bool acc) const {
        std::vector<float> C = C0;
        f(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc, acc);
        return C;
    }
    std::vector<float> run_fast(bool acc) const { return run(autograd::kernels::gemm, acc); }
    std::vector<float> run_naive(bool acc) const { return run(autograd::kernels::gemm_naive, acc); }
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

// fast vs ref (gemm() vs gemm_naive() unless told): every element within float rounding of a
// K-term sum, and the padding between rows of C left untouched.
inline void check_against_naive(const Problem& p, bool acc, GemmFn fast_fn = autograd::kernels::gemm,
                                GemmFn ref_fn = autograd::kernels::gemm_naive) {
    const std::vector<float> fast = p.run(fast_fn, acc), ref = p.run(ref_fn, acc);
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

// gemm() through one micro-kernel, as a GemmFn: gemm_via<GemmKernel::portable>
template <autograd::kernels::GemmKernel kKernel>
void gemm_via(bool ta, bool tb, int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
              bool acc) {
    autograd::kernels::gemm_with(kKernel, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, acc);
}

// Every micro-kernel this build contains, with its name, as the tests loop over them.
struct KernelUnderTest {
    const char* name;
    GemmFn fn;
};
inline std::vector<KernelUnderTest> kernels_under_test() {
    using autograd::kernels::GemmKernel;
    std::vector<KernelUnderTest> out;
    for (GemmKernel k : autograd::kernels::gemm_kernels()) {
        GemmFn fn = k == GemmKernel::avx512     ? gemm_via<GemmKernel::avx512>
                    : k == GemmKernel::avx2_fma ? gemm_via<GemmKernel::avx2_fma>
                    : k == GemmKernel::neon     ? gemm_via<GemmKernel::neon>
                                                : gemm_via<GemmKernel::portable>;
        out.push_back({autograd::kernels::gemm_kernel_name(k), fn});
    }
    return out;
}

inline const char* op_name(bool ta, bool tb) {
    return ta ? (tb ? "TT" : "TN") : (tb ? "NT" : "NN");
}

}  // namespace gemm_test
