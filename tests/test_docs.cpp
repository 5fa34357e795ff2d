// The numbers the chapters of docs/ quote, held to today's code: a change that moves one fails
// here until the chapter is updated. Where a quoted number is the result of a formula (attention
// weights, smoothed cross-entropy, Noam's rate), the test also works the formula out itself, in
// double and without the library, so a quote and the code cannot agree on a wrong value. One
// TEST_CASE per chapter; each chapter names its test.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/kernels/cross_entropy.h"
#include "autograd/kernels/dropout.h"
#include "autograd/kernels/gemm_bf16.h"
#include "autograd/kernels/layer_norm.h"
#include <doctest/doctest.h>
#include "examples/common/kept_epochs.h"
#include "examples/data/attention_by_hand_numbers.h"
#include "examples/eval/compare_eval.h"
#include "examples/figures/figures.h"
#include "models/decoding.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tests/graph_work.h"
#include "tests/run_example.h"

using namespace autograd;

namespace {

// value quoted with 4 decimals
bool quoted(float value, double text) { return std::fabs(value - text) <= 0.5e-4 + 1e-6; }

Tensor by_hand(const float (&a)[data::attention_by_hand::T][data::attention_by_hand::DK]) {
    using namespace data::attention_by_hand;
    std::vector<float> v;
    for (const auto& row : a) v.insert(v.end(), row, row + DK);
    return Tensor::from_vector(v, {1, T, DK});   // (1, T, Dk)
}

// softmax(q_i . k_j / sqrt(dk)) over j, for the dk columns of one head starting at column c0 of
// the walk-through's Q and K, in double; causal: position i sees only j <= i.
std::vector<std::vector<double>> naive_weights(int c0, int dk, bool causal = false) {
    using namespace data::attention_by_hand;
    std::vector<std::vector<double>> w(T, std::vector<double>(T, 0.0));
    for (int i = 0; i < T; i++) {
        double sum = 0.0;
        for (int j = 0; j < T; j++) {
            if (causal && j > i) continue;
            double dot = 0.0;
            for (int c = c0; c < c0 + dk; c++) dot += double(Q[i][c]) * K[j][c];
            sum += w[i][j] = std::exp(dot / std::sqrt(double(dk)));
        }
        for (double& x : w[i]) x /= sum;
    }
    return w;
}

// The quoted table is the formula's, to the 4 decimals quoted.
void check_quote(const std::vector<std::vector<double>>& text, const std::vector<std::vector<double>>& formula) {
    for (size_t r = 0; r < text.size(); r++)
        for (size_t c = 0; c < text[r].size(); c++) {
            CAPTURE(r);
            CAPTURE(c);
            CHECK(std::fabs(text[r][c] - formula[r][c]) <= 0.5e-4 + 1e-9);
        }
}

void check_rows(const Tensor& t, const std::vector<std::vector<double>>& text) {
    const int64_t C = t.size(-1);
    for (size_t r = 0; r < text.size(); r++)
        for (size_t c = 0; c < text[r].size(); c++) {
            CAPTURE(r);
            CAPTURE(c);
            CHECK(quoted(t.data()[r * C + c], text[r][c]));
        }
}

}  // namespace

TEST_CASE("docs/02: a 2x2 matmul backward") {
    Tensor a = Tensor::from_vector({1, 2, 3, 4}, {2, 2}).requires_grad_();
    Tensor b = Tensor::from_vector({5, 6, 7, 8}, {2, 2}).requires_grad_();
    const Tensor c = matmul(a, b);
    CHECK(c.to_vector() == std::vector<float>{19, 22, 43, 50});
    c.backward(Tensor::from_vector({1, 0, 0, 2}, {2, 2}));   // L = C00 + 2 C11
    CHECK(a.grad().to_vector() == std::vector<float>{5, 7, 12, 16});
    CHECK(b.grad().to_vector() == std::vector<float>{1, 6, 2, 8});
}

TEST_CASE("docs/03: the GELU derivative gap") {
    // GELU(x) = x Phi(x): its derivative Phi(x) + x phi(x), and the derivative of the tanh
    // approximation 0.5 x (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3), worked in double
    const double c = std::sqrt(2.0 / M_PI);
    const auto exact = [](double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-x * x / 2) / std::sqrt(2 * M_PI); };
    const auto tanh_form = [c](double x) {
        const double t = std::tanh(c * (x + 0.044715 * x * x * x));
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
    };
    double worst = 0.0, at = 0.0;
    for (int i = -60000; i <= 60000; i++) {   // x in [-6, 6], steps of 1e-4
        const double x = i * 1e-4, gap = std::fabs(tanh_form(x) - exact(x));
        if (gap > worst) worst = gap, at = x;
    }
    CHECK(worst == doctest::Approx(8.7e-4).epsilon(0.01));          // "at most 8.7·10⁻⁴"
    CHECK(std::fabs(std::fabs(at) - 2.02) < 0.005);                  // "at x ≈ ±2.02"
    CHECK(exact(2.02) == doctest::Approx(1.083).epsilon(0.001));     // "where the derivative is 1.083"
    CHECK(std::fabs(tanh_form(2.02) - exact(2.02)) / exact(2.02) == doctest::Approx(8.0e-4).epsilon(0.01));   // "8.0·10⁻⁴ of it"
}

TEST_CASE("docs/04: softmax of [1, 2, 3], shifted, and its backward for dy = [1, 0, 0]") {
    Tensor x = Tensor::from_vector({1, 2, 3}, {1, 3}).requires_grad_();
    const Tensor y = softmax(x);
    check_rows(y, {{0.0900, 0.2447, 0.6652}});
    check_rows(softmax(Tensor::from_vector({101, 102, 103}, {1, 3})), {{0.0900, 0.2447, 0.6652}});
    // dot = sum dy y = y_0 = 0.0900; dx = y (dy - dot)
    y.backward(Tensor::from_vector({1, 0, 0}, {1, 3}));
    check_rows(x.grad(), {{0.0819, -0.0220, -0.0599}});
    // log_softmax of [0, -200] keeps -200 where log(softmax) would give -inf
    const Tensor ls = log_softmax(Tensor::from_vector({0, -200}, {1, 2}));
    CHECK(ls.data()[0] == 0.0f);
    CHECK(ls.data()[1] == -200.0f);
}

TEST_CASE("docs/05: layer_norm backward on [1, 2, 3, 4]") {
    Tensor x = Tensor::from_vector({1, 2, 3, 4}, {1, 4}).requires_grad_();
    const Tensor y = nn::layer_norm(x, Tensor::ones({4}), Tensor::zeros({4}));
    check_rows(y, {{-1.3416, -0.4472, 0.4472, 1.3416}});
    y.backward(Tensor::from_vector({1, 0, 0, 0}, {1, 4}));
    check_rows(x.grad(), {{0.2683, -0.3578, -0.0894, 0.1789}});
    // the loop the chapter quotes, layer_norm_backward_reference, from the forward's mean and r
    const float xs[4] = {1, 2, 3, 4}, ones[4] = {1, 1, 1, 1}, zeros[4] = {0, 0, 0, 0}, dy[4] = {1, 0, 0, 0};
    float out[4], mean, rstd, dx[4] = {}, dgain[4] = {}, dbias[4] = {};
    kernels::layer_norm_forward(out, &mean, &rstd, xs, ones, zeros, {1, 4}, 1e-5f);
    CHECK(mean == 2.5f);
    CHECK(quoted(rstd, 0.8944));
    kernels::layer_norm_backward_reference(dx, dgain, dbias, dy, xs, &mean, &rstd, ones, {1, 4});
    check_rows(Tensor::from_vector({dx[0], dx[1], dx[2], dx[3]}, {1, 4}), {{0.2683, -0.3578, -0.0894, 0.1789}});
    check_rows(Tensor::from_vector({dgain[0], dgain[1], dgain[2], dgain[3]}, {1, 4}), {{-1.3416, 0, 0, 0}});   // dy ⊙ x̂
    CHECK(std::vector<float>(dbias, dbias + 4) == std::vector<float>{1, 0, 0, 0});                             // dy
}

TEST_CASE("docs/06: modules and parameters, Linear and Embedding backward, dropout's draws, Xavier's bound") {
    // -- Module: the copy task's feed-forward sublayer (D = 128, F = 256), its names, count and modes
    manual_seed(0);
    nn::PositionwiseFeedForward ffn(128, 256, 0.1f);
    std::vector<std::string> names;
    for (const auto& named : ffn.named_parameters()) names.push_back(named.first);
    CHECK(names == std::vector<std::string>{"w_1.weight", "w_1.bias", "w_2.weight", "w_2.bias"});
    CHECK(ffn.w_1->weight.shape() == Shape{256, 128});
    CHECK(ffn.num_parameters() == 256 * 128 + 256 + 128 * 256 + 128);   // 65,920
    CHECK(ffn.num_parameters() == 65920);
    CHECK(ffn.is_training());                 // a new module trains
    ffn.eval();
    CHECK_FALSE(ffn.w_2->is_training());      // eval() reached the children
    ffn.train();
    CHECK(ffn.w_1->is_training());

    // -- Xavier: a = sqrt(6 / (fan_in + fan_out)), Var = a^2 / 3 = 2 / (fan_in + fan_out), in double
    const auto bound = [](double fan_in, double fan_out) { return std::sqrt(6.0 / (fan_in + fan_out)); };
    CHECK(bound(128, 256) == 0.125);                                     // w_1 (256, 128): exactly 1/8
    CHECK(std::fabs(0.125 * 0.125 / 3 - 2.0 / 384) < 1e-15);             // Var = 0.005208
    CHECK(quoted(float(0.125 * 0.125 / 3), 0.0052));
    CHECK(quoted(float(std::sqrt(0.125 * 0.125 / 3)), 0.0722));         // std
    CHECK(quoted(float(bound(128, 128)), 0.1531));                       // the attention projections
    CHECK(quoted(float(bound(128, 11)), 0.2078));                        // the (11, 128) embedding tables
    CHECK(quoted(float(bound(512, 2048)), 0.0484));                      // the paper's w_1
    CHECK(quoted(float(bound(512, 512)), 0.0765));                       // the paper's projections
    CHECK(quoted(float(128 * 2.0 / 384), 0.6667));                       // forward: Var(y) = fan_in Var(W) Var(x)
    CHECK(quoted(float(256 * 2.0 / 384), 1.3333));                       // backward: Var(dx) = fan_out Var(W) Var(dy)
    CHECK(quoted(float((128 * 2.0 / 384) * (256 * 2.0 / 384)), 0.8889));   // through w_1 then w_2 (fans swapped): 8/9
    {
        // the library's draw for w_1 (32,768 entries after manual_seed(0)): inside the bound, with
        // the variance of the formula, and a unit-variance input comes out with variance about 2/3
        const Tensor& w = ffn.w_1->weight;
        double sq = 0.0, largest = 0.0;
        for (float v : w.to_vector()) sq += double(v) * v, largest = std::max(largest, double(std::fabs(v)));
        CHECK(largest <= 0.125);
        CHECK(largest > 0.1249);
        const double var_w = sq / double(w.numel());
        CHECK(std::fabs(var_w - 0.00519) < 0.5e-5);                        // "0.00519" (the formula: 0.00521)
        manual_seed(1);
        const Tensor x = Tensor::randn({64, 128}), y = ffn.w_1->forward(x);   // (64, 256)
        double sx = 0.0, sy = 0.0;
        for (float v : x.to_vector()) sx += double(v) * v;
        for (float v : y.to_vector()) sy += double(v) * v;
        CHECK(std::fabs(sx / double(x.numel()) - 1.01) < 0.005);           // "1.01"
        CHECK(std::fabs(sy / double(y.numel()) - 0.66) < 0.005);           // "0.66"
    }

    // -- Linear: y = x W^T + b and its backward, on x (2, 3), W (2, 3), fused and plain
    for (bool fused : {true, false}) {
        CAPTURE(fused);
        FusedKernelsGuard guard(fused);
        nn::Linear lin(3, 2);
        const std::vector<float> w = {1, 0, -1, 2, 1, 0}, b = {0.5f, -1};
        std::copy(w.begin(), w.end(), lin.weight.data());
        std::copy(b.begin(), b.end(), lin.bias.data());
        Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
        const Tensor dy = Tensor::from_vector({1, 0, 1, 2}, {2, 2});   // L = y00 + y10 + 2 y11
        // the formulas in double: y = x W^T + b, dx = dy W, dW = dy^T x, db = sum over rows of dy
        double yf[2][2], dxf[2][3], dwf[2][3], dbf[2] = {0, 0};
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 2; j++) {
                yf[r][j] = b[j];
                for (int k = 0; k < 3; k++) yf[r][j] += x.data()[r * 3 + k] * double(w[j * 3 + k]);
            }
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < 3; k++) {
                dxf[r][k] = 0;
                for (int j = 0; j < 2; j++) dxf[r][k] += dy.data()[r * 2 + j] * double(w[j * 3 + k]);
            }
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++) {
                dwf[j][k] = 0;
                for (int r = 0; r < 2; r++) dwf[j][k] += dy.data()[r * 2 + j] * double(x.data()[r * 3 + k]);
            }
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 2; j++) dbf[j] += dy.data()[r * 2 + j];
        check_quote({{-1.5, 3}, {-1.5, 12}}, {{yf[0][0], yf[0][1]}, {yf[1][0], yf[1][1]}});
        check_quote({{1, 0, -1}, {5, 2, -1}}, {{dxf[0][0], dxf[0][1], dxf[0][2]}, {dxf[1][0], dxf[1][1], dxf[1][2]}});
        check_quote({{5, 7, 9}, {8, 10, 12}}, {{dwf[0][0], dwf[0][1], dwf[0][2]}, {dwf[1][0], dwf[1][1], dwf[1][2]}});
        check_quote({{2, 2}}, {{dbf[0], dbf[1]}});
        // the library
        const Tensor y = lin.forward(x);
        check_rows(y, {{-1.5, 3}, {-1.5, 12}});
        y.backward(dy);
        check_rows(x.grad(), {{1, 0, -1}, {5, 2, -1}});
        check_rows(lin.weight.grad(), {{5, 7, 9}, {8, 10, 12}});
        check_rows(lin.bias.grad(), {{2, 2}});
        // a second backward without zero_grad adds: the gradients double; zero_grad drops them
        lin.forward(x).backward(dy);
        check_rows(lin.weight.grad(), {{10, 14, 18}, {16, 20, 24}});
        check_rows(lin.bias.grad(), {{4, 4}});
        lin.zero_grad();
        CHECK_FALSE(lin.weight.has_grad());
        CHECK_FALSE(lin.bias.has_grad());
        CHECK(x.has_grad());                   // x is not a parameter of lin
    }

    // -- Embedding: the lookup copies rows; the backward adds dy's rows into the table, so id 2,
    // used twice, receives the sum of its two rows' gradients
    {
        nn::Embedding emb(4, 2);
        const std::vector<float> table = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
        std::copy(table.begin(), table.end(), emb.weight.data());
        const Tokens ids({2, 0, 2}, {3});
        const Tensor e = emb.forward(ids);   // (3, 2)
        check_rows(e, {{0.5, 0.6}, {0.1, 0.2}, {0.5, 0.6}});
        e.backward(Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}));
        check_rows(emb.weight.grad(), {{3, 4}, {0, 0}, {6, 8}, {0, 0}});
    }

    // -- dropout: the draws u_i = counter_uniform(seed, i), worked here from splitmix64's formula
    const auto u = [](uint64_t seed, uint64_t i) {
        uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ULL;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        return double(z >> 40) / 16777216.0;   // the top 24 bits, in [0, 1)
    };
    const std::vector<double> u42 = {0.7416, 0.1599, 0.2786, 0.3442, 0.0380, 0.8682, 0.2184, 0.8006};
    const kernels::DropoutDraws drop(0.1f, 42);
    for (uint64_t i = 0; i < 8; i++) {
        CAPTURE(i);
        CHECK(std::fabs(u(42, i) - u42[i]) <= 0.5e-4);
        CHECK(counter_uniform(42, i) == float(u(42, i)));
        CHECK(drop.keep(i) == (u(42, i) >= 0.1 ? 1.0f / 0.9f : 0.0f));   // only i = 4 (0.0380 < 0.1) is dropped
    }
    CHECK(quoted(drop.scale, 1.1111));
    CHECK(quoted(float(0.1 / 0.9), 0.1111));   // Var(y) = p/(1-p) x^2 at p = 0.1
    CHECK(quoted(float(std::sqrt(0.1 / 0.9)), 0.3333));
    {
        // one seed per application, the next draw of the default generator; both paths drop the
        // elements the formula drops
        for (bool fused : {true, false}) {
            CAPTURE(fused);
            FusedKernelsGuard guard(fused);
            manual_seed(0);
            Rng copy = default_rng();
            const uint64_t seed = copy.next_u64();
            const Tensor y = nn::dropout(Tensor::ones({10000}), 0.1f, true);
            int64_t kept = 0, right = 0;
            double sum = 0.0, sq = 0.0;
            for (int64_t i = 0; i < y.numel(); i++) {
                const float v = y.data()[i];
                right += v == (u(seed, uint64_t(i)) >= 0.1 ? 1.0f / 0.9f : 0.0f);
                kept += v != 0.0f;
                sum += v, sq += double(v) * v;
            }
            CHECK(right == 10000);
            CHECK(kept == 8956);
            const double mean = sum / 10000.0;
            CHECK(quoted(float(mean), 0.9951));
            CHECK(quoted(float(sq / 10000.0 - mean * mean), 0.1154));
        }
        const Tensor x = Tensor::ones({4});
        CHECK(nn::dropout(x, 0.1f, false).data() == x.data());   // evaluation: x itself
    }
}

// docs/06a's table of exact matches comes from the default run of examples/compare_models (make
// figures runs it on the x86-64-v2 build, and docs/quoted_numbers.txt holds every cell to that
// run's log). Each of its rows trains alone from the same seed and batches, so any one cell can be
// rerun: here the L = 10 column of Sutskever et al.'s LSTM encoder-decoder and of the one with
// additive attention (8 s), the column where the two part. rnn-additive's 100% does not move with
// the rounding of another instruction set, and the run must print it. rnn-sutskever's cell lies
// between 0 and 100%, where a native build's rounding moves a trained model's answers: the run
// must print it within 10 points (50 sequences in 500) and below attention's.
TEST_CASE("docs/06a: the table's L = 10 cells of rnn-sutskever and rnn-additive are what compare_models prints (rnn-sutskever's within 10 points)") {
    const std::string chapter = read_whole_file("docs/06a-recurrent-encoder-decoder.md");
    // the row of a system: "| `name`: ... | L=5 | L=10 | L=20 | L=40 |" -> its L = 10 cell, in %
    auto quoted_l10 = [&](const std::string& name) {
        const size_t row = chapter.find("| `" + name + "`:");
        REQUIRE(row != std::string::npos);
        size_t cell = row;
        for (int bar = 0; bar < 2; bar++) cell = chapter.find('|', cell + 1);   // past the name and the L = 5 cell
        return std::stod(chapter.substr(cell + 1));
    };
    const ExampleRun r = run_example("compare_models", {"--models", "rnn-sutskever,rnn-additive", "--lengths", "10"});
    REQUIRE(r.status == 0);
    // the printed row: "name params L loss exact% token% align% ms/step"
    auto printed_exact = [&](const std::string& name) {
        const size_t at = r.out.find("\n" + name + " ");
        REQUIRE(at != std::string::npos);
        std::istringstream row(r.out.substr(at + 1));
        std::string who;
        double params = 0, L = 0, loss = 0, exact = -1;
        row >> who >> params >> L >> loss >> exact;
        CHECK(L == 10);
        return exact;
    };
    CHECK(quoted_l10("rnn-additive") == 100.0);
    CHECK(printed_exact("rnn-additive") == quoted_l10("rnn-additive"));
    CHECK(quoted_l10("rnn-sutskever") < 90.0);
    CHECK(std::fabs(printed_exact("rnn-sutskever") - quoted_l10("rnn-sutskever")) <= 10.0);
}

TEST_CASE("docs/07: the attention_by_hand walk-through") {
    using namespace data::attention_by_hand;
    const Tensor q = by_hand(Q), k = by_hand(K), v = by_hand(V);
    // the inputs and the raw scores Q Kᵀ, as the chapter prints them
    const std::vector<std::vector<double>> quoted_q = {{1, 0, 1, 0}, {0, 2, 0, 2}, {1, 1, 1, 1}},
                                           quoted_k = {{1, 0, 1, 0}, {0, 1, 0, 1}, {1, 1, 0, 0}},
                                           quoted_v = {{1, 0, 0, 1}, {0, 1, 0, 1}, {0, 0, 1, 1}},
                                           quoted_scores = {{2, 0, 1}, {0, 4, 2}, {2, 2, 2}};
    std::vector<std::vector<double>> qs(T, std::vector<double>(DK)), ks = qs, vs = qs, scores(T, std::vector<double>(T, 0.0));
    for (int i = 0; i < T; i++)
        for (int d = 0; d < DK; d++) {
            qs[i][d] = Q[i][d], ks[i][d] = K[i][d], vs[i][d] = V[i][d];
            for (int j = 0; j < T; j++) scores[i][j] += double(Q[i][d]) * K[j][d];
        }
    check_quote(quoted_q, qs);
    check_quote(quoted_k, ks);
    check_quote(quoted_v, vs);
    check_quote(quoted_scores, scores);
    // row "cat": e^0 : e^2 : e^1 = 1 : 7.389 : 2.718, sum 11.107 (3 decimals)
    CHECK(std::fabs(std::exp(0.0) + std::exp(2.0) + std::exp(1.0) - 11.107) <= 0.5e-3);
    // without a mask: the weights are the output's first three columns (V is one-hot there)
    const nn::AttentionOutput plain = nn::scaled_dot_product_attention_with_weights(q, k, v, 1);
    const std::vector<std::vector<double>> weights = {
        {0.5065, 0.1863, 0.3072}, {0.0900, 0.6652, 0.2447}, {0.3333, 0.3333, 0.3333}};
    check_quote(weights, naive_weights(0, DK));
    check_rows(plain.weights, weights);
    // the output O = A V: the chapter quotes O[cat] = [0.0900, 0.6652, 0.2447, 1]
    const std::vector<std::vector<double>> out = {{0.5065, 0.1863, 0.3072, 1.0}, {0.0900, 0.6652, 0.2447, 1.0}, {0.3333, 0.3333, 0.3333, 1.0}};
    {
        const std::vector<std::vector<double>> a = naive_weights(0, DK);
        std::vector<std::vector<double>> formula(T, std::vector<double>(DK, 0.0));
        for (int t = 0; t < T; t++)
            for (int d = 0; d < DK; d++)
                for (int s = 0; s < T; s++) formula[t][d] += a[t][s] * V[s][d];
        check_quote(out, formula);
    }
    check_rows(plain.out, out);
    // backward of L = O[cat][dim 1]: dO one-hot
    {
        const std::vector<std::vector<double>> dq = {{0, 0, 0, 0}, {-0.1113, 0.0299, -0.0299, 0.1113}, {0, 0, 0, 0}},
                                               dk = {{0, -0.0599, 0, -0.0599}, {0, 0.2227, 0, 0.2227}, {0, -0.1628, 0, -0.1628}},
                                               dv = {{0, 0.0900, 0, 0}, {0, 0.6652, 0, 0}, {0, 0.2447, 0, 0}};
        // the formulas, in double: dA[cat][s] = V[s][1] (dO is one-hot), the softmax rule
        // dS[cat][s] = A[cat][s] (dA[cat][s] - Σ_j A[cat][j] dA[cat][j]), dK[s] = dS[cat][s] Q[cat] / √Dk,
        // dQ[cat] = Σ_s dS[cat][s] K[s] / √Dk, dV[s][1] = A[cat][s]; every other row of dS and dQ is 0
        const std::vector<std::vector<double>> a = naive_weights(0, DK);
        const int cat = 1;
        const double scale = 1.0 / std::sqrt(double(DK));
        double dot = 0.0;   // Σ_j A[cat][j] dA[cat][j]
        for (int j = 0; j < T; j++) dot += a[cat][j] * V[j][1];
        std::vector<std::vector<double>> fq(T, std::vector<double>(DK, 0.0)), fk = fq, fv = fq;
        for (int s = 0; s < T; s++) {
            const double ds = a[cat][s] * (V[s][1] - dot);
            for (int d = 0; d < DK; d++) {
                fk[s][d] = ds * Q[cat][d] * scale;
                fq[cat][d] += ds * K[s][d] * scale;
            }
            fv[s][1] = a[cat][s];
        }
        check_quote(dq, fq);
        check_quote(dk, fk);
        check_quote(dv, fv);
        Tensor gq = by_hand(Q).requires_grad_(), gk = by_hand(K).requires_grad_(), gv = by_hand(V).requires_grad_();
        nn::scaled_dot_product_attention(gq, gk, gv, 1).backward(Tensor::from_vector({0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, {1, T, DK}));
        check_rows(gq.grad(), dq);
        check_rows(gk.grad(), dk);
        check_rows(gv.grad(), dv);
    }
    // the decoder's subsequent mask (chapter 8 quotes the whole table)
    const nn::AttentionOutput masked = nn::scaled_dot_product_attention_with_weights(q, k, v, 1, models::subsequent_mask(T));
    const std::vector<std::vector<double>> masked_weights = {{1.0, 0.0, 0.0}, {0.1192, 0.8808, 0.0}, {0.3333, 0.3333, 0.3333}};
    check_quote(masked_weights, naive_weights(0, DK, /*causal=*/true));
    check_rows(masked.weights, masked_weights);
    // two heads of Dk = 2
    const nn::AttentionOutput two = nn::scaled_dot_product_attention_with_weights(q, k, v, 2);
    const Tensor head0 = narrow(two.weights, 1, 0, 1), head1 = narrow(two.weights, 1, 1, 1);
    const std::vector<std::vector<double>> weights0 = {{0.4011, 0.1978, 0.4011}, {0.1084, 0.4458, 0.4458}, {0.2483, 0.2483, 0.5035}},
                                           weights1 = {{0.5035, 0.2483, 0.2483}, {0.1636, 0.6728, 0.1636}, {0.4011, 0.4011, 0.1978}};
    check_quote(weights0, naive_weights(0, 2));    // head 0: columns 0-1 of Q and K
    check_quote(weights1, naive_weights(2, 2));    // head 1: columns 2-3
    check_rows(head0, weights0);
    check_rows(head1, weights1);
    // the output: column d of head h = d / 2 is Σ_s weights_h[t][s] V[s][d]
    const std::vector<std::vector<double>> two_out = {{0.4011, 0.1978, 0.2483, 1.0}, {0.1084, 0.4458, 0.1636, 1.0}, {0.2483, 0.2483, 0.1978, 1.0}};
    const std::vector<std::vector<double>> w[2] = {naive_weights(0, 2), naive_weights(2, 2)};
    std::vector<std::vector<double>> formula_out(T, std::vector<double>(DK, 0.0));
    for (int t = 0; t < T; t++)
        for (int d = 0; d < DK; d++)
            for (int s = 0; s < T; s++) formula_out[t][d] += w[d / 2][t][s] * V[s][d];
    check_quote(two_out, formula_out);
    check_rows(two.out, two_out);
}

// docs/07's Table 1 for this project's layers, counted on their graphs (tests/graph_work.h): the
// multiply-adds of n tokens of width d and the products that wait for each other, for one layer
// of each kind, and for the two models whose training steps bench/RESULTS.md times
// ("Recurrent against Transformer": compare_models' transformer and rnn-additive, B = 32).
TEST_CASE("docs/07: Table 1 counted: multiply-adds and sequential products of attention and recurrent layers") {
    FusedKernelsGuard plain(false);   // every product a "matmul" node
    manual_seed(1);
    const int64_t d = 64;
    nn::LSTM lstm({.input_size = d, .hidden_size = d});
    nn::GRU gru({.input_size = d, .hidden_size = d});
    nn::RNN rnn({.input_size = d, .hidden_size = d});
    nn::MultiHeadAttention attention(d, /*heads=*/4, /*dropout=*/0.0f);
    for (int64_t n : {5, 10, 40}) {
        CAPTURE(n);
        const Tensor x = Tensor::randn({1, n, d});   // (1, n, d)
        const Work l = count_work(lstm.forward(x).output), g = count_work(gru.forward(x).output),
                   r = count_work(rnn.forward(x).output), a = count_work(attention.forward(x, x, x));
        // the table's rows: each weight of a recurrent layer is one multiply-add per token, G (d + d) d
        CHECK(l.multiply_adds == 8 * n * d * d);
        CHECK(g.multiply_adds == 6 * n * d * d);
        CHECK(r.multiply_adds == 2 * n * d * d);
        CHECK(a.multiply_adds == 4 * n * d * d + 2 * n * n * d);   // W_q, W_k, W_v, W_o; then Q K^T and A V
        // one state product per step, in a chain; W_q, Q K^T, A V, W_o whatever n is
        CHECK(l.sequential_products == n);
        CHECK(g.sequential_products == n);
        CHECK(r.sequential_products == n);
        CHECK(a.sequential_products == 4);
    }
    // the crossovers at d = 64: 4 n d^2 + 2 n^2 d against 6 n d^2 (GRU) at n = d, 8 n d^2 (LSTM) at n = 2d
    struct Crossing { int64_t n; int vs_gru, vs_lstm; };   // the sign of attention's count minus the layer's
    for (const Crossing c : {Crossing{d - 1, -1, -1}, Crossing{d, 0, -1}, Crossing{2 * d, 1, 0}, Crossing{2 * d + 1, 1, 1}}) {
        CAPTURE(c.n);
        const Tensor x = Tensor::randn({1, c.n, d});
        const int64_t a = count_work(attention.forward(x, x, x)).multiply_adds;
        const auto sign = [](int64_t v) { return v > 0 ? 1 : v < 0 ? -1 : 0; };
        CHECK(sign(a - count_work(gru.forward(x).output).multiply_adds) == c.vs_gru);
        CHECK(sign(a - count_work(lstm.forward(x).output).multiply_adds) == c.vs_lstm);
    }
    // at L = 40 the n^2 part is 2 n^2 d / (4 n d^2 + 2 n^2 d) = n / (2d + n) of the attention's work
    CHECK(40.0 / (2 * 64 + 40) == doctest::Approx(0.238).epsilon(0.002));

    // the whole models of the timing, one forward of a copy-task batch of B = 32 at L = 10, 20, 40
    // (S = L, T = L - 1), in millions of multiply-adds, and their chains of products
    struct Quote { int64_t L; double transformer_m; int64_t transformer_chain; double rnn_m; int64_t rnn_chain; };
    for (const Quote q : {Quote{10, 26.2, 13, 24.8, 48}, Quote{20, 56.2, 13, 51.9, 98}, Quote{40, 123.6, 13, 109.1, 198}}) {
        CAPTURE(q.L);
        // every product has B times the rows at B sequences: counted at B = 1 (and at L = 10 also
        // at B = 3, to see it), quoted for 32
        Work w[2];
        int i = 0;
        for (const char* name : {"transformer", "rnn-additive"}) {
            const std::unique_ptr<models::Seq2Seq> m = eval::make_system(name, 11);
            const auto count = [&](int64_t B) {
                Rng rng(1);
                const models::Batch b = eval::make_task_batch(eval::Task::copy, rng, 11, B, q.L);
                REQUIRE(b.src.size(1) == q.L);
                REQUIRE(b.tgt_in.size(1) == q.L - 1);
                return count_work(m->logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask));
            };
            const Work one = count(1);
            if (q.L == 10) {
                const Work three = count(3);
                CHECK(three.multiply_adds == 3 * one.multiply_adds);
                CHECK(three.sequential_products == one.sequential_products);
            }
            w[i++] = {32 * one.multiply_adds, one.sequential_products};
        }
        CHECK(std::fabs(w[0].multiply_adds / 1e6 - q.transformer_m) <= 0.05);
        CHECK(std::fabs(w[1].multiply_adds / 1e6 - q.rnn_m) <= 0.05);
        CHECK(w[0].sequential_products == q.transformer_chain);
        CHECK(w[1].sequential_products == q.rnn_chain);
        CHECK(w[1].sequential_products == q.L + 4 * (q.L - 1) + 2);   // S + 4T + 2
    }
    // the ratios the chapter quotes: L = 40 over L = 10, and the RNN's work over the Transformer's at L = 40
    CHECK(123.6 / 26.2 == doctest::Approx(4.7).epsilon(0.01));
    CHECK(109.1 / 24.8 == doctest::Approx(4.4).epsilon(0.01));
    CHECK(109.1 / 123.6 == doctest::Approx(0.88).epsilon(0.01));

    // the times beside them are bench/RESULTS.md's (ms per step, 1 thread), and the chapter's rows
    // are the counts above with those times
    const std::string results = read_whole_file("bench/RESULTS.md"), chapter = read_whole_file("docs/07-attention.md");
    const size_t section = results.find("## Recurrent against Transformer");
    REQUIRE(section != std::string::npos);
    struct Row { const char* L; const char* chapter_counts; };
    std::vector<double> transformer_ms, rnn_ms;
    for (const Row r : {Row{"10", "26.2 M | 13 | 24.8 M | 48"}, Row{"20", "56.2 M | 13 | 51.9 M | 98"}, Row{"40", "123.6 M | 13 | 109.1 M | 198"}}) {
        CAPTURE(r.L);
        // RESULTS.md: "| L | transformer 1 thread | transformer 2 threads | rnn-additive 1 thread | ... |"
        const size_t at = results.find(std::string("\n| ") + r.L + " | ", section);
        REQUIRE(at != std::string::npos);
        std::vector<std::string> cells;
        std::istringstream line(results.substr(at + 3, results.find('\n', at + 1) - at - 3));
        for (std::string cell; std::getline(line, cell, '|');) cells.push_back(cell.substr(cell.find_first_not_of(' ')));
        REQUIRE(cells.size() >= 4);
        const std::string t1 = cells[1].substr(0, cells[1].find(' ')), r1 = cells[3].substr(0, cells[3].find(' '));
        transformer_ms.push_back(std::stod(t1));
        rnn_ms.push_back(std::stod(r1));
        CHECK(chapter.find(std::string("| ") + r.L + " | " + r.chapter_counts + " | " + t1 + " / " + r1 + " |") != std::string::npos);
    }
    CHECK(rnn_ms[2] / transformer_ms[2] == doctest::Approx(3.5).epsilon(0.01));   // "takes 3.5 times as long"
    CHECK(transformer_ms[2] / transformer_ms[0] == doctest::Approx(4.5).epsilon(0.01));
    CHECK(rnn_ms[2] / rnn_ms[0] == doctest::Approx(5.0).epsilon(0.01));
}

TEST_CASE("docs/10: the copy task's model has 667,275 parameters") {
    models::TransformerConfig cfg;
    cfg.src_vocab = cfg.tgt_vocab = 11;
    cfg.layers = 2;
    cfg.d_model = 128;
    cfg.d_ff = 256;
    cfg.heads = 4;
    const models::Transformer model(cfg);
    CHECK(model.num_parameters() == 667275);
    const int64_t D = 128, F = 256, attention = 4 * (D * D + D), ffn = 2 * D * F + F + D, norm = 2 * D;
    CHECK(attention + ffn + 2 * norm == 132480);       // encoder layer
    CHECK(2 * attention + ffn + 3 * norm == 198784);   // decoder layer
    CHECK(2 * (132480 + 198784) + 2 * norm + 2 * 11 * D + D * 11 + 11 == 667275);
    // tied: one V x D matrix for both embeddings and the generator, whose bias stays: V D + V
    cfg.tie_weights = true;
    CHECK(models::Transformer(cfg).num_parameters() == 664459);
    CHECK(2 * (132480 + 198784) + 2 * norm + 11 * D + 11 == 664459);
    CHECK(cfg.parameter_count() == 664459);
}

TEST_CASE("docs/11: cross-entropy with label smoothing, V = 4, and the H(q) floors") {
    Tensor z = Tensor::from_vector({2, 1, 0, -1}, {1, 4}).requires_grad_();
    const Tokens y({0}, {1});
    const Tensor loss = nn::cross_entropy(z, y, {.label_smoothing = 0.1f});
    CHECK(quoted(loss.item(), 0.5902));
    check_rows(softmax(z), {{0.6439, 0.2369, 0.0871, 0.0321}});
    loss.backward();
    check_rows(z.grad(), {{-0.2811, 0.2119, 0.0621, 0.0071}});   // p - q
    {   // the loop the chapter quotes, cross_entropy_backward_reference, from the forward's lse
        const float logits[4] = {2, 1, 0, -1};
        const int32_t target = 0;
        const kernels::CrossEntropyDims d{1, 4, -100, 0.1f};
        float lse, dz[4] = {};
        CHECK(quoted(kernels::cross_entropy_forward(&lse, logits, &target, d), 0.5902));
        kernels::cross_entropy_backward_reference(dz, 1.0f, logits, &lse, &target, d);
        check_rows(Tensor::from_vector({dz[0], dz[1], dz[2], dz[3]}, {1, 4}), {{-0.2811, 0.2119, 0.0621, 0.0071}});
    }
    {   // the same, worked in double: q = (0.9 + 0.1/4, 0.1/4, 0.1/4, 0.1/4), p = softmax(z),
        // loss = -sum_j q_j log p_j, gradient p - q
        const double zs[] = {2, 1, 0, -1}, q[] = {0.925, 0.025, 0.025, 0.025};
        double lse = 0.0, loss_by_hand = 0.0;
        for (double x : zs) lse += std::exp(x);
        lse = std::log(lse);
        for (int j = 0; j < 4; j++) loss_by_hand -= q[j] * (zs[j] - lse);
        CHECK(std::fabs(loss_by_hand - 0.5902) <= 0.5e-4);
        const double quoted_p[] = {0.6439, 0.2369, 0.0871, 0.0321}, quoted_grad[] = {-0.2811, 0.2119, 0.0621, 0.0071};
        for (int j = 0; j < 4; j++) {
            CHECK(std::fabs(std::exp(zs[j] - lse) - quoted_p[j]) <= 0.5e-4);
            CHECK(std::fabs(std::exp(zs[j] - lse) - q[j] - quoted_grad[j]) <= 0.5e-4);
        }
    }
    // the floor H(q): the loss when p = q, i.e. logits log q; by hand,
    // H(q) = -(0.9 + 0.1/V) log(0.9 + 0.1/V) - (V - 1) (0.1/V) log(0.1/V)
    const auto floor_at = [](int64_t V) {
        std::vector<float> logq(V, std::log(0.1f / V));
        logq[0] = std::log(0.9f + 0.1f / V);
        return nn::cross_entropy(Tensor::from_vector(logq, {1, V}), Tokens({0}, {1}), {.label_smoothing = 0.1f}).item();
    };
    const auto entropy = [](int64_t V) {
        const double top = 0.9 + 0.1 / V, rest = 0.1 / V;
        return -top * std::log(top) - (V - 1) * rest * std::log(rest);
    };
    for (const auto& quote : {std::pair<int64_t, double>{4, 0.3488}, {11, 0.514}, {100, 0.778}, {1000, 1.015}}) {
        const int64_t V = quote.first;   // (not a structured binding: clang 14 cannot capture one)
        const double text = quote.second;
        CAPTURE(V);
        CHECK(entropy(V) == doctest::Approx(text).epsilon(1e-3));
        CHECK(floor_at(V) == doctest::Approx(text).epsilon(1e-3));
    }
}

TEST_CASE("docs/12: the Noam table and Adam without bias correction") {
    Tensor p = Tensor::zeros({1}).requires_grad_();
    optim::Adam opt({p}, {.lr = 0});
    struct Row { int64_t d_model, warmup; float factor; double lr1, peak; };
    const Row table[] = {{512, 4000, 1.0f, 1.7e-7, 7.0e-4},
                         {512, 400, 0.5f, 2.8e-6, 1.1e-3},
                         {128, 200, 1.0f, 3.1e-5, 6.25e-3},
                         {128, 400, 1.0f, 1.1e-5, 4.4e-3}};
    for (const Row& r : table) {
        const optim::NoamSchedule s(opt, r.d_model, r.warmup, r.factor);
        CAPTURE(r.d_model);
        CAPTURE(r.warmup);
        CHECK(s.lr_at(1) == doctest::Approx(r.lr1).epsilon(0.03));       // quoted with 2 digits
        CHECK(s.lr_at(r.warmup) == doctest::Approx(r.peak).epsilon(0.01));
        // the quotes are the formula's: factor * d^-0.5 * min(s^-0.5, s * w^-1.5)
        const auto noam = [&](double step) {
            return r.factor / std::sqrt(double(r.d_model)) * std::min(1 / std::sqrt(step), step * std::pow(double(r.warmup), -1.5));
        };
        CHECK(noam(1) == doctest::Approx(r.lr1).epsilon(0.03));
        CHECK(noam(double(r.warmup)) == doctest::Approx(r.peak).epsilon(0.01));
        CHECK(s.lr_at(r.warmup) >= s.lr_at(r.warmup - 1));
        CHECK(s.lr_at(r.warmup) >= s.lr_at(r.warmup + 1));
    }
    // the uncorrected step over the corrected one: (1 - b1^t) / sqrt(1 - b2^t)
    const auto ratio = [](int t) { return (1 - std::pow(0.9, t)) / std::sqrt(1 - std::pow(0.98, t)); };
    CHECK(ratio(1) == doctest::Approx(0.71).epsilon(0.01));
    CHECK(ratio(10) == doctest::Approx(1.52).epsilon(0.005));
    CHECK(ratio(194) > 1.01);
    CHECK(ratio(195) <= 1.01);
}

// docs/12's worked example of checkpoint averaging, run through the code the translation example
// runs: optim::SGD takes the steps, common::KeptEpochs keeps the last K epochs' parameters and
// averages them. The model is two numbers w = (w1, w2), the weight of a Linear(2, 1) without bias;
// the loss L(w) = (w1^2 + 4 w2^2) / 2 has its minimum at 0, and each step's gradient carries
// noise, as a minibatch's does: the step's loss is L(w) + xi . w with xi ~ N(0, I).
namespace docs12 {

constexpr double curvature[2] = {1.0, 4.0};   // a1, a2: L(w) = (a1 w1^2 + a2 w2^2) / 2
constexpr double lr = 0.1;
constexpr int epochs = 10, steps_per_epoch = 10;

double loss_at(const float* w) { return 0.5 * (curvature[0] * w[0] * w[0] + curvature[1] * w[1] * w[1]); }

// The mean loss, over draws of the noise, of the mean of the last K checkpoints once the iterates
// have forgotten their start: in dimension i, w <- rho w - lr xi with rho = 1 - lr a_i, so
// Var(w) = lr^2 / (1 - rho^2) and checkpoints E steps apart have correlation rho^E; the mean of K
// of them has Var(w) (sum over p, q of rho^(E |p - q|)) / K^2.
double expected_loss_of_mean(int K) {
    double total = 0.0;
    for (double a : curvature) {
        const double rho = 1.0 - lr * a, var = lr * lr / (1.0 - rho * rho);
        double pairs = 0.0;
        for (int p = 0; p < K; p++)
            for (int q = 0; q < K; q++) pairs += std::pow(rho, steps_per_epoch * std::abs(p - q));
        total += 0.5 * a * var * pairs / (K * K);
    }
    return total;
}

// One run from w = (2, 2) with the noise of `seed`: the loss of the last checkpoint
// (K = 1) and of the mean of the last K, for each K of Ks.
std::vector<double> run(uint64_t seed, const std::vector<int>& Ks) {
    nn::Linear model(2, 1, {.bias = false});   // w = model.weight (1, 2)
    model.weight.data()[0] = model.weight.data()[1] = 2.0f;   // L = 10 at the start
    const Tensor a = Tensor::from_vector({float(curvature[0]), float(curvature[1])}, {1, 2});
    optim::SGD opt(model.parameters(), {.lr = float(lr)});
    std::vector<common::KeptEpochs> kept;
    for (int K : Ks) kept.emplace_back(K);
    manual_seed(seed);
    for (int epoch = 1; epoch <= epochs; epoch++) {
        for (int step = 0; step < steps_per_epoch; step++) {
            const Tensor& w = model.weight;
            const Tensor xi = Tensor::randn({1, 2});              // the minibatch's noise
            const Tensor loss = sum(0.5f * a * w * w + xi * w);   // its gradient: a w + xi
            opt.zero_grad();
            loss.backward();
            opt.step();
        }
        for (common::KeptEpochs& k : kept) k.add(model, epoch, loss_at(model.weight.data()));   // "validation": L itself
    }
    std::vector<double> losses;
    for (const common::KeptEpochs& k : kept) {
        nn::Linear probe(2, 1, {.bias = false});
        k.average_last_into(probe);
        losses.push_back(loss_at(probe.weight.data()));
    }
    return losses;
}

}  // namespace docs12

TEST_CASE("docs/12: averaging the last checkpoints of noisy SGD on a quadratic") {
    using namespace docs12;
    // the quoted means over seeds 1..200: the last checkpoint, the mean of the last 2, 5 and 10
    const std::vector<int> Ks = {1, 2, 5, 10};
    std::vector<double> mean(Ks.size(), 0.0);
    int beaten = 0;   // runs in which the mean of the last 5 is below the last checkpoint
    const int runs = 200;
    for (uint64_t seed = 1; seed <= runs; seed++) {
        const std::vector<double> r = run(seed, Ks);
        for (size_t i = 0; i < Ks.size(); i++) mean[i] += r[i] / runs;
        beaten += r[2] < r[0];
    }
    const double quoted_mean[] = {0.053, 0.033, 0.015, 0.015};
    for (size_t i = 0; i < Ks.size(); i++) {
        CAPTURE(Ks[i]);
        CHECK(mean[i] == doctest::Approx(quoted_mean[i]).epsilon(0.04));   // quoted with 2 digits
    }
    CHECK(mean[0] / mean[2] == doctest::Approx(3.5).epsilon(0.03));   // "cut the loss 3.5 times, not 5"
    CHECK(beaten >= 145);   // "three runs in four" (150 here)
    CHECK(beaten <= 155);
    // the formula's, for checkpoints far from the start: 0.058, 0.033, 0.015, and 0.008 for K = 10,
    // which the runs miss because their first checkpoints are still on the way down
    const double quoted_formula[] = {0.058, 0.033, 0.015, 0.008};
    for (size_t i = 0; i < Ks.size(); i++) CHECK(expected_loss_of_mean(Ks[i]) == doctest::Approx(quoted_formula[i]).epsilon(0.03));
    CHECK(expected_loss_of_mean(1) == doctest::Approx(lr / 2 * (1 / (2 - lr * 1.0) + 1 / (2 - lr * 4.0))).epsilon(1e-12));
    // the correlations of checkpoints 10 steps apart, and w1's descent at the first checkpoint
    CHECK(std::pow(1 - lr * curvature[0], steps_per_epoch) == doctest::Approx(0.35).epsilon(0.01));
    CHECK(std::pow(1 - lr * curvature[1], steps_per_epoch) == doctest::Approx(0.006).epsilon(0.01));
    CHECK(2 * std::pow(1 - lr * curvature[0], steps_per_epoch) == doctest::Approx(0.70).epsilon(0.01));
    // one run can go either way: seed 1's last checkpoint lands nearer the minimum than any mean
    const std::vector<double> one = run(1, Ks);
    CHECK(one[0] == doctest::Approx(0.0013).epsilon(0.04));
    for (size_t i = 1; i < Ks.size(); i++) CHECK(one[i] > one[0]);
}

// docs/14's sampling section: logits (2, 1, 0) at T = 1, 0.5 and 2, top-k 2 and top-p 0.8 (the
// top-2 again), each p worked out here in double, the quote to 4 decimals, and sampling_probs
// giving the same; and the cumulative bounds of the inverse-CDF draw.
TEST_CASE("docs/14: sampling's worked example") {
    const float z[3] = {2.0f, 1.0f, 0.0f};
    struct Row { double T; int k; float top_p; std::vector<double> quote; };
    const std::vector<Row> rows = {{1.0, 0, 1.0f, {0.6652, 0.2447, 0.0900}}, {0.5, 0, 1.0f, {0.8668, 0.1173, 0.0159}},
                                   {2.0, 0, 1.0f, {0.5065, 0.3072, 0.1863}}, {1.0, 2, 1.0f, {0.7311, 0.2689, 0.0}},
                                   {1.0, 0, 0.8f, {0.7311, 0.2689, 0.0}}};
    for (const Row& r : rows) {
        CAPTURE(r.T);
        CAPTURE(r.k);
        CAPTURE(r.top_p);
        const int kept = r.k > 0 ? r.k : r.top_p < 1.0f ? 2 : 3;   // top-p 0.8: 0.6652 < 0.8 <= 0.9099
        double sum = 0.0;
        for (int i = 0; i < kept; i++) sum += std::exp(z[i] / r.T);
        const std::vector<double> p = models::sampling_probs(z, 3, {.temperature = static_cast<float>(r.T), .top_k = r.k, .top_p = r.top_p});
        for (int i = 0; i < 3; i++) {
            CAPTURE(i);
            const double formula = i < kept ? std::exp(z[i] / r.T) / sum : 0.0;
            CHECK(std::fabs(formula - r.quote[i]) <= 0.5e-4);
            CHECK(p[i] == doctest::Approx(formula).epsilon(1e-6));
        }
    }
    // the sums quoted: 11.107, 62.987, 5.367, 10.107
    CHECK(std::exp(2.0) + std::exp(1.0) + 1.0 == doctest::Approx(11.107).epsilon(1e-4));
    CHECK(std::exp(4.0) + std::exp(2.0) + 1.0 == doctest::Approx(62.987).epsilon(1e-4));
    CHECK(std::exp(1.0) + std::exp(0.5) + 1.0 == doctest::Approx(5.367).epsilon(1e-4));
    CHECK(std::exp(2.0) + std::exp(1.0) == doctest::Approx(10.107).epsilon(1e-4));
    // the draw at T = 1: u < 0.6652 token 0, u < 0.9099 token 1, the rest token 2
    const std::vector<double> t1 = models::sampling_probs(z, 3, {});
    CHECK(t1[0] + t1[1] == doctest::Approx(0.9099).epsilon(1e-4));
    CHECK(models::sample_token(t1, 0.6651f) == 0);
    CHECK(models::sample_token(t1, 0.6653f) == 1);
    CHECK(models::sample_token(t1, 0.9098f) == 1);
    CHECK(models::sample_token(t1, 0.9100f) == 2);
}

TEST_CASE("docs/16: bf16's rounding error, and Adam steps near w = 0.1") {
    // 8 significant bits: neighbours at most 2^-7 |x| apart, so round-to-nearest is off by at most
    // 2^-8 of x. The worst case, the tie 1 + 2^-8 (to even: down to 1), is off by 2^-8 / (1 + 2^-8).
    CHECK(kernels::round_to_bf16(1.00390625f) == 1.0f);
    const double tie_error = std::ldexp(1.0, -8) / (1 + std::ldexp(1.0, -8));
    CHECK(tie_error == doctest::Approx(0.00389).epsilon(0.001));
    // every float in [1, 2) (the relative error is the same in every binade of normal numbers)
    double worst = 0.0;
    float worst_x = 0.0f;
    for (uint32_t bits = 0x3F800000u; bits < 0x40000000u; bits++) {
        float x;
        std::memcpy(&x, &bits, sizeof x);
        const double error = std::fabs(double(kernels::round_to_bf16(x)) - x) / x;
        if (error > worst) worst = error, worst_x = x;
    }
    CHECK(worst <= std::ldexp(1.0, -8));
    CHECK(worst == tie_error);
    CHECK(worst_x == 1.00390625f);

    // near w = 0.1 (in [2^-4, 2^-3)) bf16's neighbours are 2^-4 * 2^-7 = 2^-11 apart
    const float w = kernels::round_to_bf16(0.1f), spacing = std::ldexp(1.0f, -11);
    CHECK(w == 0.10009765625f);
    CHECK(kernels::round_to_bf16(w + spacing) == w + spacing);   // the next bf16 number
    CHECK(spacing == doctest::Approx(0.00049).epsilon(0.01));
    CHECK(spacing / 2 == doctest::Approx(0.00024).epsilon(0.02));
    const auto moved = [w](float step) { return kernels::round_to_bf16(w + step) - w; };
    CHECK(moved(1e-4f) == 0.0f);       // below half a spacing: lost
    CHECK(moved(2.4e-4f) == 0.0f);
    // chapter 12's peaks, the paper's and --paper's: factor * (D * warmup)^-0.5
    const double paper_peak = 1 / std::sqrt(512.0 * 4000), annotated_peak = 0.5 / std::sqrt(512.0 * 400);
    CHECK(paper_peak == doctest::Approx(7.0e-4).epsilon(0.01));
    CHECK(annotated_peak == doctest::Approx(1.1e-3).epsilon(0.01));
    CHECK(moved(float(paper_peak)) == spacing);               // 0.00049 instead of 0.0007
    CHECK(1 - spacing / paper_peak == doctest::Approx(0.30).epsilon(0.02));   // 30% short
    CHECK(moved(float(annotated_peak)) == 2 * spacing);       // 0.00098 instead of 0.0011
    // a weight of 0.5: neighbours 2^-8 = 0.0039 apart, so even the peaks are lost
    CHECK(std::ldexp(1.0, -8) == doctest::Approx(0.0039).epsilon(0.01));
    CHECK(kernels::round_to_bf16(0.5f + float(paper_peak)) == 0.5f);
    CHECK(kernels::round_to_bf16(0.5f + float(annotated_peak)) == 0.5f);
    // after the peak, the paper's lr = (512 step)^-0.5 reaches 2^-12, half the spacing at 0.1, at
    // step 2^15 and stays below it, a third of the paper's 100,000 steps
    Tensor p = Tensor::zeros({1}).requires_grad_();
    optim::Adam opt({p}, {.lr = 0});
    const optim::NoamSchedule paper(opt, 512, 4000, 1.0f);
    CHECK(paper.lr_at(32768) == std::ldexp(1.0f, -12));
    CHECK(paper.lr_at(32769) < std::ldexp(1.0f, -12));
    CHECK(paper.lr_at(32767) > std::ldexp(1.0f, -12));
    CHECK(32768.0 / 100000 == doctest::Approx(1.0 / 3).epsilon(0.02));
    CHECK(moved(paper.lr_at(33000)) == 0.0f);       // a step of lr on w = 0.1 is lost from then on
    CHECK(moved(paper.lr_at(100000)) == 0.0f);
}

// docs/15's two figures draw figures::kStepTimes; the chapter's table quotes the same numbers.
TEST_CASE("docs/15: the table's floor and 2-thread rows are the numbers its figures draw") {
    const std::string chapter = read_whole_file("docs/15-making-it-fast.md");
    const figures::StepTimes& t = figures::kStepTimes;
    // (snprintf instead of "literal" + std::string: g++ 12's -Wrestrict misreads the latter)
    char paper[96], floor[96], threads[128];
    std::snprintf(paper, sizeof paper, "(%.1f ms against %.1f ms)", t.paper_ours_ms, t.paper_torch_ms);
    std::snprintf(floor, sizeof floor, "**%.0f ms**, 81%% of the measured %.1f ms", t.paper_floor_ms, t.paper_ours_ms);
    std::snprintf(threads, sizeof threads, "(%.1f-%.1f ms on 1 thread, %.1f-%.1f ms on 2)", t.d128_one_thread_ms[0],
                  t.d128_one_thread_ms[1], t.d128_two_threads_ms[0], t.d128_two_threads_ms[1]);
    CHECK(chapter.find(paper) != std::string::npos);
    CHECK(chapter.find(floor) != std::string::npos);
    CHECK(chapter.find(threads) != std::string::npos);
    // the floor's arithmetic: 67 GFLOP at 2 x 225 GFLOP/s, and its share of the measured step
    CHECK(67.0 / (2 * 225.0) * 1000 == doctest::Approx(t.paper_floor_ms).epsilon(0.002));
    CHECK(t.paper_floor_ms / t.paper_ours_ms == doctest::Approx(0.81).epsilon(0.005));
    // and the speedup the table prints in bold: the ratio of the ranges' middles, 1.94
    const double speedup = (t.d128_one_thread_ms[0] + t.d128_one_thread_ms[1]) / (t.d128_two_threads_ms[0] + t.d128_two_threads_ms[1]);
    CHECK(speedup == doctest::Approx(1.94).epsilon(0.003));
    CHECK(chapter.find("**1.94x**") != std::string::npos);
}

// The lesson's functions hold the lesson (docs/README.md, "The path"): the files a chapter
// teaches from name no decoding cache, beam slot, data-parallel shard, thread or parallel loop.
// That machinery lives beside them (models/decoder_cache, autograd/data_parallel,
// autograd/kernels/) and reaches them from outside. `thread_local`, the C++ storage of a mode
// (grad mode, NoGradGuard), is not a thread of work and is let through.
TEST_CASE("the lesson's files name no decoding cache, beam slot, shard, thread or parallel loop") {
    const std::vector<std::string> lesson = {
        "autograd/engine.cpp", "autograd/tensor.h", "autograd/tensor.cpp", "autograd/ops.h", "autograd/ops_elementwise.cpp",
        "autograd/ops_matmul.cpp", "autograd/ops_reduce.cpp", "autograd/ops_shape.cpp", "autograd/ops_softmax.cpp",
        "models/transformer.h", "models/transformer.cpp", "models/gpt.h", "models/gpt.cpp", "models/rnn_seq2seq.h", "models/rnn_seq2seq.cpp", "optim/adam.h",
        "optim/adam.cpp", "nn/attention.h", "nn/attention.cpp", "nn/dropout.h", "nn/dropout.cpp", "nn/embedding.h",
        "nn/embedding.cpp", "nn/feed_forward.h", "nn/feed_forward.cpp", "nn/init.h", "nn/init.cpp", "nn/layer_norm.h",
        "nn/layer_norm.cpp", "nn/linear.h", "nn/linear.cpp", "nn/loss.h", "nn/loss.cpp", "nn/module.h", "nn/module.cpp",
        "nn/positional_encoding.h", "nn/positional_encoding.cpp", "nn/recurrent.h", "nn/recurrent.cpp", "nn/soft_attention.h",
        "nn/soft_attention.cpp", "nn/serialization.h", "nn/serialization.cpp", "nn/nn.h"};
    const std::vector<std::string> words = {"cache", "slot", "shard", "thread", "parallel", "#pragma omp", "omp_"};
    int checked = 0;
    for (const std::string& path : lesson) {
        std::istringstream lines(read_whole_file(path));
        REQUIRE(lines.str().size() > 0);
        int n = 0;
        for (std::string line; std::getline(lines, line);) {
            n++;
            std::string lower = line;
            for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            for (size_t at; (at = lower.find("thread_local")) != std::string::npos;) lower.erase(at, 12);
            for (const std::string& w : words) {
                INFO(path << ":" << n << ": " << line);
                CHECK(lower.find(w) == std::string::npos);
            }
        }
        checked++;
    }
    CHECK(checked == static_cast<int>(lesson.size()));
}

// docs/README.md promises short lectures: each chapter's lesson, the text before its exercises,
// is at most 2,000 words (counted as wc -w counts them); the details go to its Notes.
TEST_CASE("every chapter's lesson, before its exercises, is at most 2,000 words") {
    int chapters = 0;
    for (const auto& entry : std::filesystem::directory_iterator("docs")) {
        const std::string name = entry.path().filename().string();
        if (name.size() < 3 || !std::isdigit(static_cast<unsigned char>(name[0])) || entry.path().extension() != ".md") continue;
        std::istringstream lines(read_whole_file(entry.path()));
        int64_t words = 0;
        for (std::string line; std::getline(lines, line) && line.rfind("## Exercises", 0) != 0;) {
            std::istringstream w(line);
            for (std::string word; w >> word;) words++;
        }
        CAPTURE(name);
        CHECK(words <= 2000);
        chapters++;
    }
    CHECK(chapters == 18);
}
