// Soft attention, as Bahdanau, Cho & Bengio (2014) gave it to the RNN encoder-decoder: at every
// output step the decoder looks at all of the encoder's states h_1..h_S and takes its own context
//     C_i = sum_j alpha_ij h_j
// instead of one fixed vector for the whole sentence. The weights come in three stages:
//   1) score   e_ij = score(s, h_j): how well the decoder's query s (its state) matches each h_j
//   2) softmax alpha_ij = exp(e_ij) / sum_k exp(e_ik), padded positions j left out (weight 0)
//   3) sum     C_i = sum_j alpha_ij h_j
// Four scores (Score below), named as the papers name them: dot and general from Luong, Pham &
// Manning (2015), "Effective Approaches to Attention-based Neural Machine Translation", section
// 3.1; additive from Bahdanau, Cho & Bengio (2014), "Neural Machine Translation by Jointly
// Learning to Align and Translate", appendix A.1.2; cosine is this project's. The Transformer's
// scaled dot-product attention (nn/attention.h) is stage 1's dot product scaled, over many
// queries and heads at once.
#pragma once
#include <memory>
#include <string>

#include "nn/linear.h"
#include "nn/module.h"

namespace nn {

// Each score compares the query s with the keys k_j, which keys() makes from the states h_j once
// per sentence (the values are always the states themselves):
enum class Score {
    dot,        // e_ij = s . h_j                  Luong et al.'s "dot": no parameters, the keys are the
                //                                 states, so s and h_j must be equally wide (Q = Dv)
    general,    // e_ij = s . W h_j                Luong et al.'s "general": k_j = W h_j (Q, Dv), no bias
                //                                 (it would add s . b to every e_ij alike: no weight changes)
    cosine,     // e_ij = tau * cos(s, W h_j + b)  this project's: tau = e^log_temperature learned; cosines
                //                                 lie in [-1, 1], and a softmax over S numbers in [-1, 1] puts
                //                                 at most e^2 / (e^2 + S - 1) on any one of them
    additive,   // e_ij = v . tanh(W_q s + U h_j + b)   Bahdanau et al.'s one-layer MLP ("v_a^T tanh(W_a s + U_a h)",
                //                                 biases left out of their equations): k_j = U h_j + b (A, Dv)
};
// "dot", "general", "cosine", "additive"; throws std::invalid_argument listing them for any other name.
Score score_from_name(const std::string& name);
const char* score_name(Score s);

class SoftAttention : public Module {
public:
    // query_size Q (the decoder's state), value_size Dv (the encoder states' width), attention_size
    // A (the keys' width: Q for general and cosine, Dv = Q for dot, any for additive). Throws
    // std::invalid_argument naming the sizes when they do not fit the score.
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
    std::shared_ptr<Linear> w_key;     // (A, Dv): general W (no bias), cosine W and b, additive U and b; none for dot
    std::shared_ptr<Linear> w_query;   // (A, Q), additive only: W_q s, no bias
    Tensor v;                          // (A,), additive only
    Tensor log_temperature;            // (), cosine only: tau = e^log_temperature, starting at tau = 10
};

}  // namespace nn
