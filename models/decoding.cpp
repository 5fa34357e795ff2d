#include "models/decoding.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "models/batch.h"

namespace models {

using autograd::NoGradGuard;
using autograd::shape_str;

// log-probabilities of the next token after each row of ys (n, t): (n, V)
static Tensor next_log_probs(Transformer& model, const Tensor& memory, const Mask& src_mask, const Tokens& ys) {
    const int64_t n = ys.size(0), t = ys.size(1);
    Tensor out = model.decode(memory, src_mask, ys, subsequent_mask(t));             // (n, t, D)
    Tensor last = autograd::narrow(out, 1, t - 1, 1).reshape({n, model.cfg.d_model});   // (n, D)
    return model.generator->log_probs(last);                                          // (n, V)
}

Tokens greedy_decode(Transformer& model, const Tokens& src, const Mask& src_mask, const GreedyOptions& opt) {
    if (src.dim() != 2) throw std::invalid_argument("greedy_decode: src must be (B, S), got " + shape_str(src.shape));
    if (opt.max_len < 1) throw std::invalid_argument("greedy_decode: max_len must be >= 1, got " + std::to_string(opt.max_len));
    NoGradGuard no_grad;
    const int64_t B = src.size(0);
    const Tensor memory = model.encode(src, src_mask);   // (B, S, D)
    std::vector<std::vector<int32_t>> rows(B, std::vector<int32_t>{opt.bos});
    std::vector<bool> done(B, false);
    for (int64_t t = 1; t < opt.max_len; t++) {
        const Tokens ys = pad_rows(rows, opt.pad);        // (B, t)
        const Tokens next = autograd::argmax(next_log_probs(model, memory, src_mask, ys), -1);   // (B,)
        bool all_done = true;
        for (int64_t b = 0; b < B; b++) {
            rows[b].push_back(done[b] ? opt.pad : next[b]);
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

Hypothesis beam_search(Transformer& model, const Tokens& src, const Mask& src_mask, const BeamSearchOptions& opt) {
    if (src.dim() != 2 || src.size(0) != 1)
        throw std::invalid_argument("beam_search: src must be one sentence (1, S), got " + shape_str(src.shape));
    if (opt.beam_size < 1 || opt.max_len < 1)
        throw std::invalid_argument("beam_search: beam_size and max_len must be >= 1");
    NoGradGuard no_grad;
    const Tensor memory1 = model.encode(src, src_mask);   // (1, S, D)
    std::vector<Hypothesis> live = {{{opt.bos}, 0.0, 0.0}}, finished;
    const size_t K = static_cast<size_t>(opt.beam_size);
    for (int64_t t = 1; t < opt.max_len && !live.empty() && finished.size() < K; t++) {
        // 1) score every continuation of every live hypothesis
        const int64_t n = static_cast<int64_t>(live.size());
        std::vector<std::vector<int32_t>> prefixes;
        for (const Hypothesis& h : live) prefixes.push_back(h.tokens);
        const Tokens ys = pad_rows(prefixes, 0);                                              // (n, t)
        const Tokens rep = Tokens::full({n}, 0);
        const Tensor memory = autograd::index_select(memory1, 0, rep);                       // (n, S, D)
        Mask mask = src_mask;
        mask.shape[0] = n;
        mask.data.clear();
        for (int64_t i = 0; i < n; i++) mask.data.insert(mask.data.end(), src_mask.data.begin(), src_mask.data.end());
        const Tensor lp = next_log_probs(model, memory, mask, ys);                           // (n, V)
        const int64_t V = lp.size(1);
        // 2) keep the K best (hypothesis, token) pairs by total log-probability
        struct Cand { double lp; int64_t beam; int32_t tok; };
        std::vector<Cand> cands;
        cands.reserve(n * V);
        for (int64_t i = 0; i < n; i++)
            for (int64_t v = 0; v < V; v++) cands.push_back({live[i].log_prob + lp.data()[i * V + v], i, static_cast<int32_t>(v)});
        const size_t keep = std::min(K, cands.size());
        std::partial_sort(cands.begin(), cands.begin() + keep, cands.end(), [](const Cand& a, const Cand& b) {
            return a.lp != b.lp ? a.lp > b.lp : (a.beam != b.beam ? a.beam < b.beam : a.tok < b.tok);   // deterministic ties
        });
        // 3) a candidate ending in eos is finished; the others continue
        std::vector<Hypothesis> next;
        for (size_t c = 0; c < keep; c++) {
            Hypothesis h = live[cands[c].beam];
            h.tokens.push_back(cands[c].tok);
            h.log_prob = cands[c].lp;
            h.score = length_normalized(h.log_prob, h.tokens.size() - 1, opt.length_penalty);
            (cands[c].tok == opt.eos ? finished : next).push_back(std::move(h));
        }
        live = std::move(next);
    }
    // Stopped by max_len before K hypotheses finished: the unfinished ones compete too. (When K
    // did finish, the live ones are mere prefixes and stay out.)
    if (finished.size() < K)
        for (Hypothesis& h : live) finished.push_back(std::move(h));
    return *std::max_element(finished.begin(), finished.end(),
                             [](const Hypothesis& a, const Hypothesis& b) { return a.score < b.score; });
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
