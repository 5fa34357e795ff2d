// The figures of chapters 6a to 12: the recurrent encoder-decoder, attention's data flow, heads,
// masks, positional encoding, the architecture, the label-smoothed target and the learning-rate
// schedules.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "examples/common/svg.h"
#include "examples/data/attention_by_hand_numbers.h"
#include "examples/data/vocab.h"
#include "examples/eval/compare_eval.h"
#include "examples/figures/figures.h"
#include "models/rnn_seq2seq.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"

using autograd::Mask;
using autograd::Tensor;
using autograd::Tokens;
using data::Vocab;

namespace figures {

namespace {

std::string fixed(double v, int decimals) {   // fixed(0.925, 3) = "0.925"
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

std::string list(const std::vector<float>& v) {   // "[2, 1, 0, -1]"
    std::string s = "[";
    for (size_t i = 0; i < v.size(); i++) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", v[i]);
        s += (i ? ", " : "") + std::string(buf);
    }
    return s + "]";
}

std::string indexed(const std::string& name, int n) {   // ("h", 12) -> "h₁₂"
    static const char* const digit[] = {"₀", "₁", "₂", "₃", "₄", "₅", "₆", "₇", "₈", "₉"};
    std::string s = name;
    for (char ch : std::to_string(n)) s += digit[ch - '0'];
    return s;
}

}  // namespace

// ---------------------------------------------------------------- chapter 6a: the recurrent encoder-decoder

// The recurrent encoder-decoder unrolled over S = 4 source and T = 3 target words, once for each of
// the chapter's three systems, built by eval::make_system as compare_models builds them. What a
// panel draws beside the decoder's previous word, extra_i, is read off that model: its config says
// whether there is attention and where C goes, and its output layer W_out (V, Hd + X) how wide
// extra_i is: X = 0 (nothing), Hd (C) or dirs·Hd (C_i, as wide as a state of the two-way encoder).
void rnn_encoder_decoder(const std::string& path) {
    const int S = 4, T = 3;    // the words drawn
    const int64_t V = 11;      // compare_models' vocabulary
    struct Panel { const char* system; const char* what; };
    const Panel panels[] = {{"rnn-sutskever", "the encoder's final state starts the decoder (Sutskever et al. 2014)"},
                            {"rnn-cho", "C at every step (Cho et al. 2014)"},
                            {"rnn-additive", "soft attention (Bahdanau et al. 2014)"}};
    const double W = 1100, top = 60, panel_h = 356, cell_w = 70, cell_h = 34, c_x = 540, c_w = 160;
    auto xe = [](int j) { return 110 + (j - 1) * 95.0; };    // encoder step j's centre, j = 1..S
    auto xd = [](int i) { return 710 + (i - 1) * 155.0; };   // decoder step i's centre, i = 1..T
    const std::string blue = "#2171b5", enc_fill = "#c6dbef", dec_fill = "#c7e9c0";
    const std::string ci_line[] = {"#e6550d", "#756bb1", "#cb181d"}, ci_fill[] = {"#fdd0a2", "#dadaeb", "#fcbba1"};

    common::SvgCanvas c(W, top + 3 * panel_h + 48, "The recurrent encoder-decoder, unrolled");
    c.text(W / 2, 22, "The recurrent encoder-decoder, unrolled over S = 4 source words and T = 3 target words (docs/06a)", 16, "middle",
           "#222", true);
    c.text(W / 2, 44, "Each box is one step of the same cell: hⱼ = cell(embed(xⱼ), hⱼ₋₁) in the encoder, sᵢ = cell([embed(yᵢ₋₁) ; extraᵢ], sᵢ₋₁) "
           "in the decoder", 12, "middle", "#444");
    for (int p = 0; p < 3; p++) {
        const auto model = eval::make_system(panels[p].system, V);
        const auto* rnn = dynamic_cast<const models::RNNSeq2Seq*>(model.get());
        if (rnn == nullptr) throw std::logic_error(std::string("rnn_encoder_decoder: '") + panels[p].system + "' is not an RNNSeq2Seq");
        const models::RNNSeq2SeqConfig& cfg = rnn->cfg;
        const int64_t Hd = cfg.hidden, dirs = cfg.bidirectional ? 2 : 1;
        const int64_t X = rnn->out->weight.size(1) - Hd;   // the output layer reads [s_i ; extra_i]
        const bool every_step = cfg.context == models::Context::cho;
        if (X != (cfg.attention() ? dirs * Hd : every_step ? Hd : 0))
            throw std::logic_error(std::string("rnn_encoder_decoder: extra_i of '") + panels[p].system + "' is not what its panel draws");
        const std::string x_wide = std::to_string(X);
        const std::string subtitle =
            cfg.attention() ? "extraᵢ = Cᵢ = Σⱼ αᵢⱼ hⱼ: a weighted sum of all the states, its weights αᵢⱼ scored against the query sᵢ₋₁ "
                            "(dashed); X = " + std::to_string(dirs) + "·Hd = " + x_wide + ", the encoder reads both ways"
            : every_step ? "extraᵢ = C, beside the previous word at every step and at the output layer; X = Hd = " + x_wide
                         : "extraᵢ is nothing (X = 0): the encoder's final state (h, c) is the decoder's first, and every word has to come out of it";

        const double py = top + p * panel_h, cy = py + 100, ey = py + 284;   // the tops of the decoder's and the encoder's cells
        if (p > 0) c.line(20, py - 8, W - 20, py - 8, "#ddd", 1);
        c.text(20, py + 12, std::string("(") + static_cast<char>('a' + p) + ") " + panels[p].system + ": " + panels[p].what, 13, "start",
               "#222", true);
        c.text(20, py + 30, subtitle, 12, "start", "#444");

        // the encoder: S steps of one cell, left to right (and right to left too when it reads both ways)
        const double mid = ey + cell_h / 2, fwd = cfg.bidirectional ? mid - 6 : mid, bwd = mid + 6;
        c.text(14, ey - 12, "encoder", 11, "start", "#555", true);
        c.text(53, fwd, "h₀ = 0", 12, "end");
        c.arrow(56, fwd, xe(1) - cell_w / 2, fwd);
        for (int j = 1; j <= S; j++) {
            c.box(xe(j) - cell_w / 2, ey, cell_w, cell_h, enc_fill, indexed("h", j), 13);
            c.text(xe(j), ey + cell_h + 22, indexed("x", j), 13);
            c.arrow(xe(j), ey + cell_h + 14, xe(j), ey + cell_h + 1);
            if (j < S) c.arrow(xe(j) + cell_w / 2, fwd, xe(j + 1) - cell_w / 2, fwd);
            if (j < S && cfg.bidirectional) c.arrow(xe(j + 1) - cell_w / 2, bwd, xe(j) + cell_w / 2, bwd, "#555");
        }
        if (cfg.bidirectional) {
            c.text(xe(S) + cell_w / 2 + 30, bwd, "0", 12, "start");
            c.arrow(xe(S) + cell_w / 2 + 26, bwd, xe(S) + cell_w / 2, bwd, "#555");
        }

        // the decoder's first state s_0: the encoder's last state itself (Sutskever et al.), through C
        // (Cho et al.), or the backward pass's last state through W_s (Bahdanau et al.)
        const double c_left = c_x - c_w / 2, c_top = cy - 4, c_bottom = cy + cell_h + 4;
        c.text(c_x, c_top - 14, "decoder", 11, "middle", "#555", true);
        c.box(c_left, c_top, c_w, c_bottom - c_top, "#9ecae1");
        const std::string first = cfg.context == models::Context::sutskever ? indexed("s₀ = (h", S) + indexed(", c", S) + ")"
                                  : every_step                               ? indexed("C = tanh(V h", S) + ")"
                                                                             : "s₀";
        const std::string second = cfg.context == models::Context::sutskever ? "no map between"
                                   : every_step                               ? "s₀ = tanh(V′ C)"
                                   : cfg.bidirectional                        ? "tanh(W_s h₁←)"
                                                                              : indexed("tanh(W_s h", S) + ")";
        c.text(c_x, cy + 8, first, 13, "middle", "#222", true);
        c.text(c_x, cy + 26, second, 11);
        if (!cfg.bidirectional) c.arrow(xe(S) + cell_w / 2, ey, c_left + 16, c_bottom, "#333");
        if (cfg.bidirectional) {   // the backward pass ends at x_1: its last state leaves h_1
            c.line(xe(1) - 20, ey, xe(1) - 20, cy + cell_h / 2, "#555");
            c.arrow(xe(1) - 20, cy + cell_h / 2, c_left, cy + cell_h / 2, "#555");
            c.text(xe(1) - 14, cy + cell_h / 2 - 9, "h₁←, the backward pass's last state", 10, "start", "#555");
        }

        // the decoder: T steps of its cell, each reading [embed(y_{i-1}) ; extra_i] and s_{i-1}
        const double in_top = py + 150, in_h = 22, wout_y = py + 66, ci_y = py + 190;
        for (int i = 1; i <= T; i++) {
            const double x = xd(i);
            const std::string extra_colour = cfg.attention() ? ci_line[i - 1] : blue;
            c.box(x - cell_w / 2, cy, cell_w, cell_h, dec_fill, indexed("s", i), 13);
            c.arrow(i == 1 ? c_x + c_w / 2 : xd(i - 1) + cell_w / 2, cy + cell_h / 2, x - cell_w / 2, cy + cell_h / 2);
            c.box(x - 28, wout_y, 56, 18, "#f2f2f2", "W_out", 10);
            c.arrow(x, cy, x, wout_y + 18);
            c.arrow(x, wout_y, x, py + 56);
            c.text(x, py + 47, indexed("y", i), 13);
            const double y_left = X == 0 ? x - 24 : x - 48;   // [y_{i-1} ; extra_i], side by side: a concatenation
            c.rect(y_left, in_top, 48, in_h, "#ffffff", "#555");
            c.text(y_left + 24, in_top + in_h / 2, indexed("y", i - 1), 12);
            c.arrow(x, in_top, x, cy + cell_h);
            if (X == 0) continue;
            c.rect(x, in_top, 48, in_h, cfg.attention() ? ci_fill[i - 1] : "#9ecae1", "#555");
            c.text(x + 24, in_top + in_h / 2, cfg.attention() ? indexed("C", i) : "C", 12);
            // extra_i goes to the output layer too
            c.line(x + 44, in_top, x + 44, wout_y + 9, extra_colour, 1.5);
            c.arrow(x + 44, wout_y + 9, x + 28, wout_y + 9, extra_colour, 1.5);
            if (!cfg.attention()) {   // C, the same for every step, along a bus from C's box
                c.arrow(x + 24, ci_y + 10, x + 24, in_top + in_h, blue, 1.5);
                continue;
            }
            // C_i: from every state h_j, weighted by alpha_ij; the query is s_{i-1}
            c.box(x + 6, ci_y, 36, 20, ci_fill[i - 1], indexed("C", i), 12, ci_line[i - 1]);
            c.arrow(x + 24, ci_y, x + 24, in_top + in_h, ci_line[i - 1], 1.5);
            for (int j = 1; j <= S; j++) c.line(xe(j), ey, x + 24, ci_y + 20, ci_line[i - 1], 1.1);
            const double drop = ((i == 1 ? c_x + c_w / 2 : xd(i - 1) + cell_w / 2) + x - cell_w / 2) / 2;
            c.line(drop, cy + cell_h / 2, drop, ci_y + 10, ci_line[i - 1], 1.2, true);
            c.arrow(drop, ci_y + 10, x + 6, ci_y + 10, ci_line[i - 1], 1.2, true);
            c.text(drop + 4, ci_y - 6, indexed("s", i - 1), 10, "start", ci_line[i - 1]);
        }
        if (every_step) {
            c.line(c_x, c_bottom, c_x, ci_y + 10, blue, 1.5);
            c.line(c_x, ci_y + 10, xd(T) + 24, ci_y + 10, blue, 1.5);
            c.text(c_x + 8, ci_y + 2, "C, at every step", 11, "start", blue);
        }
    }
    const double foot = top + 3 * panel_h + 8;
    c.text(20, foot, "W_out, the output layer: p(yᵢ | y<ᵢ, x) = softmax(W_out [sᵢ ; extraᵢ]); y₀ is the start symbol. Each panel is the system of that "
           "name as compare_models builds it", 12, "start", "#444");
    c.text(20, foot + 18, "(eval::make_system), X the width of extraᵢ as its W_out (V, Hd + X) reads it; with attention the encoder reads both ways, "
           "and hⱼ = [hⱼ→ ; hⱼ←].", 12, "start", "#444");
    common::write_text_file(path, c.svg());
    wrote(path);
}

// ---------------------------------------------------------------- chapter 7: attention's data flow

// Scaled dot-product attention for one (b, h) slice, each intermediate as a grid of its numbers:
// docs/07's worked example ("the cat sleeps", Q, K and V from attention_by_hand) as T = 3 queries
// over S = 4 keys, the fourth a padding position, so that T and S differ and the mask has work to
// do. The stages are the plain path's ops (matmul, scale, masked_fill, softmax, matmul), checked
// against nn::scaled_dot_product_attention_with_weights.
void attention_flow(const std::string& path) {
    namespace abh = data::attention_by_hand;
    const int T = abh::T, S = abh::T + 1, Dk = abh::DK;
    std::vector<std::string> keys(abh::TOKENS, abh::TOKENS + T);
    keys.push_back("pad");
    std::vector<float> q, k, v;
    for (int t = 0; t < T; t++)
        for (int d = 0; d < Dk; d++) q.push_back(abh::Q[t][d]), k.push_back(abh::K[t][d]), v.push_back(abh::V[t][d]);
    for (int d = 0; d < Dk; d++) k.push_back(1.0f), v.push_back(1.0f);   // the padding position's key and value: any numbers
    const Tensor Q = Tensor::from_vector(q, {1, T, Dk});   // (B, T, Dk)
    const Tensor K = Tensor::from_vector(k, {1, S, Dk});   // (B, S, Dk)
    const Tensor V = Tensor::from_vector(v, {1, S, Dk});   // (B, S, Dk)
    const Mask allowed = models::padding_mask(Tokens({7, 4, 9, Vocab::PAD}, {1, S}), Vocab::PAD);   // (B, 1, S)
    Mask blocked = allowed;   // masked_fill fills where true: the keys that may not be attended to
    for (auto& m : blocked.data) m = !m;
    const float scale = 1.0f / std::sqrt(static_cast<float>(Dk));
    const Tensor scores = autograd::matmul(Q, K, false, true);                                              // (B, T, S)
    const Tensor scaled = scores * scale;                                                                    // (B, T, S)
    const Tensor masked = autograd::masked_fill(scaled, blocked, -std::numeric_limits<float>::infinity());   // (B, T, S)
    const Tensor A = autograd::softmax(masked);                                                              // (B, T, S)
    const Tensor out = autograd::matmul(A, V);                                                               // (B, T, Dk)
    const nn::AttentionOutput lib = nn::scaled_dot_product_attention_with_weights(Q, K, V, /*heads=*/1, allowed);
    const std::vector<float> a = A.to_vector(), o = out.to_vector(), lib_a = lib.weights.to_vector(), lib_o = lib.out.to_vector();
    for (size_t i = 0; i < a.size(); i++)
        if (std::fabs(a[i] - lib_a[i]) > 1e-6f) throw std::logic_error("attention_flow: the weights differ from the library's");
    for (size_t i = 0; i < o.size(); i++)
        if (std::fabs(o[i] - lib_o[i]) > 1e-6f) throw std::logic_error("attention_flow: the output differs from the library's");

    const double cw = 46, ch = 26, W = 1000;
    common::SvgCanvas c(W, 672, "Scaled dot-product attention, step by step");
    auto exact = [](float x) -> std::string {   // the inputs and the scores: 2, 0.5, −∞
        if (std::isinf(x)) return "−∞";
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", x);
        return buf;
    };
    auto four = [](float x) { return x == 0 ? std::string("0") : fixed(x, 4); };   // the weights and the output: 0.5065
    auto heat = [](float x) {   // the heatmaps' colour of a weight in 0..1
        const common::Rgb rgb = common::heat_color(x);
        char buf[8];
        std::snprintf(buf, sizeof buf, "#%02x%02x%02x", rgb.r, rgb.g, rgb.b);
        return std::string(buf);
    };
    // a (rows, cols) grid at (x, y), colour(value) filling each cell; text on a dark cell is white
    auto grid = [&](double x, double y, int rows, int cols, const std::vector<float>& values, const auto& colour,
                    const auto& shown) {
        for (int r = 0; r < rows; r++)
            for (int col = 0; col < cols; col++) {
                const float val = values[static_cast<size_t>(r * cols + col)];
                const std::string fill = colour(val);
                const int red = std::stoi(fill.substr(1, 2), nullptr, 16), green = std::stoi(fill.substr(3, 2), nullptr, 16),
                          blue = std::stoi(fill.substr(5, 2), nullptr, 16);
                const bool dark = 0.299 * red + 0.587 * green + 0.114 * blue < 140;
                c.rect(x + col * cw, y + r * ch, cw, ch, fill, "#777", 1);
                c.text(x + (col + 0.5) * cw, y + (r + 0.5) * ch, shown(val), 11, "middle", dark ? "#ffffff" : "#222");
            }
    };
    auto labels_left = [&](double x, double y, const std::vector<std::string>& names) {
        for (size_t r = 0; r < names.size(); r++) c.text(x - 6, y + (r + 0.5) * ch, names[r], 11, "end", "#333");
    };
    auto labels_above = [&](double x, double y, const std::vector<std::string>& names) {
        for (size_t col = 0; col < names.size(); col++) c.text(x + (col + 0.5) * cw, y - 9, names[col], 10, "middle", "#333");
    };
    auto caption = [&](double x, double w, double y, const std::string& line1, const std::string& line2) {
        c.text(x + w / 2, y + 14, line1, 12, "middle", "#222", true);
        c.text(x + w / 2, y + 30, line2, 11, "middle", "#444");
    };
    const auto input = [](float) { return std::string("#eeeeee"); };
    const auto score = [](float x) { return std::string(std::isinf(x) ? "#d9d9d9" : "#fdd0a2"); };
    const auto output = [](float) { return std::string("#c7e9c0"); };
    const std::vector<std::string> queries(keys.begin(), keys.begin() + T);
    const std::string t_dk = "(" + std::to_string(T) + ", " + std::to_string(Dk) + ")", s_dk = "(" + std::to_string(S) + ", " + std::to_string(Dk) + ")";
    std::vector<float> kt;   // K drawn transposed, (Dk, S), above the scores it makes
    for (int d = 0; d < Dk; d++)
        for (int s = 0; s < S; s++) kt.push_back(k[static_cast<size_t>(s * Dk + d)]);
    std::vector<float> mask_row;   // the padding mask's one row, (1, S), which every query row shares
    for (int s = 0; s < S; s++) mask_row.push_back(allowed.data[static_cast<size_t>(s)] ? 1.0f : 0.0f);

    c.text(W / 2, 22, "Scaled dot-product attention, one head: T = " + std::to_string(T) + " queries, S = " + std::to_string(S) +
                          " keys, Dk = " + std::to_string(Dk) + " (docs/07)", 16, "middle", "#222", true);
    c.text(W / 2, 44, "Q, and the first three keys and values: the chapter's example (attention_by_hand); the fourth key is padding", 12,
           "middle", "#444");
    // row 1: Q Kᵀ (Kᵀ above, Q to the left, as a matrix product is written by hand), the scale, the mask
    const double r1 = 200, gw = 4 * cw, xq = 90, xs = 300, xsc = 540, xm = 780;
    grid(xq, r1, T, Dk, q, input, exact);
    labels_left(xq, r1, queries);
    caption(xq, gw, r1 + T * ch, "Q", "(T, Dk) = " + t_dk);
    const double kt_y = r1 - Dk * ch - 14;
    grid(xs, kt_y, Dk, S, kt, input, exact);
    labels_above(xs, kt_y, keys);
    c.text(xs - 12, kt_y + Dk * ch / 2 - 9, "Kᵀ, of K (S, Dk) = " + s_dk, 12, "end", "#222", true);
    c.text(xs - 12, kt_y + Dk * ch / 2 + 9, "one column per key", 11, "end", "#444");
    grid(xs, r1, T, S, scores.to_vector(), score, exact);
    caption(xs, gw, r1 + T * ch, "Q Kᵀ: the scores", "(T, S): query t · key s");
    c.arrow(xs + gw + 8, r1 + T * ch / 2, xsc - 8, r1 + T * ch / 2);
    c.text((xs + gw + xsc) / 2, r1 + T * ch / 2 - 12, "· 1/√Dk", 12, "middle", "#222", true);
    grid(xsc, r1, T, S, scaled.to_vector(), score, exact);
    caption(xsc, gw, r1 + T * ch, "scaled: · " + exact(scale), "(T, S)");
    c.arrow(xsc + gw + 8, r1 + T * ch / 2, xm - 8, r1 + T * ch / 2);
    c.text((xsc + gw + xm) / 2, r1 + T * ch / 2 - 12, "mask", 12, "middle", "#222", true);
    const double mask_y = r1 - ch - 46;
    grid(xm, mask_y, 1, S, mask_row, heat, exact);
    labels_above(xm, mask_y, keys);
    c.text(xm + gw / 2, mask_y + ch + 12, "padding_mask (B, 1, S): 1 = may attend", 10, "middle", "#444");
    c.arrow(xm + gw / 2, mask_y + ch + 20, xm + gw / 2, r1 - 4);
    grid(xm, r1, T, S, masked.to_vector(), score, exact);
    caption(xm, gw, r1 + T * ch, "masked_fill: −∞ where 0", "(T, S): the mask's row, in every query row");

    // the turn into row 2: softmax over each row
    const double turn = r1 + T * ch + 62, r2 = turn + Dk * ch + 44, xa = xs, xo = xsc;
    c.line(xm + gw / 2, r1 + T * ch + 40, xm + gw / 2, turn);
    c.line(xm + gw / 2, turn, xa + gw / 2, turn);
    c.arrow(xa + gw / 2, turn, xa + gw / 2, r2 - 22);
    c.text((xa + xm + gw) / 2, turn - 10, "softmax over each row (over the S keys)", 12, "middle", "#222", true);
    // row 2: A V (V above, A to the left)
    grid(xa, r2, T, S, a, heat, four);
    labels_left(xa, r2, queries);
    labels_above(xa, r2, keys);
    caption(xa, gw, r2 + T * ch, "A: the weights", "(T, S): each row sums to 1; −∞ gives 0");
    const double v_y = r2 - Dk * ch - 14;
    grid(xo, v_y, S, Dk, v, input, exact);
    for (int s = 0; s < S; s++) c.text(xo + gw + 6, v_y + (s + 0.5) * ch, keys[static_cast<size_t>(s)], 11, "start", "#333");
    c.text(xo + gw + 56, v_y + Dk * ch / 2 - 9, "V (S, Dk) = " + s_dk, 12, "start", "#222", true);
    c.text(xo + gw + 56, v_y + Dk * ch / 2 + 9, "one row per key", 11, "start", "#444");
    grid(xo, r2, T, Dk, o, output, four);
    caption(xo, gw, r2 + T * ch, "out = A V", "(T, Dk): row t = Σₛ A[t, s] · V[s]");

    std::vector<float> pad_scores;   // the padding key's scaled scores, which the mask throws away
    for (int t = 0; t < T; t++) pad_scores.push_back(scaled.to_vector()[static_cast<size_t>(t * S + S - 1)]);
    const double foot = r2 + T * ch + 62;
    c.text(W / 2, foot, "The padding key's scaled scores, " + list(pad_scores) + ", are as high as any; masked, it gets weight exactly 0, and A's rows are "
           "the chapter's table for S = 3.", 12, "middle", "#444");
    c.text(W / 2, foot + 18, "In the model each grid is one (b, h) slice: Q (B, H, T, Dk), K and V (B, H, S, Dk), the scores and A (B, H, T, S).", 12,
           "middle", "#444");
    common::write_text_file(path, c.svg());
    wrote(path);
}

// ---------------------------------------------------------------- chapter 7: D split into H heads

// Q, K and V (T, D) with their columns coloured by head; each is split the same way into H
// (T, Dk) blocks; head h attends with its own three blocks; the H outputs are concatenated back
// to (T, D) and W_O mixes them. The sizes come from nn::MultiHeadAttention(8, 2), and which
// columns head h reads from the split the plain path does (reshape to (T, H, Dk), then transpose).
void heads(const std::string& path) {
    const nn::MultiHeadAttention mha(8, 2, 0.0f);
    const int T = 3, H = static_cast<int>(mha.heads), Dk = static_cast<int>(mha.d_k), D = static_cast<int>(mha.d_model);
    // q[t][col] = t * D + col, split as scaled_dot_product_attention does: (1, T, D) -> (1, H, T, Dk)
    const Tensor q = Tensor::arange(static_cast<float>(T * D)).reshape({1, T, D});
    const Tensor qh = autograd::transpose(q.reshape({1, T, H, Dk}), 1, 2);
    std::vector<int> first(H), last(H);   // the columns of Q that head h reads
    for (int h = 0; h < H; h++) {
        first[h] = static_cast<int>(qh.at({0, h, 0, 0}));
        last[h] = static_cast<int>(qh.at({0, h, 0, Dk - 1}));
        if (last[h] - first[h] != Dk - 1) throw std::logic_error("heads: a head's columns are not contiguous");
    }
    const double cell = 14;
    const std::string colour[] = {"#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc"};
    common::SvgCanvas c(920, 410, "D split into H heads");
    c.text(460, 22, "Multi-head attention: D = H · Dk columns, one block of Dk per head", 16, "middle", "#222", true);
    c.text(460, 44, "nn::MultiHeadAttention(" + std::to_string(D) + ", " + std::to_string(H) + "): D = " + std::to_string(D) +
                        ", H = " + std::to_string(H) + ", Dk = " + std::to_string(Dk) + "; here T = S = " + std::to_string(T) +
                        " positions. Q, K and V are split the same way.",
           12, "middle", "#444");
    auto grid = [&](double x, double y, int cols, int first_col) {
        for (int t = 0; t < T; t++)
            for (int j = 0; j < cols; j++)
                c.box(x + j * cell, y + t * cell, cell, cell, colour[((first_col + j) / Dk) % 4], "", 10, "#555");
    };
    const double top = 100, x0 = 120, step = D * cell + 48;   // Q, K, V side by side
    const double row_y[] = {200, 290};   // one row of blocks per head (two heads drawn)
    const char* names[] = {"Q", "K", "V"};
    const char* made[] = {"query W_qᵀ (T, D)", "key W_kᵀ (S, D)", "value W_vᵀ (S, D)"};
    for (int m = 0; m < 3; m++) {
        const double x = x0 + m * step;
        c.text(x + D * cell / 2, top - 28, std::string(names[m]) + " = " + made[m], 12);
        for (int j = 0; j < D; j++) c.text(x + (j + 0.5) * cell, top - 9, std::to_string(j), 9, "middle", "#666");
        grid(x, top, D, 0);
        for (int h = 0; h < std::min(H, 2); h++) {   // the split: head h's columns, straight down
            const double bx = x + first[h] * cell;
            c.arrow(bx + Dk * cell / 2, top + T * cell + 2, bx + Dk * cell / 2, row_y[h] - 2, "#777", 1.2);
            grid(bx, row_y[h], Dk, first[h]);
            c.text(bx + Dk * cell / 2, row_y[h] + T * cell + 11, std::string(names[m]) + ", columns " + std::to_string(first[h]) +
                                                                    "-" + std::to_string(last[h]), 10, "middle", "#444");
        }
    }
    const double out_x = x0 + 3 * step + 60, cat_x = out_x + Dk * cell + 50;
    for (int h = 0; h < std::min(H, 2); h++) {
        const double y = row_y[h];
        c.text(20, y + 14, "head " + std::to_string(h), 13, "start", "#222", true);
        c.text(20, y + 31, "columns " + std::to_string(first[h]) + "-" + std::to_string(last[h]), 11, "start", "#444");
        const double from = x0 + 2 * step + (first[h] + Dk) * cell + 6;   // right of this head's V block
        c.arrow(from, y + T * cell / 2, out_x - 4, y + T * cell / 2, "#333", 1.5);
        c.text((from + out_x) / 2, y - 8, "attention", 11, "middle", "#333");
        grid(out_x, y, Dk, first[h]);
        c.text(out_x + Dk * cell / 2, y + T * cell + 11, "head " + std::to_string(h) + " output", 10, "middle", "#444");
        c.arrow(out_x + Dk * cell + 4, y + T * cell / 2, cat_x - 4, 245 + T * cell / 2, "#333", 1.2);
    }
    grid(cat_x, 245, D, 0);
    c.text(cat_x + D * cell / 2, 232, "concat (T, D)", 12);
    c.text(cat_x + D * cell / 2, 245 + T * cell + 14, "then · W_oᵀ: (T, D)", 12);
    c.text(460, 365, "Head h reads columns h·Dk to h·Dk + Dk - 1 of each of Q, K and V, and its output fills the same columns", 12,
           "middle", "#444");
    c.text(460, 385, "of the concatenation. The fused kernel copies nothing: it reads a head's block in place, rows D floats apart.",
           12, "middle", "#444");
    common::write_text_file(path, c.svg());
    wrote(path);
}

// ---------------------------------------------------------------- chapter 8: the three masks

// The masks of a 5-token batch row whose last two tokens are padding, as the functions return
// them: 1 = may attend (dark), 0 = masked (white). Binary data: a two-entry legend, no colour bar.
void masks(const std::string& path) {
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
    common::write_heatmaps(path, "Masks: rows are queries, columns keys", maps, 3,
                           {.legend = {{1.0f, "1: may attend"}, {0.0f, "0: masked (the key is hidden from that query)"}}});
    wrote(path);
}

// ---------------------------------------------------------------- chapter 9: the PE table

// The first 64 rows of the table for D = 128, from PositionalEncoding::table; values in -1..1.
void positional_encoding(const std::string& path) {
    const int64_t T = 64, D = 128;
    const nn::PositionalEncoding pe(D, 0.0f);
    const Tensor table = pe.table(T);   // (T, D)
    common::Heatmap m{"PE[pos, i]: rows pos = 0..63, columns i = 0..127 (even i: sin, odd i: cos)", {}, {}, {}};
    for (int64_t p = 0; p < T; p++) m.row_labels.push_back(std::to_string(p));
    for (int64_t i = 0; i < D; i++) m.col_labels.push_back(std::to_string(i));
    m.values = table.to_vector();
    common::HeatmapOptions options;
    options.lo = -1, options.hi = 1;                                  // the colour bar reads -1..1
    options.cell = 6, options.label_font = 11, options.label_every = 8;   // every 8th position and dimension
    common::write_heatmaps(path, "Positional encoding, D = 128: rows are positions, columns dimensions", {m}, 1, options);
    wrote(path);
}

// ---------------------------------------------------------------- chapter 10: the architecture

// One SublayerConnection (pre-norm): x + dropout(sublayer(LayerNorm(x))), drawn upwards from its
// input at y_in; returns its output's y.
static double sublayer_block(common::SvgCanvas& c, double cx, double y_in, const std::string& line1, const std::string& line2,
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

void architecture(const std::string& path) {
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

// ---------------------------------------------------------------- chapter 11: the smoothed target

// docs/11's row: V = 4, ε = 0.1, logits z = [2, 1, 0, -1], target 0. The target distribution q is
// read off the loss's own gradient: for one row, ∂ℓ/∂z = p - q, so q = softmax(z) - ∂ℓ/∂z, with ℓ
// from nn::cross_entropy with label smoothing. Drawn beside the one-hot target and p.
void smoothed_target(const std::string& path) {
    const float eps = 0.1f;
    const int target = 0;
    Tensor z = Tensor::from_vector({2, 1, 0, -1}, {1, 4}).requires_grad_();   // (1, V)
    const int V = static_cast<int>(z.size(1));
    nn::cross_entropy(z, Tokens({target}, {1}), {.label_smoothing = eps}).backward();
    const std::vector<float> p = autograd::softmax(z.detach()).to_vector(), dz = z.grad().to_vector();
    std::vector<float> q(V), one_hot(V, 0.0f);
    for (int j = 0; j < V; j++) q[j] = p[j] - dz[j];
    one_hot[target] = 1.0f;

    const double W = 860, left = 80, bottom = 330, plot_h = 240, group = 170, bar = 38;
    common::SvgCanvas c(W, 450, "The label-smoothed target");
    c.text(W / 2, 22, "Label smoothing, V = 4, ε = 0.1: the target q of one row (docs/11)", 16, "middle", "#222", true);
    c.text(W / 2, 44, "q = (1 - ε)·one_hot(y) + ε/V: " + fixed(q[target], 3) + " = 1 - ε + ε/V on the target, ε/V = " +
                          fixed(q[(target + 1) % V], 3) + " on every other class",
           12, "middle", "#444");
    // the y axis, 0 to 1
    for (int k = 0; k <= 4; k++) {
        const double yy = bottom - plot_h * k / 4.0;
        c.line(left, yy, left + V * group, yy, "#e3e3e3", 1);
        c.text(left - 8, yy, fixed(k / 4.0, 2), 11, "end", "#333");
    }
    c.line(left, bottom, left + V * group, bottom, "#444", 1.2);
    c.line(left, bottom, left, bottom - plot_h, "#444", 1.2);
    struct Bars { const std::vector<float>* v; std::string name; const char* fill; };
    const Bars bars[] = {{&one_hot, "one-hot target", "#d9d9d9"}, {&q, "smoothed target q", "#3182bd"}, {&p, "model p = softmax(z), z = " + list(z.detach().to_vector()), "#fd8d3c"}};
    for (int j = 0; j < V; j++) {
        const double gx = left + j * group + (group - 3 * bar - 8) / 2;
        for (int b = 0; b < 3; b++) {
            const double v = (*bars[b].v)[j], h = plot_h * v, x = gx + b * (bar + 4);
            if (h > 0) c.rect(x, bottom - h, bar, h, bars[b].fill, "#555", 0.8);
            c.text(x + bar / 2, bottom - h - 9, b == 0 ? fixed(v, 0) : fixed(v, b == 1 ? 3 : 4), 10, "middle", "#222");
        }
        c.text(left + (j + 0.5) * group, bottom + 16, j == target ? "class 0 = y (the target)" : "class " + std::to_string(j), 12);
        c.text(left + (j + 0.5) * group, bottom + 34, "∂ℓ/∂z = p - q = " + fixed(dz[j], 4), 11, "middle", "#c0392b");
    }
    for (int b = 0; b < 3; b++) {   // legend
        const double x = left + b * 210;
        c.rect(x, 392, 16, 16, bars[b].fill, "#555", 0.8);
        c.text(x + 22, 400, bars[b].name, 12, "start");
    }
    c.text(left, 430, "Every class gets ε/V, <pad> included (PyTorch's convention); a position whose target is <pad> (ignore_index) is left out.",
           12, "start", "#444");
    common::write_text_file(path, c.svg());
    wrote(path);
}

// ---------------------------------------------------------------- chapter 12: the Noam schedule

void noam_schedule(const std::string& path) {
    Tensor p = Tensor::zeros({1}).requires_grad_();
    optim::Adam opt({p}, {.lr = 0});
    struct Setting {
        const char* name;
        int64_t d_model, warmup;
        float factor;
    };
    const Setting settings[] = {{"copy_task --schedule noam --warmup 200: D=128, factor 1", 128, 200, 1.0f},
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
    // Beside them, the copy task's default, which is not Noam's: a linear warmup to 3e-3 in 100
    // steps, then half a cosine down to 0 at its last step, 600 (docs/12 says why it ends at 0).
    const optim::WarmupCosineSchedule cosine(opt, 3e-3f, 100, 600);
    common::Series curve{"copy_task default (not Noam): warmup 100 to 3e-3, cosine to 0 at 600", {}, {}};
    for (int64_t step = 1; step <= 600; step++) {
        curve.x.push_back(static_cast<double>(step));
        curve.y.push_back(cosine.lr_at(step));
    }
    series.push_back(std::move(curve));
    common::write_line_plot(path, "Noam schedule: lr = factor · D^-0.5 · min(step^-0.5, step · warmup^-1.5)", "step",
                            "learning rate", series);
    wrote(path);
}

}  // namespace figures
