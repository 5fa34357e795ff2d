// Every differentiable op, as a free function. Each one's forward loop and backward closure
// sit together in one of the ops_*.cpp files named in the section headings below.
#pragma once
#include "autograd/tensor.h"

namespace autograd {

// ---- elementwise, with NumPy broadcasting (ops_elementwise.cpp) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, float s);
Tensor mul(const Tensor& a, float s);
Tensor neg(const Tensor& a);
Tensor pow(const Tensor& a, float exponent);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);       // 1 / (1 + e^-a), without overflow for any a
Tensor relu(const Tensor& a);
Tensor gelu(const Tensor& a);          // exact form x * Phi(x), as torch.nn.GELU()
// Where mask is true the output is `value` (and the gradient is zero); mask broadcasts to a.
Tensor masked_fill(const Tensor& a, const Mask& mask, float value);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, float s) { return add(a, s); }
inline Tensor operator+(float s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(const Tensor& a, float s) { return add(a, -s); }
inline Tensor operator-(float s, const Tensor& a) { return add(neg(a), s); }
inline Tensor operator*(const Tensor& a, float s) { return mul(a, s); }
inline Tensor operator*(float s, const Tensor& a) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, float s) { return mul(a, 1.0f / s); }
inline Tensor operator/(float s, const Tensor& a) { return mul(pow(a, -1.0f), s); }
inline Tensor operator-(const Tensor& a) { return neg(a); }

// ---- reductions (ops_reduce.cpp) ----
Tensor sum(const Tensor& a);                                   // all elements -> shape ()
Tensor sum(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& a);                                   // gradient goes to the first maximum
Tensor max(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor var(const Tensor& a, bool unbiased = true);
Tensor var(const Tensor& a, int64_t dim, bool unbiased = true, bool keepdim = false);
Tokens argmax(const Tensor& a, int64_t dim, bool keepdim = false);   // not differentiable
// Sum a gradient of shape `from` down to a broadcast input's shape `to` (the adjoint of broadcasting).
std::vector<float> sum_to(const float* grad, const Shape& from, const Shape& to);

// ---- matrix multiply (ops_matmul.cpp) ----
// a: (..., M, K), b: (..., K, N) -> (..., M, N); batch dims broadcast. transpose_a/b use the
// last two dims of a or b transposed, without copying.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// ---- shape (ops_shape.cpp) ----
Tensor reshape(const Tensor& a, const Shape& shape);         // shares storage; one dim may be -1
Tensor permute(const Tensor& a, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& a, int64_t d0, int64_t d1);
Tensor unsqueeze(const Tensor& a, int64_t dim);
Tensor squeeze(const Tensor& a, int64_t dim);                // the dim must have size 1
Tensor cat(const std::vector<Tensor>& ts, int64_t dim);
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length);
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end);   // [start, end)
// Gather entries along `dim` by integer ids: out has a's shape with dim replaced by ids' shape.
// With dim = 0 on a (V, D) table this is an embedding lookup.
Tensor index_select(const Tensor& a, int64_t dim, const Tokens& ids);

// ---- random (ops_elementwise.cpp) ----
// The keep factors of one dropout over a tensor of `shape`: element i (flat index) is 0 with
// probability p, else 1/(1-p); x * dropout_keep(x.shape(), p) is inverted dropout. Draws one
// seed from the default generator (none if p = 0, all ones then), the same draws the fused
// dropout makes (fused_ops.h), so both paths drop the same elements.
Tensor dropout_keep(const Shape& shape, float p);

// ---- fused, hand-derived backward (ops_softmax.cpp) ----
Tensor softmax(const Tensor& x);        // over the last dim
Tensor log_softmax(const Tensor& x);    // over the last dim

}  // namespace autograd
