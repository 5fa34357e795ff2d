// Scaled dot-product attention worked by hand on a 3-token sentence, one step at a time:
//
//     Attention(Q, K, V) = softmax(Q K^T / sqrt(Dk)) V          (Vaswani et al. 2017, eq. 1)
//
// then the same through the library (nn::scaled_dot_product_attention, the fused op the model
// uses, and attention_reference, its plain path composed from primitive ops) to show they
// agree, then again with the decoder's subsequent mask, then split into two heads.
//
//   ./examples/attention_by_hand                    # print every step
//   ./examples/attention_by_hand --graph mha.dot    # also draw one MultiHeadAttention forward
//   dot -Tsvg mha.dot -o mha.svg                    # (Graphviz) render the drawing
//
// Change the numbers below and rerun: everything printed is computed from them.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/graph_dot.h"
#include "examples/common/args.h"
#include "examples/common/output_files.h"
#include "examples/data/attention_by_hand_numbers.h"
#include "models/transformer.h"
#include "nn/nn.h"

// ---------------------------------------------------------------- the numbers to play with

// Q, K and V, one row per token, are in examples/data/attention_by_hand_numbers.h.
using namespace data::attention_by_hand;

// ---------------------------------------------------------------- printing

using autograd::Mask;
using autograd::Tensor;
using Matrix = std::vector<std::vector<float>>;   // rows x cols

static Matrix from_array(const float (&a)[T][DK]) {
    Matrix m(T, std::vector<float>(DK));
    for (int i = 0; i < T; i++)
        for (int j = 0; j < DK; j++) m[i][j] = a[i][j];
    return m;
}

// Rows labelled by token; columns by token (key_cols) or by feature index.
static void print_matrix(const std::string& title, const Matrix& m, bool key_cols, bool row_sums = false) {
    std::printf("%s\n%9s", title.c_str(), "");
    for (size_t j = 0; j < m[0].size(); j++) {
        if (key_cols) std::printf(" %8s", TOKENS[j]);
        else std::printf("    dim %zu", j);
    }
    std::printf(row_sums ? "   row sum\n" : "\n");
    for (size_t i = 0; i < m.size(); i++) {
        std::printf("%9s", TOKENS[i]);
        float sum = 0.0f;
        for (float v : m[i]) {
            if (std::isinf(v)) std::printf(" %8s", v < 0 ? "-inf" : "inf");
            else std::printf(" %8.4f", v);
            sum += v;
        }
        if (row_sums) std::printf("   %7.4f", sum);
        std::printf("\n");
    }
    std::printf("\n");
}

// The values of a (1, T, C) or (T, C) tensor as a matrix.
static Matrix to_matrix(const Tensor& t) {
    const int64_t cols = t.size(-1), rows = t.numel() / cols;
    Matrix m(rows, std::vector<float>(cols));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) m[i][j] = t.data()[i * cols + j];
    return m;
}

// NaN on either side makes the result NaN: std::max alone would drop it (a comparison with NaN
// is false), and a row gone NaN would print as a perfect match.
static float max_abs_diff(const Matrix& a, const Matrix& b) {
    float d = 0.0f;
    for (size_t i = 0; i < a.size(); i++)
        for (size_t j = 0; j < a[i].size(); j++) {
            const float e = std::fabs(a[i][j] - b[i][j]);
            if (std::isnan(e)) return e;
            d = std::max(d, e);
        }
    return d;
}

// ---------------------------------------------------------------- attention, by hand

// The three steps of eq. 1 with plain loops. allowed[t][s] = false removes key s for query t.
// Prints every intermediate matrix and returns the weights (T, T) and the output (T, DK).
struct ByHand {
    Matrix weights, out;
};
static ByHand attention_by_hand(const Matrix& q, const Matrix& k, const Matrix& v, const std::vector<std::vector<bool>>& allowed) {
    // 1) raw scores: how well query t matches key s, the dot product q_t . k_s
    Matrix scores(T, std::vector<float>(T, 0.0f));
    for (int t = 0; t < T; t++)
        for (int s = 0; s < T; s++)
            for (int d = 0; d < DK; d++) scores[t][s] += q[t][d] * k[s][d];
    print_matrix("1) raw scores S = Q K^T   (row t = query t, column s = key s)", scores, true);

    // 2) scale by 1/sqrt(Dk): dot products of Dk-dim vectors grow like sqrt(Dk), which would
    //    push softmax into saturation; masked-out keys get -inf, i.e. e^-inf = 0 weight
    const float scale = 1.0f / std::sqrt(static_cast<float>(DK));
    bool any_masked = false;
    Matrix scaled = scores;
    for (int t = 0; t < T; t++)
        for (int s = 0; s < T; s++) {
            scaled[t][s] = allowed[t][s] ? scores[t][s] * scale : -std::numeric_limits<float>::infinity();
            any_masked = any_masked || !allowed[t][s];
        }
    char title[128];
    std::snprintf(title, sizeof title, "2) scaled scores S / sqrt(Dk) = S * %.4f%s", scale, any_masked ? ", masked keys = -inf" : "");
    print_matrix(title, scaled, true);

    // 3) softmax along each row: w_ts = e^(x_ts - m_t) / sum_s' e^(x_ts' - m_t), m_t the row max
    Matrix w(T, std::vector<float>(T, 0.0f));
    for (int t = 0; t < T; t++) {
        float m = -std::numeric_limits<float>::infinity(), sum = 0.0f;
        for (int s = 0; s < T; s++) m = std::max(m, scaled[t][s]);
        for (int s = 0; s < T; s++) sum += (w[t][s] = std::isinf(scaled[t][s]) ? 0.0f : std::exp(scaled[t][s] - m));
        for (int s = 0; s < T; s++) w[t][s] /= sum;
    }
    print_matrix("3) attention weights A = softmax(row)   (each row sums to 1)", w, true, true);

    // 4) output: row t is the weighted average of the value rows, sum_s w_ts v_s
    Matrix out(T, std::vector<float>(DK, 0.0f));
    for (int t = 0; t < T; t++)
        for (int s = 0; s < T; s++)
            for (int d = 0; d < DK; d++) out[t][d] += w[t][s] * v[s][d];
    print_matrix("4) output O = A V   (row t = sum over s of A[t][s] * V[s])", out, false);
    return {w, out};
}

// The backward of the same three steps, with plain loops, for an upstream gradient dO (T, DK):
// each line inverts one line of the forward (chapter 7 derives them). Returns dQ, dK, dV.
static std::vector<Matrix> attention_backward_by_hand(const Matrix& q, const Matrix& k, const Matrix& v, const Matrix& w,
                                                      const Matrix& d_out) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(DK));
    // in the forward pass this was: O = A V, so dV = A^T dO and dA = dO V^T
    Matrix dv(T, std::vector<float>(DK, 0.0f)), dw(T, std::vector<float>(T, 0.0f));
    for (int t = 0; t < T; t++)
        for (int s = 0; s < T; s++)
            for (int d = 0; d < DK; d++) {
                dv[s][d] += w[t][s] * d_out[t][d];
                dw[t][s] += d_out[t][d] * v[s][d];
            }
    print_matrix("dA = dO V^T", dw, true);
    // A = softmax(scaled scores), row by row: dS_ts = A_ts (dA_ts - sum_s' A_ts' dA_ts') (chapter 4)
    Matrix ds(T, std::vector<float>(T, 0.0f));
    for (int t = 0; t < T; t++) {
        float dot = 0.0f;
        for (int s = 0; s < T; s++) dot += w[t][s] * dw[t][s];
        for (int s = 0; s < T; s++) ds[t][s] = w[t][s] * (dw[t][s] - dot);
    }
    print_matrix("dS = A * (dA - rowsum(A * dA))   (the gradient of the scaled scores)", ds, true);
    // scaled scores = scale * Q K^T, so dQ = scale dS K and dK = scale dS^T Q
    Matrix dq(T, std::vector<float>(DK, 0.0f)), dk(T, std::vector<float>(DK, 0.0f));
    for (int t = 0; t < T; t++)
        for (int s = 0; s < T; s++)
            for (int d = 0; d < DK; d++) {
                dq[t][d] += scale * ds[t][s] * k[s][d];
                dk[s][d] += scale * ds[t][s] * q[t][d];
            }
    print_matrix("dQ = dS K / sqrt(Dk)", dq, false);
    print_matrix("dK = dS^T Q / sqrt(Dk)", dk, false);
    print_matrix("dV = A^T dO", dv, false);
    return {dq, dk, dv};
}

// The plain path of the library's op (fused kernels off): composed from primitive ops.
static Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const Mask& mask) {
    autograd::FusedKernelsGuard plain(false);
    return nn::scaled_dot_product_attention(q, k, v, heads, mask);
}

// The same through the library: the fused op the model uses, and the reference composed from
// primitive ops (reshape, transpose, matmul, masked_fill, softmax, matmul).
static void compare_with_library(const Matrix& by_hand, const Mask& mask) {
    std::vector<float> q, k, v;
    for (int i = 0; i < T; i++)
        for (int j = 0; j < DK; j++) q.push_back(Q[i][j]), k.push_back(K[i][j]), v.push_back(V[i][j]);
    const Tensor tq = Tensor::from_vector(q, {1, T, DK}), tk = Tensor::from_vector(k, {1, T, DK}),   // (B, T, D)
        tv = Tensor::from_vector(v, {1, T, DK});
    const Tensor fused = nn::scaled_dot_product_attention(tq, tk, tv, /*heads=*/1, mask);         // (1, T, DK)
    const Tensor ref = attention_reference(tq, tk, tv, /*heads=*/1, mask);
    print_matrix("library: nn::scaled_dot_product_attention(q, k, v, heads = 1" + std::string(mask.data.empty() ? "" : ", mask") + ")",
                 to_matrix(fused), false);
    std::printf("max |by hand - scaled_dot_product_attention| = %.2g\n", max_abs_diff(by_hand, to_matrix(fused)));
    std::printf("max |by hand - attention_reference|          = %.2g\n\n", max_abs_diff(by_hand, to_matrix(ref)));
}

// The gradients of the same through the library's backward: the fused kernel's and the reference's.
static void compare_gradients_with_library(const std::vector<Matrix>& by_hand, const Matrix& d_out) {
    std::vector<float> q, k, v, g;
    for (int i = 0; i < T; i++)
        for (int j = 0; j < DK; j++) q.push_back(Q[i][j]), k.push_back(K[i][j]), v.push_back(V[i][j]), g.push_back(d_out[i][j]);
    const Tensor dO = Tensor::from_vector(g, {1, T, DK});   // (B, T, D)
    const char* names[2] = {"scaled_dot_product_attention", "attention_reference"};
    for (int which = 0; which < 2; which++) {
        Tensor tq = Tensor::from_vector(q, {1, T, DK}).requires_grad_(), tk = Tensor::from_vector(k, {1, T, DK}).requires_grad_(),
               tv = Tensor::from_vector(v, {1, T, DK}).requires_grad_();
        const Tensor out = which == 0 ? nn::scaled_dot_product_attention(tq, tk, tv, 1)
                                      : attention_reference(tq, tk, tv, 1, Mask());
        out.backward(dO);
        const float diff = std::max({max_abs_diff(by_hand[0], to_matrix(tq.grad())), max_abs_diff(by_hand[1], to_matrix(tk.grad())),
                                     max_abs_diff(by_hand[2], to_matrix(tv.grad()))});
        std::printf("max |by hand - %s backward|%*s = %.2g   (dQ, dK, dV)\n", names[which],
                    static_cast<int>(std::strlen(names[0]) - std::strlen(names[which])), "", diff);
    }
    std::printf("\n");
}

// One nn::MultiHeadAttention forward (D = DK, 2 heads), its graph written as Graphviz DOT.
static void write_mha_graph(const std::string& path) {
    autograd::manual_seed(0);
    nn::MultiHeadAttention mha(DK, 2, /*dropout=*/0.0f);
    mha.eval();
    std::vector<float> xs;
    for (int i = 0; i < T; i++)
        for (int j = 0; j < DK; j++) xs.push_back(Q[i][j]);
    const Tensor x = Tensor::from_vector(xs, {1, T, DK});   // (B, T, D): the token vectors
    const Tensor y = mha.forward(x, x, x);                   // (B, T, D)
    autograd::DotNames names = mha.named_parameters();       // label the leaves "w_q.weight", ...
    names.push_back({"x", x});
    autograd::write_dot(y, path, names);                     // before any backward(): it frees the graph
    std::printf("wrote %s: the graph of one MultiHeadAttention(d_model=%d, h=2) forward; render it with\n"
                "  dot -Tsvg %s -o graph.svg\n",
                path.c_str(), DK, path.c_str());
}

int main(int argc, char** argv) {
    std::string graph;
    common::ArgParser p("attention_by_hand",
                        "Scaled dot-product attention on a 3-token sentence, step by step, checked against the library.");
    p.add("--graph", &graph, "also write the computation graph of one MultiHeadAttention forward to PATH (Graphviz DOT)", "PATH");
    bool overwrite = false;
    common::add_overwrite_flag(p, &overwrite);
    p.parse(argc, argv);
    common::RunFiles files;   // --graph's file: not replaced unasked
    files.output("--graph", graph);
    files.check(p, overwrite);

    try {
        std::printf("Scaled dot-product attention, by hand: softmax(Q K^T / sqrt(Dk)) V\n");
        std::printf("sentence: \"%s %s %s\", T = %d tokens, Dk = %d\n\n", TOKENS[0], TOKENS[1], TOKENS[2], T, DK);
        const Matrix q = from_array(Q), k = from_array(K), v = from_array(V);
        print_matrix("queries Q (T, Dk)", q, false);
        print_matrix("keys K (T, Dk)", k, false);
        print_matrix("values V (T, Dk)", v, false);

        std::printf("=== without a mask: every token attends to every token ===\n\n");
        const std::vector<std::vector<bool>> all(T, std::vector<bool>(T, true));
        const ByHand plain = attention_by_hand(q, k, v, all);
        compare_with_library(plain.out, Mask());

        std::printf("=== backward: L = O[cat][dim 1], so dO is 1 there and 0 elsewhere ===\n\n");
        Matrix d_out(T, std::vector<float>(DK, 0.0f));
        d_out[1][1] = 1.0f;
        const std::vector<Matrix> grads = attention_backward_by_hand(q, k, v, plain.weights, d_out);
        compare_gradients_with_library(grads, d_out);

        std::printf("=== with the decoder's subsequent mask: token t sees tokens 0..t only ===\n\n");
        const Mask sub = models::subsequent_mask(T);   // (1, T, T), 1 = may attend
        std::printf("models::subsequent_mask(%d), shape (1, %d, %d), 1 = may attend\n", T, T, T);
        std::vector<std::vector<bool>> allowed(T, std::vector<bool>(T));
        for (int t = 0; t < T; t++) {
            std::printf("%9s", TOKENS[t]);
            for (int s = 0; s < T; s++) {
                allowed[t][s] = sub[t * T + s] != 0;
                std::printf(" %8d", allowed[t][s] ? 1 : 0);
            }
            std::printf("\n");
        }
        std::printf("\n");
        compare_with_library(attention_by_hand(q, k, v, allowed).out, sub);

        std::printf("=== the same Q, K, V as H = 2 heads of Dk = %d: head h uses columns [%d*h, %d*h + %d) ===\n\n", DK / 2,
                    DK / 2, DK / 2, DK / 2);
        std::vector<float> fq, fk, fv;
        for (int i = 0; i < T; i++)
            for (int j = 0; j < DK; j++) fq.push_back(Q[i][j]), fk.push_back(K[i][j]), fv.push_back(V[i][j]);
        const auto [out2, weights] = nn::scaled_dot_product_attention_with_weights(   // (1, T, D), (B, H, T, S)
            Tensor::from_vector(fq, {1, T, DK}), Tensor::from_vector(fk, {1, T, DK}), Tensor::from_vector(fv, {1, T, DK}), /*heads=*/2);
        const Matrix w = to_matrix(weights);   // (H * T, S): head 0's rows, then head 1's
        for (int h = 0; h < 2; h++) {
            char title[96];
            std::snprintf(title, sizeof title, "head %d weights (scores scaled by 1/sqrt(%d))", h, DK / 2);
            print_matrix(title, Matrix(w.begin() + h * T, w.begin() + (h + 1) * T), true, true);
        }
        print_matrix("output (1, T, D): head 0 fills dims 0-1, head 1 fills dims 2-3", to_matrix(out2), false);

        if (!graph.empty()) write_mha_graph(graph);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "attention_by_hand: %s\n", e.what());
        return 1;
    }
    return 0;
}
