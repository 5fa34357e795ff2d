#include "models/decoding.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <string>

#include "autograd/frozen_weights.h"
#include "models/batch.h"
#include "models/transformer.h"

namespace models {

using autograd::NoGradGuard;
using autograd::shape_str;

// ---------------------------------------------------------------- greedy, as plain as it gets

static void check_decoding(const Tokens& src, int64_t max_len, const std::string& who) {
    if (src.dim() != 2) throw std::invalid_argument(who + ": src must be (B, S), got " + shape_str(src.shape));
    if (max_len < 1) throw std::invalid_argument(who + ": max_len must be >= 1, got " + std::to_string(max_len));
}

// Has every row of ys (B, t) produced eos?
static bool all_ended(const Tokens& ys, int32_t eos) {
    const int64_t B = ys.size(0), t = ys.size(1);
    for (int64_t b = 0; b < B; b++)
        if (std::find(&ys.data[b * t], &ys.data[b * t] + t, eos) == &ys.data[b * t] + t) return false;
    return true;
}

// ys (B, t) with next (B, 1) as a new last column -> (B, t + 1); a row that has ended gets pad.
static Tokens append_column(const Tokens& ys, const Tokens& next, int32_t eos, int32_t pad) {
    const int64_t B = ys.size(0), t = ys.size(1);
    Tokens out = Tokens::full({B, t + 1}, pad);   // (B, t + 1)
    for (int64_t b = 0; b < B; b++) {
        std::copy_n(&ys.data[b * t], t, &out.data[b * (t + 1)]);
        if (std::find(&ys.data[b * t], &ys.data[b * t] + t, eos) == &ys.data[b * t] + t) out[b * (t + 1) + t] = next[b];
    }
    return out;
}

Tokens greedy_decode(Seq2Seq& model, const Tokens& src, const Mask& src_mask, const GreedyOptions& opt) {
    check_decoding(src, opt.max_len, "greedy_decode");
    NoGradGuard no_grad;
    Tokens ys = Tokens::full({src.size(0), 1}, opt.bos);                                        // (B, 1): every row starts with bos
    for (int64_t t = 1; t < opt.max_len && !all_ended(ys, opt.eos); t++) {
        // the whole model over the whole prefix, as in training; the last position scores the next token
        const Tensor logits = model.logits(src, ys, src_mask, subsequent_mask(t));                   // (B, t, V)
        const Tensor log_probs = autograd::log_softmax(autograd::narrow(logits, 1, t - 1, 1));       // (B, 1, V)
        const Tokens next = autograd::argmax(log_probs, -1);                                         // (B, 1): the most likely
        ys = append_column(ys, next, opt.eos, opt.pad);                                              // (B, t + 1)
    }
    return ys;
}

// ---------------------------------------------------------------- one position per step

// What the cached decoders share: every row starts with bos and gets one token per step, the one
// `choose(log_probs (B, V), t)` picks for it (B,); once a row has produced eos it gets pad.
template <class Choose>
static Tokens decode_token_by_token(Seq2Seq& model, const Tokens& src, const Mask& src_mask, const GreedyOptions& opt,
                                    bool kv_cache, int64_t* positions, const std::string& who, Choose choose) {
    check_decoding(src, opt.max_len, who);
    NoGradGuard no_grad;
    autograd::FrozenWeightsGuard frozen_weights;   // no weight changes while decoding: bf16 products pack each once
    const int64_t B = src.size(0);
    // the last token is never fed back: the decoder runs on at most max_len - 1 positions
    const std::unique_ptr<NextTokens> next_log_probs =
        model.start_decoding(src, src_mask, {.max_positions = opt.max_len - 1, .max_rows = B, .kv_cache = kv_cache,
                                             .positions = positions});
    std::vector<std::vector<int32_t>> rows(B, std::vector<int32_t>{opt.bos});
    std::vector<bool> done(B, false);
    Tokens newest = Tokens::full({B, 1}, opt.bos);                                         // (B, 1)
    for (int64_t t = 1; t < opt.max_len; t++) {
        const Tokens next = choose(next_log_probs->append(newest), t);                    // (B,)
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

Tokens greedy_decode_cached(Seq2Seq& model, const Tokens& src, const Mask& src_mask, const GreedyOptions& opt, int64_t* positions) {
    // the single most likely next token of every row
    return decode_token_by_token(model, src, src_mask, opt, true, positions, "greedy_decode",
                                 [](const Tensor& log_probs, int64_t) { return autograd::argmax(log_probs, -1); });
}

Tokens greedy_decode_counted(Seq2Seq& model, const Tokens& src, const Mask& src_mask, const GreedyOptions& opt, bool kv_cache,
                             int64_t* positions) {
    if (kv_cache) return greedy_decode_cached(model, src, src_mask, opt, positions);
    const Tokens out = greedy_decode(model, src, src_mask, opt);   // (B, W): W - 1 steps, step t over t positions
    const int64_t B = out.size(0), W = out.size(1);
    if (positions) *positions += B * W * (W - 1) / 2;
    return out;
}

// The options a reader can get wrong, each named with its value ("%g": 0.5, not 0.500000).
static void check_sampling(const SampleOptions& opt, const std::string& who) {
    const auto fail = [&](const char* what, double value) {
        char got[32];
        std::snprintf(got, sizeof got, "%g", value);
        throw std::invalid_argument(who + ": " + what + ", got " + got);
    };
    if (!(opt.temperature > 0.0f)) fail("temperature must be > 0", opt.temperature);   // (NaN too)
    if (opt.top_k < 0) fail("top_k must be >= 0 (0: every token)", opt.top_k);
    if (!(opt.top_p > 0.0f && opt.top_p <= 1.0f)) fail("top_p must be in (0, 1] (1: every token)", opt.top_p);
}

std::vector<double> sampling_probs(const float* z, int64_t V, const SampleOptions& opt) {
    check_sampling(opt, "sampling_probs");
    // the tokens from the most likely down (ties: the lower id first, as argmax), sorted only as
    // far as top_k and top_p need
    const int64_t k = opt.top_k > 0 ? std::min<int64_t>(opt.top_k, V) : V;
    std::vector<int32_t> order(V);
    std::iota(order.begin(), order.end(), 0);
    const auto more_likely = [z](int32_t a, int32_t b) { return z[a] != z[b] ? z[a] > z[b] : a < b; };
    if (opt.top_p < 1.0f) std::sort(order.begin(), order.end(), more_likely);
    else if (k < V) std::partial_sort(order.begin(), order.begin() + k, order.end(), more_likely);
    // 1) p_i ∝ exp(z_i / T) over the k best, 0 for the others. Subtracting the largest z first
    //    changes no p (it cancels in the normalisation) and keeps exp from overflowing at small T.
    const double z_max = *std::max_element(z, z + V);
    std::vector<double> p(V, 0.0);
    double sum = 0.0;
    for (int64_t j = 0; j < k; j++) sum += p[order[j]] = std::exp((z[order[j]] - z_max) / opt.temperature);
    for (int64_t j = 0; j < k; j++) p[order[j]] /= sum;   // renormalised over the k kept
    // 2) the nucleus: the fewest most likely tokens whose probability reaches top_p, renormalised
    if (opt.top_p < 1.0f) {
        double mass = 0.0;
        int64_t n = 0;
        while (n < k && mass < opt.top_p) mass += p[order[n++]];
        for (int64_t j = n; j < k; j++) p[order[j]] = 0.0;
        for (int64_t j = 0; j < n; j++) p[order[j]] /= mass;
    }
    return p;
}

int32_t sample_token(const std::vector<double>& p, float u) {
    double cumulative = 0.0;
    int32_t last = 0;   // the last token with any probability
    for (size_t i = 0; i < p.size(); i++) {
        if (p[i] == 0.0) continue;   // cut by top_k or top_p: never drawn, even at u = 0
        cumulative += p[i];
        last = static_cast<int32_t>(i);
        if (u < cumulative) return last;
    }
    return last;   // u at or above the total, which rounding can leave a hair under 1
}

Tokens sample_decode(Seq2Seq& model, const Tokens& src, const Mask& src_mask, const SampleOptions& opt) {
    check_sampling(opt, "sample_decode");
    // One 64-bit seed per call; draw (b, t) is a hash of it and b * max_len + t (counter_uniform,
    // as dropout's draws): no generator state passes from row to row or from thread to thread.
    const uint64_t seed = opt.rng ? opt.rng->next_u64() : opt.seed;
    const GreedyOptions steps{.max_len = opt.max_len, .bos = opt.bos, .eos = opt.eos, .pad = opt.pad};
    return decode_token_by_token(model, src, src_mask, steps, opt.kv_cache, opt.positions, "sample_decode", [&](const Tensor& log_probs, int64_t t) {
        const int64_t B = log_probs.size(0), V = log_probs.size(1);                       // (B, V)
        Tokens next = Tokens::full({B}, 0);                                                // (B,)
        for (int64_t b = 0; b < B; b++) {
            const float u = autograd::counter_uniform(seed, static_cast<uint64_t>(b * opt.max_len + t));
            next[b] = sample_token(sampling_probs(log_probs.data() + b * V, V, opt), u);
        }
        return next;
    });
}

static double length_normalized(double log_prob, size_t len, float alpha) {
    return alpha == 0.0f ? log_prob : log_prob / std::pow((5.0 + static_cast<double>(len)) / 6.0, alpha);
}

std::vector<Hypothesis> beam_search_batch(Seq2Seq& model, const Tokens& src, const Mask& src_mask,
                                          const BeamSearchOptions& opt) {
    if (src.dim() != 2) throw std::invalid_argument("beam_search: src must be (B, S), got " + shape_str(src.shape));
    if (opt.beam_size < 1 || opt.max_len < 1)
        throw std::invalid_argument("beam_search: beam_size and max_len must be >= 1");
    NoGradGuard no_grad;
    autograd::FrozenWeightsGuard frozen_weights;   // as in greedy_decode
    const int64_t B = src.size(0);
    const size_t K = static_cast<size_t>(opt.beam_size);
    // Row r of the decoder call is one live hypothesis; the rows of sentence b are live[b], in
    // order, after those of sentences 0..b-1. A finished sentence has no live hypothesis, no row.
    // Row b starts as sentence b; at most max_len - 1 positions, as in greedy.
    const std::unique_ptr<NextTokens> next_log_probs =
        model.start_decoding(src, src_mask, {.max_positions = opt.max_len - 1, .max_rows = B * opt.beam_size,
                                             .kv_cache = opt.kv_cache, .positions = opt.positions});
    std::vector<std::vector<Hypothesis>> live(B, {{{opt.bos}, 0.0, 0.0}}), finished(B);
    Tokens newest = Tokens::full({B, 1}, opt.bos);                                                    // (n, 1)
    for (int64_t t = 1; t < opt.max_len && newest.size(0) > 0; t++) {
        // 1) score every continuation of every live hypothesis of every sentence
        const Tensor lp = next_log_probs->append(newest);                                             // (n, V)
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
        next_log_probs->reorder(from);
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

Hypothesis beam_search(Seq2Seq& model, const Tokens& src, const Mask& src_mask, const BeamSearchOptions& opt) {
    if (src.dim() != 2 || src.size(0) != 1)
        throw std::invalid_argument("beam_search: src must be one sentence (1, S), got " + shape_str(src.shape));
    return beam_search_batch(model, src, src_mask, opt)[0];
}

double sequence_log_prob(Seq2Seq& model, const Tokens& src, const Mask& src_mask, const std::vector<int32_t>& tokens) {
    if (tokens.size() < 2) return 0.0;
    NoGradGuard no_grad;
    const int64_t t = static_cast<int64_t>(tokens.size()) - 1;
    const Tokens ys(std::vector<int32_t>(tokens.begin(), tokens.end() - 1), {1, t});     // (1, t)
    const Tensor lp = autograd::log_softmax(model.logits(src, ys, src_mask, subsequent_mask(t)));   // (1, t, V)
    const int64_t V = lp.size(-1);
    double total = 0.0;
    for (int64_t i = 0; i < t; i++) total += lp.data()[i * V + tokens[i + 1]];
    return total;
}

}  // namespace models
