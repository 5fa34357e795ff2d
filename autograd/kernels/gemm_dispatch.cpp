#include "autograd/kernels/gemm_dispatch.h"

#include "autograd/kernels/gemm.h"
#include "autograd/kernels/gemm_bf16.h"

namespace autograd::kernels {

void gemm_in(Precision precision, bool trans_a, bool trans_b, int M, int N, int K,
             const float* A, int lda, const float* B, int ldb,
             float* C, int ldc, bool accumulate) {
    if (precision == Precision::bf16) gemm_bf16(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    else                              gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

}  // namespace autograd::kernels
