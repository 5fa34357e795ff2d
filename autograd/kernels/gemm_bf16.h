// gemm_bf16: matrix multiply with bfloat16 inputs and fp32 accumulation, for mixed precision.
//
//   C (M x N) = bf16(op(A)) (M x K) * bf16(op(B)) (K x N)  [+ C's old contents if accumulate]
//
// The same contract as gemm() (gemm.h: row-major, leading dimensions, transposes, accumulate),
// except that every input float is first rounded to the nearest bfloat16 (ties to even): the
// product is the one of the rounded inputs, summed in fp32, written in fp32. A and B stay fp32
// arrays; the rounding happens while packing, so callers never hold bf16 copies.
//
// On a CPU with AVX512_BF16 the hot loop is vdpbf16ps: for each of 16 fp32 lanes, it multiplies
// two pairs of bf16 numbers and adds both products to the lane, 32 multiply-adds per instruction
// where an fp32 FMA does 16. Elsewhere gemm_bf16() rounds copies of the inputs and calls gemm():
// the same numbers up to fp32 rounding of the sum, slower. bf16_dot_supported() says which one
// runs. Either way the result is bit-identical whatever the number of OpenMP threads.
//
// gemm_bf16_reference() is the plain definition the tests hold the fast kernel equal to.
#pragma once
#include <cstdint>

namespace autograd::kernels {

// Does this CPU (and OS) run AVX512_BF16 instructions? Checked once, at run time, so the project
// builds and runs with compiler flags that lack them (make ARCH=-march=x86-64-v3).
bool bf16_dot_supported();

// fp32 -> bf16 with round-to-nearest-even: the top 16 bits of the float, rounded. NaN stays a
// (quiet) NaN, a finite value past bf16's largest rounds to infinity, as in fp32 arithmetic; a
// denormal (below 1.18e-38) becomes a signed zero, as AVX512_BF16's conversion makes it.
uint16_t bf16_bits(float x);
float bf16_to_float(uint16_t bits);                            // exact: pad with 16 zero bits
inline float round_to_bf16(float x) { return bf16_to_float(bf16_bits(x)); }

void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K,
               const float* A, int lda, const float* B, int ldb,
               float* C, int ldc, bool accumulate);

// Round every input to bf16, then the three loops of gemm_naive (the products of two bf16
// numbers are exact in fp32; the sum is done in double, to be the more accurate of the two).
void gemm_bf16_reference(bool trans_a, bool trans_b, int M, int N, int K,
                         const float* A, int lda, const float* B, int ldb,
                         float* C, int ldc, bool accumulate);

namespace detail {
// The portable path (round copies, then gemm()), callable on any CPU so tests cover it too.
void gemm_bf16_portable(bool trans_a, bool trans_b, int M, int N, int K,
                        const float* A, int lda, const float* B, int ldb,
                        float* C, int ldc, bool accumulate);
}  // namespace detail

}  // namespace autograd::kernels
