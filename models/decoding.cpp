#include "models/decoding.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/frozen_weights.h"
#include "models/batch.h"
#include "models/decoder_cache.h"

namespace models {

using autograd::NoGradGuard;
using autograd::shape_str;

// The n rows being decoded, each growing by one token per step, and what the next token's
// log-probabilities are after each: the one place where the two ways of decoding differ.
class NextTokenLogProbs {
public:
    // memory (n, S, D) from Transformer::encode, src_mask (n, 1, S); the rows start empty, at
    // most max_positions tokens are appended to each, and there are at most max_rows rows at once.
    NextTokenLogProbs(Transformer& model, const Tensor& memory, const Mask& src_mask, int64_t max_positions, int64_t max_rows,
                      bool kv_cache, int64_t* positions)
        : model_(model), kv_cache_(kv_cache), positions_(positions), memory_(memory), src_mask_(src_mask),
          prefixes_(memory.size(0)) {
        if (kv_cache) cache_ = start_decoder_cache(model, memory, src_mask, max_positions, max_rows);
    }

    // Appends tokens (n, 1) to the rows -> log p(next token | row so far, src) (n, V).
    Tensor append(const Tokens& tokens) {
        if (kv_cache_) {
            if (positions_) *positions_ += tokens.size(0);                                        // one per row
            return model_.generator->log_probs(decode_step(model_, cache_, tokens));              // (n, V)
        }
        // recomputing: the decoder over the whole prefix, of which the last position is kept
        for (size_t i = 0; i < prefixes_.size(); i++) prefixes_[i].push_back(tokens[static_cast<int64_t>(i)]);
        const Tokens ys = pad_rows(prefixes_, 0);                                                 // (n, t)
        const int64_t n = ys.size(0), t = ys.size(1);
        if (positions_) *positions_ += n * t;                                                     // t per row
        const Tensor out = model_.decode(memory_, src_mask_, ys, subsequent_mask(t));             // (n, t, D)
        const Tensor last = autograd::narrow(out, 1, t - 1, 1).reshape({n, model_.cfg.d_model});  // (n, D)
        return model_.generator->log_probs(last);                                                 // (n, V)
    }

    // Row i continues row from[i] (beam search keeping other hypotheses); rows may repeat or go.
    void reorder(const std::vector<int64_t>& from) {
        if (kv_cache_) return cache_.reorder(from);   // no copy of the memory's keys and values
        // recomputing, the reference: the memory's rows are gathered with the hypotheses, as plain as it gets
        const Tokens ids(std::vector<int32_t>(from.begin(), from.end()), {static_cast<int64_t>(from.size())});
        src_mask_ = select_mask_rows(src_mask_, from);                                            // (n', 1, S)
        memory_ = autograd::index_select(memory_, 0, ids);                                        // (n', S, D)
        std::vector<std::vector<int32_t>> prefixes;
        for (int64_t i : from) prefixes.push_back(prefixes_[i]);
        prefixes_ = std::move(prefixes);
    }

private:
    // no weight changes while decoding: bf16 Linear products pack each weight once, not per step
    autograd::FrozenWeightsGuard frozen_weights_;
    Transformer& model_;
    bool kv_cache_;
    int64_t* positions_;                              // the work done, when the caller counts it
    DecoderCache cache_;                              // cached: keys and values of every layer
    Tensor memory_;                                   // recomputing: (n, S, D), and its mask (n, 1, S)
    Mask src_mask_;
    std::vector<std::vector<int32_t>> prefixes_;      // recomputing: every row's tokens so far
};

Tokens greedy_decode(Transformer& model, const Tokens& src, const Mask& src_mask, const GreedyOptions& opt) {
    if (src.dim() != 2) throw std::invalid_argument("greedy_decode: src must be (B, S), got " + shape_str(src.shape));
    if (opt.max_len < 1) throw std::invalid_argument("greedy_decode: max_len must be >= 1, got " + std::to_string(opt.max_len));
    NoGradGuard no_grad;
    const int64_t B = src.size(0);
    // the last token is never fed back: the decoder runs on at most max_len - 1 positions
    NextTokenLogProbs next_log_probs(model, model.encode(src, src_mask), src_mask, opt.max_len - 1, B, opt.kv_cache, opt.positions);
    std::vector<std::vector<int32_t>> rows(B, std::vector<int32_t>{opt.bos});
    std::vector<bool> done(B, false);
    Tokens newest = Tokens::full({B, 1}, opt.bos);                                         // (B, 1)
    for (int64_t t = 1; t < opt.max_len; t++) {
        const Tokens next = autograd::argmax(next_log_probs.append(newest), -1);          // (B,)
        bool all_done = true;
        for (int64_t b = 0; b < B; b++) {
            rows[b].push_back(done[b] ? opt.pad : next[b]);
            newest[b] = rows[b].back();
            done[b] = done[b] || next[b] == opt.eos;
            all_done = all_done && done[b];
        }
        if (all_done) break;
    }
    return pad_rows(rows, opt.pad);                       // (B, L)
}

static double length_normalized(double log_prob, size_t len, float alpha) {
    return alpha == 0.0f ? log_prob : log_prob / std::pow((5.0 + static_cast<double>(len)) / 6.0, alpha);
}

std::vector<Hypothesis> beam_search_batch(Transformer& model, const Tokens& src, const Mask& src_mask,
                                          const BeamSearchOptions& opt) {
    if (src.dim() != 2) throw std::invalid_argument("beam_search: src must be (B, S), got " + shape_str(src.shape));
    if (opt.beam_size < 1 || opt.max_len < 1)
        throw std::invalid_argument("beam_search: beam_size and max_len must be >= 1");
    NoGradGuard no_grad;
    const int64_t B = src.size(0);
    const size_t K = static_cast<size_t>(opt.beam_size);
    // Row r of the decoder call is one live hypothesis; the rows of sentence b are live[b], in
    // order, after those of sentences 0..b-1. A finished sentence has no live hypothesis, no row.
    NextTokenLogProbs next_log_probs(model, model.encode(src, src_mask), src_mask, opt.max_len - 1, B * opt.beam_size,
                                     opt.kv_cache, opt.positions);   // row b: sentence b; at most max_len - 1 positions, as in greedy
    std::vector<std::vector<Hypothesis>> live(B, {{{opt.bos}, 0.0, 0.0}}), finished(B);
    Tokens newest = Tokens::full({B, 1}, opt.bos);                                                    // (n, 1)
    for (int64_t t = 1; t < opt.max_len && newest.size(0) > 0; t++) {
        // 1) score every continuation of every live hypothesis of every sentence
        const Tensor lp = next_log_probs.append(newest);                                              // (n, V)
        const int64_t V = lp.size(1);
        std::vector<int64_t> from;      // the rows that continue, and their newest tokens
        std::vector<int32_t> tokens;
        int64_t row0 = 0;               // sentence b's first row
        for (int64_t b = 0; b < B; b++) {
            const int64_t n = static_cast<int64_t>(live[b].size());
            if (n == 0) continue;
            // 2) keep the sentence's K best (hypothesis, token) pairs by total log-probability
            struct Cand { double lp; int64_t beam; int32_t tok; };
            std::vector<Cand> cands;
            cands.reserve(n * V);
            for (int64_t i = 0; i < n; i++)
                for (int64_t v = 0; v < V; v++)
                    cands.push_back({live[b][i].log_prob + lp.data()[(row0 + i) * V + v], i, static_cast<int32_t>(v)});
            const size_t keep = std::min(K, cands.size());
            std::partial_sort(cands.begin(), cands.begin() + keep, cands.end(), [](const Cand& x, const Cand& y) {
                return x.lp != y.lp ? x.lp > y.lp : (x.beam != y.beam ? x.beam < y.beam : x.tok < y.tok);   // deterministic ties
            });
            // 3) a candidate ending in eos is finished; the others continue
            std::vector<Hypothesis> next;
            std::vector<int64_t> next_from;
            for (size_t c = 0; c < keep; c++) {
                Hypothesis h = live[b][cands[c].beam];
                h.tokens.push_back(cands[c].tok);
                h.log_prob = cands[c].lp;
                h.score = length_normalized(h.log_prob, h.tokens.size() - 1, opt.length_penalty);
                if (cands[c].tok == opt.eos) {
                    finished[b].push_back(std::move(h));
                } else {
                    next.push_back(std::move(h));
                    next_from.push_back(row0 + cands[c].beam);
                }
            }
            row0 += n;
            // 4) K finished hypotheses end the sentence: its live ones are mere prefixes, and go
            live[b] = finished[b].size() < K ? std::move(next) : std::vector<Hypothesis>();
            for (size_t i = 0; i < live[b].size(); i++) {
                from.push_back(next_from[i]);
                tokens.push_back(live[b][i].tokens.back());
            }
        }
        next_log_probs.reorder(from);
        newest = Tokens(tokens, {static_cast<int64_t>(tokens.size()), 1});                        // (n', 1)
    }
    std::vector<Hypothesis> best(B);
    for (int64_t b = 0; b < B; b++) {
        // Stopped by max_len before K hypotheses finished: the unfinished ones compete too.
        for (Hypothesis& h : live[b]) finished[b].push_back(std::move(h));
        best[b] = *std::max_element(finished[b].begin(), finished[b].end(),
                                    [](const Hypothesis& x, const Hypothesis& y) { return x.score < y.score; });
    }
    return best;
}

Hypothesis beam_search(Transformer& model, const Tokens& src, const Mask& src_mask, const BeamSearchOptions& opt) {
    if (src.dim() != 2 || src.size(0) != 1)
        throw std::invalid_argument("beam_search: src must be one sentence (1, S), got " + shape_str(src.shape));
    return beam_search_batch(model, src, src_mask, opt)[0];
}

double sequence_log_prob(Transformer& model, const Tokens& src, const Mask& src_mask, const std::vector<int32_t>& tokens) {
    if (tokens.size() < 2) return 0.0;
    NoGradGuard no_grad;
    const int64_t t = static_cast<int64_t>(tokens.size()) - 1;
    const Tokens ys(std::vector<int32_t>(tokens.begin(), tokens.end() - 1), {1, t});     // (1, t)
    const Tensor memory = model.encode(src, src_mask);
    const Tensor lp = model.generator->log_probs(model.decode(memory, src_mask, ys, subsequent_mask(t)));   // (1, t, V)
    const int64_t V = lp.size(-1);
    double total = 0.0;
    for (int64_t i = 0; i < t; i++) total += lp.data()[i * V + tokens[i + 1]];
    return total;
}

}  // namespace models
