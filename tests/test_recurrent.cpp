// nn/recurrent.h: the tanh RNN, GRU and LSTM cells, and the layers that run them over a sequence.
//   - gradcheck of each cell (input, state, every weight) and of 2-layer bidirectional padded layers
//   - one step of each cell computed by hand
//   - every option against a brute force: the layer is its cell run step by step (from h0, c0);
//     the reverse direction is a forward layer on the reversed sequence; 2 layers are two layers
//     of 1; a padded batch gives each row what it gets alone; dropout acts between layers, in
//     training only
//   - against PyTorch: torch.nn.GRU and torch.nn.LSTM (tests/reference/make_rnn_reference.py):
//     outputs, final states and every gradient, with fused kernels on and off
//   - the GRU's fused cell (autograd/kernels/gru_cell.h): gradcheck of the op, and the layer the
//     same both ways (the kernel against the plain step on its own: test_kernels.cpp)
//   - parameter names, shapes and init as PyTorch's; errors that name the layer and the shapes
// Sizes are all different (B 3, T 5, I 7, Hd 2: 2Hd 4, 3Hd 6, 4Hd 8; the PyTorch fixtures'
// B 4, T 5, I 7, Hd 3), so a mixed-up dim cannot hide behind an equal one.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <type_traits>

#include "autograd/io/json.h"
#include "nn/nn.h"
#include "tests/compare.h"
#include "tests/gradcheck_helpers.h"
#include "tests/pytorch_fixture.h"

using namespace autograd;
using V = const std::vector<Tensor>&;

namespace {

constexpr int64_t B = 3, T = 5, I = 7, Hd = 2;

// The parameter of m named `name`: a handle, so writing its data changes m.
Tensor parameter(const nn::Module& m, const std::string& name) {
    for (const auto& [n, t] : m.named_parameters())
        if (n == name) return t;
    throw std::runtime_error("no parameter named " + name);
}

// One cell's four weights, e.g. a layer's "_l1_reverse" into another layer's "_l0" or a cell's "".
void copy_cell(const nn::Module& from, const std::string& from_suffix, nn::Module& to, const std::string& to_suffix) {
    for (const std::string w : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
        const Tensor src = parameter(from, w + from_suffix);
        Tensor dst = parameter(to, w + to_suffix);
        REQUIRE(src.shape() == dst.shape());
        std::copy_n(src.data(), src.numel(), dst.data());
    }
}

// forward of any of the three layers; c0 goes to the LSTM only
template <class Layer>
nn::RecurrentOutput forward(const Layer& layer, const Tensor& x, const std::vector<int64_t>& lengths = {}, const Tensor& h0 = Tensor(),
                            const Tensor& c0 = Tensor()) {
    if constexpr (std::is_same_v<Layer, nn::LSTM>) return layer.forward(x, lengths, h0, c0);
    else return layer.forward(x, lengths, h0);
}

// output, h_n and c_n flattened into one vector: what gradcheck projects
Tensor flat(const nn::RecurrentOutput& r) {
    std::vector<Tensor> parts = {reshape(r.output, {-1}), reshape(r.h_n, {-1})};
    if (r.c_n.defined()) parts.push_back(reshape(r.c_n, {-1}));
    return cat(parts, 0);
}

// x (B, T, ...) read backwards in time
Tensor reversed(const Tensor& x) {
    const int64_t n = x.size(1);
    std::vector<int32_t> ids;
    for (int64_t t = n - 1; t >= 0; t--) ids.push_back(static_cast<int32_t>(t));
    return index_select(x, 1, Tokens(ids, {n}));
}

Tensor step_of(const Tensor& x, int64_t t) { return squeeze(narrow(x, 1, t, 1), 1); }   // x[:, t]

double max_abs_diff(const Tensor& a, const Tensor& b) {
    REQUIRE(a.shape() == b.shape());
    double d = 0.0;
    for (int64_t i = 0; i < a.numel(); i++) d = std::max(d, std::fabs(static_cast<double>(a.data()[i]) - b.data()[i]));
    return d;
}

// Two computations of the same numbers in different orders (a batch of 3 rows or 1, one gemm
// over all steps or one per step) differ by float32 rounding only: values here are below 3.
constexpr double kSame = 1e-6;

}  // namespace

// ------------------------------------------------------------------------------------------------
// cells

TEST_CASE("sigmoid, tanh RNN, GRU and LSTM cells: gradcheck w.r.t. the input, the state(s) and every weight") {
    manual_seed(1);
    // B 3, I 5, Hd 4 (3Hd 12, 4Hd 16): all different
    SUBCASE("RNNCell") {
        nn::RNNCell cell(5, 4);
        CHECK_GRAD([&](V v) { return cell.forward(v[0], v[1]); }, param({3, 5}), param({3, 4}), cell.weight_ih, cell.weight_hh,
                   cell.bias_ih, cell.bias_hh);
        check_backward_adds([&](V v) { return cell.forward(v[0], v[1]); }, {param({3, 5}), param({3, 4}), cell.weight_hh});
    }
    SUBCASE("GRUCell") {
        nn::GRUCell cell(5, 4);
        CHECK_GRAD([&](V v) { return cell.forward(v[0], v[1]); }, param({3, 5}), param({3, 4}), cell.weight_ih, cell.weight_hh,
                   cell.bias_ih, cell.bias_hh);
        // the step alone, from a given input part gi (B, 3Hd), both ways: fused and plain
        for (bool fused : {true, false}) {
            CAPTURE(fused);
            FusedKernelsGuard path(fused);
            CHECK_GRAD([&](V v) { return nn::gru_step(v[0], v[1], v[2], v[3]); }, param({3, 12}), param({3, 4}), param({12, 4}),
                       param({12}));
        }
        check_backward_adds([&](V v) { return cell.forward(v[0], v[1]); }, {param({3, 5}), param({3, 4}), cell.weight_hh});
        // the fused op itself, from gi, gh (B, 3Hd) and h (B, Hd); gates of up to ±4 reach the
        // sigmoids' and tanh's flat ends
        CHECK_GRAD([](V v) { return fused::gru_cell(v[0], v[1], v[2]); }, param({3, 12}, -2.0f, 2.0f), param({3, 12}, -2.0f, 2.0f),
                   param({3, 4}));
        check_backward_adds([](V v) { return fused::gru_cell(v[0], v[1], v[2]); }, {param({3, 12}), param({3, 12}), param({3, 4})});
    }
    SUBCASE("LSTMCell") {
        nn::LSTMCell cell(5, 4);
        // h' and c' side by side, so one projection checks both
        auto both = [&](V v) {
            const nn::CellState s = cell.forward(v[0], {v[1], v[2]});
            return cat({s.h, s.c}, -1);   // (B, 2Hd)
        };
        CHECK_GRAD(both, param({3, 5}), param({3, 4}), param({3, 4}), cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh);
        check_backward_adds(both, {param({3, 5}), param({3, 4}), param({3, 4}), cell.weight_hh});
    }
}

TEST_CASE("cells: one step computed by hand (I = Hd = 1)") {
    // x = 1, h = 0.5; weights chosen so that every gate's argument is a round number.
    // (torch.nn.GRUCell and LSTMCell with these weights print the same: 0.5363, and 0.8231, 1.6932.)
    const Tensor x = Tensor::from_vector({1.0f}, {1, 1}), h = Tensor::from_vector({0.5f}, {1, 1});
    auto set = [](Tensor t, std::vector<float> v) { std::copy(v.begin(), v.end(), t.data()); };

    SUBCASE("tanh RNN") {
        nn::RNNCell cell(1, 1);
        set(cell.weight_ih, {0.5f});
        set(cell.weight_hh, {-1.0f});
        set(cell.bias_ih, {0.1f});
        set(cell.bias_hh, {0.2f});
        // h' = tanh(0.5 * 1 + 0.1 + (-1) * 0.5 + 0.2) = tanh(0.3) = 0.2913126
        CHECK(cell.forward(x, h).item() == doctest::Approx(0.2913126124515909).epsilon(1e-6));
    }
    SUBCASE("GRU") {
        nn::GRUCell cell(1, 1);
        set(cell.weight_ih, {0.5f, 1.0f, 0.25f});   // W_ir, W_iz, W_in
        set(cell.weight_hh, {-1.0f, 2.0f, 1.0f});   // W_hr, W_hz, W_hn
        set(cell.bias_ih, {0.0f, -0.5f, 0.0f});     // b_ir, b_iz, b_in
        set(cell.bias_hh, {0.0f, -0.5f, 0.5f});     // b_hr, b_hz, b_hn
        // r  = σ(0.5 * 1 + 0 + (-1) * 0.5 + 0)       = σ(0) = 0.5
        // z  = σ(1 * 1 - 0.5 + 2 * 0.5 - 0.5)        = σ(1) = 0.7310586
        // n  = tanh(0.25 * 1 + 0 + r (1 * 0.5 + 0.5)) = tanh(0.75) = 0.6351490
        // h' = (1 - z) n + z h = 0.2689414 * 0.6351490 + 0.7310586 * 0.5 = 0.5363472
        // (the reset gate applied to h before the product, tanh(0.25 + 1 * (r h) + 0.5) = tanh(1), would give 0.5703535;
        //  z and 1 - z swapped, 0.5988018)
        for (bool fused : {true, false}) {   // the fused kernel and the plain form
            CAPTURE(fused);
            FusedKernelsGuard path(fused);
            CHECK(cell.forward(x, h).item() == doctest::Approx(0.5363471513517029).epsilon(1e-6));
        }
    }
    SUBCASE("LSTM") {
        nn::LSTMCell cell(1, 1);
        set(cell.weight_ih, {1.0f, 0.5f, -1.0f, 3.0f});   // W_ii, W_if, W_ig, W_io
        set(cell.weight_hh, {0.0f, 1.0f, 2.0f, -2.0f});   // W_hi, W_hf, W_hg, W_ho
        set(cell.bias_ih, {0.0f, 0.0f, 0.0f, 0.0f});
        set(cell.bias_hh, {-1.0f, 0.0f, 0.5f, 0.0f});
        const Tensor c = Tensor::from_vector({2.0f}, {1, 1});
        // i  = σ(1 + 0 * 0.5 - 1)      = σ(0) = 0.5
        // f  = σ(0.5 + 1 * 0.5)        = σ(1) = 0.7310586
        // g  = tanh(-1 + 2 * 0.5 + 0.5) = tanh(0.5) = 0.4621172
        // o  = σ(3 - 2 * 0.5)          = σ(2) = 0.8807971
        // c' = f c + i g = 0.7310586 * 2 + 0.5 * 0.4621172 = 1.6931757
        // h' = o tanh(c') = 0.8807971 * 0.9345533 = 0.8231494
        const nn::CellState s = cell.forward(x, {h, c});
        CHECK(s.c.item() == doctest::Approx(1.6931757358900146).epsilon(1e-6));
        CHECK(s.h.item() == doctest::Approx(0.8231493521850437).epsilon(1e-6));
    }
}

// ------------------------------------------------------------------------------------------------
// layers

TEST_CASE("RNN, GRU and LSTM layers: gradcheck of 2 layers, bidirectional, with padding and initial states") {
    const std::vector<int64_t> lengths = {5, 2, 4};
    auto check = [&](const auto& layer) {
        const bool lstm = std::is_same_v<std::decay_t<decltype(layer)>, nn::LSTM>;
        std::vector<Tensor> inputs = {param({B, T, I}), param({4, B, Hd}, -0.5f, 0.5f)};   // x, h0
        if (lstm) inputs.push_back(param({4, B, Hd}, -0.5f, 0.5f));                       // c0
        for (const Tensor& p : layer.parameters()) inputs.push_back(p);                   // all 16 weights
        // Two layers both ways: L = sum(w * f) adds up every output of every step, and its float
        // rounding, about u |L| / eps, reached 6.7e-5 on one element in the sanitizer's build
        // (-O1: other roundings), past the default atol of 5e-5. A wrong backward is off by far more.
        const autograd::GradcheckResult r_ = autograd::gradcheck(
            [&](V v) { return flat(forward(layer, v[0], lengths, v[1], lstm ? v[2] : Tensor())); }, inputs, {.atol = 1.5e-4});
        INFO(r_.report);
        CHECK(r_.ok);
    };
    manual_seed(2);
    const nn::RecurrentOptions opt{.input_size = I, .hidden_size = Hd, .num_layers = 2, .bidirectional = true};
    SUBCASE("RNN") { check(nn::RNN(opt)); }
    SUBCASE("GRU") { check(nn::GRU(opt)); }
    SUBCASE("LSTM") { check(nn::LSTM(opt)); }
}

// Row b alone is x[b, :lengths[b]] (1, n, I), from h0[:, b] (and c0[:, b]).
template <class Layer>
void check_padded_equals_alone() {
    manual_seed(3);
    const Layer layer({.input_size = I, .hidden_size = Hd, .num_layers = 2, .bidirectional = true});
    const bool lstm = std::is_same_v<Layer, nn::LSTM>;
    const std::vector<int64_t> lengths = {5, 2, 4};
    Tensor x = Tensor::randn({B, T, I});
    for (int64_t b = 0; b < B; b++)   // padding that must not matter
        for (int64_t t = lengths[b]; t < T; t++)
            for (int64_t i = 0; i < I; i++) x.at({b, t, i}) = 100.0f;
    x.requires_grad_();
    const Tensor h0 = Tensor::randn({4, B, Hd}), c0 = Tensor::randn({4, B, Hd});
    const nn::RecurrentOutput batch = forward(layer, x, lengths, h0, c0);
    REQUIRE(batch.output.shape() == Shape{B, T, 2 * Hd});
    for (int64_t b = 0; b < B; b++) {
        const int64_t n = lengths[b];
        CAPTURE(b);
        const nn::RecurrentOutput alone =
            forward(layer, narrow(narrow(x, 0, b, 1), 1, 0, n), {}, narrow(h0, 1, b, 1), lstm ? narrow(c0, 1, b, 1) : Tensor());
        const Tensor out_b = narrow(batch.output, 0, b, 1);   // (1, T, 2Hd)
        CHECK(max_abs_diff(narrow(out_b, 1, 0, n), alone.output) <= kSame);
        CHECK(max_abs_diff(narrow(batch.h_n, 1, b, 1), alone.h_n) <= kSame);   // both directions, both layers
        if (lstm) CHECK(max_abs_diff(narrow(batch.c_n, 1, b, 1), alone.c_n) <= kSame);
        const std::vector<float> pad = narrow(out_b, 1, n, T - n).to_vector();   // exactly 0 after the row's end
        CHECK(pad == std::vector<float>(pad.size(), 0.0f));
    }
    // and no gradient reaches the padding
    Tensor loss = sum(batch.output) + sum(batch.h_n);
    if (lstm) loss = loss + sum(batch.c_n);
    loss.backward();
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < I; i++) {
                CAPTURE(b);
                CAPTURE(t);
                if (t >= lengths[b]) CHECK(x.grad().at({b, t, i}) == 0.0f);
                else if (i == 0) CHECK(x.grad().at({b, t, i}) != 0.0f);
            }
}

TEST_CASE("a padded batch gives each row the outputs and final states it gets alone (2 layers, bidirectional)") {
    SUBCASE("GRU") { check_padded_equals_alone<nn::GRU>(); }
    SUBCASE("LSTM") { check_padded_equals_alone<nn::LSTM>(); }
    SUBCASE("RNN") { check_padded_equals_alone<nn::RNN>(); }
}

TEST_CASE("a layer is its cell run step by step: one matmul for all input parts, h0 and c0 as the first state") {
    manual_seed(4);
    const Tensor x = Tensor::randn({B, T, I}), h0 = Tensor::randn({1, B, Hd}), c0 = Tensor::randn({1, B, Hd});
    SUBCASE("GRU") {
        const nn::GRU gru({.input_size = I, .hidden_size = Hd});
        nn::GRUCell cell(I, Hd);
        copy_cell(gru, "_l0", cell, "");
        const nn::RecurrentOutput r = gru.forward(x, {}, h0);
        Tensor h = squeeze(h0, 0);   // (B, Hd)
        for (int64_t t = 0; t < T; t++) {
            h = cell.forward(step_of(x, t), h);
            CHECK(max_abs_diff(step_of(r.output, t), h) <= kSame);
        }
        CHECK(max_abs_diff(squeeze(r.h_n, 0), h) <= kSame);
        CHECK(max_abs_diff(gru.forward(x).output, r.output) > 1e-2);   // the initial state matters
    }
    SUBCASE("LSTM") {
        const nn::LSTM lstm({.input_size = I, .hidden_size = Hd});
        nn::LSTMCell cell(I, Hd);
        copy_cell(lstm, "_l0", cell, "");
        const nn::RecurrentOutput r = lstm.forward(x, {}, h0, c0);
        nn::CellState s{squeeze(h0, 0), squeeze(c0, 0)};   // (B, Hd) each
        for (int64_t t = 0; t < T; t++) {
            s = cell.forward(step_of(x, t), s);
            CHECK(max_abs_diff(step_of(r.output, t), s.h) <= kSame);
        }
        CHECK(max_abs_diff(squeeze(r.h_n, 0), s.h) <= kSame);
        CHECK(max_abs_diff(squeeze(r.c_n, 0), s.c) <= kSame);
        CHECK(max_abs_diff(lstm.forward(x, {}, h0).output, r.output) > 1e-2);   // c0 matters
        CHECK(max_abs_diff(lstm.forward(x, {}, Tensor(), c0).output, r.output) > 1e-2);   // and h0
    }
    SUBCASE("RNN") {
        const nn::RNN rnn({.input_size = I, .hidden_size = Hd});
        nn::RNNCell cell(I, Hd);
        copy_cell(rnn, "_l0", cell, "");
        const nn::RecurrentOutput r = rnn.forward(x, {}, h0);
        Tensor h = squeeze(h0, 0);
        for (int64_t t = 0; t < T; t++) h = cell.forward(step_of(x, t), h);
        CHECK(max_abs_diff(squeeze(r.h_n, 0), h) <= kSame);
        CHECK(max_abs_diff(step_of(r.output, T - 1), h) <= kSame);
    }
}

// The layer of the reference test below, on other sizes and inputs: every gradient, not only
// the ones a loss of PyTorch's cotangents weighs. Tolerance: see test_kernels.cpp's gru_step
// test; the differences of one step's kernel grow a little over T steps and two layers.
TEST_CASE("GRU: fused kernels on and off give the same outputs and gradients (2 layers, bidirectional, lengths, h0)") {
    manual_seed(11);
    const nn::GRU gru({.input_size = I, .hidden_size = Hd, .num_layers = 2, .bidirectional = true});
    std::vector<Tensor> leaves = {(Tensor::randn({B, T, I}) * 2.0f).detach().requires_grad_(), param({4, B, Hd})};   // x, h0
    for (const Tensor& p : gru.parameters()) leaves.push_back(p);
    auto f = [&](V v) { return flat(gru.forward(v[0], {5, 2, 4}, v[1])); };
    expect_fused_equals_plain(f, leaves, 1e-5, 1e-6);
}

TEST_CASE("gru_step records one gru_cell op with fused kernels on, the sigmoids and tanh of its plain form with them off") {
    manual_seed(12);
    const Tensor gi = param({B, 3 * Hd}), h = param({B, Hd}), w_hh = param({3 * Hd, Hd}), b_hh = param({3 * Hd});
    for (bool fused : {true, false}) {
        CAPTURE(fused);
        FusedKernelsGuard path(fused);
        const std::string graph = to_dot(nn::gru_step(gi, h, w_hh, b_hh));   // one node per op, labelled with its name
        CHECK((graph.find("gru_cell") != std::string::npos) == fused);
        CHECK((graph.find("sigmoid") != std::string::npos) == !fused);
        CHECK((graph.find("tanh") != std::string::npos) == !fused);
        CHECK(graph.find(fused ? "linear" : "matmul") != std::string::npos);   // gh = h W_hh^T + b_hh, a product either way
    }
}

TEST_CASE("bidirectional: the reverse half is a forward layer run on the reversed sequence, concatenated after the forward half") {
    manual_seed(5);
    const Tensor x = Tensor::randn({B, T, I});
    const nn::GRU bi({.input_size = I, .hidden_size = Hd, .bidirectional = true});
    nn::GRU fwd({.input_size = I, .hidden_size = Hd}), bwd({.input_size = I, .hidden_size = Hd});
    copy_cell(bi, "_l0", fwd, "_l0");
    copy_cell(bi, "_l0_reverse", bwd, "_l0");
    const nn::RecurrentOutput r = bi.forward(x), f = fwd.forward(x), b = bwd.forward(reversed(x));
    CHECK(r.output.shape() == Shape{B, T, 2 * Hd});
    CHECK(max_abs_diff(r.output, cat({f.output, reversed(b.output)}, -1)) <= kSame);
    CHECK(max_abs_diff(r.h_n, cat({f.h_n, b.h_n}, 0)) <= kSame);   // the reverse one's state after reading position 0
    CHECK(max_abs_diff(narrow(r.output, -1, Hd, Hd), b.output) > 1e-2);   // it is not the reverse direction unreversed
}

TEST_CASE("num_layers: layer l reads the output of layer l - 1, both directions; h_n stacks the layers") {
    manual_seed(6);
    const std::vector<int64_t> lengths = {5, 2, 4};
    const Tensor x = Tensor::randn({B, T, I}), h0 = Tensor::randn({4, B, Hd}), c0 = Tensor::randn({4, B, Hd});
    const nn::LSTM two({.input_size = I, .hidden_size = Hd, .num_layers = 2, .bidirectional = true});
    nn::LSTM first({.input_size = I, .hidden_size = Hd, .bidirectional = true});
    nn::LSTM second({.input_size = 2 * Hd, .hidden_size = Hd, .bidirectional = true});
    copy_cell(two, "_l0", first, "_l0");
    copy_cell(two, "_l0_reverse", first, "_l0_reverse");
    copy_cell(two, "_l1", second, "_l0");
    copy_cell(two, "_l1_reverse", second, "_l0_reverse");
    const nn::RecurrentOutput r = two.forward(x, lengths, h0, c0);
    const nn::RecurrentOutput a = first.forward(x, lengths, narrow(h0, 0, 0, 2), narrow(c0, 0, 0, 2));
    const nn::RecurrentOutput b = second.forward(a.output, lengths, narrow(h0, 0, 2, 2), narrow(c0, 0, 2, 2));
    CHECK(max_abs_diff(r.output, b.output) <= kSame);
    CHECK(max_abs_diff(r.h_n, cat({a.h_n, b.h_n}, 0)) <= kSame);
    CHECK(max_abs_diff(r.c_n, cat({a.c_n, b.c_n}, 0)) <= kSame);
    CHECK(max_abs_diff(r.output, a.output) > 1e-2);
}

TEST_CASE("lengths: full-length rows are untouched, shorter rows change; lengths of T everywhere equal none") {
    manual_seed(7);
    const Tensor x = Tensor::randn({B, T, I});
    const nn::GRU gru({.input_size = I, .hidden_size = Hd, .num_layers = 2, .bidirectional = true});
    const nn::RecurrentOutput none = gru.forward(x), full = gru.forward(x, {T, T, T}), padded = gru.forward(x, {5, 2, 4});
    CHECK(full.output.to_vector() == none.output.to_vector());
    CHECK(full.h_n.to_vector() == none.h_n.to_vector());
    CHECK(max_abs_diff(narrow(padded.output, 0, 0, 1), narrow(none.output, 0, 0, 1)) <= kSame);   // row 0 has length T
    CHECK(max_abs_diff(narrow(padded.h_n, 1, 0, 1), narrow(none.h_n, 1, 0, 1)) <= kSame);
    for (int64_t b : {1, 2}) {
        CAPTURE(b);
        CHECK(max_abs_diff(narrow(padded.h_n, 1, b, 1), narrow(none.h_n, 1, b, 1)) > 1e-2);
        // the reverse direction starts at the row's last token, so its output changes even at position 0
        CHECK(max_abs_diff(narrow(narrow(padded.output, 0, b, 1), 1, 0, 1), narrow(narrow(none.output, 0, b, 1), 1, 0, 1)) > 1e-3);
    }
}

TEST_CASE("dropout: between layers only, in training only, the same draws as nn::dropout there") {
    manual_seed(8);
    const float p = 0.5f;
    const Tensor x = Tensor::randn({B, T, I});
    nn::GRU drop({.input_size = I, .hidden_size = Hd, .num_layers = 2, .dropout = p});
    nn::GRU first({.input_size = I, .hidden_size = Hd}), second({.input_size = Hd, .hidden_size = Hd});
    copy_cell(drop, "_l0", first, "_l0");
    copy_cell(drop, "_l1", second, "_l0");
    manual_seed(9);
    const nn::RecurrentOutput trained = drop.forward(x);
    manual_seed(9);
    const nn::RecurrentOutput a = first.forward(x);
    const nn::RecurrentOutput b = second.forward(nn::dropout(a.output, p, true));
    CHECK(max_abs_diff(trained.output, b.output) <= kSame);
    CHECK(max_abs_diff(trained.h_n, cat({a.h_n, b.h_n}, 0)) <= kSame);
    drop.eval();   // no dropout: the two layers composed plainly
    const nn::RecurrentOutput evaluated = drop.forward(x);
    CHECK(max_abs_diff(evaluated.output, second.forward(a.output).output) <= kSame);
    CHECK(max_abs_diff(evaluated.output, trained.output) > 1e-2);
    // one layer: no layer after it, so nothing to drop, in training too (PyTorch warns and does the same)
    nn::GRU one({.input_size = I, .hidden_size = Hd, .dropout = p});
    copy_cell(drop, "_l0", one, "_l0");
    CHECK(one.forward(x).output.to_vector() == a.output.to_vector());
}

TEST_CASE("parameters: torch.nn.GRU's names and shapes, initialized U(-1/sqrt(Hd), 1/sqrt(Hd))") {
    manual_seed(10);
    const nn::GRU gru({.input_size = I, .hidden_size = Hd, .num_layers = 2, .bidirectional = true});
    std::vector<std::string> names;
    std::vector<Shape> shapes;
    for (const auto& [n, t] : gru.named_parameters()) names.push_back(n), shapes.push_back(t.shape());
    std::vector<std::string> want_names;
    std::vector<Shape> want_shapes;
    for (const std::string l : {"_l0", "_l1"})
        for (const std::string dir : {"", "_reverse"}) {
            for (const std::string w : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) want_names.push_back(w + l + dir);
            want_shapes.insert(want_shapes.end(), {{3 * Hd, l == "_l0" ? I : 2 * Hd}, {3 * Hd, Hd}, {3 * Hd}, {3 * Hd}});
        }
    CHECK(names == want_names);
    CHECK(shapes == want_shapes);
    CHECK(gru.cell(1, 1).weight_ih.data() == parameter(gru, "weight_ih_l1_reverse").data());
    const nn::LSTMCell cell(I, Hd);
    CHECK(cell.weight_ih.shape() == Shape{4 * Hd, I});
    CHECK(cell.named_parameters()[1].first == "weight_hh");
    // the init's bound: k = 1/sqrt(Hd), every weight and bias within it and the extremes near it
    const nn::LSTM big({.input_size = 30, .hidden_size = 25});
    float largest = 0.0f;
    for (const Tensor& t : big.parameters())
        for (float v : t.to_vector()) largest = std::max(largest, std::fabs(v));
    CHECK(largest <= 0.2f);
    CHECK(largest > 0.199f);
}

TEST_CASE("recurrent errors name the layer or step and the shapes") {
    const nn::GRU gru({.input_size = 4, .hidden_size = 3, .num_layers = 2, .bidirectional = true});
    const Tensor x = Tensor::zeros({2, 5, 4});
    CHECK_THROWS_WITH_AS(gru.forward(Tensor::zeros({2, 5, 6})), doctest::Contains("GRU: input (2, 5, 6) does not match input_size 4"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(gru.forward(Tensor::zeros({5, 4})), doctest::Contains("GRU: input (5, 4) does not match"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(gru.forward(x, {5, 5, 5}), doctest::Contains("GRU: lengths has 3 entries for a batch of 2 rows"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(gru.forward(x, {5, 0}), doctest::Contains("GRU: lengths[1] = 0 is outside [1, T] = [1, 5]"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(gru.forward(x, {6, 1}), doctest::Contains("GRU: lengths[0] = 6 is outside"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(gru.forward(x, {}, Tensor::zeros({2, 2, 3})),
                         doctest::Contains("GRU: h0 (2, 2, 3) should be (layers*directions, B, Hd) = (4, 2, 3)"), std::invalid_argument);
    const nn::LSTM lstm({.input_size = 4, .hidden_size = 3});
    CHECK_THROWS_WITH_AS(lstm.forward(x, {}, Tensor(), Tensor::zeros({1, 3, 3})),
                         doctest::Contains("LSTM: c0 (1, 3, 3) should be (layers*directions, B, Hd) = (1, 2, 3)"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(nn::GRU({.input_size = 4}), doctest::Contains("GRU: input_size, hidden_size and num_layers must be positive"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(nn::LSTM({.input_size = 4, .hidden_size = 3, .dropout = 1.0f}),
                         doctest::Contains("LSTM: dropout probability must be in [0, 1)"), std::invalid_argument);
    const nn::GRUCell cell(4, 3);
    CHECK_THROWS_WITH_AS(cell.forward(Tensor::zeros({2, 5})), doctest::Contains("GRUCell: input (2, 5) does not match input_size 4"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(nn::gru_step(Tensor::zeros({2, 6}), Tensor::zeros({2, 3}), cell.weight_hh, cell.bias_hh),
                         doctest::Contains("gru_step: gi (2, 6), h (2, 3), weight_hh (9, 3) and bias_hh (9,) do not fit: expected gi (B, 3 Hd)"),
                         std::invalid_argument);
    const nn::LSTMCell lcell(4, 3);
    CHECK_THROWS_WITH_AS(nn::lstm_step(Tensor::zeros({2, 12}), {Tensor::zeros({2, 3}), Tensor()}, lcell.weight_hh, lcell.bias_hh),
                         doctest::Contains("lstm_step: gi (2, 12), h (2, 3), c (undefined)"), std::invalid_argument);
}

// ------------------------------------------------------------------------------------------------
// against PyTorch

namespace {

namespace io = autograd::io;

// Tolerance: |C++ - PyTorch| <= kRelTol * max(|PyTorch|, kFloor), element by element. The
// reference is float64 from float32 inputs, so the difference is the C++ float32 rounding alone.
// Measured worst (GRU / LSTM; fused kernels on and off give the same but for the GRU's fused
// cell, whose gradients are 1.35e-5 off): outputs, final states and loss 1.1e-6 / 1.5e-6,
// gradients 1.1e-5 / 6.0e-6. PyTorch's own float32 run of the same layers is as far from its
// float64 one: 1.1e-6 / 2.9e-6 and 1.1e-5 / 4.4e-6 (make_rnn_reference.py prints it), and its
// worst GRU element is ours: a gradient of 1.2e-3 summed from terms ~100x larger, off by 1.05e-7
// in both (1.35e-7 through the fused cell). Such sums are why the floor is 1e-2 (77 of the GRU's 602
// gradients are below it; the largest is 5.1): below it the 1e-4 is taken relative to 1e-2, an
// absolute 1e-6. A wrong convention (gate order, where the reset gate goes, which step a padded
// row starts from) moves values by 1e-2 and more.
constexpr double kRelTol = 1e-4;
constexpr double kFloor = 1e-2;

using fixture::Worst;
using fixture::record;

template <class Layer>
void check_against_pytorch(const std::string& path) {
    constexpr bool lstm = std::is_same_v<Layer, nn::LSTM>;
    REQUIRE_MESSAGE(std::filesystem::exists(path), path << " not found: run the suite from the repo root (make test)");
    const io::SafetensorsFile f = io::load_safetensors(path);
    const io::json::Value config = io::json::parse(f.metadata.at("config"));
    auto size = [&](const char* key) { return static_cast<int64_t>(config.find(key)->as_number()); };
    Layer layer({.input_size = size("input_size"), .hidden_size = size("hidden_size"), .num_layers = size("num_layers"),
                 .bidirectional = config.find("bidirectional")->as_bool()});
    nn::load_parameters(layer, f, path, /*allow_unexpected=*/true);   // by torch's names; the file holds more than weights
    std::set<std::string> ours, theirs;   // and torch's layer has no parameter ours lacks
    for (const auto& [name, p] : layer.named_parameters()) ours.insert(name);
    for (const io::TensorRecord& r : f.tensors)   // grad.<parameter>, besides grad.input, grad.h0, grad.c0
        if (r.name.rfind("grad.", 0) == 0 && r.name != "grad.input" && r.name != "grad.h0" && r.name != "grad.c0")
            theirs.insert(r.name.substr(5));
    REQUIRE(ours == theirs);

    std::vector<int64_t> lengths;
    for (int32_t n : io::as_i32(record(f, "lengths"))) lengths.push_back(n);
    Tensor x = fixture::tensor(f, "input").requires_grad_();   // (B, T, I)
    Tensor h0 = fixture::tensor(f, "h0").requires_grad_();     // (L*dirs, B, Hd)
    Tensor c0 = lstm ? fixture::tensor(f, "c0").requires_grad_() : Tensor();

    for (bool fused : {true, false}) {   // the fused kernels (nn::linear's, the GRU's cell) and the plain forms
        CAPTURE(fused);
        FusedKernelsGuard guard(fused);
        layer.zero_grad();
        x.zero_grad();
        h0.zero_grad();
        if (lstm) c0.zero_grad();
        const nn::RecurrentOutput r = forward(layer, x, lengths, h0, c0);
        Tensor loss = sum(r.output * fixture::tensor(f, "cotangent.output")) + sum(r.h_n * fixture::tensor(f, "cotangent.h_n"));
        if (lstm) loss = loss + sum(r.c_n * fixture::tensor(f, "cotangent.c_n"));
        loss.backward();

        Worst values, grads;
        fixture::compare("output", r.output, f, "output", values, kFloor);
        fixture::compare("h_n", r.h_n, f, "h_n", values, kFloor);
        if (lstm) fixture::compare("c_n", r.c_n, f, "c_n", values, kFloor);
        fixture::compare("loss", loss, f, "loss", values, kFloor);
        for (const auto& [name, p] : layer.named_parameters()) fixture::compare("grad of " + name, p.grad(), f, "grad." + name, grads, kFloor);
        fixture::compare("grad of the input", x.grad(), f, "grad.input", grads, kFloor);
        fixture::compare("grad of h0", h0.grad(), f, "grad.h0", grads, kFloor);
        if (lstm) fixture::compare("grad of c0", c0.grad(), f, "grad.c0", grads, kFloor);
        CHECK_MESSAGE(values.err <= kRelTol, "values differ from PyTorch: " << values.describe(kRelTol));
        CHECK_MESSAGE(grads.err <= kRelTol, "gradients differ from PyTorch: " << grads.describe(kRelTol));
    }
}

}  // namespace

TEST_CASE("reference: nn::GRU and nn::LSTM match torch.nn.GRU and torch.nn.LSTM (2 layers, bidirectional, packed padding)") {
    SUBCASE("GRU") { check_against_pytorch<nn::GRU>("tests/reference/gru_reference.safetensors"); }
    SUBCASE("LSTM") { check_against_pytorch<nn::LSTM>("tests/reference/lstm_reference.safetensors"); }
}
