// Shape ops: reshape, permute/transpose, unsqueeze/squeeze, cat, narrow/slice, index_select.
// Every tensor is contiguous row-major, so reshape shares storage and the others copy.
#include <numeric>
#include <stdexcept>

#include "autograd/ops.h"

namespace autograd {

// ---------------------------------------------------------------- reshape

// Same values, new shape: the node shares the storage. One dim may be -1 (inferred).
// backward: the flat layout is identical, so the gradient passes through unchanged.
Tensor reshape(const Tensor& a, const Shape& shape) {
    Shape s = shape;
    int64_t known = 1, infer = -1;
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] == -1) {
            if (infer >= 0) throw std::invalid_argument("reshape: only one dim can be -1, got " + shape_str(shape));
            infer = static_cast<int64_t>(i);
        } else if (s[i] < 0) {
            throw std::invalid_argument("reshape: invalid dim " + std::to_string(s[i]) + " in " + shape_str(shape));
        } else {
            known *= s[i];
        }
    }
    if (infer >= 0 && known > 0 && a.numel() % known == 0) s[infer] = a.numel() / known;
    if ((infer >= 0 && s[infer] == -1) || shape_numel(s) != a.numel())
        throw std::invalid_argument("reshape: cannot reshape a tensor of shape " + shape_str(a.shape()) + " (" +
                                    std::to_string(a.numel()) + " elements) into " + shape_str(shape));
    auto n = std::make_shared<Node>();
    n->shape = s;
    n->data = a.node().data;                  // no copy
    Tensor y(n);
    const int64_t numel = a.numel();
    record(y, {a}, "reshape", [numel](Node& self) {
        const float* dy = self.grad.data();
        float* dx = self.parent_grad(0);
        for (int64_t i = 0; i < numel; i++) dx[i] += dy[i];
    });
    return y;
}

Tensor unsqueeze(const Tensor& a, int64_t dim) {
    Shape s = a.shape();
    const int d = normalize_dim(dim, a.dim() + 1, "unsqueeze");   // may insert after the last dim
    s.insert(s.begin() + d, 1);
    return reshape(a, s);
}

Tensor squeeze(const Tensor& a, int64_t dim) {
    const int d = normalize_dim(dim, a.dim(), "squeeze");
    if (a.shape()[d] != 1)
        throw std::invalid_argument("squeeze: dim " + std::to_string(dim) + " of shape " + shape_str(a.shape()) + " is not 1");
    Shape s = a.shape();
    s.erase(s.begin() + d);
    return reshape(a, s);
}

// ---------------------------------------------------------------- permute

// f(out_index, in_index) for every element, in row-major order of the output.
template <class F>
static void permute_walk(const Shape& in, const std::vector<int>& dims, F f) {
    const int nd = static_cast<int>(in.size());
    std::vector<int64_t> in_stride(nd, 1), out_shape(nd), st(nd);
    for (int i = nd - 2; i >= 0; i--) in_stride[i] = in_stride[i + 1] * in[i + 1];
    for (int i = 0; i < nd; i++) { out_shape[i] = in[dims[i]]; st[i] = in_stride[dims[i]]; }
    const int64_t n = shape_numel(in);
    if (n == 0) return;
    const int64_t inner = nd ? out_shape[nd - 1] : 1, step = nd ? st[nd - 1] : 0;
    for (int64_t r = 0; r < n / inner; r++) {   // row r of the output: where it starts in the input
        int64_t base = 0, rem = r;
        for (int d = nd - 2; d >= 0; d--) { base += (rem % out_shape[d]) * st[d]; rem /= out_shape[d]; }
        for (int64_t j = 0; j < inner; j++) f(r * inner + j, base + j * step);
    }
}

// y's dim i is a's dim dims[i]. backward: send each gradient element back to where it came from.
Tensor permute(const Tensor& a, const std::vector<int64_t>& dims_in) {
    const int nd = a.dim();
    if (static_cast<int>(dims_in.size()) != nd)
        throw std::invalid_argument("permute: got " + std::to_string(dims_in.size()) + " dims for a tensor of shape " + shape_str(a.shape()));
    std::vector<int> dims(nd);
    std::vector<bool> seen(nd, false);
    Shape out(nd);
    for (int i = 0; i < nd; i++) {
        dims[i] = normalize_dim(dims_in[i], nd, "permute");
        if (seen[dims[i]]) throw std::invalid_argument("permute: dim " + std::to_string(dims_in[i]) + " repeated");
        seen[dims[i]] = true;
        out[i] = a.shape()[dims[i]];
    }
    Tensor y = Tensor::empty(out);
    const float* x = a.data();
    float* py = y.data();
    permute_walk(a.shape(), dims, [&](int64_t o, int64_t i) { py[o] = x[i]; });
    const Shape in_shape = a.shape();
    record(y, {a}, "permute", [in_shape, dims](Node& self) {
        const float* dy = self.grad.data();
        float* dx = self.parent_grad(0);
        permute_walk(in_shape, dims, [&](int64_t o, int64_t i) { dx[i] += dy[o]; });
    });
    return y;
}

Tensor transpose(const Tensor& a, int64_t d0, int64_t d1) {
    std::vector<int64_t> dims(a.dim());
    std::iota(dims.begin(), dims.end(), 0);
    std::swap(dims[normalize_dim(d0, a.dim(), "transpose")], dims[normalize_dim(d1, a.dim(), "transpose")]);
    return permute(a, dims);
}

// The member forms, t.reshape(...) and t.transpose(...), are these ops.
Tensor Tensor::reshape(const Shape& s) const { return autograd::reshape(*this, s); }
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return autograd::transpose(*this, d0, d1); }

// ---------------------------------------------------------------- cat, narrow

// Along `dim`, every tensor is seen as (outer, n_k, inner); the output is (outer, sum n_k, inner).
Tensor cat(const std::vector<Tensor>& ts, int64_t dim) {
    if (ts.empty()) throw std::invalid_argument("cat: needs at least one tensor");
    const Shape& s0 = ts[0].shape();
    const int d = normalize_dim(dim, static_cast<int>(s0.size()), "cat");
    Shape out = s0;
    out[d] = 0;
    std::vector<int64_t> sizes;
    for (const Tensor& t : ts) {
        bool ok = t.dim() == static_cast<int>(s0.size());
        for (int i = 0; ok && i < t.dim(); i++) ok = i == d || t.shape()[i] == s0[i];
        if (!ok) throw std::invalid_argument("cat: shapes " + shape_str(s0) + " and " + shape_str(t.shape()) +
                                             " differ outside dim " + std::to_string(dim));
        sizes.push_back(t.shape()[d]);
        out[d] += t.shape()[d];
    }
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < d; i++) outer *= s0[i];
    for (size_t i = d + 1; i < s0.size(); i++) inner *= s0[i];
    Tensor y = Tensor::empty(out);
    const int64_t total = out[d];
    for (int64_t o = 0, start = 0; o < outer; o++, start = 0)
        for (size_t k = 0; k < ts.size(); start += sizes[k], k++)
            std::copy_n(ts[k].data() + o * sizes[k] * inner, sizes[k] * inner, y.data() + (o * total + start) * inner);
    // backward: each input takes back its own slab of the gradient
    record(y, ts, "cat", [sizes, outer, inner, total](Node& self) {
        const float* dy = self.grad.data();
        for (size_t k = 0, start = 0; k < sizes.size(); start += sizes[k], k++) {
            float* dx = self.parent_grad(k);
            if (!dx) continue;
            for (int64_t o = 0; o < outer; o++)
                for (int64_t j = 0; j < sizes[k] * inner; j++) dx[o * sizes[k] * inner + j] += dy[(o * total + start) * inner + j];
        }
    });
    return y;
}

// The elements start .. start+length-1 along dim. backward: the gradient goes back to that window.
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length) {
    const int d = normalize_dim(dim, a.dim(), "narrow");
    const int64_t n = a.shape()[d];
    if (start < 0 || length < 0 || start + length > n)
        throw std::out_of_range("narrow: window [" + std::to_string(start) + ", " + std::to_string(start + length) +
                                ") is outside dim " + std::to_string(dim) + " of size " + std::to_string(n) +
                                " (shape " + shape_str(a.shape()) + ")");
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < d; i++) outer *= a.shape()[i];
    for (int i = d + 1; i < a.dim(); i++) inner *= a.shape()[i];
    Shape out = a.shape();
    out[d] = length;
    Tensor y = Tensor::empty(out);
    for (int64_t o = 0; o < outer; o++)
        std::copy_n(a.data() + (o * n + start) * inner, length * inner, y.data() + o * length * inner);
    record(y, {a}, "narrow", [outer, inner, n, start, length](Node& self) {
        const float* dy = self.grad.data();
        float* dx = self.parent_grad(0);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < length * inner; j++) dx[(o * n + start) * inner + j] += dy[o * length * inner + j];
    });
    return y;
}

Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end) {
    const int d = normalize_dim(dim, a.dim(), "slice");
    const int64_t n = a.shape()[d];
    if (start < 0) start += n;
    if (end < 0) end += n;
    if (start < 0 || end > n || start > end)
        throw std::out_of_range("slice: [" + std::to_string(start) + ", " + std::to_string(end) + ") is not a valid range of dim " +
                                std::to_string(dim) + " of size " + std::to_string(n));
    return narrow(a, d, start, end - start);
}

// ---------------------------------------------------------------- index_select

// a seen as (outer, n, inner) around dim; out is (outer, m, inner) with m = ids.numel(), reshaped
// so the dim becomes ids' shape. backward: row ids[j] receives the gradient of output row j;
// a repeated id receives the sum (the loop is serial, so the order is fixed).
Tensor index_select(const Tensor& a, int64_t dim, const Tokens& ids) {
    const int d = normalize_dim(dim, a.dim(), "index_select");
    const int64_t n = a.shape()[d], m = ids.numel();
    for (int64_t j = 0; j < m; j++)
        if (ids[j] < 0 || ids[j] >= n)
            throw std::out_of_range("index_select: id " + std::to_string(ids[j]) + " at position " + std::to_string(j) +
                                    " is out of range [0, " + std::to_string(n) + ") for dim " + std::to_string(dim) +
                                    " of shape " + shape_str(a.shape()));
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < d; i++) outer *= a.shape()[i];
    for (int i = d + 1; i < a.dim(); i++) inner *= a.shape()[i];
    Shape out(a.shape().begin(), a.shape().begin() + d);
    out.insert(out.end(), ids.shape.begin(), ids.shape.end());
    out.insert(out.end(), a.shape().begin() + d + 1, a.shape().end());
    Tensor y = Tensor::empty(out);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < m; j++)
            std::copy_n(a.data() + (o * n + ids[j]) * inner, inner, y.data() + (o * m + j) * inner);
    record(y, {a}, "index_select", [ids, outer, inner, n, m](Node& self) {
        const float* dy = self.grad.data();
        float* dx = self.parent_grad(0);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < m; j++)
                for (int64_t i = 0; i < inner; i++) dx[(o * n + ids[j]) * inner + i] += dy[(o * m + j) * inner + i];
    });
    return y;
}

}  // namespace autograd
