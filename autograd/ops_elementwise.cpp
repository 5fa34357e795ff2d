// Elementwise ops with NumPy broadcasting. Forward loop first, backward closure right below.
#include <cmath>
#include <stdexcept>

#include "autograd/kernels/dropout.h"
#include "autograd/ops.h"

namespace autograd {

// ---------------------------------------------------------------- broadcasting walk

// Strides of `in` seen through the broadcast output shape: 0 along dims where `in` has size 1
// (or is missing on the left), so the same input element is reused along that dim.
static std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
    std::vector<int64_t> st(out.size(), 0);
    int64_t s = 1;
    for (int i = static_cast<int>(in.size()) - 1, o = static_cast<int>(out.size()) - 1; i >= 0; i--, o--) {
        st[o] = in[i] == 1 ? 0 : s;
        s *= in[i];
    }
    return st;
}

// Call f(i_out, i_a, i_b) for every output element, in row-major order of the output.
// The walk goes row by row over the last dim; the offsets of a row come from its row index.
template <class F>
static void for_each_broadcast(const Shape& out, const Shape& as, const Shape& bs, F f) {
    const int nd = static_cast<int>(out.size());
    const int64_t n = shape_numel(out);
    if (n == 0) return;
    const std::vector<int64_t> sa = broadcast_strides(as, out), sb = broadcast_strides(bs, out);
    const int64_t inner = nd ? out[nd - 1] : 1, rows = n / inner;
    const int64_t ia_step = nd ? sa[nd - 1] : 0, ib_step = nd ? sb[nd - 1] : 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t ia = 0, ib = 0, rem = r;
        for (int d = nd - 2; d >= 0; d--) {               // decompose the row index
            const int64_t c = rem % out[d];
            rem /= out[d];
            ia += c * sa[d];
            ib += c * sb[d];
        }
        for (int64_t j = 0; j < inner; j++) f(r * inner + j, ia + j * ia_step, ib + j * ib_step);
    }
}

std::vector<float> sum_to(const float* grad, const Shape& from, const Shape& to) {
    if (broadcast_shapes(from, to, "sum_to") != from)
        throw std::invalid_argument("sum_to: shape " + shape_str(to) + " does not broadcast to " + shape_str(from));
    std::vector<float> out(static_cast<size_t>(shape_numel(to)), 0.0f);
    for_each_broadcast(from, from, to, [&](int64_t i, int64_t, int64_t it) { out[it] += grad[i]; });
    return out;
}

// Shared skeleton of the four binary ops. f(a, b) is the value; dfa/dfb are the partial
// derivatives, given (a, b, y). The backward adds dy * dfa into a's grad (summed over the dims a
// was broadcast along) and the same for b.
template <class F, class DA, class DB>
static Tensor binary_op(const Tensor& a, const Tensor& b, const char* op, F f, DA dfa, DB dfb) {
    const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), op);
    Tensor y = Tensor::empty(out_shape);
    const float *pa = a.data(), *pb = b.data();
    float* py = y.data();
    const int64_t n = y.numel();
    if (a.shape() == b.shape()) {                          // fast path: no broadcasting
        for (int64_t i = 0; i < n; i++) py[i] = f(pa[i], pb[i]);
    } else {
        for_each_broadcast(out_shape, a.shape(), b.shape(),
                           [&](int64_t i, int64_t ia, int64_t ib) { py[i] = f(pa[ia], pb[ib]); });
    }
    record(y, {a, b}, op, [dfa, dfb, n](Node& self) {
        const Node &na = *self.parents[0], &nb = *self.parents[1];
        const float *pa = na.data->data(), *pb = nb.data->data(), *py = self.data->data();
        const float* dy = self.grad.data();
        float* ga = self.parent_grad(0);   // nullptr when that input needs no gradient
        float* gb = self.parent_grad(1);
        if (na.shape == nb.shape) {        // no broadcasting: every element is its own
            if (ga)
                for (int64_t i = 0; i < n; i++) ga[i] += dy[i] * dfa(pa[i], pb[i], py[i]);
            if (gb)
                for (int64_t i = 0; i < n; i++) gb[i] += dy[i] * dfb(pa[i], pb[i], py[i]);
            return;
        }
        // broadcast inputs receive several contributions, added in the order of the output
        for_each_broadcast(self.shape, na.shape, nb.shape, [&](int64_t i, int64_t ia, int64_t ib) {
            if (ga) ga[ia] += dy[i] * dfa(pa[ia], pb[ib], py[i]);
            if (gb) gb[ib] += dy[i] * dfb(pa[ia], pb[ib], py[i]);
        });
    });
    return y;
}

// y = a + b: dy/da = 1, dy/db = 1
Tensor add(const Tensor& a, const Tensor& b) {
    return binary_op(a, b, "add", [](float x, float z) { return x + z; },
                     [](float, float, float) { return 1.0f; }, [](float, float, float) { return 1.0f; });
}

// y = a - b: dy/da = 1, dy/db = -1
Tensor sub(const Tensor& a, const Tensor& b) {
    return binary_op(a, b, "sub", [](float x, float z) { return x - z; },
                     [](float, float, float) { return 1.0f; }, [](float, float, float) { return -1.0f; });
}

// y = a * b: dy/da = b, dy/db = a
Tensor mul(const Tensor& a, const Tensor& b) {
    return binary_op(a, b, "mul", [](float x, float z) { return x * z; },
                     [](float, float z, float) { return z; }, [](float x, float, float) { return x; });
}

// y = a / b: dy/da = 1/b, dy/db = -a/b^2
Tensor div(const Tensor& a, const Tensor& b) {
    return binary_op(a, b, "div", [](float x, float z) { return x / z; },
                     [](float, float z, float) { return 1.0f / z; },
                     [](float x, float z, float) { return -x / (z * z); });
}

// ---------------------------------------------------------------- unary

// Shared skeleton of the unary ops: y = f(x), and backward dx += dy * dfdx(x, y).
template <class F, class D>
static Tensor unary_op(const Tensor& a, const char* op, F f, D dfdx) {
    Tensor y = Tensor::empty(a.shape());
    const float* px = a.data();
    float* py = y.data();
    const int64_t n = a.numel();
    for (int64_t i = 0; i < n; i++) py[i] = f(px[i]);
    record(y, {a}, op, [dfdx, n](Node& self) {
        const float *px = self.parent_data(0), *py = self.data->data(), *dy = self.grad.data();
        float* dx = self.parent_grad(0);
        for (int64_t i = 0; i < n; i++) dx[i] += dy[i] * dfdx(px[i], py[i]);
    });
    return y;
}

// y = a + s: dy/da = 1
Tensor add(const Tensor& a, float s) {
    return unary_op(a, "add_scalar", [s](float x) { return x + s; }, [](float, float) { return 1.0f; });
}

// y = a * s: dy/da = s
Tensor mul(const Tensor& a, float s) {
    return unary_op(a, "mul_scalar", [s](float x) { return x * s; }, [s](float, float) { return s; });
}

// y = -a: dy/da = -1
Tensor neg(const Tensor& a) {
    return unary_op(a, "neg", [](float x) { return -x; }, [](float, float) { return -1.0f; });
}

// y = a^p: dy/da = p * a^(p-1)
Tensor pow(const Tensor& a, float p) {
    return unary_op(a, "pow", [p](float x) { return std::pow(x, p); },
                    [p](float x, float) { return p * std::pow(x, p - 1.0f); });
}

// y = e^a: dy/da = e^a = y
Tensor exp(const Tensor& a) {
    return unary_op(a, "exp", [](float x) { return std::exp(x); }, [](float, float y) { return y; });
}

// y = ln a: dy/da = 1/a
Tensor log(const Tensor& a) {
    return unary_op(a, "log", [](float x) { return std::log(x); }, [](float x, float) { return 1.0f / x; });
}

// y = sqrt(a): dy/da = 1 / (2 sqrt(a)) = 1 / (2y)
Tensor sqrt(const Tensor& a) {
    return unary_op(a, "sqrt", [](float x) { return std::sqrt(x); }, [](float, float y) { return 0.5f / y; });
}

// y = tanh(a): dy/da = 1 - tanh^2(a) = 1 - y^2
Tensor tanh(const Tensor& a) {
    return unary_op(a, "tanh", [](float x) { return std::tanh(x); }, [](float, float y) { return 1.0f - y * y; });
}

// y = sigmoid(a) = 1 / (1 + e^-a): dy/da = e^-a / (1 + e^-a)^2 = y (1 - y), from the output alone.
// The value from e = e^-|a|, which is in (0, 1] for every a, so no exp overflows: for a >= 0,
// 1 / (1 + e); for a < 0, e / (1 + e) (the same fraction multiplied through by e^a).
Tensor sigmoid(const Tensor& a) {
    return unary_op(a, "sigmoid",
                    [](float x) {
                        const float e = std::exp(-std::fabs(x));
                        return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
                    },
                    [](float, float y) { return y * (1.0f - y); });
}

// y = max(a, 0): dy/da = 1 where a > 0, else 0
Tensor relu(const Tensor& a) {
    return unary_op(a, "relu", [](float x) { return x > 0.0f ? x : 0.0f; },
                    [](float x, float) { return x > 0.0f ? 1.0f : 0.0f; });
}

// y = x * Phi(x), Phi the standard normal CDF = (1 + erf(x / sqrt 2)) / 2.
// dy/dx = Phi(x) + x * phi(x), phi the standard normal density exp(-x^2/2) / sqrt(2 pi).
Tensor gelu(const Tensor& a) {
    return unary_op(a, "gelu", [](float x) { return 0.5f * x * (1.0f + std::erf(x * float(M_SQRT1_2))); },
                    [](float x, float) {
                        const float cdf = 0.5f * (1.0f + std::erf(x * float(M_SQRT1_2)));
                        const float pdf = std::exp(-0.5f * x * x) * float(0.5 * M_2_SQRTPI * M_SQRT1_2);
                        return cdf + x * pdf;
                    });
}

// ---------------------------------------------------------------- masked_fill

// y = value where mask, else a. dy/da = 0 where mask (the value is a constant), else 1.
Tensor masked_fill(const Tensor& a, const Mask& mask, float value) {
    if (broadcast_shapes(a.shape(), mask.shape, "masked_fill") != a.shape())
        throw std::invalid_argument("masked_fill: mask of shape " + shape_str(mask.shape) +
                                    " must broadcast to the tensor's shape " + shape_str(a.shape()) +
                                    " without enlarging it");
    Tensor y = Tensor::empty(a.shape());
    const float* px = a.data();
    float* py = y.data();
    const uint8_t* pm = mask.data.data();
    for_each_broadcast(a.shape(), a.shape(), mask.shape,
                       [&](int64_t i, int64_t, int64_t im) { py[i] = pm[im] ? value : px[i]; });
    record(y, {a}, "masked_fill", [mask](Node& self) {
        const float* dy = self.grad.data();
        float* dx = self.parent_grad(0);
        const uint8_t* pm = mask.data.data();
        for_each_broadcast(self.shape, self.shape, mask.shape,
                           [&](int64_t i, int64_t, int64_t im) { if (!pm[im]) dx[i] += dy[i]; });
    });
    return y;
}

// ---------------------------------------------------------------- dropout's keep factors

// The plain path's dropout: the keep factors as a constant tensor (a plain loop over keep(i),
// kernels/dropout.h), so a layer applies dropout as one elementwise multiply, y = x * factors. The
// same seed draw as the fused dropout (autograd/fused_ops.h), so both paths drop the same elements.
Tensor dropout_keep(const Shape& shape, float p) {
    const kernels::DropoutDraws drop = kernels::draw_dropout(p);
    Tensor keep = Tensor::empty(shape);   // same shape as the tensor it drops
    for (int64_t i = 0; i < keep.numel(); i++) keep.data()[i] = drop.keep(static_cast<uint64_t>(i));
    return keep;
}

}  // namespace autograd
