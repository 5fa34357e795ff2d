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
#include <vector>

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

// op(B) packed once for many gemm_bf16 calls that read the same B: a weight while it does not
// change (decoding runs the decoder's Linear layers hundreds of times on the same weights; see
// FrozenWeightsGuard in autograd/frozen_weights.h). Packing rounds every float to bf16 and lays it
// out as the kernel reads it, which for a call with few rows of A costs more than the product.
// The fast kernel's words on a CPU with AVX512_BF16, else the rounded fp32 copy the portable path
// multiplies; either way a call with it gives the bits of the call that packs B itself.
class PackedBf16B {
public:
    // op(B) is (K x N): B[k][j] (ldb apart per k), or B[j][k] when trans_b, as in gemm_bf16.
    PackedBf16B(bool trans_b, int N, int K, const float* B, int ldb);
    // The same, packed for the portable path whatever the CPU: lets tests check that path here.
    static PackedBf16B for_portable_path(bool trans_b, int N, int K, const float* B, int ldb);

    int N() const { return N_; }
    int K() const { return K_; }
    bool fast() const { return fast_; }   // packed for the AVX512_BF16 kernel?

    PackedBf16B(PackedBf16B&& o) noexcept;
    PackedBf16B& operator=(PackedBf16B&&) = delete;
    PackedBf16B(const PackedBf16B&) = delete;   // large: moved, never copied
    PackedBf16B& operator=(const PackedBf16B&) = delete;
    ~PackedBf16B();

private:
    PackedBf16B(bool trans_b, int N, int K, const float* B, int ldb, bool fast);
    friend void gemm_bf16(bool, int, const float*, int, const PackedBf16B&, float*, int, bool);
    int N_ = 0, K_ = 0;
    bool trans_b_ = false, fast_ = false;
    uint32_t* words_ = nullptr;     // fast: the B slivers, ceil(N / 32) x ceil(K / 2) x 32 words (tensor_alloc)
    std::vector<float> rounded_;    // portable: bf16(B) as floats, B's layout (trans_b: N x K, else K x N), compact
};

// C (M x N) = bf16(op(A)) * op(B) [+ C], op(B) packed: the bits of
// gemm_bf16(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate) with the B it was packed from.
void gemm_bf16(bool trans_a, int M, const float* A, int lda, const PackedBf16B& b, float* C, int ldc, bool accumulate);

// Round every input to bf16, then the three loops of gemm_naive (the products of two bf16
// numbers are exact in fp32; the sum is done in double, to be the more accurate of the two).
void gemm_bf16_reference(bool trans_a, bool trans_b, int M, int N, int K,
                         const float* A, int lda, const float* B, int ldb,
                         float* C, int ldc, bool accumulate);

// The portable path (round copies, then gemm()), callable on any CPU so tests cover it too.
void gemm_bf16_portable(bool trans_a, bool trans_b, int M, int N, int K,
                        const float* A, int lda, const float* B, int ldb,
                        float* C, int ldc, bool accumulate);

}  // namespace autograd::kernels
