// The figures of chapters 1, 2 and 5: broadcasting through strides, a small recorded graph, and
// LayerNorm of one row.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "autograd/autograd.h"
#include "examples/common/svg.h"
#include "examples/figures/figures.h"
#include "nn/nn.h"

using autograd::Node;
using autograd::Shape;
using autograd::Tensor;

namespace figures {

namespace {

std::string number(double v) {   // 16, -6, 0.5: as the chapters write them
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

std::string list(const std::vector<float>& v) {   // "[50, 94, 138]"
    std::string s = "[";
    for (size_t i = 0; i < v.size(); i++) s += (i ? ", " : "") + number(v[i]);
    return s + "]";
}

std::string decimals4(double v) {   // -1.3416, 2.5, 0.8944: as docs/05 writes them, with a real minus sign
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", v);
    std::string s = buf;
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    if (s == "-0") s = "0";
    return s[0] == '-' ? "\u2212" + s.substr(1) : s;
}

}  // namespace

// ---------------------------------------------------------------- chapter 1: broadcasting

// docs/01's example, x (2, 3) + y (3,). The result's shape comes from broadcast_shapes, the values
// from add, and which float of y each output element read from sum_to, the adjoint of the
// broadcast: a gradient of 1 at output (i, j) and 0 elsewhere lands on exactly the float that
// (i, j) read. Its offset is i·0 + j·1: y is walked with strides (0, 1), its one row read twice.
void broadcasting(const std::string& path) {
    Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
    Tensor y = Tensor::from_vector({10, 20, 30}, {3}).requires_grad_();
    const Shape out = autograd::broadcast_shapes(x.shape(), y.shape(), "add");   // (2, 3)
    const Tensor z = x + y;                                                       // (2, 3)
    const int64_t R = out[0], C = out[1];
    // reads(shape)[k]: the offset, in the buffer of an input of that shape, of the float output
    // element k read: where a gradient of 1 at k lands when sum_to folds it back to that shape
    auto reads = [&](const Shape& in) {
        std::vector<int64_t> at;
        for (int64_t k = 0; k < R * C; k++) {
            std::vector<float> one_hot(static_cast<size_t>(R * C), 0.0f);
            one_hot[k] = 1.0f;
            const std::vector<float> g = autograd::sum_to(one_hot.data(), out, in);
            at.push_back(std::find(g.begin(), g.end(), 1.0f) - g.begin());
        }
        return at;
    };
    const std::vector<int64_t> x_reads = reads(x.shape()), y_reads = reads(y.shape());
    // the strides: how far the offset moves for one step along dim 0, and along dim 1
    auto strides = [&](const std::vector<int64_t>& at) {
        return std::string("(") + number(static_cast<double>(at[C] - at[0])) + ", " + number(static_cast<double>(at[1] - at[0])) + ")";
    };
    const int64_t stride_i = y_reads[C] - y_reads[0], stride_j = y_reads[1] - y_reads[0];   // (0, 1)
    autograd::sum(z * z).backward();   // the chapter's L = Σ z²: dy sums both rows
    const std::vector<float> dy = y.grad().to_vector();

    common::SvgCanvas c(900, 515, "Broadcasting x (2, 3) + y (3,)");
    c.text(450, 22, "Broadcasting: x (2, 3) + y (3,) = z (2, 3), without copying y", 16, "middle", "#222", true);

    // 1) the shapes, aligned from the right
    c.text(30, 56, "1) align the shapes from the right (broadcast_shapes)", 13, "start", "#222", true);
    const double sx = 130, sw = 50, sh = 24;
    c.text(sx + sw / 2, 78, "dim 0", 11, "middle", "#555");
    c.text(sx + sw * 1.5 + 6, 78, "dim 1", 11, "middle", "#555");
    const struct { const char* name; Shape shape; } rows[] = {{"x", x.shape()}, {"y", y.shape()}, {"x + y", out}};
    for (int r = 0; r < 3; r++) {
        const double yy = 90 + r * 30;
        c.text(sx - 12, yy + sh / 2, rows[r].name, 13, "end");
        const Shape& s = rows[r].shape;
        for (int d = 0; d < 2; d++) {
            const int k = d - (2 - static_cast<int>(s.size()));   // this dim's index in s; < 0: missing
            const double bx = sx + d * (sw + 12);
            if (k < 0) {
                c.box(bx, yy, sw, sh, "#f4f4f4", "", 12, "#aaa");
                c.text(bx + sw / 2, yy + sh / 2, "(1)", 12, "middle", "#888");
            } else {
                c.box(bx, yy, sw, sh, r == 2 ? "#fdd0a2" : "#eeeeee", number(static_cast<double>(s[k])), 13);
            }
        }
    }
    c.text(270, 102, "each pair of dims is equal, or one of them is 1;", 12, "start", "#444");
    c.text(270, 120, "a missing dim counts as 1, shown (1);", 12, "start", "#444");
    c.text(270, 138, "the result takes the larger of each pair", 12, "start", "#444");

    // 2) the values: x, y as the loop sees it, z
    c.text(30, 192, "2) the loop reads y through strides " + strides(y_reads) + ": stride 0 along dim 0 reads the same 3 floats for every row",
           13, "start", "#222", true);
    const double cell = 46, gy = 250;
    auto grid = [&](double gx, const std::vector<float>& v, const std::string& fill_row0, const std::string& fill_row1) {
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < C; j++)
                c.box(gx + j * cell, gy + i * cell, cell, cell, i == 0 ? fill_row0 : fill_row1, number(v[i * C + j]), 14, "#555");
    };
    const double x_at = 40, y_at = 330, z_at = 580;
    grid(x_at, x.to_vector(), "#eeeeee", "#eeeeee");
    c.text(x_at + 1.5 * cell, gy - 16, "x (2, 3), strides " + strides(x_reads), 13);
    c.text(x_at + 3 * cell + 18, gy + cell, "+", 22);
    std::vector<float> y_view;   // the value each output element read: y[y_reads[k]]
    for (int64_t k = 0; k < R * C; k++) y_view.push_back(y.to_vector()[y_reads[k]]);
    grid(y_at, y_view, "#c6dbef", "#deebf7");
    for (int64_t k = 0; k < R * C; k++)   // which float of y's buffer each cell is
        c.text(y_at + (k % C + 0.5) * cell, gy + (k / C) * cell + 38, "y[" + number(static_cast<double>(y_reads[k])) + "]", 9, "middle",
               "#2171b5");
    c.text(y_at + 1.5 * cell, gy - 16, "y as the loop sees it: (2, 3), strides " + strides(y_reads), 13);
    c.text(y_at + 3 * cell + 27, gy + cell, "=", 22);
    grid(z_at, z.to_vector(), "#fdd0a2", "#fdd0a2");
    c.text(z_at + 1.5 * cell, gy - 16, "z = x + y (2, 3)", 13);
    // row 1 of the view goes back to the floats of row 0
    c.curved_arrow(y_at - 4, gy + 1.5 * cell, y_at - 4, gy + 0.5 * cell, 14, "#2171b5", 1.5);
    c.text(y_at - 28, gy + cell - 8, "next row:", 11, "end", "#2171b5");
    c.text(y_at - 28, gy + cell + 8, std::string("+") + number(static_cast<double>(stride_i)) + " floats", 11, "end", "#2171b5");

    // y's memory: the 3 floats every row reads
    const double my = gy + 2 * cell + 58;
    for (int64_t j = 0; j < C; j++) {
        c.rect(y_at + j * cell, my, cell, 30, "#c6dbef", "#2171b5", 1.5);
        c.text(y_at + (j + 0.5) * cell, my + 15, number(y.to_vector()[j]), 13);
        c.text(y_at + (j + 0.5) * cell, my + 42, "y[" + std::to_string(j) + "]", 10, "middle", "#2171b5");
        c.arrow(y_at + (j + 0.5) * cell, gy + 2 * cell + 2, y_at + (j + 0.5) * cell, my - 2, "#2171b5", 1.2);
    }
    c.text(y_at - 10, my + 15, "y's memory:", 12, "end", "#2171b5");
    c.text(y_at - 10, my + 31, "3 floats", 12, "end", "#2171b5");
    c.text(y_at + 3 * cell + 16, my + 8, "offset = i·" + number(static_cast<double>(stride_i)) + " + j·" +
                                             number(static_cast<double>(stride_j)) + ": both rows read here,", 12, "start", "#444");
    c.text(y_at + 3 * cell + 16, my + 26, "and nothing is copied", 12, "start", "#444");

    // 3) the gradient: the same mapping backwards
    c.text(30, 478, "3) backward goes along the same arrows and adds: for L = Σ z², dz = 2z, and each float of y collects the dz of", 12,
           "start", "#222");
    c.text(30, 495, "both rows that read it: dy = Σ_i dz[i, j] = " + list(dy) + ", the sum sum_to computes", 12, "start", "#222");
    common::write_text_file(path, c.svg());
    wrote(path);
}

// ---------------------------------------------------------------- chapter 2: the a, b graph

// docs/02's example, L = (a·b + a)² at a = 2, b = -3, as the engine recorded it: one box per Node
// (found by walking Node::parents from L, as backward's topo_order does), its value and, after
// L.backward(), its gradient. Grey arrows: the forward edges, input -> op, numbered by argument
// as to_dot numbers them. Red arrows: what backward sends back along each edge, found by running
// each node's own backward closure once more, alone, and reading what it added to each input.
void ab_graph(const std::string& path) {
    Tensor a = Tensor::scalar(2.0f).requires_grad_(), b = Tensor::scalar(-3.0f).requires_grad_();
    Tensor c_ = a * b, d = c_ + a, L = autograd::pow(d, 2.0f);   // the chapter's c, d and L
    for (Tensor* t : {&c_, &d, &L}) t->retain_grad();
    L.backward(/*retain_graph=*/true);   // keep the closures: they are run again below
    const std::unordered_map<const Node*, std::string> names = {
        {&a.node(), "a"}, {&b.node(), "b"}, {&c_.node(), "c"}, {&d.node(), "d"}, {&L.node(), "L"}};

    // 1) the nodes in computation order (every input before its op): a post-order walk from L
    std::vector<Node*> order;
    std::unordered_set<Node*> seen;
    std::vector<std::pair<Node*, size_t>> stack = {{&L.node(), 0}};
    seen.insert(&L.node());
    while (!stack.empty()) {
        Node* n = stack.back().first;
        const size_t next = stack.back().second++;
        if (next < n->parents.size()) {
            Node* p = n->parents[next].get();
            if (seen.insert(p).second) stack.push_back({p, 0});
        } else {
            order.push_back(n);
            stack.pop_back();
        }
    }

    // 2) what each edge carries backwards: node n's closure, run alone on n's gradient, adds
    // (∂n/∂input)·dn into each input's grad; set the inputs' grads aside to read it
    struct Edge { Node* from; Node* to; size_t arg; float sent; };
    std::vector<Edge> edges;
    for (Node* n : order) {
        if (!n->backward) continue;   // a leaf
        std::vector<autograd::FloatBuffer> kept;
        for (auto& p : n->parents) kept.push_back(p->grad), p->grad.clear();
        n->backward(*n);
        for (size_t i = 0; i < n->parents.size(); i++) {
            edges.push_back({n->parents[i].get(), n, i, n->parents[i]->grad.empty() ? 0.0f : n->parents[i]->grad[0]});
            n->parents[i]->grad = kept[i];
        }
    }
    for (Node* n : order) {   // the edges out of a node add up to its gradient (a: -8 + 24 = 16)
        float total = 0;
        bool any = false;
        for (const Edge& e : edges)
            if (e.from == n) total += e.sent, any = true;
        if (any && std::fabs(total - n->grad[0]) > 1e-5f) throw std::logic_error("ab_graph: the edges do not add up to a gradient");
    }

    // 3) layout: a node's layer is one more than its deepest input's; leaves stacked in layer 0,
    // every other node at the mean height of its inputs
    std::unordered_map<Node*, int> layer;
    std::unordered_map<Node*, double> cy;
    double leaf_y = 125;
    for (Node* n : order) {
        if (n->parents.empty()) {
            layer[n] = 0, cy[n] = leaf_y, leaf_y += 170;
            continue;
        }
        int deepest = 0;
        double sum_y = 0;
        for (auto& p : n->parents) deepest = std::max(deepest, layer[p.get()]), sum_y += cy[p.get()];
        layer[n] = deepest + 1, cy[n] = sum_y / static_cast<double>(n->parents.size());
    }
    const double bw = 140, bh = 70, col = 240, x0 = 40;
    auto left = [&](Node* n) { return x0 + layer[n] * col; };

    common::SvgCanvas c(x0 + 3 * col + bw + 40, 400, "The graph of L = (a·b + a)²");
    c.text(30, 22, "The graph of L = (a·b + a)² at a = 2, b = -3, as recorded (docs/02)", 16, "start", "#222", true);
    c.text(30, 44, "grey: forward, input → op (numbered by argument);  red: what backward sends back along each edge", 12, "start",
           "#444");
    for (const Edge& e : edges) {
        // the forward edge, from the input's right side to the op's left side (one port per
        // argument), and the backward one beside it, in the other direction: each 4 px off the
        // straight line, on either side of it
        const double x1 = left(e.from) + bw, y1 = cy[e.from], x2 = left(e.to);
        // of an op's two inputs, the higher one enters at the upper port, so edges do not cross
        Node* other = e.to->parents.size() > 1 ? e.to->parents[1 - e.arg].get() : nullptr;
        const double y2 = cy[e.to] + (other == nullptr ? 0 : cy[e.from] <= cy[other] ? -14 : 14);
        const double len = std::hypot(x2 - x1, y2 - y1), nx = -(y2 - y1) / len, ny = (x2 - x1) / len;   // the normal, below
        c.arrow(x1 - 4 * nx, y1 - 4 * ny, x2 - 4 * nx, y2 - 4 * ny, "#888", 1.5);
        c.arrow(x2 + 4 * nx, y2 + 4 * ny, x1 + 4 * nx, y1 + 4 * ny, "#c0392b", 1.5, true);
        const double t = 0.8;   // the argument number near the op's end, above; the gradient in the middle, below
        c.text(x1 + (x2 - x1) * t - 14 * nx, y1 + (y2 - y1) * t - 14 * ny, std::to_string(e.arg), 11, "middle", "#666");
        c.text((x1 + x2) / 2 + 18 * nx, (y1 + y2) / 2 + 18 * ny, number(e.sent), 13, "middle", "#c0392b", true);
    }
    for (Node* n : order) {
        const double x = left(n), y = cy[n] - bh / 2;
        const bool leaf = n->parents.empty();
        c.box(x, y, bw, bh, leaf ? "#c8e6c9" : "#ffffff", "", 12, n == &L.node() ? "#000" : "#333");
        const std::string name = names.at(n);
        std::string inputs;   // "a, b"
        for (auto& p : n->parents) inputs += (inputs.empty() ? "" : ", ") + names.at(p.get());
        c.text(x + bw / 2, y + 16, leaf ? name + " (leaf)" : name + " = " + n->op + "(" + inputs + ")", 13, "middle", "#222", true);
        c.text(x + bw / 2, y + 36, "value " + number((*n->data)[0]), 12);
        c.text(x + bw / 2, y + 55, "d" + name + " = " + number(n->grad[0]), 12, "middle", "#c0392b");
    }
    std::string shares;   // what a receives along its two edges
    for (const Edge& e : edges)
        if (e.from == &a.node())
            shares += shares.empty() ? number(e.sent) : e.sent < 0 ? " + (" + number(e.sent) + ")" : " + " + number(e.sent);
    c.text(30, 375, "a feeds two ops, so two red arrows come back into it, and its grad is their sum (the += of every backward): da = " +
                        shares + " = " + number(a.grad().item()), 12, "start", "#222");
    common::write_text_file(path, c.svg());
    wrote(path);
}

// ---------------------------------------------------------------- chapter 5: LayerNorm of one row

// docs/05's row x = [1, 2, 3, 4], stage by stage: its mean and variance, x − μ, x̂ = (x − μ)·r and
// y = γ ⊙ x̂ + β. The stages are the plain path's ops (mean, var, sub, sqrt, div), y is nn::layer_norm's;
// the figure checks that layer_norm with γ = 1, β = 0 (nn::LayerNorm's start, the chapter's example)
// gives the x̂ drawn. Each value as a cell, and as a dot on a number line, one colour per feature.
void layer_norm_row(const std::string& path) {
    const nn::LayerNorm ln(4);   // gain ones, bias zeros, eps 1e-5
    const Tensor x = Tensor::from_vector({1, 2, 3, 4}, {1, 4});                  // (1, C)
    const Tensor gamma = Tensor::from_vector({2, 1, 1, 0.5f}, {4});               // (C,): an example of learned values
    const Tensor beta = Tensor::from_vector({1, 1, 1, 1}, {4});                   // (C,)
    const Tensor mu = autograd::mean(x, -1, true);                                // (1, 1)
    const Tensor variance = autograd::var(x, -1, /*unbiased=*/false, true);       // (1, 1)
    const Tensor centred = x - mu;                                                // (1, C)
    const Tensor xhat = centred / autograd::sqrt(variance + ln.eps);              // (1, C): as nn::layer_norm's plain path
    const double r = 1.0 / std::sqrt(variance.item() + ln.eps);                   // the chapter's r, for the label
    const Tensor y = nn::layer_norm(x, gamma, beta, ln.eps);                      // (1, C)
    const std::vector<float> at_start = ln.forward(x).to_vector(), xh = xhat.to_vector(), yv = y.to_vector();
    for (size_t j = 0; j < xh.size(); j++)
        if (std::fabs(at_start[j] - xh[j]) > 1e-6f || std::fabs(yv[j] - (xh[j] * gamma.to_vector()[j] + beta.to_vector()[j])) > 1e-6f)
            throw std::logic_error("layer_norm_row: nn::layer_norm differs from the formula drawn");
    const double m = mu.item(), v = variance.item(), sigma = std::sqrt(v);
    if (ln.eps != 1e-5f) throw std::logic_error("layer_norm_row: the figure says ε = 1e-5, nn::LayerNorm's default");

    struct Stage { std::vector<float> values; std::string formula; std::vector<std::string> notes; };
    const std::vector<Stage> stages = {
        {x.to_vector(), "x: one row, C = 4 features", {"μ = (1/C) Σⱼ xⱼ = " + decimals4(m), "σ² = (1/C) Σⱼ (xⱼ − μ)² = " + decimals4(v) + " (biased)"}},
        {centred.to_vector(), "x − μ: centred", {"mean 0, the spread unchanged"}},
        {xh, "x̂ = (x − μ) · r: unit scale", {"r = 1/√(σ² + ε) = " + decimals4(r) + ", ε = 1e-5", "mean 0, variance 1"}},
        {yv, "y = γ ⊙ x̂ + β", {"here γ = " + list(gamma.to_vector()) + ", β = " + list(beta.to_vector()),
                              "(learned; they start at γ = 1, β = 0, where y = x̂)"}},
    };

    const double W = 940, cx0 = 340, cw = 64, ch = 30, nl0 = 650, nl1 = 905, row0 = 112, pitch = 84;
    double lo = 0, hi = 0;   // the number line: whole numbers around every value drawn
    for (const Stage& s : stages)
        for (float val : s.values) lo = std::min(lo, std::floor(static_cast<double>(val))), hi = std::max(hi, std::ceil(static_cast<double>(val)));
    auto px = [&](double val) { return nl0 + (val - lo) / (hi - lo) * (nl1 - nl0); };
    auto row_y = [&](size_t k) { return row0 + static_cast<double>(k) * pitch; };
    const std::string dot[] = {"#3182bd", "#e6550d", "#31a354", "#756bb1"}, fill[] = {"#c6dbef", "#fdd0a2", "#c7e9c0", "#dadaeb"};
    const double last = row_y(stages.size() - 1);

    common::SvgCanvas c(W, last + 110, "LayerNorm of one row");
    c.text(W / 2, 22, "LayerNorm of one row, x = " + list(x.to_vector()) + " (docs/05)", 16, "middle", "#222", true);
    c.text(W / 2, 44, "μ, σ², x − μ and x̂ from the plain path's ops (mean, var, sub, sqrt, div); y from nn::layer_norm", 12, "middle", "#444");
    // the number line's grid: one vertical line per whole number, labelled above and below
    for (double t = lo; t <= hi; t += 1) {
        c.line(px(t), row0 - 30, px(t), last + 30, "#e3e3e3", 1);
        c.text(px(t), row0 - 40, decimals4(t), 11, "middle", "#555");
        c.text(px(t), last + 40, decimals4(t), 11, "middle", "#555");
    }
    for (size_t k = 0; k < stages.size(); k++) {
        const Stage& s = stages[k];
        const double yk = row_y(k), text_top = yk - 8 * static_cast<double>(s.notes.size());
        c.text(24, text_top, s.formula, 13, "start", "#222", true);
        for (size_t n = 0; n < s.notes.size(); n++) c.text(24, text_top + 17 * static_cast<double>(n + 1), s.notes[n], 12, "start", "#444");
        for (size_t j = 0; j < s.values.size(); j++) {
            c.box(cx0 + j * cw, yk - ch / 2, cw, ch, fill[j], decimals4(s.values[j]), 13, "#555");
            if (k + 1 < stages.size()) {   // the same feature, one stage down: in its column, and on the line
                c.arrow(cx0 + (j + 0.5) * cw, yk + ch / 2 + 2, cx0 + (j + 0.5) * cw, row_y(k + 1) - ch / 2 - 2, "#999", 1.2);
            }
        }
        c.line(nl0, yk, nl1, yk, "#444", 1.2);
    }
    for (size_t k = 0; k + 1 < stages.size(); k++)   // each feature's path on the number line, light, under the marks
        for (size_t j = 0; j < stages[k].values.size(); j++)
            c.line(px(stages[k].values[j]), row_y(k), px(stages[k + 1].values[j]), row_y(k + 1), fill[j], 2);
    // the marks: the mean and the spread of each stage that has them
    auto mark = [&](double yk, double at, const std::string& label) {
        c.line(px(at), yk - 16, px(at), yk + 6, "#c0392b", 2);
        c.text(px(at), yk - 24, label, 11, "middle", "#c0392b");
    };
    auto spread = [&](double yk, double from, double to, const std::string& label) {
        c.line(px(from), yk + 13, px(to), yk + 13, "#555", 1.2);
        c.line(px(from), yk + 9, px(from), yk + 17, "#555", 1.2);
        c.line(px(to), yk + 9, px(to), yk + 17, "#555", 1.2);
        c.text((px(from) + px(to)) / 2, yk + 25, label, 11, "middle", "#555");
    };
    mark(row_y(0), m, "μ = " + decimals4(m));
    spread(row_y(0), m - sigma, m + sigma, "μ ± σ");
    mark(row_y(1), 0, "mean 0");
    spread(row_y(1), -sigma, sigma, "± σ");
    mark(row_y(2), 0, "mean 0");
    spread(row_y(2), -1, 1, "± 1");
    for (size_t k = 0; k < stages.size(); k++)   // the dots last, over the lines
        for (size_t j = 0; j < stages[k].values.size(); j++) c.box(px(stages[k].values[j]) - 5, row_y(k) - 5, 10, 10, dot[j], "", 10, dot[j]);
    c.text(24, last + 66, "Each row loses its mean and its scale in x̂, so a sublayer sees inputs of the same size at any depth;", 12, "start",
           "#444");
    c.text(24, last + 84, "γ and β, one pair per feature, let the layer learn back whatever scale and shift help it.", 12, "start", "#444");
    common::write_text_file(path, c.svg());
    wrote(path);
}

}  // namespace figures
