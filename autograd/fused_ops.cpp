// The fused ops as autograd ops: each runs a kernel's forward (autograd/kernels/), and records a
// backward closure that runs the kernel's backward. The arithmetic, and its derivation, is in the
// kernel; what is here is the graph: which inputs, what the backward keeps, where the gradients go.
#include "autograd/fused_ops.h"

#include <algorithm>
#include <memory>

#include "autograd/frozen_weights.h"
#include "autograd/kernels/adam.h"
#include "autograd/kernels/additive_score.h"
#include "autograd/kernels/attention.h"
#include "autograd/kernels/cross_entropy.h"
#include "autograd/kernels/dropout.h"
#include "autograd/kernels/gru_cell.h"
#include "autograd/kernels/layer_norm.h"
#include "autograd/kernels/linear.h"
#include "autograd/kernels/linear_cross_entropy.h"
#include "autograd/mixed_precision.h"
#include "autograd/ops.h"

namespace autograd {

// The switch, fused_kernels_enabled() and FusedKernelsGuard, is beside grad mode in engine.cpp.

namespace fused {

using kernels::GradOut;

// Where a kernel's backward writes parent i's gradient. A kernel that writes *every* element of
// it may store (=) instead of adding (+=) when the parent has no gradient yet: the buffer is then
// allocated but not zeroed, which saves a pass over memory (for the weight gradients of a big
// model, a pass over every parameter each step). When two parents are one tensor
// (linear(w, w, b)), the first request allocates and says "store", the second sees that gradient
// and says "add": so the kernel writes the gradients one after the other, in the order asked.
static GradOut grad_to_write(Node& self, size_t i) {
    Node& p = *self.parents[i];
    if (!p.requires_grad) return {nullptr, true};
    const bool add = !p.grad.empty();
    if (!add) p.grad.resize(p.data->size());   // FloatBuffer: uninitialized
    return {p.grad.data(), add};
}

// A gradient the kernel adds into (+=), zero-filled when new, as every plain op's backward does.
static GradOut grad_to_add(Node& self, size_t i) { return {self.parent_grad(i), true}; }

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, bool relu, float dropout_p) {
    const int64_t in = w.size(1), out = w.size(0);
    const kernels::LinearDims d{x.numel() / std::max<int64_t>(in, 1), in, out};
    const kernels::DropoutDraws drop = kernels::draw_dropout(dropout_p);
    Shape ys = x.shape();
    ys.back() = out;
    Tensor y = Tensor::empty(ys);                                   // (..., out)
    const Precision precision = matmul_precision();                  // the backward uses it too
    // decoding (a FrozenWeightsGuard): W^T packed once for all calls, not once per call
    const kernels::PackedBf16B* packed_w_t = precision == Precision::bf16 ? detail::frozen_bf16_weight_t(w) : nullptr;
    kernels::linear_forward(y.data(), x.data(), w.data(), b.defined() ? b.data() : nullptr, d, relu, drop, precision, packed_w_t);

    std::vector<Tensor> inputs = {x, w};
    if (b.defined()) inputs.push_back(b);
    const char* name = relu ? (drop.active() ? "linear_relu_dropout" : "linear_relu") : (drop.active() ? "linear_dropout" : "linear");
    record(y, inputs, name, [d, relu, drop, precision](Node& self) {
        // dx, dW, db in the order the kernel writes them
        const GradOut dx = grad_to_write(self, 0), dw = grad_to_write(self, 1),
                      db = self.parents.size() > 2 ? grad_to_write(self, 2) : GradOut{};
        kernels::linear_backward(dx, dw, db, self.grad.data(), self.parent_data(0), self.parent_data(1), self.data->data(), d,
                                 relu, drop, precision);
    });
    return y;
}

Tensor layer_norm(const Tensor& x, const Tensor& gain, const Tensor& bias, float eps) {
    const int64_t C = x.size(-1);
    const kernels::LayerNormDims d{x.numel() / C, C};
    Tensor y = Tensor::empty(x.shape());                              // (..., C)
    auto stats = std::make_shared<FloatBuffer>(2 * d.R);             // per row: mean, then 1/std
    float *mean = stats->data(), *rstd = mean + d.R;
    kernels::layer_norm_forward(y.data(), mean, rstd, x.data(), gain.data(), bias.data(), d, eps);
    record(y, {x, gain, bias}, "layer_norm", [d, stats](Node& self) {
        const float *mean = stats->data(), *rstd = mean + d.R;
        // dx first, as the kernel writes it; gain and bias add (the kernel sums them over the rows)
        const GradOut dx = grad_to_write(self, 0), dgain = grad_to_add(self, 1), dbias = grad_to_add(self, 2);
        kernels::layer_norm_backward(dx, dgain, dbias, self.grad.data(), self.parent_data(0), mean, rstd, self.parent_data(1), d);
    });
    return y;
}

Tensor gru_cell(const Tensor& gi, const Tensor& gh, const Tensor& h) {
    const kernels::GruCellDims d{h.size(0), h.size(1)};
    Tensor h_next = Tensor::empty(h.shape());                         // (B, Hd)
    auto gates = std::make_shared<FloatBuffer>(3 * d.B * d.Hd);      // (B, 3Hd): r, z, n per row, for the backward
    kernels::gru_cell_forward(h_next.data(), gates->data(), gi.data(), gh.data(), h.data(), d);
    record(h_next, {gi, gh, h}, "gru_cell", [d, gates](Node& self) {
        // dgi, dgh, dh in the order the kernel writes them; it writes every element of each, so a
        // new gradient is stored into, and when gi and gh are one tensor dgh adds to dgi
        const GradOut dgi = grad_to_write(self, 0), dgh = grad_to_write(self, 1), dh = grad_to_write(self, 2);
        kernels::gru_cell_backward(dgi, dgh, dh, self.grad.data(), gates->data(), self.parent_data(1), self.parent_data(2), d);
    });
    return h_next;
}

Tensor dropout(const Tensor& x, float p) {
    const kernels::DropoutDraws drop = kernels::draw_dropout(p);
    if (!drop.active()) return x;
    Tensor y = Tensor::empty(x.shape());   // same shape as x
    kernels::dropout_forward(y.data(), x.data(), x.numel(), drop);
    record(y, {x}, "dropout", [drop](Node& self) {
        kernels::dropout_backward(grad_to_write(self, 0), self.grad.data(), self.numel(), drop);
    });
    return y;
}

Tensor add_dropout(const Tensor& x, const Tensor& y, float p) {
    const kernels::DropoutDraws drop = kernels::draw_dropout(p);
    if (!drop.active()) return x + y;
    Tensor out = Tensor::empty(x.shape());   // same shape as x and y
    kernels::add_dropout_forward(out.data(), x.data(), y.data(), x.numel(), drop);
    record(out, {x, y}, "add_dropout", [drop](Node& self) {
        const GradOut dx = grad_to_write(self, 0), dy = grad_to_write(self, 1);   // dx is written first
        kernels::add_dropout_backward(dx, dy, self.grad.data(), self.numel(), drop);
    });
    return out;
}

Tensor cross_entropy(const Tensor& logits, const Tokens& targets, int32_t ignore_index, float label_smoothing) {
    const kernels::CrossEntropyDims d{targets.numel(), logits.size(-1), ignore_index, label_smoothing};
    auto lse = std::make_shared<FloatBuffer>(d.R);   // per row: log-sum-exp, for the backward
    Tensor loss = Tensor::scalar(kernels::cross_entropy_forward(lse->data(), logits.data(), targets.data.data(), d));   // ()
    record(loss, {logits}, "cross_entropy", [d, lse, targets](Node& self) {
        kernels::cross_entropy_backward(grad_to_write(self, 0), self.grad[0], self.parent_data(0), lse->data(), targets.data.data(), d);
    });
    return loss;
}

Tensor linear_cross_entropy(const Tensor& x, const Tensor& w, const Tensor& b, const Tokens& targets, int32_t ignore_index,
                            float label_smoothing, int64_t chunk_rows) {
    const int64_t R = targets.numel(), D = w.size(1), V = w.size(0);
    const int64_t chunk = chunk_rows > 0 ? chunk_rows : kernels::logits_chunk_rows(V);
    if (R <= chunk)   // one chunk: nothing to save, so the two ops as they are (the logits kept for the backward)
        return cross_entropy(linear(x, w, b, /*relu=*/false, /*dropout_p=*/0.0f), targets, ignore_index, label_smoothing);
    const kernels::LinearCrossEntropyDims d{R, D, V, ignore_index, label_smoothing, chunk};
    // the gradient, for dloss = 1, is computed in the forward pass when a backward can come
    const bool wanted = is_grad_enabled() && (x.requires_grad() || w.requires_grad() || (b.defined() && b.requires_grad()));
    std::shared_ptr<FloatBuffer> dx, dw, db;
    if (wanted) {
        dx = std::make_shared<FloatBuffer>(R * D);                   // (R, D)
        dw = std::make_shared<FloatBuffer>(V * D);                   // (V, D)
        if (b.defined()) db = std::make_shared<FloatBuffer>(V);      // (V,)
    }
    FloatBuffer scratch(chunk * V);                                   // one chunk's logits, then their gradient
    const Precision precision = matmul_precision();
    Tensor loss = Tensor::scalar(kernels::linear_cross_entropy_forward(
        dx ? dx->data() : nullptr, dw ? dw->data() : nullptr, db ? db->data() : nullptr, scratch.data(), x.data(), w.data(),
        b.defined() ? b.data() : nullptr, targets.data.data(), d, precision));   // ()
    if (!wanted) return loss;
    std::vector<Tensor> inputs = {x, w};
    if (b.defined()) inputs.push_back(b);
    record(loss, inputs, "linear_cross_entropy", [dx, dw, db](Node& self) {
        const float dloss = self.grad[0];
        kernels::scale_saved_gradient(grad_to_write(self, 0), dloss, dx->data(), static_cast<int64_t>(dx->size()));
        kernels::scale_saved_gradient(grad_to_write(self, 1), dloss, dw->data(), static_cast<int64_t>(dw->size()));
        if (db) kernels::scale_saved_gradient(grad_to_write(self, 2), dloss, db->data(), static_cast<int64_t>(db->size()));
    });
    return loss;
}

// A mask that broadcasts to (B, T, S) (a head dim of 1 allowed, as in (B, 1, 1, S)), made dense:
// (B, T, S), 1 = may attend. The layer that calls the op has checked that it broadcasts.
static Mask dense_mask(const Mask& mask, int64_t B, int64_t T, int64_t S) {
    Shape ms = mask.shape;
    if (ms.size() == 4 && ms[1] == 1) ms.erase(ms.begin() + 1);
    while (ms.size() < 3) ms.insert(ms.begin(), 1);
    Mask out = Mask::full({B, T, S}, 0);   // (B, T, S)
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t s = 0; s < S; s++) {
                const int64_t i = ((ms[0] == 1 ? 0 : b) * ms[1] + (ms[1] == 1 ? 0 : t)) * ms[2] + (ms[2] == 1 ? 0 : s);
                out[(b * T + t) * S + s] = mask.data[i] != 0;
            }
    return out;
}

Attention attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const Mask& mask, float dropout_p,
                    int64_t keys, const std::vector<int64_t>& kv_slot) {
    const int64_t B = q.size(0), T = q.size(1), D = q.size(2);
    if (keys < 0) keys = k.size(1);
    const Mask allowed = mask.data.empty() ? Mask() : dense_mask(mask, B, T, keys);   // (B, T, S), or none
    const kernels::AttentionDims d{B, heads, T, keys, D / heads, k.size(1)};
    const kernels::DropoutDraws drop = kernels::draw_dropout(dropout_p);
    Tensor weights = Tensor::empty({B, heads, T, keys});   // (B, H, T, S)
    Tensor out = Tensor::empty({B, T, D});                 // (B, T, D)
    const Precision precision = matmul_precision();        // the backward uses it too
    kernels::attention_forward(out.data(), weights.data(), q.data(), k.data(), v.data(),
                               allowed.data.empty() ? nullptr : allowed.data.data(), d, drop, precision,
                               kv_slot.empty() ? nullptr : kv_slot.data());
    if (!kv_slot.empty()) return {out, weights};   // decoding: no graph (several queries may read one slot)
    record(out, {q, k, v}, "attention", [d, drop, weights, precision](Node& self) {
        // q, k and v are usually three tensors (three projections), and the kernel writes every
        // element of their gradients: so they are stored into when new. They must add (+=) when
        // two of them are one tensor (the kernel writes them interleaved, per head) or when k and
        // v have rows past `keys` (those get nothing, so they must hold zeros).
        const auto& in = self.parents;
        const bool store = in[0] != in[1] && in[1] != in[2] && in[0] != in[2] && d.S == d.kv_rows;
        auto grad = [&](size_t i) { return store ? grad_to_write(self, i) : grad_to_add(self, i); };
        const GradOut dq = grad(0), dk = grad(1), dv = grad(2);
        kernels::attention_backward(dq, dk, dv, self.grad.data(), self.parent_data(0), self.parent_data(1), self.parent_data(2),
                                    weights.data(), d, drop, precision);
    });
    return {out, weights};
}

Tensor additive_score(const Tensor& keys, const Tensor& q, const Tensor& v) {
    const kernels::AdditiveScoreDims d{keys.size(0), keys.size(1), keys.size(2)};
    Tensor e = Tensor::empty({d.B, d.S});   // (B, S)
    kernels::additive_score_forward(e.data(), keys.data(), q.data(), v.data(), d);
    record(e, {keys, q, v}, "additive_score", [d](Node& self) {
        // dk and dq first, then dv, as the kernel writes them (three shapes: never one tensor)
        const GradOut dk = grad_to_write(self, 0), dq = grad_to_write(self, 1), dv = grad_to_write(self, 2);
        kernels::additive_score_backward(dk, dq, dv, self.grad.data(), self.parent_data(0), self.parent_data(1), self.parent_data(2), d);
    });
    return e;
}

void adam_update(const std::vector<AdamParam>& params, const AdamConstants& c) {
    std::vector<kernels::AdamArrays> arrays;
    arrays.reserve(params.size());
    for (const AdamParam& a : params) arrays.push_back({a.g, a.p, a.m, a.v, a.n, a.bias_correction1, a.bias_correction2});
    kernels::adam_update(arrays.data(), arrays.size(), {c.lr, c.beta1, c.beta2, c.eps, c.l2, c.decay});
}

}  // namespace fused

}  // namespace autograd
