// Turning a trained model into output sequences: greedy decoding and beam search.
// Both run the decoder once per output position over the whole prefix (no key/value cache:
// simpler to read, and fast enough for the sequence lengths of the examples).
#pragma once
#include <vector>

#include "models/transformer.h"

namespace models {

struct GreedyOptions {
    int64_t max_len = 50;   // L: the longest output, bos included
    int32_t bos = 1;        // the decoder's first input
    int32_t eos = -1;       // -1: no end symbol, every row runs to max_len
    int32_t pad = 0;        // fills a row after its eos
};

// Greedy: at every step append the single most likely next token.
// src (B, S), src_mask (B, 1, S) -> (B, L) ids, L <= max_len, each row starting with bos. Once a
// row has produced eos, the rest of it is filled with pad; decoding stops early when all rows have.
Tokens greedy_decode(Transformer& model, const Tokens& src, const Mask& src_mask, const GreedyOptions& opt);

struct BeamSearchOptions {
    int beam_size = 4;            // K: hypotheses kept at every step
    int64_t max_len = 50;         // including bos
    int32_t bos = 1;
    int32_t eos = -1;             // -1: no end symbol, every hypothesis runs to max_len
    float length_penalty = 0.0f;  // alpha of GNMT (Wu et al. 2016): score = log_prob / ((5 + len) / 6)^alpha;
                                  // 0 compares raw log-probabilities, which favours short outputs
};

struct Hypothesis {
    std::vector<int32_t> tokens;  // bos ... [eos]
    double log_prob = 0.0;        // sum of the log-probabilities of tokens[1:]
    double score = 0.0;           // log_prob after the length penalty
};

// Beam search for one source sentence: src (1, S), src_mask (1, 1, S). At every step the K best
// continuations (by log-probability) are kept; those ending in eos are finished, the others stay
// live. Stops when K hypotheses have finished, or at max_len (then the live ones count as
// finished too), and returns the finished hypothesis with the best score.
Hypothesis beam_search(Transformer& model, const Tokens& src, const Mask& src_mask, const BeamSearchOptions& opt);

// The model's log-probability of a whole sequence (bos first), computed in one teacher-forced
// pass: sum over t of log p(tokens[t] | tokens[<t], src). For comparing decoders.
double sequence_log_prob(Transformer& model, const Tokens& src, const Mask& src_mask, const std::vector<int32_t>& tokens);

}  // namespace models
