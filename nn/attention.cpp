#include "nn/attention.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "autograd/random.h"

namespace nn {

using autograd::gemm;
using autograd::Node;
using autograd::shape_str;

// Expand a mask that broadcasts to (B, T, S) into a dense (B, T, S) byte array (1 = may attend).
// A leading head dim of size 1, as in (B, 1, 1, S), is accepted too.
static std::vector<uint8_t> expand_mask(const Mask& mask, int64_t B, int64_t T, int64_t S) {
    Shape ms = mask.shape;
    if (ms.size() == 4 && ms[1] == 1) ms.erase(ms.begin() + 1);
    const Shape target{B, T, S};
    bool ok = ms.size() <= 3 && static_cast<int64_t>(mask.data.size()) == autograd::shape_numel(ms);
    for (size_t i = 0; ok && i < ms.size(); i++) {
        const int64_t want = target[3 - ms.size() + i];
        ok = ms[i] == want || ms[i] == 1;
    }
    if (!ok)
        throw std::invalid_argument("attention: mask of shape " + shape_str(mask.shape) +
                                    " does not broadcast to (B, T, S) = " + shape_str(target));
    while (ms.size() < 3) ms.insert(ms.begin(), 1);
    std::vector<uint8_t> out(static_cast<size_t>(B * T * S));
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t s = 0; s < S; s++) {
                const int64_t i = ((ms[0] == 1 ? 0 : b) * ms[1] + (ms[1] == 1 ? 0 : t)) * ms[2] + (ms[2] == 1 ? 0 : s);
                out[(b * T + t) * S + s] = mask.data[i] != 0;
            }
    return out;
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Mask& mask,
                                    float dropout_p, bool training, Tensor* weights) {
    if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || k.shape() != v.shape() || q.size(0) != k.size(0) ||
        q.size(1) != k.size(1) || q.size(3) != k.size(3))
        throw std::invalid_argument("attention: expected q (B, H, T, Dk) and k, v (B, H, S, Dk), got q " +
                                    shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " + shape_str(v.shape()));
    if (!(dropout_p >= 0.0f && dropout_p < 1.0f)) throw std::invalid_argument("attention: dropout must be in [0, 1)");
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2), S = k.size(2), Dk = q.size(3);
    const float scale = 1.0f / std::sqrt(static_cast<float>(Dk));
    auto allowed = std::make_shared<std::vector<uint8_t>>(mask.data.empty() ? std::vector<uint8_t>()
                                                                            : expand_mask(mask, B, T, S));
    // Dropout decisions are drawn up front, serially, so they do not depend on the thread count.
    auto keep = std::make_shared<std::vector<float>>();
    if (training && dropout_p > 0.0f) {
        keep->resize(static_cast<size_t>(B * H * T * S));
        autograd::Generator& gen = autograd::default_generator();
        for (float& kv : *keep) kv = gen.uniform() < dropout_p ? 0.0f : 1.0f / (1.0f - dropout_p);
    }
    Tensor P = Tensor::empty({B, H, T, S});   // attention weights, (B, H, T, S)
    Tensor out = Tensor::empty({B, H, T, Dk});
    const float *pq = q.data(), *pk = k.data(), *pv = v.data();
    float *pp = P.data(), *po = out.data();
    #pragma omp parallel if (B * H * T * S * Dk > (1 << 14))
    {
        std::vector<float> dropped(keep->empty() ? 0 : T * S);     // per-thread scratch
        #pragma omp for schedule(static)
        for (int64_t bh = 0; bh < B * H; bh++) {
            const int64_t b = bh / H;
            float* Pbh = pp + bh * T * S;
            // 1) scores = Q K^T / sqrt(Dk)                                              (T, S)
            gemm(false, true, T, S, Dk, pq + bh * T * Dk, Dk, pk + bh * S * Dk, Dk, Pbh, S, false);
            // 2) softmax over the allowed keys of each row; masked keys get exactly 0
            for (int64_t t = 0; t < T; t++) {
                float* row = Pbh + t * S;
                const uint8_t* ok = allowed->empty() ? nullptr : allowed->data() + (b * T + t) * S;
                float m = -std::numeric_limits<float>::infinity();
                for (int64_t s = 0; s < S; s++)
                    if (!ok || ok[s]) m = std::max(m, row[s] * scale);
                float sum = 0.0f;
                for (int64_t s = 0; s < S; s++) {
                    row[s] = (!ok || ok[s]) && m > -std::numeric_limits<float>::infinity() ? std::exp(row[s] * scale - m) : 0.0f;
                    sum += row[s];
                }
                const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
                for (int64_t s = 0; s < S; s++) row[s] *= inv;
            }
            // 3) out = dropout(P) V                                                    (T, Dk)
            const float* Pused = Pbh;
            if (!keep->empty()) {
                for (int64_t i = 0; i < T * S; i++) dropped[i] = Pbh[i] * (*keep)[bh * T * S + i];
                Pused = dropped.data();
            }
            gemm(false, false, T, Dk, S, Pused, S, pv + bh * S * Dk, Dk, po + bh * T * Dk, Dk, false);
        }
    }
    if (weights) *weights = P;

    // backward, per (b, h), with Pd = dropout(P) and keep the dropout scale (1 without dropout):
    //   dV  += Pd^T dO                         (out = Pd V)
    //   dPd  = dO V^T,  dP = dPd * keep
    //   dSc  = P * (dP - rowsum(dP * P))       (softmax backward; masked P = 0 gives dSc = 0 there)
    //   dQ  += dSc K / sqrt(Dk),  dK += dSc^T Q / sqrt(Dk)    (Sc = Q K^T / sqrt(Dk))
    autograd::record(out, {q, k, v}, "attention", [B, H, T, S, Dk, scale, P, keep](Node& self) {
        const float *pq = self.parent_data(0), *pk = self.parent_data(1), *pv = self.parent_data(2);
        const float *pp = P.data(), *dout = self.grad.data();
        float* dq = self.parent_grad(0);
        float* dk = self.parent_grad(1);
        float* dv = self.parent_grad(2);
        #pragma omp parallel if (B * H * T * S * Dk > (1 << 14))
        {
            std::vector<float> dP(T * S), Pd(keep->empty() ? 0 : T * S);
            #pragma omp for schedule(static)
            for (int64_t bh = 0; bh < B * H; bh++) {
                const float *Pbh = pp + bh * T * S, *dO = dout + bh * T * Dk;
                const float* Pused = Pbh;
                if (!keep->empty()) {
                    for (int64_t i = 0; i < T * S; i++) Pd[i] = Pbh[i] * (*keep)[bh * T * S + i];
                    Pused = Pd.data();
                }
                if (dv) gemm(true, false, S, Dk, T, Pused, S, dO, Dk, dv + bh * S * Dk, Dk, true);
                if (!dq && !dk) continue;
                gemm(false, true, T, S, Dk, dO, Dk, pv + bh * S * Dk, Dk, dP.data(), S, false);
                for (int64_t t = 0; t < T; t++) {
                    float* d = dP.data() + t * S;
                    const float* p = Pbh + t * S;
                    if (!keep->empty())
                        for (int64_t s = 0; s < S; s++) d[s] *= (*keep)[bh * T * S + t * S + s];
                    float dot = 0.0f;
                    for (int64_t s = 0; s < S; s++) dot += d[s] * p[s];
                    for (int64_t s = 0; s < S; s++) d[s] = p[s] * (d[s] - dot) * scale;   // dSc, scaled
                }
                if (dq) gemm(false, false, T, Dk, S, dP.data(), S, pk + bh * S * Dk, Dk, dq + bh * T * Dk, Dk, true);
                if (dk) gemm(true, false, S, Dk, T, dP.data(), S, pq + bh * T * Dk, Dk, dk + bh * S * Dk, Dk, true);
            }
        }
    });
    return out;
}

Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Mask& mask) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(q.size(-1)));
    Tensor scores = autograd::matmul(q, k, false, true) * scale;              // (B, H, T, S)
    if (!mask.data.empty()) {
        Mask blocked = mask;                                                   // masked_fill fills where true
        for (auto& m : blocked.data) m = !m;
        if (blocked.dim() == 3) blocked.shape.insert(blocked.shape.begin() + 1, 1);   // (B, 1, T, S): all heads
        scores = autograd::masked_fill(scores, blocked, -std::numeric_limits<float>::infinity());
    }
    return autograd::matmul(autograd::softmax(scores), v);                   // (B, H, T, Dk)
}

MultiHeadAttention::MultiHeadAttention(int64_t d_model_, int64_t h_, float dropout)
    : d_model(d_model_), h(h_), d_k(h_ > 0 ? d_model_ / h_ : 0), dropout_p(dropout) {
    if (h <= 0 || d_model <= 0 || d_model % h != 0)
        throw std::invalid_argument("MultiHeadAttention: d_model (" + std::to_string(d_model) +
                                    ") must be a positive multiple of the number of heads (" + std::to_string(h) + ")");
    if (!(dropout >= 0.0f && dropout < 1.0f)) throw std::invalid_argument("MultiHeadAttention: dropout must be in [0, 1)");
    w_q = register_module("w_q", std::make_shared<Linear>(d_model, d_model));
    w_k = register_module("w_k", std::make_shared<Linear>(d_model, d_model));
    w_v = register_module("w_v", std::make_shared<Linear>(d_model, d_model));
    w_o = register_module("w_o", std::make_shared<Linear>(d_model, d_model));
}

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value, const Mask& mask) {
    if (query.dim() != 3 || key.dim() != 3 || value.dim() != 3 || query.size(-1) != d_model ||
        key.shape() != value.shape() || key.size(0) != query.size(0) || key.size(-1) != d_model)
        throw std::invalid_argument("MultiHeadAttention: expected query (B, T, " + std::to_string(d_model) + ") and key, value (B, S, " +
                                    std::to_string(d_model) + "), got " + shape_str(query.shape()) + ", " +
                                    shape_str(key.shape()) + ", " + shape_str(value.shape()));
    const int64_t B = query.size(0), T = query.size(1), S = key.size(1);
    // 1) project, then split D into H heads of Dk: (B, T, D) -> (B, T, H, Dk) -> (B, H, T, Dk)
    Tensor q = autograd::transpose(w_q->forward(query).reshape({B, T, h, d_k}), 1, 2);   // (B, H, T, Dk)
    Tensor k = autograd::transpose(w_k->forward(key).reshape({B, S, h, d_k}), 1, 2);     // (B, H, S, Dk)
    Tensor v = autograd::transpose(w_v->forward(value).reshape({B, S, h, d_k}), 1, 2);   // (B, H, S, Dk)
    // 2) attend in every head at once
    Tensor weights;
    Tensor x = scaled_dot_product_attention(q, k, v, mask, dropout_p, is_training(), &weights);   // (B, H, T, Dk)
    last_attention = weights;                                                                     // (B, H, T, S)
    // 3) concatenate the heads: (B, H, T, Dk) -> (B, T, H, Dk) -> (B, T, D)
    x = autograd::transpose(x, 1, 2).reshape({B, T, d_model});
    // 4) final projection
    return w_o->forward(x);                                                                       // (B, T, D)
}

}  // namespace nn
