#include "nn/attention.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "autograd/kernels/parallel.h"
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

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t H, const Mask& mask,
                                    float dropout_p, bool training, Tensor* weights) {
    if (q.dim() != 3 || k.dim() != 3 || k.shape() != v.shape() || q.size(0) != k.size(0) || q.size(2) != k.size(2) ||
        H <= 0 || q.size(2) % H != 0)
        throw std::invalid_argument("attention: expected q (B, T, D) and k, v (B, S, D) with D a multiple of the " +
                                    std::to_string(H) + " heads, got q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) +
                                    ", v " + shape_str(v.shape()));
    if (!(dropout_p >= 0.0f && dropout_p < 1.0f)) throw std::invalid_argument("attention: dropout must be in [0, 1)");
    const int64_t B = q.size(0), T = q.size(1), S = k.size(1), D = q.size(2), Dk = D / H;
    const float scale = 1.0f / std::sqrt(static_cast<float>(Dk));
    auto allowed = std::make_shared<std::vector<uint8_t>>(mask.data.empty() ? std::vector<uint8_t>()
                                                                            : expand_mask(mask, B, T, S));
    const bool drop = training && dropout_p > 0.0f;
    const uint64_t seed = drop ? autograd::default_rng().next_u64() : 0;   // see nn::dropout
    const float keep_scale = 1.0f / (1.0f - dropout_p);
    // keep factor of weight (bh, t, s): 0 if dropped, 1/(1-p) if kept, 1 without dropout
    auto keep = [=](int64_t i) { return !drop ? 1.0f : (counter_uniform(seed, i) < dropout_p ? 0.0f : keep_scale); };

    Tensor P = Tensor::empty({B, H, T, S});   // attention weights
    Tensor out = Tensor::empty({B, T, D});    // heads side by side, already "concatenated"
    const float *pq = q.data(), *pk = k.data(), *pv = v.data();
    float *pp = P.data(), *po = out.data();
    #pragma omp parallel if (autograd::worth_threads(B * H * T * S * Dk, autograd::kAttentionParallelMin))
    {
        autograd::FloatBuffer dropped(drop ? T * S : 0);   // per-thread scratch
        #pragma omp for schedule(static)
        for (int64_t bh = 0; bh < B * H; bh++) {
            const int64_t b = bh / H, h = bh % H;
            const float *Q = pq + b * T * D + h * Dk, *K = pk + b * S * D + h * Dk, *Vh = pv + b * S * D + h * Dk;
            float* Pbh = pp + bh * T * S;
            // 1) scores = Q K^T / sqrt(Dk)                                   (T, S); scale applied in 2)
            gemm(false, true, T, S, Dk, Q, D, K, D, Pbh, S, false);
            // 2) softmax over the allowed keys of each row; masked keys get exactly 0
            for (int64_t t = 0; t < T; t++) {
                float* row = Pbh + t * S;
                const uint8_t* ok = allowed->empty() ? nullptr : allowed->data() + (b * T + t) * S;
                // a masked key's score becomes -inf, which exp() sends to exactly 0: no branch
                // per element (a branch on the mask mispredicts; these rows are only S long)
                constexpr float kNegInf = -std::numeric_limits<float>::infinity();
                float m = kNegInf;
                for (int64_t s = 0; s < S; s++) {
                    row[s] = !ok || ok[s] ? row[s] * scale : kNegInf;
                    m = std::max(m, row[s]);
                }
                if (m == kNegInf) {   // no allowed key: all zeros
                    for (int64_t s = 0; s < S; s++) row[s] = 0.0f;
                    continue;
                }
                float sum = 0.0f;
                for (int64_t s = 0; s < S; s++) {
                    row[s] = std::exp(row[s] - m);
                    sum += row[s];
                }
                const float inv = 1.0f / sum;
                for (int64_t s = 0; s < S; s++) row[s] *= inv;
            }
            // 3) out_h = dropout(P) V_h, written into columns [h*Dk, (h+1)*Dk) of out    (T, Dk)
            const float* Pused = Pbh;
            if (drop) {
                #pragma omp simd
                for (int64_t i = 0; i < T * S; i++) dropped[i] = Pbh[i] * keep(bh * T * S + i);
                Pused = dropped.data();
            }
            gemm(false, false, T, Dk, S, Pused, S, Vh, D, po + b * T * D + h * Dk, D, false);
        }
    }
    if (weights) *weights = P;

    // backward, per (b, h), with Pd = P * keep (dropout) and out = Pd V:
    //   dV  += Pd^T dO                          dPd = dO V^T,   dP = dPd * keep
    //   dSc  = P * (dP - rowsum(dP * P))        (softmax backward; masked P = 0 gives dSc = 0 there)
    //   dQ  += dSc K / sqrt(Dk),   dK += dSc^T Q / sqrt(Dk)       (Sc = Q K^T / sqrt(Dk))
    autograd::record(out, {q, k, v}, "attention", [B, H, T, S, D, Dk, scale, P, drop, keep](Node& self) {
        const float *pq = self.parent_data(0), *pk = self.parent_data(1), *pv = self.parent_data(2);
        const float *pp = P.data(), *dout = self.grad.data();
        float* dq = self.parent_grad(0);
        float* dk = self.parent_grad(1);
        float* dv = self.parent_grad(2);
        #pragma omp parallel if (autograd::worth_threads(B * H * T * S * Dk, autograd::kAttentionParallelMin))
        {
            autograd::FloatBuffer dP(T * S), Pd(drop ? T * S : 0), kf(drop ? T * S : 0);
            #pragma omp for schedule(static)
            for (int64_t bh = 0; bh < B * H; bh++) {
                const int64_t b = bh / H, h = bh % H, qo = b * T * D + h * Dk, ko = b * S * D + h * Dk;
                const float *Pbh = pp + bh * T * S, *dO = dout + qo;
                const float* Pused = Pbh;
                if (drop) {   // the keep factors, drawn again from the seed, once for both uses
                    #pragma omp simd
                    for (int64_t i = 0; i < T * S; i++) {
                        kf[i] = keep(bh * T * S + i);
                        Pd[i] = Pbh[i] * kf[i];
                    }
                    Pused = Pd.data();
                }
                if (dv) gemm(true, false, S, Dk, T, Pused, S, dO, D, dv + ko, D, true);
                if (!dq && !dk) continue;
                gemm(false, true, T, S, Dk, dO, D, pv + ko, D, dP.data(), S, false);
                for (int64_t t = 0; t < T; t++) {
                    float* d = dP.data() + t * S;
                    const float* p = Pbh + t * S;
                    if (drop)
                        for (int64_t s = 0; s < S; s++) d[s] *= kf[t * S + s];
                    float dot = 0.0f;
                    for (int64_t s = 0; s < S; s++) dot += d[s] * p[s];
                    for (int64_t s = 0; s < S; s++) d[s] = p[s] * (d[s] - dot) * scale;   // dSc, with the 1/sqrt(Dk)
                }
                if (dq) gemm(false, false, T, Dk, S, dP.data(), S, pk + ko, D, dq + qo, D, true);
                if (dk) gemm(true, false, S, Dk, T, dP.data(), S, pq + qo, D, dk + ko, D, true);
            }
        }
    });
    return out;
}

Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, int64_t H, const Mask& mask) {
    const int64_t B = q.size(0), T = q.size(1), S = k.size(1), D = q.size(2), Dk = D / H;
    // 1) split the heads: (B, T, D) -> (B, T, H, Dk) -> (B, H, T, Dk)
    const Tensor qh = autograd::transpose(q.reshape({B, T, H, Dk}), 1, 2);
    const Tensor kh = autograd::transpose(k.reshape({B, S, H, Dk}), 1, 2);
    const Tensor vh = autograd::transpose(v.reshape({B, S, H, Dk}), 1, 2);
    // 2) scores, masked, softmax, weighted sum of values
    Tensor scores = autograd::matmul(qh, kh, false, true) * (1.0f / std::sqrt(static_cast<float>(Dk)));   // (B, H, T, S)
    if (!mask.data.empty()) {
        Mask blocked = mask;                                                   // masked_fill fills where true
        for (auto& m : blocked.data) m = !m;
        if (blocked.dim() == 3) blocked.shape.insert(blocked.shape.begin() + 1, 1);   // (B, 1, T, S): all heads
        scores = autograd::masked_fill(scores, blocked, -std::numeric_limits<float>::infinity());
    }
    const Tensor x = autograd::matmul(autograd::softmax(scores), vh);         // (B, H, T, Dk)
    // 3) concatenate the heads: (B, H, T, Dk) -> (B, T, H, Dk) -> (B, T, D)
    return autograd::transpose(x, 1, 2).reshape({B, T, D});
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
    // 1) project: q, k and v each (B, ., D); head h lives in columns [h*Dk, (h+1)*Dk)
    const Tensor q = w_q->forward(query);   // (B, T, D)
    const Tensor k = w_k->forward(key);     // (B, S, D)
    const Tensor v = w_v->forward(value);   // (B, S, D)
    // 2) attend in every head at once; the output has the heads side by side (concatenated)
    Tensor weights;
    const Tensor x = scaled_dot_product_attention(q, k, v, h, mask, dropout_p, is_training(), &weights);   // (B, T, D)
    last_attention = weights;                                                                             // (B, H, T, S)
    // 3) final projection mixes the heads
    return w_o->forward(x);   // (B, T, D)
}

}  // namespace nn
