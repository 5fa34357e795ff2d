// models/gpt.h and models/gpt_sampling.h: the decoder alone. Its shape and its tie; causality
// (no logit reads a later token); the fused and the plain layers agree, and the loss's gradients
// pass gradcheck; the cached sampler draws the recompute's tokens, across new windows; top-k
// and top-p together, each in turn the one that binds; AdamW's decay on matrices only; the spread
// of every parameter at initialization; every row of a batch sampled as it is alone, with its own
// draws, from prompts shorter and longer than the window.
// (Its loss, gradients and one AdamW step against PyTorch: tests/test_reference.cpp.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/decoding.h"
#include "models/gpt.h"
#include "models/gpt_sampling.h"
#include "optim/optim.h"
#include "tests/gradcheck_helpers.h"

using namespace autograd;
using models::GPT;
using models::GPTConfig;

namespace {

// Odd, different sizes: V 7, T_max 6, D 12 over 3 heads, 2 blocks.
GPTConfig tiny() { return {.vocab = 7, .block_size = 6, .layers = 2, .heads = 3, .d_model = 12}; }

Tokens random_ids(Rng& rng, int64_t B, int64_t T, int64_t V) {
    Tokens ids = Tokens::full({B, T}, 0);
    for (int32_t& id : ids.data) id = static_cast<int32_t>(rng.below(static_cast<uint32_t>(V)));
    return ids;
}

}  // namespace

TEST_CASE("GPT: shapes, parameters, and one matrix for the embedding and the output layer") {
    manual_seed(3);
    GPT model(tiny());
    Rng rng(1);
    const Tokens ids = random_ids(rng, 2, 5, 7);
    CHECK(model.logits(ids).shape() == Shape{2, 5, 7});
    // wte 7x12 + wpe 6x12, per block: 2 LayerNorms, 4 (12x12 + 12) projections, 12->48->12 feed-forward; ln_f
    const int64_t D = 12, F = 48, block = 2 * 2 * D + 4 * (D * D + D) + (D * F + F) + (F * D + D);
    CHECK(model.num_parameters() == 7 * D + 6 * D + 2 * block + 2 * D);
    CHECK(model.lm_head->weight.data() == model.wte->weight.data());   // tied: the same floats
    // the output layer's gradient reaches the embedding: tokens the input never holds get one too
    const Tokens zeros = Tokens::full({1, 3}, 0);
    model.zero_grad();
    model.loss(zeros, zeros).backward();
    const std::vector<float> g = model.wte->weight.grad().to_vector();
    double row6 = 0;
    for (int64_t j = 0; j < D; j++) row6 += std::abs(g[6 * D + j]);
    CHECK(row6 > 0.0);
    CHECK_THROWS_AS(model.logits(Tokens::full({1, 7}, 0)), std::invalid_argument);   // past block_size
    CHECK_THROWS_AS(GPT(GPTConfig{.heads = 3, .d_model = 16}), std::invalid_argument);
}

TEST_CASE("GPT: changing token t changes no logit before t, and changes the one at t") {
    manual_seed(4);
    GPT model(tiny());
    model.eval();
    Rng rng(2);
    const Tokens ids = random_ids(rng, 1, 6, 7);
    const std::vector<float> before = model.logits(ids).to_vector();   // (1, 6, 7)
    for (int64_t t = 0; t < 6; t++) {
        CAPTURE(t);
        Tokens changed = ids;
        changed[t] = (changed[t] + 1) % 7;
        const std::vector<float> after = model.logits(changed).to_vector();
        for (int64_t i = 0; i < t * 7; i++) CHECK(after[i] == before[i]);   // bit for bit
        double diff = 0;
        for (int64_t i = t * 7; i < (t + 1) * 7; i++) diff += std::abs(after[i] - before[i]);
        CHECK(diff > 1e-4);
    }
}

TEST_CASE("GPT: the fused layers give the plain ones' loss and gradients, and the plain loss passes gradcheck") {
    manual_seed(5);
    GPT model(tiny());
    Rng rng(3);
    const Tokens x = random_ids(rng, 2, 5, 7), y = random_ids(rng, 2, 5, 7);
    std::vector<std::vector<float>> grads[2];
    float losses[2];
    for (int fused = 0; fused < 2; fused++) {
        FusedKernelsGuard kernels(fused == 1);
        model.zero_grad();
        const Tensor loss = model.loss(x, y);
        loss.backward();
        losses[fused] = loss.item();
        for (const Tensor& p : model.parameters()) grads[fused].push_back(p.grad().to_vector());
    }
    CHECK(losses[1] == doctest::Approx(losses[0]).epsilon(1e-5));
    for (size_t i = 0; i < grads[0].size(); i++)
        for (size_t j = 0; j < grads[0][i].size(); j++) CHECK(grads[1][i][j] == doctest::Approx(grads[0][i][j]).epsilon(1e-3).scale(1e-4));
    // central differences against backward, through every kind of parameter (wte feeds two uses)
    // (with weights of about 1: at GPT's 0.02, LayerNorm's input is so small that a difference step
    // of 1e-3 is far from infinitesimal)
    FusedKernelsGuard plain(false);
    const auto& named = model.named_parameters();
    for (auto [name, p] : named)
        if (p.dim() > 1) nn::init::normal_(p, 0.0f, 0.5f);
    std::vector<Tensor> checked;
    for (const auto& [name, p] : named)
        if (name == "wte.weight" || name == "wpe.weight" || name == "h.0.ln_1.gain" || name == "h.1.attn.w_k.weight" ||
            name == "h.1.mlp.w_1.bias" || name == "ln_f.bias")
            checked.push_back(p);
    REQUIRE(checked.size() == 6);
    CHECK_GRAD([&](const std::vector<Tensor>&) { return model.loss(x, y); }, checked[0], checked[1], checked[2], checked[3],
               checked[4], checked[5]);
}

TEST_CASE("GELU feed-forward: fused linear then GELU equals the plain form, and dropout applies after GELU") {
    manual_seed(6);
    nn::PositionwiseFeedForward ff(5, 11, 0.0f, nn::Activation::gelu);
    const Tensor x = Tensor::uniform({3, 2, 5}, -2.0f, 2.0f);
    Tensor plain, fused;
    {
        FusedKernelsGuard off(false);
        plain = ff.forward(x);
    }
    fused = ff.forward(x);
    const std::vector<float> a = plain.to_vector(), b = fused.to_vector();
    for (size_t i = 0; i < a.size(); i++) CHECK(b[i] == doctest::Approx(a[i]).epsilon(1e-5));
    // by hand: w_2 gelu(w_1 x + b_1) + b_2
    const Tensor by_hand = ff.w_2->forward(gelu(ff.w_1->forward(x)));
    const std::vector<float> c = by_hand.to_vector();
    for (size_t i = 0; i < a.size(); i++) CHECK(a[i] == doctest::Approx(c[i]).epsilon(1e-6));
    // ReLU's feed-forward (the default) differs: the activation is honoured
    nn::PositionwiseFeedForward relu_ff(5, 11, 0.0f);
    relu_ff.w_1->weight = ff.w_1->weight, relu_ff.w_2->weight = ff.w_2->weight;
    CHECK(relu_ff.forward(x).to_vector() != a);
}

TEST_CASE("GPT sampling: the window starts again from its last half when full") {
    CHECK(models::window_start(5, 0, 8) == 0);
    CHECK(models::window_start(8, 0, 8) == 0);
    CHECK(models::window_start(9, 0, 8) == 5);   // the last 4 tokens
    CHECK(models::window_start(12, 5, 8) == 5);
    CHECK(models::window_start(14, 5, 8) == 10);
    CHECK(models::window_start(9, 0, 1) == 8);   // a window of 1: the last token alone
    CHECK(models::window_start(20, 0, 8, /*prompt=*/true) == 12);
}

TEST_CASE("GPT sampling: the key/value cache draws the recompute's tokens with the same seed, across new windows") {
    manual_seed(7);
    GPT model(tiny());   // block_size 6: 40 tokens pass through many windows
    model.eval();
    Rng rng(4);
    for (const int64_t T0 : {1, 4, 9}) {   // 9: a prompt longer than a window
        CAPTURE(T0);
        const Tokens prompt = random_ids(rng, 3, T0, 7);
        for (const auto& [k, p] : {std::pair{0, 1.0f}, std::pair{3, 1.0f}, std::pair{0, 0.8f}}) {
            int64_t cached_positions = 0, plain_positions = 0;
            models::GenerateOptions opt{.new_tokens = 40, .temperature = 1.3f, .top_k = k, .top_p = p, .seed = 11};
            opt.positions = &cached_positions;
            const Tokens cached = models::generate(model, prompt, opt);
            opt.kv_cache = false, opt.positions = &plain_positions;
            const Tokens plain = models::generate(model, prompt, opt);
            CHECK(cached.shape == Shape{3, T0 + 40});
            CHECK(cached.data == plain.data);
            CHECK(cached_positions < plain_positions);
            for (int64_t b = 0; b < 3; b++)
                for (int64_t t = 0; t < T0; t++) CHECK(cached[b * (T0 + 40) + t] == prompt[b * T0 + t]);
        }
    }
    // a row's tokens do not depend on the other rows; another seed draws others
    const Tokens prompt = random_ids(rng, 2, 2, 7);
    const Tokens both = models::generate(model, prompt, {.new_tokens = 20, .seed = 5});
    const Tokens first = models::generate(model, Tokens({prompt[0], prompt[1]}, {1, 2}), {.new_tokens = 20, .seed = 5});
    CHECK(std::vector<int32_t>(both.data.begin(), both.data.begin() + 22) == first.data);
    CHECK(models::generate(model, prompt, {.new_tokens = 20, .seed = 6}).data != both.data);
    CHECK_THROWS_AS(models::generate(model, prompt, {.temperature = 0.0f}), std::invalid_argument);
    CHECK_THROWS_AS(models::generate(model, Tokens::full({1, 2}, 7), {}), std::invalid_argument);
}

// The k-th token and the nucleus: with top_k and top_p both set, the tokens kept are the fewest
// of the k best whose probability (renormalised over the k) reaches top_p. Scores whose softmax
// is 0.4, 0.3, 0.2, 0.1 (log of them).
TEST_CASE("sampling: top-k and top-p together, each in turn the one that binds") {
    const std::vector<float> z = {std::log(0.1f), std::log(0.4f), std::log(0.2f), std::log(0.3f)};   // ids by rank: 1, 3, 2, 0
    const auto probs = [&](int k, float p) { return models::sampling_probs(z.data(), 4, {.top_k = k, .top_p = p}); };
    // top-k binds: k = 3 keeps {1, 3, 2} (0.4, 0.3, 0.2 -> /0.9); top_p 0.95 of them needs all three
    std::vector<double> a = probs(3, 0.95f);
    CHECK(a[0] == 0.0);
    CHECK(a[1] == doctest::Approx(0.4 / 0.9));
    CHECK(a[3] == doctest::Approx(0.3 / 0.9));
    CHECK(a[2] == doctest::Approx(0.2 / 0.9));   // the k-th token, kept
    // top-p binds: k = 3, top_p 0.7: 0.444 + 0.333 = 0.778 >= 0.7 -> {1, 3}, renormalised
    std::vector<double> b = probs(3, 0.7f);
    CHECK(b[2] == 0.0);
    CHECK(b[1] == doctest::Approx(0.4 / 0.7));
    CHECK(b[3] == doctest::Approx(0.3 / 0.7));
    // each alone: k = 2 keeps two; top_p 0.95 alone keeps all four
    CHECK(probs(2, 1.0f)[2] == 0.0);
    CHECK(probs(0, 0.95f)[0] > 0.0);
    // k = 4 and top_p 0.85: 0.4 + 0.3 + 0.2 = 0.9 >= 0.85: three kept, the fourth cut by top-p
    std::vector<double> c = probs(4, 0.85f);
    CHECK(c[0] == 0.0);
    CHECK(c[2] == doctest::Approx(0.2 / 0.9));
}

TEST_CASE("AdamW with decay_matrices_only decays the matrices and leaves vectors to Adam alone, fused and plain alike") {
    for (const bool fused : {false, true}) {
        CAPTURE(fused);
        FusedKernelsGuard kernels(fused);
        Tensor w = Tensor::full({2, 3}, 1.0f).requires_grad_(), b = Tensor::full({3}, 1.0f).requires_grad_();
        Tensor w0 = Tensor::full({2, 3}, 1.0f).requires_grad_(), b0 = Tensor::full({3}, 1.0f).requires_grad_();
        optim::AdamW only(std::vector<Tensor>{w, b}, {.lr = 0.1f, .weight_decay = 0.5f, .decay_matrices_only = true});
        optim::AdamW none(std::vector<Tensor>{w0, b0}, {.lr = 0.1f, .weight_decay = 0.0f});
        for (Tensor* t : {&w, &b, &w0, &b0}) (sum(*t * *t)).backward();   // g = 2 p = 2
        only.step();
        none.step();
        // the matrix: p (1 - lr lambda) - lr m_hat / (sqrt(v_hat) + eps) = 0.95 - 0.1; the vector: 1 - 0.1
        CHECK(w.to_vector()[4] == doctest::Approx(0.95f - 0.1f));
        CHECK(b.to_vector()[1] == doctest::Approx(b0.to_vector()[1]));
        CHECK(b.to_vector()[1] == doctest::Approx(0.9f));
        CHECK(w0.to_vector()[4] == doctest::Approx(0.9f));
    }
}

// ---- GPT-2's initialization (docs/10a-gpt.md), read back from the model

namespace {

// The mean, standard deviation and share within one standard deviation of the mean of v.
struct Spread {
    double mean = 0, std = 0, within_one_std = 0;
};
Spread spread(const std::vector<float>& v) {
    Spread s;
    for (float x : v) s.mean += x;
    s.mean /= static_cast<double>(v.size());
    for (float x : v) s.std += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(s.std / static_cast<double>(v.size()));
    for (float x : v) s.within_one_std += std::fabs(x - s.mean) < s.std;
    s.within_one_std /= static_cast<double>(v.size());
    return s;
}

}  // namespace

// Every matrix N(0, 0.02), the two projections that write into the residual stream (attn.w_o,
// mlp.w_2) N(0, 0.02 / sqrt(2N)), every bias 0 and every gain 1, the tied output layer the token
// embedding itself. At N = 1 and N = 4 (and H = 2, which neither is), so that a divisor of sqrt(N),
// 2N or sqrt(2H), or another set of matrices, fails at one of them. The expected parameters are
// listed by name here, not by the rule the code uses. Each matrix has 1,296 draws or more: its
// sample std is within 2% (one standard error) of the true one, so 10% is a wide margin, and a
// divisor off by sqrt(2) is 30-40% away. A normal has 68.3% of its draws within one std (a
// uniform of the same std: 57.7%).
TEST_CASE("GPT init: every matrix N(0, 0.02), the projections into the residual stream N(0, 0.02/sqrt(2N)), biases 0, gains 1") {
    for (const int64_t N : {1, 4}) {
        CAPTURE(N);
        manual_seed(9);
        GPT model({.vocab = 41, .block_size = 37, .layers = N, .heads = 2, .d_model = 36});
        std::map<std::string, double> matrices = {{"wte.weight", 0.02}, {"wpe.weight", 0.02}};   // name -> std
        std::set<std::string> gains = {"ln_f.gain"}, biases = {"ln_f.bias"};
        for (int64_t l = 0; l < N; l++) {
            const std::string h = "h." + std::to_string(l) + ".";
            for (const char* m : {"attn.w_q", "attn.w_k", "attn.w_v", "mlp.w_1"}) matrices[h + m + ".weight"] = 0.02;
            for (const char* m : {"attn.w_o", "mlp.w_2"}) matrices[h + m + ".weight"] = 0.02 / std::sqrt(2.0 * N);
            for (const char* m : {"attn.w_q", "attn.w_k", "attn.w_v", "attn.w_o", "mlp.w_1", "mlp.w_2", "ln_1", "ln_2"})
                biases.insert(h + m + ".bias");
            gains.insert({h + "ln_1.gain", h + "ln_2.gain"});
        }
        const auto named = model.named_parameters();
        CHECK(named.size() == matrices.size() + gains.size() + biases.size());   // lm_head's weight is wte's, listed once
        for (const auto& [name, p] : named) {
            CAPTURE(name);
            const std::vector<float> v = p.to_vector();
            if (gains.count(name) || biases.count(name)) {
                const float want = gains.count(name) ? 1.0f : 0.0f;
                CHECK(std::count(v.begin(), v.end(), want) == static_cast<std::ptrdiff_t>(v.size()));
                continue;
            }
            REQUIRE(matrices.count(name) == 1);
            const double want = matrices[name];
            const Spread s = spread(v);
            CAPTURE(s.std);
            CAPTURE(s.within_one_std);
            CHECK(std::fabs(s.std / want - 1.0) < 0.1);   // (relative: doctest's Approx adds 1 to its scale)
            CHECK(std::fabs(s.mean) < 4.0 * want / std::sqrt(static_cast<double>(v.size())));
            CHECK(std::fabs(s.within_one_std - 0.683) < 0.05);
        }
        CHECK(model.lm_head->weight.data() == model.wte->weight.data());   // the output layer drew nothing of its own
    }
}

// ---- sampling past the window, many rows at once

namespace {

// models::generate's rule written out plainly, for one row alone: the window starts at the
// prompt's last whole window (or 0), and once it holds more than block_size tokens it starts
// again from the last max(1, block_size / 2); each next token is drawn from GPT::logits over the
// window alone, at its last position, with the draw u = counter_uniform(seed, b * new_tokens + i)
// of row b's i-th new token.
std::vector<int32_t> sample_row_by_hand(GPT& model, std::vector<int32_t> text, int64_t b, const models::GenerateOptions& opt) {
    NoGradGuard no_grad;
    const int64_t W = model.cfg.block_size, V = model.cfg.vocab;
    auto length = [&] { return static_cast<int64_t>(text.size()); };
    int64_t start = std::max<int64_t>(0, length() - W);
    for (int64_t i = 0; i < opt.new_tokens; i++) {
        const int64_t t = length() - start;
        const Tokens window(std::vector<int32_t>(text.begin() + start, text.end()), {1, t});
        const std::vector<float> z = model.logits(window).to_vector();   // (1, t, V)
        const std::vector<double> probs =
            models::sampling_probs(z.data() + (t - 1) * V, V, {.temperature = opt.temperature, .top_k = opt.top_k, .top_p = opt.top_p});
        text.push_back(models::sample_token(probs, counter_uniform(opt.seed, static_cast<uint64_t>(b * opt.new_tokens + i))));
        if (length() - start > W) start = length() - std::max<int64_t>(1, W / 2);
    }
    return text;
}

}  // namespace

TEST_CASE("GPT sampling: every row of a batch is its own prompt sampled alone with its own draws, cached and plain, past the "
          "window and from prompts longer than it") {
    manual_seed(10);
    GPT model(tiny());   // block_size 6
    model.eval();
    Rng rng(5);
    const int64_t B = 3;
    for (const int64_t T0 : {1, 6, 9, 14}) {   // shorter than a window, one whole window, longer, longer than two
        CAPTURE(T0);
        const Tokens prompt = random_ids(rng, B, T0, 7);
        for (const auto& [k, temperature] : {std::pair{0, 1.5f}, std::pair{3, 0.9f}}) {
            CAPTURE(k);
            models::GenerateOptions opt{.new_tokens = 17, .temperature = temperature, .top_k = k, .seed = 12};
            for (const auto& [cached, fused] : {std::pair{true, true}, std::pair{false, true}, std::pair{true, false}}) {
                CAPTURE(cached);
                CAPTURE(fused);   // the cache's attention: the kernel reading each row's slot, or the gathered rows' plain form
                FusedKernelsGuard path(fused);
                opt.kv_cache = cached;
                const Tokens out = models::generate(model, prompt, opt);   // (B, T0 + 17)
                REQUIRE(out.shape == Shape{B, T0 + 17});
                for (int64_t b = 0; b < B; b++) {
                    CAPTURE(b);
                    const std::vector<int32_t> row(out.data.begin() + b * (T0 + 17), out.data.begin() + (b + 1) * (T0 + 17));
                    const std::vector<int32_t> alone(prompt.data.begin() + b * T0, prompt.data.begin() + (b + 1) * T0);
                    CHECK(row == sample_row_by_hand(model, alone, b, opt));
                }
            }
        }
    }
    // rows do not share draws: one prompt in every row gives rows of different tokens
    const Tokens same = Tokens::full({B, 2}, 3);
    const Tokens out = models::generate(model, same, {.new_tokens = 30, .temperature = 2.0f, .seed = 13});
    CHECK(std::vector<int32_t>(out.data.begin(), out.data.begin() + 32) != std::vector<int32_t>(out.data.begin() + 32, out.data.begin() + 64));
    // a prompt longer than the window goes on as its last whole window does: 9 tokens in a window of 6 continue as their last 6
    const Tokens long_prompt = random_ids(rng, 1, 9, 7);
    const Tokens last_window(std::vector<int32_t>(long_prompt.data.begin() + 3, long_prompt.data.end()), {1, 6});
    for (const bool cached : {true, false}) {
        CAPTURE(cached);
        const models::GenerateOptions opt{.new_tokens = 15, .seed = 14, .kv_cache = cached};
        const Tokens a = models::generate(model, long_prompt, opt), b = models::generate(model, last_window, opt);
        CHECK(std::vector<int32_t>(a.data.begin() + 9, a.data.end()) == std::vector<int32_t>(b.data.begin() + 6, b.data.end()));
    }
}
