// Turning a trained model into output sequences: greedy decoding and beam search, each for a
// batch of sentences at once, for every model of models/ (the Seq2Seq interface, models/seq2seq.h:
// the decoder's state grows by a token per step and reorders with the hypotheses).
//
// Both produce one token per step. The Transformer does it in one of two ways (the options' kv_cache):
//   recomputing (kv_cache = false): run the whole decoder over the whole prefix and keep its last
//     position. The simplest thing that is correct; a step costs O(t) decoder passes of a
//     position, a whole output of T tokens O(T^2).
//   cached (kv_cache = true, the default): run the decoder on the newest position only, with the
//     earlier positions' keys and values kept in a models::DecoderCache (models/decoder_cache.h).
//     A step costs one position-pass: a whole output O(T). The same tokens (tests/test_decoding.cpp).
// The options' `positions` counts that work: each row of each step adds 1 position when cached,
// t when recomputing a prefix of t tokens, so a greedy output of L tokens (bos included) costs
// L - 1 positions against 1 + 2 + ... + (L - 1) = L (L - 1) / 2. The recurrent models carry their
// state from step to step: a step is one position per row either way.
#pragma once
#include <vector>

#include "models/seq2seq.h"

namespace models {

struct GreedyOptions {
    int64_t max_len = 50;   // L: the longest output, bos included
    int32_t bos = 1;        // the decoder's first input
    int32_t eos = -1;       // -1: no end symbol, every row runs to max_len
    int32_t pad = 0;        // fills a row after its eos
    bool kv_cache = true;   // false: recompute the whole prefix every step (the reference)
    int64_t* positions = nullptr;   // when set, gets the decoder's work added: the positions it ran
};

// Greedy: at every step append the single most likely next token.
// src (B, S), src_mask (B, 1, S) -> (B, L) ids, L <= max_len, each row starting with bos. Once a
// row has produced eos, the rest of it is filled with pad; decoding stops early when all rows have.
Tokens greedy_decode(Seq2Seq& model, const Tokens& src, const Mask& src_mask, const GreedyOptions& opt);

struct BeamSearchOptions {
    int beam_size = 4;            // K: hypotheses kept at every step
    int64_t max_len = 50;         // including bos
    int32_t bos = 1;
    int32_t eos = -1;             // -1: no end symbol, every hypothesis runs to max_len
    float length_penalty = 0.0f;  // alpha of GNMT (Wu et al. 2016): score = log_prob / ((5 + len) / 6)^alpha;
                                  // 0 compares raw log-probabilities, which favours short outputs
    bool kv_cache = true;         // false: recompute the whole prefix every step (the reference)
    int64_t* positions = nullptr; // when set, gets the decoder's work added: the positions it ran
};

struct Hypothesis {
    std::vector<int32_t> tokens;  // bos ... [eos]
    double log_prob = 0.0;        // sum of the log-probabilities of tokens[1:]
    double score = 0.0;           // log_prob after the length penalty
};

// Beam search for B source sentences at once: src (B, S) padded, src_mask (B, 1, S) -> B results.
// For each sentence, at every step the K best continuations (by log-probability) of its live
// hypotheses are kept; those ending in eos are finished, the others stay live. A sentence stops
// when K of its hypotheses have finished, or at max_len (then the live ones count as finished
// too), and yields its finished hypothesis with the best score. Every live hypothesis of every
// sentence still going is a row of one decoder call per step (at most B x K rows); a sentence's
// result is the one it gets decoded alone (tests/test_decoding.cpp).
std::vector<Hypothesis> beam_search_batch(Seq2Seq& model, const Tokens& src, const Mask& src_mask,
                                          const BeamSearchOptions& opt);

// The same for one sentence: src (1, S), src_mask (1, 1, S).
Hypothesis beam_search(Seq2Seq& model, const Tokens& src, const Mask& src_mask, const BeamSearchOptions& opt);

// The model's log-probability of a whole sequence (bos first), computed in one teacher-forced
// pass: sum over t of log p(tokens[t] | tokens[<t], src). For comparing decoders.
double sequence_log_prob(Seq2Seq& model, const Tokens& src, const Mask& src_mask, const std::vector<int32_t>& tokens);

}  // namespace models
