// gemm: single-precision matrix multiply, the hot path of the whole framework.
//
//   C (M x N) = op(A) (M x K) * op(B) (K x N)  [+ C's old contents if accumulate]
//
// Everything is row-major. A "leading dimension" (lda, ldb, ldc) is the distance in floats
// between the starts of two consecutive stored rows, so a sub-matrix of a bigger one can be
// passed without copying (ld >= the number of stored columns).
//
//   op(A) = A    if !trans_a : A is stored M x K, row stride lda (lda >= K)
//   op(A) = A^T  if  trans_a : A is stored K x M, row stride lda (lda >= M)
//   op(B) = B    if !trans_b : B is stored K x N, row stride ldb (ldb >= N)
//   op(B) = B^T  if  trans_b : B is stored N x K, row stride ldb (ldb >= K)
//
// How a Linear layer (weight W stored (out, in), like PyTorch) uses it:
//   forward   y  = x W^T   gemm(false, true,  ...)   "NT"
//   backward  dx = dy W    gemm(false, false, ...)   "NN"
//             dW = dy^T x  gemm(true,  false, ...)   "TN"  (accumulate=true adds into dW)
//
// gemm() is cache-blocked, packed, vectorized and parallel (OpenMP); gemm_naive() is the same
// contract written as three plain loops, kept as the reference the tests hold gemm() equal to.
// gemm() gives bit-identical results whatever the number of OpenMP threads, and may be called
// from inside an outer `#pragma omp parallel` region.
#pragma once
#include <vector>

namespace autograd::kernels {

void gemm(bool trans_a, bool trans_b, int M, int N, int K,
          const float* A, int lda, const float* B, int ldb,
          float* C, int ldc, bool accumulate);

void gemm_naive(bool trans_a, bool trans_b, int M, int N, int K,
                const float* A, int lda, const float* B, int ldb,
                float* C, int ldc, bool accumulate);

// One product's arguments, in gemm()'s order: what the GEMM drivers pass around, and what
// gemm_pair_in (gemm_dispatch.h) takes two of.
struct GemmCall {
    bool trans_a, trans_b;
    int M, N, K;
    const float* A; int lda;
    const float* B; int ldb;
    float* C; int ldc;
    bool accumulate;
};

// The micro-kernels (gemm_micro_kernel.h): one per instruction set. A build contains the portable
// one and those its compiler flags enable (make ARCH=...); gemm() uses the first of the list.
enum class GemmKernel { avx512, avx2_fma, neon, portable };
const std::vector<GemmKernel>& gemm_kernels();   // in this build, widest first
const char* gemm_kernel_name(GemmKernel kernel);  // "AVX2+FMA (6 x 16 tile)"

// gemm() through one given micro-kernel (the tests run every one the build contains, and
// bench_gemm times each). Throws std::invalid_argument for a kernel this build does not contain.
void gemm_with(GemmKernel kernel, bool trans_a, bool trans_b, int M, int N, int K,
               const float* A, int lda, const float* B, int ldb,
               float* C, int ldc, bool accumulate);

}  // namespace autograd::kernels
