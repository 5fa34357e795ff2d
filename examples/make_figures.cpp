// The figures of docs/ that are drawn rather than run: each one from the code it shows (the masks
// from models::padding_mask, the table from nn::PositionalEncoding, the curves from
// optim::NoamSchedule, ...), written as SVG by examples/common/svg.h. `make figures` runs it,
// together with the example runs that draw the loss curves and heatmaps, and
// `make figures-check` renders every SVG.
//
//   ./examples/make_figures --out docs/figures
//   ./examples/make_figures --out docs/figures --copy-model copy.safetensors   # + the copy task's attention
//   ./examples/make_figures --out docs/figures --translation-model tr.safetensors   # + the beam-search tree
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "examples/common/args.h"
#include "examples/common/saved_model.h"
#include "examples/common/svg.h"
#include "examples/data/translation_data.h"
#include "examples/data/vocab.h"
#include "models/decoding.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"

using autograd::Mask;
using autograd::Tensor;
using autograd::Tokens;
using data::Vocab;

namespace {

struct Options {
    std::string out = "docs/figures", copy_model, translation_model;
    std::string sentence = "the dog sees the cat .";
};

std::string join(const std::string& dir, const std::string& file) { return dir + "/" + file; }

void wrote(const std::string& path) { std::printf("wrote %s\n", path.c_str()); }

// ---------------------------------------------------------------- chapter 7: D split into H heads

// A (T, D) projection with its columns coloured by head, the H (T, Dk) views the heads read in
// place, and the concatenation back to (T, D) that W_O mixes.
void heads_figure(const std::string& path) {
    const int T = 3, H = 2, Dk = 4, D = H * Dk;
    const double cell = 22;
    const std::string colour[H] = {"#9ecae1", "#fdae6b"};
    common::SvgCanvas c(860, 275, "D split into H heads");
    c.text(430, 20, "Multi-head attention: D = H · Dk columns, one block of Dk per head (here D = 8, H = 2, Dk = 4)", 14,
           "middle", "#222", true);
    auto grid = [&](double x, double y, int cols, int first_col, const std::string& label) {
        for (int t = 0; t < T; t++)
            for (int j = 0; j < cols; j++) c.box(x + j * cell, y + t * cell, cell, cell, colour[(first_col + j) / Dk], "", 10, "#555");
        c.text(x + cols * cell / 2, y + T * cell + 16, label, 12);
    };
    grid(50, 80, D, 0, "Q = x W_Qᵀ (T, D)");
    for (int t = 0; t < T; t++) c.text(44, 80 + (t + 0.5) * cell, "t=" + std::to_string(t), 10, "end");
    c.arrow(240, 113, 300, 113);
    c.text(270, 60, "view as", 11);
    c.text(270, 74, "(T, H, Dk)", 11);
    for (int h = 0; h < H; h++) {   // each head: its columns, attended on their own
        const double y = 50 + 100 * h;
        const std::string name = "head " + std::to_string(h + 1);
        grid(320, y, Dk, h * Dk, name + ": Q[:, " + std::to_string(h * Dk) + ":" + std::to_string((h + 1) * Dk) + "] (T, Dk)");
        c.arrow(420, y + 33, 500, y + 33);
        c.text(460, y + 10, "attention", 11);
        grid(520, y, Dk, h * Dk, name + " output (T, Dk)");
    }
    c.arrow(620, 113, 650, 113);
    grid(660, 100, D, 0, "");
    c.text(660 + D * cell / 2, 100 + T * cell + 16, "concat (T, D)", 12);
    c.text(660 + D * cell / 2, 100 + T * cell + 32, "then W_O", 12);
    c.text(430, 262, "No copy: a head's (T, Dk) block is the (T, D) buffer read with a row stride of D.", 12, "middle", "#555");
    common::write_text_file(path, c.svg());
    wrote(path);
}

// ---------------------------------------------------------------- chapter 8: the three masks

// "may attend" (1) as dark cells, for a 5-token batch row whose last two tokens are padding.
void masks_figure(const std::string& path) {
    const int32_t PAD = Vocab::PAD;
    const Tokens src({7, 4, 9, PAD, PAD}, {1, 5});   // (1, S)
    const Tokens tgt({1, 5, 8, PAD, PAD}, {1, 5});   // (1, T)
    const std::vector<std::string> src_tokens = {"7", "4", "9", "pad", "pad"}, tgt_tokens = {"bos", "5", "8", "pad", "pad"};
    const Mask pm = models::padding_mask(src, PAD), sm = models::subsequent_mask(5), tm = models::target_mask(tgt, PAD);
    auto values = [](const Mask& m, int rows, int cols, bool broadcast_rows) {
        std::vector<float> v;
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++) v.push_back(m.data[(broadcast_rows ? 0 : r * cols) + c] ? 1.0f : 0.0f);
        return v;
    };
    std::vector<common::Heatmap> maps = {
        {"padding_mask(src): (B, 1, S)", src_tokens, src_tokens, values(pm, 5, 5, true)},
        {"subsequent_mask(5): (1, T, T)", tgt_tokens, tgt_tokens, values(sm, 5, 5, false)},
        {"target_mask(tgt): (B, T, T)", tgt_tokens, tgt_tokens, values(tm, 5, 5, false)},
    };
    common::write_heatmaps(path, "Masks: rows are queries, columns keys; dark = may attend (1), white = blocked (0)", maps, 3);
    wrote(path);
}

// ---------------------------------------------------------------- chapter 9: the PE table

void positional_encoding_figure(const std::string& path) {
    const int64_t T = 64, D = 128;
    const nn::PositionalEncoding pe(D, 0.0f);
    const Tensor table = pe.table(T);   // (T, D)
    common::Heatmap m{"PE[pos, i] for D = 128, shown as (PE + 1) / 2: white -1, dark blue +1", {}, {}, {}};
    for (int64_t p = 0; p < T; p++) m.row_labels.push_back("pos " + std::to_string(p));
    for (int64_t i = 0; i < D; i++) m.col_labels.push_back("dim " + std::to_string(i));
    for (int64_t k = 0; k < T * D; k++) m.values.push_back((table.data()[k] + 1.0f) / 2.0f);
    common::write_heatmaps(path, "Positional encoding: rows are positions, columns dimensions", {m}, 1);
    wrote(path);
}

// ---------------------------------------------------------------- chapter 10: the architecture

// One SublayerConnection (pre-norm): x + dropout(sublayer(LayerNorm(x))), drawn upwards from its
// input at y_in; returns its output's y.
double sublayer_block(common::SvgCanvas& c, double cx, double y_in, const std::string& line1, const std::string& line2,
                      const std::string& fill) {
    const double icx = cx - 15, iw = 220;
    c.box(cx - 135, y_in - 134, 265, 130, "none", "", 10, "#bbb");   // the SublayerConnection
    c.arrow(icx, y_in, icx, y_in - 16);
    c.box(icx - iw / 2, y_in - 40, iw, 24, "#f2f2f2", "LayerNorm", 12);
    c.arrow(icx, y_in - 40, icx, y_in - 56);
    c.box(icx - iw / 2, y_in - 92, iw, 36, fill);
    c.text(icx, y_in - 81, line1, 12);
    c.text(icx, y_in - 66, line2, 11, "middle", "#444");
    c.arrow(icx, y_in - 92, icx, y_in - 106);
    c.box(icx - 10, y_in - 126, 20, 20, "white", "+", 15);
    // the residual path: around the sublayer, into the addition
    c.line(icx, y_in - 8, cx + 115, y_in - 8, "#c0392b");
    c.line(cx + 115, y_in - 8, cx + 115, y_in - 116, "#c0392b");
    c.arrow(cx + 115, y_in - 116, icx + 10, y_in - 116, "#c0392b");
    return y_in - 140;
}

void architecture_figure(const std::string& path) {
    common::SvgCanvas c(840, 830, "The Transformer of models/transformer.h");
    c.text(420, 22, "Transformer (models/transformer.h), pre-norm: read from the bottom up", 15, "middle", "#222", true);
    const double ex = 205, dx = 625;
    const std::string attn = "#c6dbef", ffn = "#c7e9c0", embed = "#fdd0a2";
    for (double x : {ex, dx}) {
        c.arrow(x, 790, x, 775);
        c.box(x - 125, 745, 250, 30, embed, "Embeddings (lookup, × √D)", 12);
        c.arrow(x, 745, x, 725);
        c.box(x - 125, 695, 250, 30, embed, "PositionalEncoding (+ PE, dropout)", 12);
        c.arrow(x, 695, x, 640);
    }
    c.text(ex, 805, "src (B, S)", 13);
    c.text(dx, 805, "tgt_in (B, T)", 13);

    // the encoder: N x EncoderLayer, then its final LayerNorm
    c.box(ex - 150, 276, 300, 406, "none", "", 10, "#333");
    c.text(ex - 145, 289, "Encoder", 13, "start", "#222", true);
    c.box(ex - 142, 338, 284, 310, "#fafafa", "", 10, "#777");
    c.text(ex + 137, 351, "EncoderLayer × N", 12, "end", "#555", true);
    double y = sublayer_block(c, ex, 640, "self_attn: MultiHeadAttention", "Q = K = V = x, src_mask", attn);
    y = sublayer_block(c, ex, y, "feed_forward", "PositionwiseFeedForward", ffn);
    c.arrow(ex - 15, y, ex - 15, 330);
    c.box(ex - 125, 306, 220, 24, "#f2f2f2", "LayerNorm (norm)", 12);
    c.line(ex - 15, 306, ex - 15, 250);
    c.text(ex - 5, 262, "memory (B, S, D)", 13, "start", "#222", true);

    // the decoder: N x DecoderLayer (three sublayers), final LayerNorm, Generator
    c.box(dx - 150, 136, 300, 546, "none", "", 10, "#333");
    c.text(dx - 145, 149, "Decoder", 13, "start", "#222", true);
    c.box(dx - 142, 198, 284, 450, "#fafafa", "", 10, "#777");
    c.text(dx + 137, 211, "DecoderLayer × N", 12, "end", "#555", true);
    y = sublayer_block(c, dx, 640, "self_attn: MultiHeadAttention", "Q = K = V = x, tgt_mask", attn);
    const double src_attn_mid = y - 74;
    y = sublayer_block(c, dx, y, "src_attn: MultiHeadAttention", "Q = x, K = V = memory, src_mask", attn);
    y = sublayer_block(c, dx, y, "feed_forward", "PositionwiseFeedForward", ffn);
    c.arrow(dx - 15, y, dx - 15, 190);
    c.box(dx - 125, 166, 220, 24, "#f2f2f2", "LayerNorm (norm)", 12);
    c.arrow(dx - 15, 166, dx - 15, 110);
    c.box(dx - 125, 80, 220, 30, "#dadaeb", "Generator: Linear(D, V)", 12);
    c.arrow(dx - 15, 80, dx - 15, 58);
    c.text(dx - 15, 46, "logits (B, T, V)", 13, "middle", "#222", true);

    // memory: from the encoder's output into every DecoderLayer's src_attn
    c.line(ex - 15, 250, 415, 250, "#2171b5", 2);
    c.line(415, 250, 415, src_attn_mid, "#2171b5", 2);
    c.arrow(415, src_attn_mid, dx - 125, src_attn_mid, "#2171b5", 2);

    // legend
    c.line(40, 60, 70, 60, "#c0392b");
    c.text(76, 60, "residual: each box with an addition is a SublayerConnection,", 11, "start");
    c.text(76, 76, "x + dropout(sublayer(LayerNorm(x)))  (pre_norm = true)", 11, "start");
    c.line(40, 100, 70, 100, "#2171b5", 2);
    c.text(76, 100, "memory: the encoder's output, keys and values of src_attn", 11, "start");
    common::write_text_file(path, c.svg());
    wrote(path);
}

// ---------------------------------------------------------------- chapter 12: the Noam schedule

void noam_figure(const std::string& path) {
    Tensor p = Tensor::zeros({1}).requires_grad_();
    optim::Adam opt({p}, {.lr = 0});
    struct Setting {
        const char* name;
        int64_t d_model, warmup;
        float factor;
    };
    const Setting settings[] = {{"copy_task default: D=128, warmup 200, factor 1", 128, 200, 1.0f},
                                {"translation default: D=128, warmup 400, factor 1", 128, 400, 1.0f},
                                {"copy_task --paper: D=512, warmup 400, factor 0.5", 512, 400, 0.5f}};
    std::vector<common::Series> series;
    for (const Setting& s : settings) {
        const optim::NoamSchedule sched(opt, s.d_model, s.warmup, s.factor);
        common::Series curve{s.name, {}, {}};
        for (int64_t step = 1; step <= 2000; step++) {
            curve.x.push_back(static_cast<double>(step));
            curve.y.push_back(sched.lr_at(step));
        }
        series.push_back(std::move(curve));
    }
    common::write_line_plot(path, "Noam schedule: lr = factor · D^-0.5 · min(step^-0.5, step · warmup^-1.5)", "step",
                            "learning rate", series);
    wrote(path);
}

// ---------------------------------------------------------------- chapter 14: attention of the copy task

// The decoder's src_attn of a trained copy-task model on one sequence: the lesson is the diagonal
// (output position t reads source position t + 1, the symbol it must write next).
void copy_attention_figure(const std::string& model_path, const std::string& path) {
    const common::SavedModel saved = common::load_saved_model(model_path);
    models::Transformer& model = *saved.model;
    model.eval();
    autograd::NoGradGuard no_grad;
    const std::vector<int32_t> seq = {1, 3, 7, 2, 9, 4, 4, 8, 5, 6};   // the start symbol 1, then 9 symbols
    const int64_t L = static_cast<int64_t>(seq.size());
    const Tokens src(seq, {1, L});
    const Mask src_mask = models::padding_mask(src, 0);
    const Tokens out = models::greedy_decode(model, src, src_mask, {.max_len = L, .bos = 1});   // (1, L)
    const Tokens tgt_in(std::vector<int32_t>(out.data.begin(), out.data.begin() + (L - 1)), {1, L - 1});
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
struct TreeNode {
    int32_t token;
    double log_prob;   // of the whole hypothesis
    int parent;        // index into the tree, -1 for <bos>
    int step;
    bool kept = false, finished = false;
    std::vector<int32_t> tokens;
};

void beam_tree_figure(const std::string& model_path, const std::string& sentence, const std::string& path) {
    const common::SavedModel saved = common::load_saved_model(model_path);
    models::Transformer& model = *saved.model;
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
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    common::ArgParser p("make_figures", "Draw the figures of docs/ from the current code.");
    p.add("--out", &o.out, "folder to write the SVG files to", "DIR");
    p.add("--copy-model", &o.copy_model, "a copy-task model (copy_task --save): also draw its attention", "PATH");
    p.add("--translation-model", &o.translation_model, "a translation model (translation --save): also draw a beam-search tree", "PATH");
    p.add("--sentence", &o.sentence, "the sentence of the beam-search tree", "TEXT");
    p.parse(argc, argv);
    try {
        heads_figure(join(o.out, "heads.svg"));
        masks_figure(join(o.out, "masks.svg"));
        positional_encoding_figure(join(o.out, "positional_encoding.svg"));
        architecture_figure(join(o.out, "architecture.svg"));
        noam_figure(join(o.out, "noam_schedule.svg"));
        if (!o.copy_model.empty()) copy_attention_figure(o.copy_model, join(o.out, "copy_attention.svg"));
        if (!o.translation_model.empty()) beam_tree_figure(o.translation_model, o.sentence, join(o.out, "beam_tree.svg"));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "make_figures: %s\n", e.what());
        return 1;
    }
}
