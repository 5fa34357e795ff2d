#include "nn/soft_attention.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "nn/init.h"

namespace nn {

using autograd::shape_str;

Score score_from_name(const std::string& name) {
    if (name == "dot") return Score::dot;
    if (name == "general") return Score::general;
    if (name == "cosine") return Score::cosine;
    if (name == "additive") return Score::additive;
    throw std::invalid_argument("unknown attention score '" + name + "' (dot, general, cosine or additive)");
}

const char* score_name(Score s) {
    switch (s) {
        case Score::dot: return "dot";
        case Score::general: return "general";
        case Score::cosine: return "cosine";
        case Score::additive: return "additive";
    }
    return "?";
}

SoftAttention::SoftAttention(Score score_, int64_t query_size_, int64_t value_size_, int64_t attention_size_)
    : score(score_), query_size(query_size_), value_size(value_size_), attention_size(attention_size_) {
    const std::string sizes = "query_size " + std::to_string(query_size) + ", value_size " + std::to_string(value_size) +
                              ", attention_size " + std::to_string(attention_size);
    if (query_size <= 0 || value_size <= 0 || attention_size <= 0)
        throw std::invalid_argument("SoftAttention: sizes must be positive, got " + sizes);
    if (score == Score::dot && (value_size != query_size || attention_size != query_size))
        throw std::invalid_argument("SoftAttention: a dot score compares the query with the values themselves (s . h_j), so " +
                                    std::string("query_size, value_size and attention_size must be equal, got ") + sizes +
                                    " (a general score's W maps one width to the other)");
    if ((score == Score::general || score == Score::cosine) && attention_size != query_size)
        throw std::invalid_argument(std::string("SoftAttention: a ") + score_name(score) + " score compares the query with the keys, so " +
                                    "attention_size (" + std::to_string(attention_size) + ") must equal query_size (" +
                                    std::to_string(query_size) + ")");
    // the keys' map: none for dot; general's W without a bias (s . b would add the same to every e_j)
    if (score != Score::dot)
        w_key = register_module("w_key", std::make_shared<Linear>(value_size, attention_size, LinearOptions{.bias = score != Score::general}));
    if (score == Score::additive) {
        w_query = register_module("w_query", std::make_shared<Linear>(query_size, attention_size, LinearOptions{.bias = false}));
        v = register_parameter("v", Tensor::empty({attention_size}));
        init::uniform_(v, -1.0f / std::sqrt(float(attention_size)), 1.0f / std::sqrt(float(attention_size)));
    }
    if (score == Score::cosine) log_temperature = register_parameter("log_temperature", Tensor::scalar(std::log(10.0f)));
}

Tensor SoftAttention::keys(const Tensor& values) const {
    if (values.dim() != 3 || values.size(2) != value_size)
        throw std::invalid_argument("SoftAttention::keys: values " + shape_str(values.shape()) + " should be (B, S, " +
                                    std::to_string(value_size) + ")");
    return w_key ? w_key->forward(values) : values;   // (B, S, A); dot's keys are the states themselves
}

// x / |x| over the last dim; eps keeps a zero vector finite (it stays zero).
static Tensor unit(const Tensor& x) { return x / sqrt(sum(x * x, -1, true) + 1e-12f); }

SoftAttention::Output SoftAttention::forward(const Tensor& query, const Tensor& keys, const Tensor& values, const Mask& src_mask) const {
    const bool ok = query.dim() == 2 && query.size(1) == query_size && keys.dim() == 3 && keys.size(0) == query.size(0) &&
                    keys.size(2) == attention_size && values.dim() == 3 && values.size(0) == keys.size(0) &&
                    values.size(1) == keys.size(1) && values.size(2) == value_size &&
                    (src_mask.data.empty() || src_mask.shape == Shape{keys.size(0), 1, keys.size(1)});
    if (!ok)
        throw std::invalid_argument("SoftAttention: expected query (B, " + std::to_string(query_size) + "), keys (B, S, " +
                                    std::to_string(attention_size) + "), values (B, S, " + std::to_string(value_size) +
                                    ") and src_mask (B, 1, S), got " + shape_str(query.shape()) + ", " + shape_str(keys.shape()) +
                                    ", " + shape_str(values.shape()) + " and " + shape_str(src_mask.shape));
    const int64_t B = keys.size(0), S = keys.size(1);
    // 1) score every source position j against the query
    Tensor e;
    switch (score) {
        case Score::dot:         // e_j = s . h_j (the keys are the states)
        case Score::general:     // e_j = s . W h_j (the keys are k_j = W h_j)
            e = matmul(keys, unsqueeze(query, 2)).reshape({B, S});                                     // (B, S)
            break;
        case Score::cosine:      // e_j = tau * (s / |s|) . (k_j / |k_j|)
            e = exp(log_temperature) * matmul(unit(keys), unsqueeze(unit(query), 2)).reshape({B, S});   // (B, S)
            break;
        case Score::additive: {  // e_j = v . tanh(W_q s + k_j), k_j = U h_j + b
            const Tensor q = w_query->forward(query);                                                     // (B, A)
            if (autograd::fused_kernels_enabled()) {   // fused: one pass, no (B, S, A) intermediates
                e = autograd::fused::additive_score(keys, q, v);                                          // (B, S)
                break;
            }
            e = matmul(tanh(keys + unsqueeze(q, 1)), v.reshape({attention_size, 1})).reshape({B, S});   // (B, S)
            break;
        }
    }
    // 2) softmax over the real positions: a padded one scores -inf, so its weight is exactly 0
    if (!src_mask.data.empty()) {
        Mask padding = src_mask;   // masked_fill fills where true: the padded positions
        for (auto& m : padding.data) m = !m;
        padding.shape = {B, S};
        e = masked_fill(e, padding, -std::numeric_limits<float>::infinity());   // (B, S)
    }
    const Tensor alpha = softmax(e);                                           // (B, S)
    // 3) the context: the values weighted by alpha
    const Tensor context = matmul(unsqueeze(alpha, 1), values).reshape({B, value_size});   // (B, Dv)
    return {context, alpha.detach()};
}

}  // namespace nn
