// Turning a trained model into output sequences: greedy decoding, sampling and beam search, each
// for a batch of sentences at once, for every model of models/ (the Seq2Seq interface, models/seq2seq.h).
//
// Every decoder produces one token per step. greedy_decode is the plain one: at every step it
// runs the whole model over the whole prefix again, exactly as in training, and keeps the last
// position's scores. A step costs t position-passes through the decoder, a whole output of L
// tokens 1 + 2 + ... + (L - 1) = L (L - 1) / 2. The others run the decoder on the newest position
// only (kv_cache = true, the default): the Transformer keeps the earlier positions' keys and values
// in a models::DecoderCache (models/decoder_cache.h), the recurrent models carry their state from
// step to step. A step costs one position-pass per row, a whole output L - 1. The same tokens:
// greedy_decode_cached gives greedy_decode's (tests/test_decoding.cpp). Their `positions` counts
// that work: each row of each step adds 1 position when cached, t when recomputing a prefix of t.
#pragma once
#include <vector>

#include "autograd/random.h"
#include "models/seq2seq.h"

namespace models {

struct GreedyOptions {
    int64_t max_len = 50;   // L: the longest output, bos included
    int32_t bos = 1;        // the decoder's first input
    int32_t eos = -1;       // -1: no end symbol, every row runs to max_len
    int32_t pad = 0;        // fills a row after its eos
};

// Greedy: at every step append the single most likely next token, recomputing the whole prefix
// (The Annotated Transformer's greedy_decode).
// src (B, S), src_mask (B, 1, S) -> (B, L) ids, L <= max_len, each row starting with bos. Once a
// row has produced eos, the rest of it is filled with pad; decoding stops early when all rows have.
Tokens greedy_decode(Seq2Seq& model, const Tokens& src, const Mask& src_mask, const GreedyOptions& opt);

// The same tokens, one position per step: the key/value cache of the Transformer, the carried
// state of a recurrent model. positions, when set, gets the decoder's work added.
Tokens greedy_decode_cached(Seq2Seq& model, const Tokens& src, const Mask& src_mask, const GreedyOptions& opt,
                            int64_t* positions = nullptr);

// One of the two, as kv_cache says, with the decoder's positions added to *positions either way
// (when set): what the examples' --no-kv-cache chooses between.
Tokens greedy_decode_counted(Seq2Seq& model, const Tokens& src, const Mask& src_mask, const GreedyOptions& opt, bool kv_cache,
                             int64_t* positions);

struct SampleOptions {
    int64_t max_len = 50;      // L: the longest output, bos included
    int32_t bos = 1;           // the decoder's first input
    int32_t eos = -1;          // -1: no end symbol, every row runs to max_len
    int32_t pad = 0;           // fills a row after its eos
    float temperature = 1.0f;  // T: p_i ∝ exp(z_i / T). 1: the model's own distribution; towards 0: greedy;
                               // large: towards uniform. Must be > 0
    int top_k = 0;             // draw among the k most likely tokens only, renormalised; 0: all V
    float top_p = 1.0f;        // nucleus (Holtzman et al. 2020): the fewest most likely tokens whose probability
                               // reaches top_p, renormalised; 1: all. In (0, 1]
    uint64_t seed = 0;         // the draws: row b's token at step t uses counter_uniform(seed, b * max_len + t)
    autograd::Rng* rng = nullptr;   // when set, the seed is drawn from it instead (one draw per call), so
                                    // that successive calls draw afresh
    bool kv_cache = true;      // false: recompute the whole prefix every step (the reference)
    int64_t* positions = nullptr;   // when set, gets the decoder's work added: the positions it ran
};

// Sampling: at every step draw the next token from the model's distribution, sharpened or
// flattened by the temperature and cut to the top_k (and top_p) most likely tokens.
// src (B, S), src_mask (B, 1, S) -> (B, L) ids, as greedy_decode_cached (its loop, its eos and pad). Each
// draw depends only on (seed, row, step): the same seed gives the same tokens on any number of
// threads, and a row's tokens do not depend on when the other rows end. Bad options (temperature
// <= 0, top_k < 0, top_p outside (0, 1]) throw std::invalid_argument naming the option and value.
Tokens sample_decode(Seq2Seq& model, const Tokens& src, const Mask& src_mask, const SampleOptions& opt);

// What sample_decode draws from, for one row of scores z (V) (logits or log-probabilities: the
// same, softmax is shift-invariant), using opt's temperature, top_k and top_p:
//   1) p_i = exp(z_i / T) / sum_j exp(z_j / T), the sum over the top_k largest z only, p_i = 0 outside
//   2) top_p < 1: keep the most likely tokens until their probability reaches top_p, renormalise
// Ties rank the lower id first, as argmax does. Returns p (V), summing to 1.
std::vector<double> sampling_probs(const float* z, int64_t V, const SampleOptions& opt);

// Inverse-CDF sampling: the first token whose cumulative probability exceeds u, u uniform in
// [0, 1). Token i is returned for u in [p_0 + ... + p_(i-1), p_0 + ... + p_i): with probability p_i.
int32_t sample_token(const std::vector<double>& p, float u);

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
