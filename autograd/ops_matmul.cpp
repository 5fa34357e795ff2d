// matmul: 2-D and batched, with broadcast batch dims and transposes that never copy.
// The arithmetic is kernels::gemm_in (kernels/gemm_dispatch.h): gemm, or gemm_bf16 inside a
// MixedPrecisionGuard; this file only works out shapes and offsets.
#include <stdexcept>

#include "autograd/kernels/gemm_dispatch.h"
#include "autograd/ops.h"

namespace autograd {

using kernels::gemm_in;

namespace {
// Everything the forward and the backward need to find the i-th matrix of each operand.
struct MatmulPlan {
    bool ta, tb;
    int64_t M, N, K;
    int64_t batches = 1;                          // number of output matrices
    std::vector<int64_t> a_off, b_off;            // element offset of each batch's A and B
    int64_t lda() const { return ta ? M : K; }    // A stored (M, K), or (K, M) when transposed
    int64_t ldb() const { return tb ? K : N; }    // B stored (K, N), or (N, K) when transposed
};

MatmulPlan make_plan(const Shape& as, const Shape& bs, bool ta, bool tb) {
    if (as.size() < 2 || bs.size() < 2)
        throw std::invalid_argument("matmul: both operands need at least 2 dims, got shapes " + shape_str(as) +
                                    " and " + shape_str(bs) + " (use reshape/unsqueeze for vectors)");
    const size_t ra = as.size(), rb = bs.size();
    MatmulPlan p;
    p.ta = ta;
    p.tb = tb;
    p.M = ta ? as[ra - 1] : as[ra - 2];
    p.N = tb ? bs[rb - 2] : bs[rb - 1];
    p.K = ta ? as[ra - 2] : as[ra - 1];
    const int64_t kb = tb ? bs[rb - 1] : bs[rb - 2];
    if (p.K != kb)
        throw std::invalid_argument("matmul: shapes " + shape_str(as) + (ta ? "^T" : "") + " and " + shape_str(bs) +
                                    (tb ? "^T" : "") + " are not aligned: inner dims " + std::to_string(p.K) + " and " +
                                    std::to_string(kb) + " differ");
    const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
    const Shape batch = broadcast_shapes(ab, bb, "matmul (batch dims)");
    p.batches = shape_numel(batch);
    // offsets: walk the batch index and map it into each operand's own batch dims
    const int64_t a_mat = p.M * p.K, b_mat = p.K * p.N;
    for (int64_t i = 0; i < p.batches; i++) {
        int64_t rem = i, ia = 0, ib = 0, sa = 1, sb = 1;
        for (int d = static_cast<int>(batch.size()) - 1; d >= 0; d--) {
            const int64_t c = rem % batch[d];
            rem /= batch[d];
            const int da = d - static_cast<int>(batch.size() - ab.size());   // aligned from the right
            const int db = d - static_cast<int>(batch.size() - bb.size());
            if (da >= 0) { if (ab[da] != 1) ia += c * sa; sa *= ab[da]; }
            if (db >= 0) { if (bb[db] != 1) ib += c * sb; sb *= bb[db]; }
        }
        p.a_off.push_back(ia * a_mat);
        p.b_off.push_back(ib * b_mat);
    }
    return p;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
    // Fast path for x @ W with a 2-D W: fold x's leading dims into M, one big gemm.
    if (b.dim() == 2 && a.dim() > 2 && !ta) {
        Shape out = a.shape();
        const int64_t K = out.back();
        const Tensor y2 = matmul(reshape(a, {a.numel() / std::max<int64_t>(K, 1), K}), b, false, tb);   // (rows, N)
        out.back() = y2.size(-1);
        return reshape(y2, out);
    }
    const MatmulPlan p = make_plan(a.shape(), b.shape(), ta, tb);
    Shape out_shape = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                       Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
    out_shape.push_back(p.M);
    out_shape.push_back(p.N);
    Tensor y = Tensor::empty(out_shape);                      // (..., M, N)
    const float *A = a.data(), *B = b.data();
    float* C = y.data();
    const kernels::Precision precision = kernels::matmul_precision();   // fp32, or bf16 under mixed precision; the backward uses it too
    for (int64_t i = 0; i < p.batches; i++)
        gemm_in(precision, ta, tb, p.M, p.N, p.K, A + p.a_off[i], p.lda(), B + p.b_off[i], p.ldb(), C + i * p.M * p.N, p.N, false);

    // backward, with C = op(A) op(B):  d op(A) = dC op(B)^T   and   d op(B) = op(A)^T dC.
    // When A itself is stored transposed, dA = (dC op(B)^T)^T = op(B) dC^T, and likewise for B.
    // Each case is one gemm call with the right transpose flags; nothing is copied.
    record(y, {a, b}, "matmul", [p, precision](Node& self) {
        const float *A = self.parent_data(0), *B = self.parent_data(1), *dC = self.grad.data();
        float* dA = self.parent_grad(0);
        float* dB = self.parent_grad(1);
        const int64_t M = p.M, N = p.N, K = p.K, mn = M * N;
        for (int64_t i = 0; dA && i < p.batches; i++) {
            const float *g = dC + i * mn, *Bi = B + p.b_off[i];
            float* dAi = dA + p.a_off[i];
            if (!p.ta) gemm_in(precision, false, !p.tb, M, K, N, g, N, Bi, p.ldb(), dAi, K, true);    // dA = dC op(B)^T
            else       gemm_in(precision, p.tb, true, K, M, N, Bi, p.ldb(), g, N, dAi, M, true);      // dA = op(B) dC^T
        }
        for (int64_t i = 0; dB && i < p.batches; i++) {
            const float *g = dC + i * mn, *Ai = A + p.a_off[i];
            float* dBi = dB + p.b_off[i];
            if (!p.tb) gemm_in(precision, !p.ta, false, K, N, M, Ai, p.lda(), g, N, dBi, N, true);    // dB = op(A)^T dC
            else       gemm_in(precision, true, p.ta, N, K, M, g, N, Ai, p.lda(), dBi, K, true);      // dB = dC^T op(A)
        }
    });
    return y;
}

}  // namespace autograd
