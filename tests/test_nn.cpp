// nn/: modules, fused ops against finite differences and against their primitive compositions,
// masks, losses, checkpoints.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <unistd.h>   // getpid: temp file names unique to this run

#include "nn/nn.h"
#include "tests/gradcheck_helpers.h"

using namespace autograd;
using V = const std::vector<Tensor>&;


static void check_close(const Tensor& a, const Tensor& b, float tol = 1e-5f) {
    REQUIRE(a.shape() == b.shape());
    for (int64_t i = 0; i < a.numel(); i++) CHECK(a.data()[i] == doctest::Approx(b.data()[i]).epsilon(tol).scale(1.0));
}

struct TwoLayer : nn::Module {
    std::shared_ptr<nn::Linear> first, second;
    std::shared_ptr<nn::ModuleList<nn::LayerNorm>> norms;
    TwoLayer() {
        first = register_module("first", std::make_shared<nn::Linear>(3, 4));
        second = register_module("second", std::make_shared<nn::Linear>(4, 2, nn::LinearOptions{.bias = false}));
        norms = register_module("norms", std::make_shared<nn::ModuleList<nn::LayerNorm>>());
        norms->push_back(std::make_shared<nn::LayerNorm>(4));
        norms->push_back(std::make_shared<nn::LayerNorm>(2));
    }
};

TEST_CASE("Module: dotted names, counts, train/eval reach every child") {
    TwoLayer m;
    std::vector<std::string> names;
    for (auto& [n, t] : m.named_parameters()) names.push_back(n);
    CHECK(names == std::vector<std::string>{"first.weight", "first.bias", "second.weight", "norms.0.gain", "norms.0.bias",
                                            "norms.1.gain", "norms.1.bias"});
    CHECK(m.num_parameters() == 12 + 4 + 8 + 4 + 4 + 2 + 2);
    CHECK(m.is_training());
    m.eval();
    CHECK_FALSE((*m.norms)[1].is_training());
    m.train();
    CHECK(m.first->is_training());
    for (Tensor& p : m.parameters()) CHECK(p.requires_grad());
    CHECK_FALSE(m.second->bias.defined());
}

TEST_CASE("init: xavier_uniform bound and seeded reproducibility") {
    manual_seed(3);
    nn::Linear a(200, 100);
    const float bound = std::sqrt(6.0f / 300.0f);
    float mx = 0.0f;
    for (float v : a.weight.to_vector()) mx = std::max(mx, std::fabs(v));
    CHECK(mx <= bound);
    CHECK(mx > 0.95f * bound);
    manual_seed(3);
    nn::Linear b(200, 100);
    CHECK(a.weight.to_vector() == b.weight.to_vector());
}

TEST_CASE("linear: gradcheck, with and without bias and ReLU, batched input") {
    manual_seed(1);
    CHECK_GRAD([](V x) { return nn::linear(x[0], x[1], x[2]); }, param({2, 3, 4}), param({5, 4}), param({5}));
    CHECK_GRAD([](V x) { return nn::linear(x[0], x[1], Tensor()); }, param({3, 4}), param({5, 4}));
    // ReLU has a kink at 0; this draw keeps pre-activations away from it (gradcheck would say so)
    CHECK_GRAD([](V x) { return nn::linear(x[0], x[1], x[2], nn::Activation::relu); }, param({2, 4}), param({6, 4}), param({6}));
    // with dropout fused in: same draws as nn::dropout after the activation
    CHECK_GRAD([](V x) { manual_seed(2); return nn::linear(x[0], x[1], x[2], nn::Activation::relu, 0.3f, true); },
               param({3, 4}), param({6, 4}), param({6}));
    CHECK_GRAD([](V x) { manual_seed(2); return nn::linear(x[0], x[1], x[2], nn::Activation::none, 0.3f, true); },
               param({3, 4}), param({6, 4}), param({6}));
    // (the fused kernel equals the plain form, values and gradients: test_kernels.cpp)
    CHECK_THROWS_WITH_AS(nn::linear(param({2, 5}), param({5, 4}), param({5})), doctest::Contains("(2, 5)"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(nn::linear(param({2, 4}), param({5, 4}), param({5}), nn::Activation::none, 1.0f, true),
                         doctest::Contains("linear: dropout probability must be in [0, 1), got 1.0"), std::invalid_argument);
}

TEST_CASE("linear and layer_norm store into an empty gradient and add into a used one") {
    // Their backward writes (=) a parent's gradient the first time and adds (+=) after that.
    // Each case below makes one parent's gradient arrive in two parts:
    manual_seed(5);
    // the same tensor as input and weight: y = W W^T, so dW gets two terms from one op
    CHECK_GRAD([](V x) { return nn::linear(x[0], x[0], x[1]); }, param({4, 4}), param({4}));
    // an input that two ops read, backpropagated in either order
    CHECK_GRAD([](V x) { return nn::linear(x[0], x[1], x[2]) + nn::linear(x[0], x[1], x[2], nn::Activation::relu); },
               param({3, 4}), param({4, 4}), param({4}));
    CHECK_GRAD([](V x) { return nn::layer_norm(x[0], x[1], x[2]) * x[0]; }, param({3, 5}), param({5}), param({5}));
    // and a gradient that was there before the backward (accumulation across calls)
    Tensor x = param({2, 4}), w = param({3, 4}), b = param({3});
    sum(nn::linear(x, w, b)).backward();
    const Tensor once = x.grad();
    sum(nn::linear(x, w, b)).backward();
    check_close(x.grad(), once * 2.0f);
}

TEST_CASE("layer_norm: gradcheck; the module normalizes each row to mean 0, variance 1") {
    manual_seed(2);
    CHECK_GRAD([](V x) { return nn::layer_norm(x[0], x[1], x[2]); }, param({2, 3, 5}), param({5}), param({5}));
    // (the fused kernel equals the plain form, values and gradients: test_kernels.cpp)
    const Tensor x = param({4, 6}, -3.0f, 3.0f);
    nn::LayerNorm ln(6);
    const Tensor y = ln.forward(x);
    CHECK(mean(y, -1).to_vector()[0] == doctest::Approx(0.0).scale(1.0));
    CHECK(var(y, -1, false).to_vector()[0] == doctest::Approx(1.0).epsilon(1e-3));
}

TEST_CASE("dropout: inverted scaling, identity in eval, seeded") {
    manual_seed(4);
    const Tensor x = Tensor::ones({10000});
    const Tensor y = nn::dropout(x, 0.25f, true);
    int zeros = 0;
    for (float v : y.to_vector()) {
        CHECK((v == 0.0f || v == doctest::Approx(1.0f / 0.75f)));
        zeros += v == 0.0f;
    }
    CHECK(zeros == doctest::Approx(2500).epsilon(0.1));
    CHECK(nn::dropout(x, 0.25f, false).data() == x.data());   // eval: the same tensor
    manual_seed(9);
    const auto a = nn::dropout(x, 0.5f, true).to_vector();
    manual_seed(9);
    CHECK(nn::dropout(x, 0.5f, true).to_vector() == a);
    // backward uses the same mask
    manual_seed(5);
    Tensor p = param({50});
    Tensor d = nn::dropout(p, 0.5f, true);
    sum(d).backward();
    for (int i = 0; i < 50; i++) CHECK(p.grad().data()[i] == (d.data()[i] == 0.0f ? 0.0f : 2.0f));
    CHECK_THROWS_WITH_AS(nn::Dropout(1.0f), doctest::Contains("Dropout: dropout probability must be in [0, 1), got 1.0"), std::invalid_argument);
}

TEST_CASE("embedding: lookup, repeated ids accumulate, out-of-range ids throw") {
    manual_seed(6);
    nn::Embedding emb(7, 3);
    const Tokens ids({1, 4, 1, 6}, {2, 2});   // (B, T)
    const Tensor e = emb.forward(ids);        // (B, T, D)
    CHECK(e.shape() == Shape{2, 2, 3});
    CHECK(e.at({1, 1, 2}) == emb.weight.at({6, 2}));
    CHECK_GRAD([&](V x) { return index_select(x[0], 0, ids); }, emb.weight);
    sum(emb.forward(ids) * 2.0f).backward();
    CHECK(emb.weight.grad().at({1, 0}) == 4.0f);
    CHECK(emb.weight.grad().at({0, 0}) == 0.0f);
    CHECK_THROWS_WITH_AS(emb.forward(Tokens({3, 7}, {2})), doctest::Contains("token id 7"), std::out_of_range);
    CHECK_THROWS_WITH_AS(emb.forward(Tokens({-2}, {1})), doctest::Contains("token id -2 at flat position 0"), std::out_of_range);
}

TEST_CASE("positional encoding matches the paper's formula") {
    nn::PositionalEncoding pe(8, 0.0f, 50);
    // PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(...)
    CHECK(pe.table(8).at({3, 0}) == doctest::Approx(std::sin(3.0)));
    CHECK(pe.table(8).at({3, 1}) == doctest::Approx(std::cos(3.0)));
    CHECK(pe.table(8).at({7, 4}) == doctest::Approx(std::sin(7.0 / std::pow(10000.0, 4.0 / 8.0))));
    CHECK(pe.table(8).at({7, 5}) == doctest::Approx(std::cos(7.0 / std::pow(10000.0, 4.0 / 8.0))));
    const Tensor x = Tensor::zeros({2, 5, 8});
    CHECK(pe.forward(x).at({1, 4, 2}) == pe.table(8).at({4, 2}));
    CHECK_THROWS_WITH_AS(pe.forward(Tensor::zeros({1, 51, 8})), doctest::Contains("sequence length 51 exceeds max_len 50"),
                         std::invalid_argument);
    // rows are computed as lengths need them; a longer request extends the same table
    const Tensor short_rows = pe.table(5), all_rows = pe.table(50);
    CHECK(all_rows.at({49, 0}) == doctest::Approx(std::sin(49.0)));
    CHECK(short_rows.at({4, 3}) == all_rows.at({4, 3}));
}

// q (B, T, D), k and v (B, S, D) with D = H * Dk. (Equal to the plain form, values and
// gradients, with and without masks and dropout: test_kernels.cpp.)
TEST_CASE("fused attention: gradcheck, with and without a padding mask") {
    manual_seed(7);
    const int64_t B = 2, H = 3, T = 4, S = 5, D = 6;
    const Mask pad({1, 1, 1, 0, 0, 1, 1, 1, 1, 1}, {B, 1, S});   // batch 0 has 2 padded keys
    for (bool masked : {false, true}) {
        CAPTURE(masked);
        const Mask m = masked ? pad : Mask();
        CHECK_GRAD([&](V x) { return nn::scaled_dot_product_attention(x[0], x[1], x[2], H, m); }, param({B, T, D}),
                   param({B, S, D}), param({B, S, D}));
    }
}

TEST_CASE("add_dropout: x + dropout(y); x + y in evaluation; one shape, or an error naming both") {
    manual_seed(2);
    const Tensor x = Tensor::randn({4, 6}), y = Tensor::randn({4, 6});
    const std::vector<float> sum = (x + y).to_vector();
    CHECK(nn::add_dropout(x, y, 0.5f, false).to_vector() == sum);   // evaluation: no dropout
    CHECK(nn::add_dropout(x, y, 0.0f, true).to_vector() == sum);
    manual_seed(3);
    const std::vector<float> out = nn::add_dropout(x, y, 0.5f, true).to_vector();
    manual_seed(3);
    const Tensor keep = dropout_keep({4, 6}, 0.5f);
    int dropped = 0;
    for (int64_t i = 0; i < 24; i++) {
        CHECK(out[i] == x.data()[i] + y.data()[i] * keep.data()[i]);
        dropped += keep.data()[i] == 0.0f;
    }
    CHECK(dropped > 0);
    CHECK(dropped < 24);
    for (bool fused : {true, false}) {
        CAPTURE(fused);
        FusedKernelsGuard guard(fused);
        CHECK_THROWS_WITH_AS(nn::add_dropout(x, Tensor::randn({1, 6}), 0.1f, true),
                             doctest::Contains("add_dropout: x (4, 6) and y (1, 6) must have the same shape"), std::invalid_argument);
        CHECK_THROWS_WITH_AS(nn::add_dropout(x, y, 1.0f, true), doctest::Contains("add_dropout: dropout probability must be in [0, 1), got 1.0"),
                             std::invalid_argument);
    }
}

TEST_CASE("dropout inside attention and in nn::dropout: gradcheck with a fixed seed") {
    // reseeding inside fn makes every evaluation draw the same keep decisions
    const Mask pad({1, 1, 1, 0, 1, 1, 1, 1}, {2, 1, 4});
    CHECK_GRAD([&](V x) { manual_seed(3); return nn::scaled_dot_product_attention(x[0], x[1], x[2], 2, pad, 0.3f); },
               param({2, 3, 4}), param({2, 4, 4}), param({2, 4, 4}));
    CHECK_GRAD([](V x) { manual_seed(4); return nn::dropout(x[0], 0.4f, true); }, param({3, 5}));
    CHECK_GRAD([](V x) { manual_seed(4); return nn::add_dropout(x[0], x[1], 0.4f, true); }, param({3, 5}), param({3, 5}));
    // with dropout the weights still come out before dropout: rows sum to 1
    manual_seed(5);
    const Tensor q = Tensor::randn({2, 3, 4}), k = Tensor::randn({2, 4, 4}), v = Tensor::randn({2, 4, 4});
    manual_seed(6);
    const auto [out, w] = nn::scaled_dot_product_attention_with_weights(q, k, v, 2, pad, 0.5f);
    CHECK(w.at({1, 1, 2, 0}) + w.at({1, 1, 2, 1}) + w.at({1, 1, 2, 2}) + w.at({1, 1, 2, 3}) == doctest::Approx(1.0));
    // and the output is (weights * keep) V, keep = 0 or 1/(1-p) drawn per weight as nn::dropout draws
    const uint64_t seed = Rng(6).next_u64();
    const int64_t B = 2, H = 2, T = 3, S = 4, Dk = 2;
    int64_t dropped = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t d = 0; d < Dk; d++) {
                    double want = 0.0;
                    for (int64_t s = 0; s < S; s++) {
                        const bool kept = autograd::counter_uniform(seed, ((b * H + h) * T + t) * S + s) >= 0.5f;
                        dropped += !kept && d == 0;
                        want += w.at({b, h, t, s}) * (kept ? 2.0 : 0.0) * v.at({b, s, h * Dk + d});
                    }
                    CHECK(out.at({b, t, h * Dk + d}) == doctest::Approx(want).epsilon(1e-5).scale(1.0));
                }
    CHECK(dropped > 0);
}

TEST_CASE("attention masks: padded keys get zero weight, the subsequent mask hides the future") {
    manual_seed(8);
    const int64_t B = 2, H = 2, T = 4, Dk = 4;
    // padding: batch 1 has its last key padded
    const Mask pad({1, 1, 1, 1, 1, 1, 1, 0}, {B, 1, T});
    const Tensor w = nn::scaled_dot_product_attention_with_weights(param({B, T, H * Dk}), param({B, T, H * Dk}),
                                                                   param({B, T, H * Dk}), H, pad).weights;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++) {
            CHECK(w.at({1, h, t, 3}) == 0.0f);
            CHECK(w.at({0, h, t, 3}) > 0.0f);
            CHECK(w.at({1, h, t, 0}) + w.at({1, h, t, 1}) + w.at({1, h, t, 2}) == doctest::Approx(1.0));
        }
    // subsequent mask (1, T, T): position t sees 0..t. The gradient of output t w.r.t. inputs at
    // positions > t must be exactly zero.
    Mask sub = Mask::full({1, T, T}, 0);
    for (int t = 0; t < T; t++)
        for (int s = 0; s <= t; s++) sub[t * T + s] = 1;
    for (int t = 0; t < T; t++) {
        Tensor x = param({1, T, Dk});
        Tensor out = nn::scaled_dot_product_attention(x, x, x, 1, sub);   // self-attention
        Tensor pick = narrow(out, 1, t, 1);
        sum(pick).backward();
        for (int s = 0; s < T; s++)
            for (int d = 0; d < Dk; d++) {
                if (s > t) CHECK(x.grad().at({0, s, d}) == 0.0f);
            }
        float seen = 0.0f;   // ... while the allowed positions do receive gradient
        for (int s = 0; s <= t; s++) seen += std::fabs(x.grad().at({0, s, 0}));
        CHECK(seen > 0.0f);
    }
}

TEST_CASE("MultiHeadAttention: shapes, weights kept, masks broadcast over heads, gradcheck") {
    manual_seed(9);
    const int64_t B = 2, T = 3, S = 4, D = 8, H = 2;
    nn::MultiHeadAttention mha(D, H, 0.0f);
    const Tensor q = Tensor::randn({B, T, D}), kv = Tensor::randn({B, S, D});
    const Mask pad({1, 1, 1, 1, 1, 1, 0, 0}, {B, 1, S});
    mha.forward(q, kv, kv, pad);
    CHECK(!mha.last_attention.defined());   // kept only when asked
    mha.keep_attention = true;
    const Tensor y = mha.forward(q, kv, kv, pad);
    CHECK(y.shape() == Shape{B, T, D});
    CHECK(mha.last_attention.shape() == Shape{B, H, T, S});
    CHECK(mha.last_attention.at({1, 1, 2, 3}) == 0.0f);
    // gradcheck the whole module through its inputs and every parameter (the four projections'
    // weights and biases; the function reads the parameters through the module)
    std::vector<Tensor> ins = {param({B, T, D}), param({B, S, D})};
    for (Tensor& p : mha.parameters()) ins.push_back(p);
    REQUIRE(ins.size() == 2 + 8);
    const GradcheckResult r = gradcheck([&](V x) { return mha.forward(x[0], x[1], x[1], pad); }, ins);
    INFO(r.report);
    CHECK(r.ok);
    // encoder-decoder attention without a mask sees every source position
    nn::MultiHeadAttention cross(D, H, 0.0f);
    Tensor src = param({1, S, D});
    sum(cross.forward(Tensor::randn({1, T, D}), src, src)).backward();
    for (int s = 0; s < S; s++) {
        float g = 0.0f;
        for (int d = 0; d < D; d++) g += std::fabs(src.grad().at({0, s, d}));
        CHECK(g > 0.0f);
    }
    CHECK_THROWS_WITH_AS(nn::MultiHeadAttention(10, 3), doctest::Contains("d_model (10) must be a positive multiple of the number of heads (3)"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(mha.forward(q, kv, kv, Mask::full({3, 1, S}, 1)), doctest::Contains("does not broadcast"),
                         std::invalid_argument);
}

TEST_CASE("feed-forward: shapes and gradcheck") {
    manual_seed(11);
    nn::PositionwiseFeedForward ff(4, 8, 0.2f);
    CHECK(ff.forward(Tensor::randn({2, 3, 4})).shape() == Shape{2, 3, 4});
    CHECK(ff.num_parameters() == 4 * 8 + 8 + 8 * 4 + 4);
    // through the input and all four parameters, in training mode (dropout on, reseeded so every
    // evaluation drops the same units). ReLU has a kink at 0, where finite differences are
    // meaningless: this draw keeps every pre-activation further from it than a step of 2e-2 in
    // any input or parameter can move it
    std::vector<Tensor> ins = {param({1, 3, 4})};
    const Tensor pre = matmul(ins[0], ff.w_1->weight, false, true) + ff.w_1->bias;   // (1, 3, F)
    float closest = INFINITY;
    for (float z : pre.to_vector()) closest = std::min(closest, std::fabs(z));
    CHECK(closest > 0.03f);
    for (Tensor& p : ff.parameters()) ins.push_back(p);
    REQUIRE(ins.size() == 5);
    const GradcheckResult r = gradcheck([&](V x) { manual_seed(3); return ff.forward(x[0]); }, ins);
    INFO(r.report);
    CHECK(r.ok);
    ff.eval();
    CHECK(gradcheck([&](V x) { return ff.forward(x[0]); }, ins).ok);
}

TEST_CASE("cross_entropy: matches log_softmax + nll and the composition of primitives, ignore_index, label smoothing, gradcheck") {
    manual_seed(11);
    const Tokens t({2, 0, 4, 1, 3, 0}, {2, 3});    // 0 is padding
    const Tensor logits = param({2, 3, 5}, -2.0f, 2.0f);
    // no smoothing, no ignore: equal to nll_loss(log_softmax)
    const float a = nn::cross_entropy(logits, t).item();
    const float b = nn::nll_loss(log_softmax(logits), t).item();
    CHECK(a == doctest::Approx(b));
    // ignore_index: mean over the 4 non-pad targets only
    double manual = 0.0;
    const Tensor lp = log_softmax(logits);
    for (int i = 0; i < 6; i++)
        if (t[i] != 0) manual -= lp.data()[i * 5 + t[i]];
    CHECK(nn::cross_entropy(logits, t, {.ignore_index = 0}).item() == doctest::Approx(manual / 4));
    // label smoothing eps: loss = (1 - eps) * nll + eps * mean_j(-logp_j), as torch.nn.functional.cross_entropy
    double smooth = 0.0;
    for (int i = 0; i < 6; i++) {
        if (t[i] == 0) continue;
        double u = 0.0;
        for (int j = 0; j < 5; j++) u -= lp.data()[i * 5 + j];
        smooth += 0.9 * -lp.data()[i * 5 + t[i]] + 0.1 * u / 5;
    }
    CHECK(nn::cross_entropy(logits, t, {.ignore_index = 0, .label_smoothing = 0.1f}).item() == doctest::Approx(smooth / 4));
    CHECK_GRAD([&](V x) { return nn::cross_entropy(x[0], t, {.ignore_index = 0, .label_smoothing = 0.1f}); }, param({2, 3, 5}));
    // (the fused kernel equals the plain form, loss and gradient: test_kernels.cpp)
    CHECK_GRAD([&](V x) { return nn::cross_entropy(x[0], t); }, param({2, 3, 5}));
    CHECK_GRAD([&](V x) { return nn::nll_loss(log_softmax(x[0]), t, {.ignore_index = 0}); }, param({2, 3, 5}));
    // padded positions get exactly zero gradient
    Tensor l2 = param({2, 3, 5});
    nn::cross_entropy(l2, t, {.ignore_index = 0, .label_smoothing = 0.1f}).backward();
    for (int j = 0; j < 5; j++) CHECK(l2.grad().at({0, 1, j}) == 0.0f);
    // logits of +-1e4 (the largest not first in its row) neither overflow nor NaN: the loss is
    // computed from the row max, as in softmax
    Tensor big = Tensor::from_vector({-1e4f, 0.0f, 1e4f, -1e4f, 0.0f, 1e4f}, {2, 3}).requires_grad_();
    const Tensor big_loss = nn::cross_entropy(big, Tokens({2, 1}, {2}));   // losses 0 and 1e4
    CHECK(big_loss.item() == doctest::Approx(5e3));
    big_loss.backward();
    CHECK(big.grad().to_vector() == std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f, -0.5f, 0.5f});   // (softmax - onehot) / 2
    // all ignored: 0, not NaN
    CHECK(nn::cross_entropy(logits, Tokens::full({2, 3}, 0), {.ignore_index = 0}).item() == 0.0f);
    CHECK_THROWS_WITH_AS(nn::cross_entropy(logits, Tokens::full({2, 3}, 5)), doctest::Contains("target 5"), std::out_of_range);
    CHECK_THROWS_WITH_AS(nn::cross_entropy(logits, Tokens::full({3, 2}, 1)),
                         doctest::Contains("targets of shape (3, 2) do not match input (2, 3, 5) (expected targets (2, 3))"), std::invalid_argument);
}

// cross_entropy's forward with a backward that smooths towards eps / (V - 1) instead of eps / V:
// a plausible slip (the other common convention), off by eps / (V (V - 1)) / n per element
static Tensor cross_entropy_smoothing_slip(const Tensor& logits, const Tokens& targets, float eps) {
    Tensor loss;
    {
        NoGradGuard no_grad;
        loss = nn::cross_entropy(logits, targets, {.label_smoothing = eps});
    }
    const int64_t V = logits.size(-1), R = targets.numel();
    record(loss, {logits}, "cross_entropy_slip", [targets, V, R, eps](Node& self) {
        const float* x = self.parent_data(0);
        float* dx = self.parent_grad(0);
        for (int64_t r = 0; r < R; r++) {
            double s = 0.0;
            for (int64_t j = 0; j < V; j++) s += std::exp(x[r * V + j]);
            for (int64_t j = 0; j < V; j++) {
                const float q = (j == targets[r] ? 1.0f - eps : 0.0f) + eps / static_cast<float>(V - 1);
                dx[r * V + j] += self.grad[0] / static_cast<float>(R) * (static_cast<float>(std::exp(x[r * V + j]) / s) - q);
            }
        }
    });
    return loss;
}

TEST_CASE("gradcheck's default tolerance catches label smoothing eps/(V-1) in cross_entropy's backward") {
    manual_seed(11);
    const Tokens t({2, 0, 4, 1, 3, 0}, {2, 3});
    const Tensor logits = param({2, 3, 5}, -2.0f, 2.0f);
    CHECK(gradcheck([&](V x) { return nn::cross_entropy(x[0], t, {.label_smoothing = 0.1f}); }, {logits}).ok);
    CHECK_FALSE(gradcheck([&](V x) { return cross_entropy_smoothing_slip(x[0], t, 0.1f); }, {logits}).ok);
}

TEST_CASE("every nn op's backward adds into an existing gradient instead of overwriting it") {
    manual_seed(13);
    const Tokens t({2, 0, 4, 1, 3, 0}, {2, 3});
    const Mask pad({1, 1, 1, 0, 1, 1, 1, 1}, {2, 1, 4});
    check_backward_adds([](V x) { return nn::layer_norm(x[0], x[1], x[2]); }, {param({3, 5}), param({5}), param({5})});
    check_backward_adds([](V x) { return nn::linear(x[0], x[1], x[2]); }, {param({2, 3, 4}), param({5, 4}), param({5})});
    check_backward_adds([](V x) { return nn::linear(x[0], x[1], x[2], nn::Activation::relu); }, {param({3, 4}), param({5, 4}), param({5})});
    check_backward_adds([](V x) { manual_seed(1); return nn::linear(x[0], x[1], x[2], nn::Activation::none, 0.3f, true); },
                        {param({3, 4}), param({5, 4}), param({5})});
    check_backward_adds([](V x) { manual_seed(1); return nn::dropout(x[0], 0.3f, true); }, {param({4, 5})});
    check_backward_adds([](V x) { manual_seed(1); return nn::add_dropout(x[0], x[1], 0.3f, true); }, {param({4, 5}), param({4, 5})});
    check_backward_adds([&](V x) { return nn::cross_entropy(x[0], t, {.ignore_index = 0, .label_smoothing = 0.1f}); }, {param({2, 3, 5})});
    check_backward_adds([&](V x) { return nn::nll_loss(x[0], t, {.ignore_index = 0}); }, {param({2, 3, 5})});
    check_backward_adds([&](V x) { return nn::scaled_dot_product_attention(x[0], x[1], x[2], 2, pad); },
                        {param({2, 3, 4}), param({2, 4, 4}), param({2, 4, 4})});
    check_backward_adds([&](V x) { manual_seed(1); return nn::scaled_dot_product_attention(x[0], x[1], x[2], 2, pad, 0.3f); },
                        {param({2, 3, 4}), param({2, 4, 4}), param({2, 4, 4})});
}

static std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("nn_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST_CASE("checkpoint: round trip, and each mismatch gets its own clear error") {
    manual_seed(12);
    TwoLayer a;
    const std::string path = temp_path("ckpt.safetensors");
    nn::save(a, path, {{"step", "42"}});
    manual_seed(13);
    TwoLayer b;
    CHECK(b.first->weight.to_vector() != a.first->weight.to_vector());
    const nn::Metadata meta = nn::load(b, path);
    CHECK(meta.at("step") == "42");
    for (size_t i = 0; i < a.parameters().size(); i++) CHECK(a.parameters()[i].to_vector() == b.parameters()[i].to_vector());

    // a model with other shapes: nothing is loaded, the message lists the problem
    struct Other : nn::Module {
        std::shared_ptr<nn::Linear> first;
        Other() { first = register_module("first", std::make_shared<nn::Linear>(3, 5)); }
    } other;
    const auto before = other.first->weight.to_vector();
    CHECK_THROWS_WITH_AS(nn::load(other, path), doctest::Contains("'first.weight' has shape (4, 3) in the file but (5, 3)"),
                         std::runtime_error);
    CHECK_THROWS_WITH_AS(nn::load(other, path), doctest::Contains("unexpected tensor 'second.weight'"), std::runtime_error);
    CHECK(other.first->weight.to_vector() == before);   // never half a model

    // missing parameter
    autograd::io::save_safetensors(path, {autograd::io::f32_record("first.weight", {4, 3}, a.first->weight.data())});
    CHECK_THROWS_WITH_AS(nn::load(b, path), doctest::Contains("missing parameter 'first.bias'"), std::runtime_error);
    // wrong dtype
    std::vector<int32_t> ints(12, 1);
    autograd::io::save_safetensors(path, {autograd::io::i32_record("first.weight", {4, 3}, ints.data())});
    CHECK_THROWS_WITH_AS(nn::load(b, path), doctest::Contains("dtype I32"), std::runtime_error);
    // truncated file
    nn::save(a, path);
    std::filesystem::resize_file(path, std::filesystem::file_size(path) - 5);
    CHECK_THROWS_WITH_AS(nn::load(b, path), doctest::Contains("is beyond the data section"), std::runtime_error);
    std::filesystem::remove(path);
}

TEST_CASE("checkpoint: a NaN or Inf weight is refused with its tensor's name and element, and nothing is copied") {
    manual_seed(14);
    TwoLayer a, b;
    const std::string path = "poisoned.safetensors";   // only named in the message: the file is in memory
    // the file a's parameters make, with one float of record `name` replaced by x
    auto file_with = [&](const std::string& name, size_t element, float x) {
        autograd::io::SafetensorsFile f{{}, nn::parameter_records(a)};
        for (autograd::io::TensorRecord& r : f.tensors)
            if (r.name == name) std::memcpy(r.bytes.data() + element * sizeof(float), &x, sizeof(float));
        return f;
    };
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const auto before = b.parameters()[0].to_vector();
    auto error_loading = [&](const autograd::io::SafetensorsFile& f) {
        try {
            nn::load_parameters(b, f, path);
        } catch (const std::runtime_error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK(error_loading(file_with("first.weight", 7, nan)) ==
          "load: 'poisoned.safetensors' does not fit this model (1 problem):\n  'first.weight' holds NaN at element 7");
    CHECK(error_loading(file_with("norms.1.gain", 1, inf)) ==
          "load: 'poisoned.safetensors' does not fit this model (1 problem):\n  'norms.1.gain' holds Inf at element 1");
    CHECK(error_loading(file_with("second.weight", 0, -inf)) ==
          "load: 'poisoned.safetensors' does not fit this model (1 problem):\n  'second.weight' holds -Inf at element 0");
    // the first bad element of each tensor, with the other problems
    autograd::io::SafetensorsFile both = file_with("first.bias", 3, nan);
    for (autograd::io::TensorRecord& r : both.tensors)
        if (r.name == "first.bias") std::memcpy(r.bytes.data(), &inf, sizeof(float));   // element 0 comes first
    both.tensors.push_back(autograd::io::f32_record("extra", {1}, &nan));                 // not a parameter: unexpected, not scanned
    const std::string msg = error_loading(both);
    CHECK(msg.find("(2 problems)") != std::string::npos);
    CHECK(msg.find("'first.bias' holds Inf at element 0") != std::string::npos);
    CHECK(msg.find("unexpected tensor 'extra'") != std::string::npos);
    CHECK(b.parameters()[0].to_vector() == before);   // nothing was copied
    // the largest finite float, a subnormal and -0 are weights like any other
    const float fine[3] = {std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(), -0.0f};
    autograd::io::SafetensorsFile ok = file_with("first.bias", 0, fine[0]);
    for (autograd::io::TensorRecord& r : ok.tensors)
        if (r.name == "first.bias") std::memcpy(r.bytes.data() + sizeof(float), fine + 1, 2 * sizeof(float));
    CHECK(error_loading(ok) == "");
    CHECK(b.first->bias.at({0}) == std::numeric_limits<float>::max());
}
