// Soft attention, as Bahdanau, Cho & Bengio (2014) gave it to the RNN encoder-decoder: at every
// output step the decoder looks at all of the encoder's states h_1..h_S and takes its own context
//     C_i = sum_j alpha_ij h_j
// instead of one fixed vector for the whole sentence. The weights come in three stages:
//   1) score   e_ij = score(q_i, h_j): how well the decoder's query q_i (its state) matches each h_j
//   2) softmax alpha_ij = exp(e_ij) / sum_k exp(e_ik), padded positions j left out (weight 0)
//   3) sum     C_i = sum_j alpha_ij h_j
// Three scores (Score below): a dot product, a cosine similarity with a learned temperature, and a
// small MLP (Bahdanau's "additive" attention). The Transformer's scaled dot-product attention
// (nn/attention.h) is stage 1's dot product scaled, over many queries and heads at once.
#pragma once
#include <memory>
#include <string>

#include "nn/linear.h"
#include "nn/module.h"

namespace nn {

enum class Score {
    dot,        // e_ij = q_i . k_j
    cosine,     // e_ij = tau * cos(q_i, k_j), tau = e^log_temperature learned: cosines lie in [-1, 1], and a
                // softmax over S numbers in [-1, 1] puts at most e^2 / (e^2 + S - 1) on any one of them
    additive,   // e_ij = v . tanh(W_q q_i + k_j)   (Bahdanau et al.'s MLP)
};
// "dot", "cosine", "additive"; throws std::invalid_argument listing them for any other name.
Score score_from_name(const std::string& name);
const char* score_name(Score s);

// The keys k_j are the encoder's states seen through a learned map, k_j = W_k h_j + b_k (A wide),
// computed once per sentence (keys()); the values are the states themselves. The query is the
// decoder's state q_i (Q wide): used as it is by dot and cosine (so A = Q), through W_q by additive.
class SoftAttention : public Module {
public:
    // query_size Q, value_size Dv (the encoder states' width), attention_size A (= Q for dot and cosine)
    SoftAttention(Score score, int64_t query_size, int64_t value_size, int64_t attention_size);

    Tensor keys(const Tensor& values) const;   // values (B, S, Dv) -> keys (B, S, A): once per sentence

    struct Output {
        Tensor context;   // (B, Dv): C_i
        Tensor weights;   // (B, S): alpha_i; exactly 0 where the source is padding
    };
    // One output step for B rows at once: query (B, Q), keys (B, S, A), values (B, S, Dv),
    // src_mask (B, 1, S) (1 = a real source position; empty: every position is real).
    Output forward(const Tensor& query, const Tensor& keys, const Tensor& values, const Mask& src_mask) const;

    Score score;
    int64_t query_size, value_size, attention_size;
    std::shared_ptr<Linear> w_key;     // (A, Dv): k_j = W_k h_j + b_k
    std::shared_ptr<Linear> w_query;   // (A, Q), additive only: W_q q_i
    Tensor v;                          // (A,), additive only
    Tensor log_temperature;            // (), cosine only: tau = e^log_temperature, starting at tau = 10
};

}  // namespace nn
