// The figures of chapter 14, drawn from trained models: the copy task's attention and a
// beam-search tree of the translation model.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "examples/common/saved_model.h"
#include "examples/common/svg.h"
#include "examples/data/translation_data.h"
#include "examples/data/vocab.h"
#include "examples/figures/figures.h"
#include "models/decoding.h"
#include "models/transformer.h"

using autograd::Mask;
using autograd::Tensor;
using autograd::Tokens;
using data::Vocab;

namespace figures {

// ---------------------------------------------------------------- chapter 14: attention of the copy task

// The decoder's src_attn of a trained copy-task model on one sequence: the lesson is the diagonal
// (output position t reads source position t + 1, the symbol it must write next).
void copy_attention(const std::string& model_path, const std::string& path) {
    const common::SavedModel saved = common::load_saved_model(model_path);
    models::Transformer& model = dynamic_cast<models::Transformer&>(*saved.model);   // the copy task's Transformer
    model.eval();
    autograd::NoGradGuard no_grad;
    const std::vector<int32_t> seq = {1, 3, 7, 2, 9, 4, 4, 8, 5, 6};   // the start symbol 1, then 9 symbols
    const int64_t L = static_cast<int64_t>(seq.size());
    const Tokens src(seq, {1, L});
    const Mask src_mask = models::padding_mask(src, 0);
    const Tokens out = models::greedy_decode(model, src, src_mask, {.max_len = L, .bos = 1});   // (1, L)
    const Tokens tgt_in(std::vector<int32_t>(out.data.begin(), out.data.begin() + (L - 1)), {1, L - 1});
    model.keep_attention_weights(true);
    model.decode(model.encode(src, src_mask), src_mask, tgt_in, models::subsequent_mask(L - 1));
    std::vector<std::string> rows, cols;
    for (int32_t s : seq) cols.push_back(std::to_string(s));
    for (int64_t t = 1; t < L; t++) rows.push_back("writes " + std::to_string(out.data[t]));
    std::vector<common::Heatmap> maps;
    const auto& layers = *model.decoder->layers;
    for (size_t l = 0; l < layers.size(); l++) {
        const Tensor& w = layers[l].src_attn->last_attention;   // (1, H, T, S)
        const int64_t H = w.size(1), T = w.size(2), S = w.size(3);
        for (int64_t h = 0; h < H; h++)
            maps.push_back({"layer " + std::to_string(l + 1) + ", head " + std::to_string(h + 1), rows, cols,
                            std::vector<float>(w.data() + h * T * S, w.data() + (h + 1) * T * S)});
    }
    common::write_heatmaps(path, "Copy task: encoder-decoder attention (rows: output positions, columns: source)", maps,
                           static_cast<int>(layers[0].src_attn->heads));
    wrote(path);
}

// ---------------------------------------------------------------- chapter 14: a beam-search tree

// Beam search with K = 2 on one sentence, step by step as models::beam_search does it, keeping
// what a reader wants to see: at every step each live hypothesis's two best continuations, the
// two kept (blue; green when they end in <eos>) and the rest pruned (grey). The program checks
// that the winner is the one models::beam_search returns.
namespace {

struct TreeNode {
    int32_t token;
    double log_prob;   // of the whole hypothesis
    int parent;        // index into the tree, -1 for <bos>
    int step;
    bool kept = false, finished = false;
    std::vector<int32_t> tokens;
};

}  // namespace

void beam_tree(const std::string& model_path, const std::string& sentence, const std::string& path) {
    const common::SavedModel saved = common::load_saved_model(model_path);
    models::Transformer& model = dynamic_cast<models::Transformer&>(*saved.model);   // the translation example's Transformer
    const data::TextCodec codec = data::read_codec(saved.metadata, model_path);
    model.eval();
    autograd::NoGradGuard no_grad;
    const std::vector<int32_t> ids = codec.encode_source(codec.tokenize(sentence));
    const Tokens src(ids, {1, static_cast<int64_t>(ids.size())});
    const Mask src_mask = models::padding_mask(src, Vocab::PAD);
    const Tensor memory = model.encode(src, src_mask);   // (1, S, D)
    const size_t K = 2;
    const float alpha = 0.6f;   // the translation example's length penalty
    const int64_t max_len = codec.max_len + 2;

    std::vector<TreeNode> tree = {{Vocab::BOS, 0.0, -1, 0, true, false, {Vocab::BOS}}};
    std::vector<int> live = {0}, finished;
    for (int step = 1; step < max_len && !live.empty() && finished.size() < K; step++) {
        struct Cand { double lp; size_t beam; int32_t tok; };
        std::vector<Cand> cands;
        std::vector<int> shown;   // this step's nodes
        for (size_t b = 0; b < live.size(); b++) {
            const TreeNode& h = tree[live[b]];
            const int64_t t = static_cast<int64_t>(h.tokens.size());
            const Tensor x = model.decode(memory, src_mask, Tokens(h.tokens, {1, t}), models::subsequent_mask(t));
            const Tensor lp = model.generator->log_probs(x);   // (1, t, V)
            const int64_t V = lp.size(2);
            const float* last = lp.data() + (t - 1) * V;
            std::vector<Cand> mine;
            for (int64_t v = 0; v < V; v++) mine.push_back({h.log_prob + last[v], b, static_cast<int32_t>(v)});
            cands.insert(cands.end(), mine.begin(), mine.end());
        }
        const auto better = [](const Cand& a, const Cand& b) {
            return a.lp != b.lp ? a.lp > b.lp : (a.beam != b.beam ? a.beam < b.beam : a.tok < b.tok);
        };
        std::sort(cands.begin(), cands.end(), better);
        // show each live hypothesis's two best continuations; the first K overall are kept
        std::vector<int> per_beam(live.size(), 0), next;
        for (size_t c = 0; c < cands.size(); c++) {
            const bool kept = c < K;
            if (!kept && per_beam[cands[c].beam] >= 2) continue;
            if (!kept && std::all_of(per_beam.begin(), per_beam.end(), [](int n) { return n >= 2; })) break;
            per_beam[cands[c].beam]++;
            TreeNode n{cands[c].tok, cands[c].lp, live[cands[c].beam], step, kept, kept && cands[c].tok == Vocab::EOS,
                       tree[live[cands[c].beam]].tokens};
            n.tokens.push_back(n.token);
            tree.push_back(n);
            if (kept) (n.finished ? finished : next).push_back(static_cast<int>(tree.size()) - 1);
        }
        live = next;
    }
    if (finished.size() < K) finished.insert(finished.end(), live.begin(), live.end());
    const auto score = [&](int i) {
        return tree[i].log_prob / std::pow((5.0 + static_cast<double>(tree[i].tokens.size() - 1)) / 6.0, alpha);
    };
    const int best = *std::max_element(finished.begin(), finished.end(), [&](int a, int b) { return score(a) < score(b); });
    const models::Hypothesis lib = models::beam_search(
        model, src, src_mask, {.beam_size = 2, .max_len = max_len, .bos = Vocab::BOS, .eos = Vocab::EOS, .length_penalty = alpha});
    if (lib.tokens != tree[best].tokens)
        throw std::runtime_error("the drawn beam search disagrees with models::beam_search: the figure would lie");

    // layout: one column per step; in a column, the nodes in the order they were made
    int steps = 0;
    for (const TreeNode& n : tree) steps = std::max(steps, n.step);
    std::vector<int> row(tree.size()), rows_in(steps + 1, 0);
    for (size_t i = 0; i < tree.size(); i++) row[i] = rows_in[tree[i].step]++;
    const double col_w = 118, row_h = 58, box_w = 96, box_h = 38, top = 70;
    const int max_rows = *std::max_element(rows_in.begin(), rows_in.end());
    common::SvgCanvas c(40 + (steps + 1) * col_w, top + max_rows * row_h + 70, "Beam search, K = 2");
    c.text(20, 22, "Beam search with K = 2: \"" + sentence + "\"", 15, "start", "#222", true);
    c.text(20, 44, "each box: a token and the log-probability of its whole hypothesis; blue: kept, green: finished (<eos>), "
                   "grey: pruned", 12, "start", "#444");
    auto at = [&](size_t i) { return std::pair<double, double>{20 + tree[i].step * col_w, top + row[i] * row_h}; };
    std::vector<bool> on_best(tree.size(), false);
    for (int i = best; i >= 0; i = tree[i].parent) on_best[i] = true;
    for (size_t i = 1; i < tree.size(); i++) {
        const auto [x, y] = at(i);
        const auto [px, py] = at(static_cast<size_t>(tree[i].parent));
        c.line(px + box_w, py + box_h / 2, x, y + box_h / 2, on_best[i] ? "#08306b" : "#bbb", on_best[i] ? 2.5 : 1.2);
    }
    for (size_t i = 0; i < tree.size(); i++) {
        const auto [x, y] = at(i);
        const TreeNode& n = tree[i];
        const std::string fill = n.finished ? "#c7e9c0" : n.kept ? "#c6dbef" : "#f0f0f0";
        c.box(x, y, box_w, box_h, fill, "", 12, on_best[i] ? "#08306b" : n.kept ? "#333" : "#bbb");
        c.text(x + box_w / 2, y + 13, codec.tgt_vocab.token(n.token), 12, "middle", n.kept ? "#111" : "#888", on_best[i]);
        char lp[32];
        std::snprintf(lp, sizeof lp, "%.2f", n.log_prob);
        c.text(x + box_w / 2, y + 28, lp, 11, "middle", n.kept ? "#333" : "#999");
    }
    char caption[200];
    std::snprintf(caption, sizeof caption, "dark path: the winner, \"%s\", score %.3f = log_prob %.3f / ((5 + %zu) / 6)^0.6",
                  codec.decode_target(tree[best].tokens).c_str(), score(best), tree[best].log_prob, tree[best].tokens.size() - 1);
    c.text(20, top + max_rows * row_h + 30, caption, 12, "start", "#222");
    common::write_text_file(path, c.svg());
    wrote(path);
    std::printf("beam tree: %s\n", caption);   // for docs/quoted_numbers.txt: docs/14 tells this search
}

}  // namespace figures
