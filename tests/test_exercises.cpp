// The answer key of the exercises at the end of the chapters of docs/ (Part I). Each TEST_CASE
// is named after the exercise it answers, "docs/NN exercise K: ...", and checks the answer the
// chapter gives: a number the learner computes, or, for an exercise that breaks something on
// purpose, that the check the chapter names does catch the broken version (the broken code is
// written here, beside the right one, so the suite runs both). Exercises that break a line of the
// library itself are answered by a planted mistake in tests/mutations.txt named "exercise-NN-..."
// (`make mutate` plants it and runs the test the chapter names).
#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/autograd.h"
#include <doctest/doctest.h>
#include "nn/nn.h"

using namespace autograd;

// ---------------------------------------------------------------- docs/01: tensors and broadcasting

// ---------------------------------------------------------------- docs/02: the graph and backward()

// ---------------------------------------------------------------- docs/03: gradcheck

// ---------------------------------------------------------------- docs/04: softmax

// ---------------------------------------------------------------- docs/05: LayerNorm

// ---------------------------------------------------------------- docs/06: building blocks

// ---------------------------------------------------------------- docs/07: attention

#include <algorithm>
#include <string>

#include "examples/data/attention_by_hand_numbers.h"   // the walk-through's Q, K, V (chapters 7 and 8)
#include "models/transformer.h"                        // the masks (chapter 8) and the model (chapter 10)
#include "tests/gradcheck_helpers.h"                   // param (a random leaf), CHECK_GRAD

namespace ex07 {

using namespace data::attention_by_hand;

// One of the walk-through's matrices as a (1, T, Dk) tensor, plus `shift` added to every row.
Tensor rows(const float (&a)[T][DK], std::vector<float> shift = std::vector<float>(DK, 0.0f)) {
    std::vector<float> x;
    for (const auto& row : a)
        for (int c = 0; c < DK; c++) x.push_back(row[c] + shift[c]);
    return Tensor::from_vector(x, {1, T, DK});   // (1, T, Dk)
}

// softmax over s of (q_t + dq) . (k_s + dk) * scale, in double: the formula, without the library
std::vector<std::vector<double>> weights(double scale, std::vector<double> dq = std::vector<double>(DK, 0.0),
                                         std::vector<double> dk = std::vector<double>(DK, 0.0)) {
    std::vector<std::vector<double>> w(T, std::vector<double>(T));
    for (int t = 0; t < T; t++) {
        double sum = 0.0;
        for (int s = 0; s < T; s++) {
            double dot = 0.0;
            for (int c = 0; c < DK; c++) dot += (Q[t][c] + dq[c]) * (K[s][c] + dk[c]);
            sum += w[t][s] = std::exp(dot * scale);
        }
        for (double& x : w[t]) x /= sum;
    }
    return w;
}

// Every element of t (rows of length C) within 0.5e-4 of a number quoted with 4 decimals.
void check_quoted(const Tensor& t, const std::vector<std::vector<double>>& text) {
    const int64_t C = t.size(-1);
    for (size_t r = 0; r < text.size(); r++)
        for (size_t c = 0; c < text[r].size(); c++) {
            CAPTURE(r);
            CAPTURE(c);
            CHECK(std::fabs(t.data()[r * C + c] - text[r][c]) <= 0.5e-4 + 1e-6);
        }
}

// The same for numbers worked out in double.
void check_quoted(const std::vector<std::vector<double>>& formula, const std::vector<std::vector<double>>& text) {
    for (size_t r = 0; r < text.size(); r++)
        for (size_t c = 0; c < text[r].size(); c++) {
            CAPTURE(r);
            CAPTURE(c);
            CHECK(std::fabs(formula[r][c] - text[r][c]) <= 0.5e-4 + 1e-9);
        }
}

}  // namespace ex07

TEST_CASE("docs/07 exercise 1: a vector added to every key changes no weight; added to every value, it moves every output") {
    using namespace ex07;
    const std::vector<float> b = {1, 2, 3, 4};
    const std::vector<double> bd(b.begin(), b.end()), zero(DK, 0.0);
    const nn::AttentionOutput plain = nn::scaled_dot_product_attention_with_weights(rows(Q), rows(K), rows(V), 1);
    // the raw scores Q (K + b)^T: row t grows by q_t . b, the same for every key of the row
    std::vector<std::vector<double>> raw(T, std::vector<double>(T));
    for (int t = 0; t < T; t++)
        for (int s = 0; s < T; s++)
            for (int c = 0; c < DK; c++) raw[t][s] += Q[t][c] * (K[s][c] + b[c]);
    check_quoted(raw, {{6, 4, 5}, {12, 16, 14}, {12, 12, 12}});
    // ... so the weights are the walk-through's, by the formula and in the library
    const std::vector<std::vector<double>> walk = {{0.5065, 0.1863, 0.3072}, {0.0900, 0.6652, 0.2447}, {0.3333, 0.3333, 0.3333}};
    check_quoted(weights(0.5, zero, bd), walk);
    Tensor q = rows(Q).requires_grad_(), k = rows(K, b).requires_grad_(), v = rows(V).requires_grad_();
    const nn::AttentionOutput shifted = nn::scaled_dot_product_attention_with_weights(q, k, v, 1);
    check_quoted(shifted.weights, walk);
    for (int64_t i = 0; i < plain.out.numel(); i++) CHECK(shifted.out.data()[i] == doctest::Approx(plain.out.data()[i]).epsilon(1e-6));
    // ... and so are the gradients of L = O[cat][dim 1]: dQ = dS (K + b) / 2 = dS K / 2 + (sum_s dS_s) b / 2, and rows of dS sum to 0
    shifted.out.backward(Tensor::from_vector({0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, {1, T, DK}));
    check_quoted(q.grad(), {{0, 0, 0, 0}, {-0.1113, 0.0299, -0.0299, 0.1113}, {0, 0, 0, 0}});
    check_quoted(k.grad(), {{0, -0.0599, 0, -0.0599}, {0, 0.2227, 0, 0.2227}, {0, -0.1628, 0, -0.1628}});
    check_quoted(v.grad(), {{0, 0.0900, 0, 0}, {0, 0.6652, 0, 0}, {0, 0.2447, 0, 0}});
    // the rest of what "docs/07: the attention_by_hand walk-through" checks holds too: the masked
    // weights, and the two heads' (head 0 adds q . [1, 2], head 1 q . [3, 4]: each the same along a row)
    check_quoted(nn::scaled_dot_product_attention_with_weights(rows(Q), rows(K, b), rows(V), 1, models::subsequent_mask(T)).weights,
                 {{1.0, 0.0, 0.0}, {0.1192, 0.8808, 0.0}, {0.3333, 0.3333, 0.3333}});
    const Tensor two = nn::scaled_dot_product_attention_with_weights(rows(Q), rows(K), rows(V), 2).weights,
                 two_shifted = nn::scaled_dot_product_attention_with_weights(rows(Q), rows(K, b), rows(V), 2).weights;
    for (int64_t i = 0; i < two.numel(); i++) CHECK(two_shifted.data()[i] == doctest::Approx(two.data()[i]).epsilon(1e-6));
    // b added to every value row: every output row moves by b (its weights sum to 1)
    const Tensor moved = nn::scaled_dot_product_attention(rows(Q), rows(K), rows(V, b), 1);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < DK; c++) CHECK(moved.at({0, t, c}) == doctest::Approx(plain.out.at({0, t, c}) + b[c]).epsilon(1e-6));
    check_quoted(moved, {{1.5065, 2.1863, 3.3072, 5.0}, {1.0900, 2.6652, 3.2447, 5.0}, {1.3333, 2.3333, 3.3333, 5.0}});
    // b added to every query instead: q_t . k_s grows by b . k_s = 4, 6, 3, which differs between keys
    const std::vector<std::vector<double>> by_query = {{0.4223, 0.4223, 0.1554}};
    check_quoted(weights(0.5, bd), by_query);
    check_quoted(nn::scaled_dot_product_attention_with_weights(rows(Q, b), rows(K), rows(V), 1).weights, by_query);
}

TEST_CASE("docs/07 exercise 2: attention without the 1/sqrt(Dk) scale") {
    using namespace ex07;
    // the broken kernel computes softmax(Q K^T) V: the formula at scale 1, and the library's
    // attention of 2 Q (2 = sqrt(Dk) cancels the scale it applies)
    const std::vector<std::vector<double>> unscaled = {{0.6652, 0.0900, 0.2447}, {0.0159, 0.8668, 0.1173}, {0.3333, 0.3333, 0.3333}};
    check_quoted(weights(1.0), unscaled);
    const Tensor broken = nn::scaled_dot_product_attention(rows(Q) * 2.0f, rows(K), rows(V), 1);
    check_quoted(broken, {{0.6652, 0.0900, 0.2447, 1.0}, {0.0159, 0.8668, 0.1173, 1.0}, {0.3333, 0.3333, 0.3333, 1.0}});
    // the example's "max |by hand - scaled_dot_product_attention|" line: 0.8668 - 0.6652
    const Tensor right = nn::scaled_dot_product_attention(rows(Q), rows(K), rows(V), 1);
    float worst = 0.0f;
    for (int64_t i = 0; i < right.numel(); i++) worst = std::max(worst, std::fabs(broken.data()[i] - right.data()[i]));
    CHECK(worst == doctest::Approx(0.2016).epsilon(1e-3));
    // The broken kernel's backward still multiplies dQ and dK by 1/sqrt(Dk). The same op built from
    // library ops: g(x) has x's value and passes s times its gradient back, so the forward is
    // softmax(Q K^T) V and the gradients of q and k are s times the true ones. gradcheck (chapter
    // 3) on the shapes of "fused attention: gradcheck" in tests/test_nn.cpp (Dk = 6 / 3 = 2):
    manual_seed(7);
    const int64_t B = 2, H = 3, Tq = 4, S = 5, D = 6;
    const float s = 1.0f / std::sqrt(2.0f);
    const auto g = [s](const Tensor& x) { return x * s + x.detach() * (1.0f - s); };
    const TensorFn wrong = [&](const std::vector<Tensor>& x) { return nn::scaled_dot_product_attention(g(x[0]) * std::sqrt(2.0f), g(x[1]), x[2], H); };
    const TensorFn consistent = [&](const std::vector<Tensor>& x) { return nn::scaled_dot_product_attention(x[0] * std::sqrt(2.0f), x[1], x[2], H); };
    const std::vector<Tensor> in = {param({B, Tq, D}), param({B, S, D}), param({B, S, D})};
    const GradcheckResult r = gradcheck(wrong, in);
    CHECK_FALSE(r.ok);   // the report the answer quotes: the first of the five worst
    CHECK(r.report.find("gradcheck failed: 108 mismatches") != std::string::npos);
    CHECK(r.report.find("input 1 (2, 5, 6) element 25: analytic 0.3606") != std::string::npos);
    CHECK(r.report.find("vs numeric 0.5100") != std::string::npos);
    CHECK(gradcheck(consistent, in).ok);   // forward and backward agree: only the forward is not the paper's
    // every gradient of q and k is s = 0.7071 times the true one; v's is right
    const Tensor w = Tensor::randn({B, Tq, D});
    wrong(in).backward(w);
    const std::vector<float> dq_wrong = in[0].grad().to_vector(), dk_wrong = in[1].grad().to_vector(), dv_wrong = in[2].grad().to_vector();
    for (Tensor t : in) t.zero_grad();
    consistent(in).backward(w);
    for (int64_t i = 0; i < in[0].numel(); i++) CHECK(dq_wrong[i] == doctest::Approx(s * in[0].grad().data()[i]).epsilon(1e-5).scale(1e-3));
    for (int64_t i = 0; i < in[1].numel(); i++) CHECK(dk_wrong[i] == doctest::Approx(s * in[1].grad().data()[i]).epsilon(1e-5).scale(1e-3));
    for (int64_t i = 0; i < in[2].numel(); i++) CHECK(dv_wrong[i] == doctest::Approx(in[2].grad().data()[i]).epsilon(1e-5).scale(1e-3));
}

TEST_CASE("docs/07 exercise 3: the variance of q . k is Dk; scaled, it is 1") {
    // 1,000 pairs of vectors with independent N(0, 1) entries, for Dk = 4 and 64
    manual_seed(1);
    const int64_t N = 1000;
    const double quoted_raw[] = {4.23, 62.85}, quoted_scaled[] = {1.06, 0.98};   // this draw's, as the answer quotes them
    int i = 0;
    for (int64_t Dk : {4, 64}) {
        CAPTURE(Dk);
        const Tensor q = Tensor::randn({N, Dk}), k = Tensor::randn({N, Dk});    // (N, Dk) each
        const Tensor dots = sum(q * k, 1);                                     // (N)
        const float raw = var(dots).item(), scaled = var(dots / std::sqrt(float(Dk))).item();
        CHECK(std::fabs(raw - quoted_raw[i]) < 0.005);
        CHECK(std::fabs(scaled - quoted_scaled[i]) < 0.005);
        CHECK(raw == doctest::Approx(double(Dk)).epsilon(0.1));   // the theory: Dk, up to the noise of 1,000 draws
        i++;
    }
    // what that variance does to a softmax over S = 8 keys, Dk = 64: the largest weight of a row,
    // averaged over the rows (1/8 = 0.125 would be uniform, 1 one-hot)
    const int64_t S = 8, Dk = 64;
    const Tensor q = Tensor::randn({N / 4, 1, Dk}), k = Tensor::randn({N / 4, S, Dk});   // 250 queries, each with its own S keys
    const Tensor scores = matmul(q, k, false, true);                               // (250, 1, S)
    CHECK(std::fabs(mean(max(softmax(scores), -1)).item() - 0.876) < 0.0005);
    CHECK(std::fabs(mean(max(softmax(scores / 8.0f), -1)).item() - 0.367) < 0.0005);
}

// ---------------------------------------------------------------- docs/08: masks

#include "models/batch.h"   // make_batch

namespace ex08 {

// The slip of exercise 3: subsequent_mask with s < t, beside the right loop (s <= t) of
// models::subsequent_mask: position t may no longer attend to itself.
Mask subsequent_mask_without_diagonal(int64_t T) {
    Mask m = Mask::full({1, T, T}, 0);   // (1, T, T)
    for (int64_t t = 0; t < T; t++)
        for (int64_t s = 0; s < t; s++) m[t * T + s] = 1;
    return m;
}

}  // namespace ex08

TEST_CASE("docs/08 exercise 1: a padded target row through make_batch, by hand") {
    // one pair; the target <bos> 5 6 <eos> padded to 6 ids, bos = 1, eos = 2, pad = 0
    const models::Batch b = models::make_batch(Tokens({4, 3}, {1, 2}), Tokens({1, 5, 6, 2, 0, 0}, {1, 6}), 0);
    CHECK(b.tgt_in.data == std::vector<int32_t>{1, 5, 6, 2, 0});
    CHECK(b.tgt_out.data == std::vector<int32_t>{5, 6, 2, 0, 0});
    CHECK(b.ntokens == 3);
    CHECK(b.tgt_mask.shape == Shape{1, 5, 5});
    const std::vector<uint8_t> by_hand = {1, 0, 0, 0, 0,    // query 0 (<bos>) sees itself
                                          1, 1, 0, 0, 0,
                                          1, 1, 1, 0, 0,
                                          1, 1, 1, 1, 0,    // query 3 (<eos>) sees 0..3
                                          1, 1, 1, 1, 0};   // query 4 is padding: it still sees 0..3, never key 4
    CHECK(b.tgt_mask.data == by_hand);
    // target_mask = padding_mask of tgt_in (one row for every query) AND subsequent_mask
    const Mask pad = models::padding_mask(b.tgt_in, 0), sub = models::subsequent_mask(5);
    CHECK(pad.data == std::vector<uint8_t>{1, 1, 1, 1, 0});
    for (int t = 0; t < 5; t++)
        for (int s = 0; s < 5; s++) CHECK(b.tgt_mask[t * 5 + s] == (pad[s] && sub[t * 5 + s]));
}

TEST_CASE("docs/08 exercise 2: the walk-through's backward with the subsequent mask: a masked key gets exactly 0") {
    using namespace data::attention_by_hand;
    // by hand, in double: row "cat" sees "the" and itself, scaled scores 0 and 2
    const double p = 1.0 / (1.0 + std::exp(-2.0));               // 0.8808: the weight of "cat" on itself
    const double ds_cat = p * (1.0 - p), ds_the = (1.0 - p) * (0.0 - p);   // dS = A (dA - sum A dA), dA = [0, 1, 0]
    CHECK(std::fabs(ds_cat - 0.1050) < 0.5e-4);
    CHECK(std::fabs(ds_the + 0.1050) < 0.5e-4);
    CHECK(std::fabs(0.5 * ds_cat - 0.0525) < 0.5e-4);            // dQ[cat] = 0.5 (dS_the K[the] + dS_cat K[cat])
    for (bool fused : {true, false}) {
        CAPTURE(fused);
        const FusedKernelsGuard path(fused);
        Tensor q = ex07::rows(Q).requires_grad_(), k = ex07::rows(K).requires_grad_(), v = ex07::rows(V).requires_grad_();
        const Tensor out = nn::scaled_dot_product_attention(q, k, v, 1, models::subsequent_mask(T));   // (1, T, Dk)
        out.backward(Tensor::from_vector({0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, {1, T, DK}));          // L = O[cat][dim 1]
        ex07::check_quoted(q.grad(), {{0, 0, 0, 0}, {-0.0525, 0.0525, -0.0525, 0.0525}, {0, 0, 0, 0}});
        ex07::check_quoted(k.grad(), {{0, -0.1050, 0, -0.1050}, {0, 0.1050, 0, 0.1050}, {0, 0, 0, 0}});
        ex07::check_quoted(v.grad(), {{0, 0.1192, 0, 0}, {0, 0.8808, 0, 0}, {0, 0, 0, 0}});
        for (int c = 0; c < DK; c++) {   // "sleeps", masked for query "cat": exactly zero, not just small
            CHECK(k.grad().at({0, 2, c}) == 0.0f);
            CHECK(v.grad().at({0, 2, c}) == 0.0f);
        }
    }
}

TEST_CASE("docs/08 exercise 3: subsequent_mask without its diagonal: the first row attends to nothing") {
    using namespace data::attention_by_hand;
    const Mask broken = ex08::subsequent_mask_without_diagonal(T);
    CHECK(broken.data == std::vector<uint8_t>{0, 0, 0, 1, 0, 0, 1, 1, 0});
    // what "masks: padding (B, 1, S), subsequent (1, T, T), target = both" compares: this one differs
    CHECK(broken.data != std::vector<uint8_t>{1, 0, 0, 1, 1, 0, 1, 1, 1});
    CHECK(models::subsequent_mask(T).data == std::vector<uint8_t>{1, 0, 0, 1, 1, 0, 1, 1, 1});
    // the example's by-hand softmax of row "the": every score -inf, so e^-inf / sum = 0 / 0
    const double inf = INFINITY, by_hand = std::exp(-inf) / (std::exp(-inf) + std::exp(-inf) + std::exp(-inf));
    CHECK(std::isnan(by_hand));
    // the library, plain and fused: weights 0 and output 0 for that row; the others renormalize
    for (bool fused : {true, false}) {
        CAPTURE(fused);
        const FusedKernelsGuard path(fused);
        const nn::AttentionOutput a = nn::scaled_dot_product_attention_with_weights(ex07::rows(Q), ex07::rows(K), ex07::rows(V), 1, broken);
        ex07::check_quoted(a.weights, {{0, 0, 0}, {1, 0, 0}, {0.5, 0.5, 0}});
        ex07::check_quoted(a.out, {{0, 0, 0, 0}, {1, 0, 0, 1}, {0.5, 0.5, 0, 1}});
        for (float x : a.out.to_vector()) CHECK_FALSE(std::isnan(x));
        for (int c = 0; c < DK; c++) CHECK(a.out.at({0, 0, c}) == 0.0f);
    }
}

// ---------------------------------------------------------------- docs/09: positional encoding

namespace ex09 {

// The table of exercise 3's slip: the paper's 2i written into the exponent although the loop's i
// already is the even dimension 2k, so pair k gets the frequency 10000^(-4k/D) instead of
// 10000^(-2k/D). Beside the right line of PositionalEncoding::table, which has no 2.0.
std::vector<double> table_with_doubled_exponent(int64_t rows, int64_t d) {
    std::vector<double> pe(static_cast<size_t>(rows * d));
    for (int64_t pos = 0; pos < rows; pos++)
        for (int64_t i = 0; i < d; i += 2) {
            const double angle = double(pos) * std::exp(-std::log(10000.0) * 2.0 * double(i) / double(d));
            pe[pos * d + i] = std::sin(angle);
            pe[pos * d + i + 1] = std::cos(angle);
        }
    return pe;
}

}  // namespace ex09

TEST_CASE("docs/09 exercise 1: PE(10) for D = 8, by hand") {
    // frequencies 10000^(-2i/8) = 1, 0.1, 0.01, 0.001: the angles 10, 1, 0.1, 0.01
    const std::vector<double> quoted = {-0.5440, -0.8391, 0.8415, 0.5403, 0.0998, 0.9950, 0.0100, 1.0000};
    nn::PositionalEncoding pe(8, 0.0f, 50);
    const Tensor row = pe.table(11);   // (11, 8): positions 0..10
    for (int c = 0; c < 8; c++) {
        CAPTURE(c);
        const double angle = 10.0 / std::pow(10000.0, double(c / 2 * 2) / 8.0);
        CHECK(std::fabs((c % 2 == 0 ? std::sin(angle) : std::cos(angle)) - quoted[c]) <= 0.5e-4);
        CHECK(std::fabs(row.at({10, c}) - quoted[c]) <= 0.5e-4 + 1e-6);
    }
}

TEST_CASE("docs/09 exercise 2: PE(pos + k) is a rotation of PE(pos); PE(pos) . PE(pos + k) depends on k only") {
    // (a) by hand, D = 4, k = 1: rotate each pair of PE(1) by the angle w_i * 1
    nn::PositionalEncoding pe4(4, 0.0f, 50);
    const Tensor t4 = pe4.table(3);   // (3, 4): the chapter's table
    const double w[] = {1.0, 0.01};
    for (int i = 0; i < 2; i++) {
        CAPTURE(i);
        const double c = std::cos(w[i]), s = std::sin(w[i]), x = t4.at({1, 2 * i}), y = t4.at({1, 2 * i + 1});
        CHECK(std::fabs(c * x + s * y - t4.at({2, 2 * i})) < 1e-6);       // sin(theta + w) = cos w sin theta + sin w cos theta
        CHECK(std::fabs(-s * x + c * y - t4.at({2, 2 * i + 1})) < 1e-6);  // cos(theta + w) = -sin w sin theta + cos w cos theta
    }
    ex07::check_quoted(narrow(t4, 0, 2, 1), {{0.9093, -0.4161, 0.0200, 0.9998}});   // PE(2), as the rotation gives it
    // (b) the dot product: sum over pairs of cos(w_i k), whatever pos; D = 4, k = 1: cos 1 + cos 0.01
    CHECK(std::fabs(std::cos(1.0) + std::cos(0.01) - 1.5403) < 0.5e-4);
    const Tensor t = pe4.table(50);
    for (int pos = 0; pos + 1 < 50; pos++) {
        double dot = 0.0, self = 0.0;
        for (int c = 0; c < 4; c++) dot += double(t.at({pos, c})) * t.at({pos + 1, c}), self += double(t.at({pos, c})) * t.at({pos, c});
        CHECK(dot == doctest::Approx(1.5403).epsilon(1e-4));
        CHECK(self == doctest::Approx(2.0).epsilon(1e-6));   // |PE(pos)|^2 = D/2: sin^2 + cos^2 per pair
    }
    // (c) numerically, D = 8, every pos < 40 and k = 1..5: the rotated row is the table's row pos + k
    nn::PositionalEncoding pe8(8, 0.0f, 50);
    const Tensor t8 = pe8.table(45);
    double worst = 0.0;
    for (int pos = 0; pos < 40; pos++)
        for (int k = 1; k <= 5; k++)
            for (int i = 0; i < 4; i++) {
                const double wk = k * std::pow(10000.0, -2.0 * i / 8.0), x = t8.at({pos, 2 * i}), y = t8.at({pos, 2 * i + 1});
                worst = std::max(worst, std::fabs(std::cos(wk) * x + std::sin(wk) * y - t8.at({pos + k, 2 * i})));
                worst = std::max(worst, std::fabs(-std::sin(wk) * x + std::cos(wk) * y - t8.at({pos + k, 2 * i + 1})));
            }
    CHECK(worst < 1e-7);   // the float rounding of the table's entries (the worst is 6e-8)
}

TEST_CASE("docs/09 exercise 3: the exponent doubled: pair 0 is unchanged, every other pair runs too slowly") {
    const std::vector<double> broken = ex09::table_with_doubled_exponent(8, 8);
    nn::PositionalEncoding pe(8, 0.0f, 50);
    const Tensor right = pe.table(8);   // (8, 8)
    // dims 0 and 1 have frequency 10000^0 = 1 either way: "positional encoding matches the paper's
    // formula" checks at (3, 0) and (3, 1) pass ...
    for (int pos = 0; pos < 8; pos++)
        for (int c = 0; c < 2; c++) CHECK(broken[pos * 8 + c] == doctest::Approx(right.at({pos, c})).epsilon(1e-6));
    // ... and its checks at (7, 4) and (7, 5) fail with the values doctest prints:
    // CHECK( 0.0007 == Approx( 0.0699428 ) ) and CHECK( 1 == Approx( 0.997551 ) )
    const double paper4 = std::sin(7.0 / std::pow(10000.0, 4.0 / 8.0)), paper5 = std::cos(7.0 / std::pow(10000.0, 4.0 / 8.0));
    CHECK(right.at({7, 4}) == doctest::Approx(paper4));
    CHECK(broken[7 * 8 + 4] != doctest::Approx(paper4));
    CHECK(broken[7 * 8 + 5] != doctest::Approx(paper5));
    CHECK(std::fabs(broken[7 * 8 + 4] - 0.0007) < 0.5e-6);   // sin(7 * 10^-4)
    CHECK(std::fabs(paper4 - 0.0699428) < 0.5e-7);
    CHECK(float(broken[7 * 8 + 5]) == doctest::Approx(1.0));   // cos(7e-4) = 0.99999976 prints as 1
    CHECK(std::fabs(paper5 - 0.997551) < 0.5e-6);
}

// ---------------------------------------------------------------- docs/10: the encoder-decoder

namespace ex10 {

// The config of exercises 1 and 3: N = 1, D = 8, F = 16, H = 2, V_src = 5, V_tgt = 7, no dropout.
models::TransformerConfig small(int64_t layers = 1, int64_t heads = 2, bool pre_norm = true) {
    models::TransformerConfig c;
    c.src_vocab = 5;
    c.tgt_vocab = 7;
    c.layers = layers;
    c.d_model = 8;
    c.d_ff = 16;
    c.heads = heads;
    c.dropout = 0.0f;
    c.pre_norm = pre_norm;
    return c;
}

}  // namespace ex10

TEST_CASE("docs/10 exercise 1: the parameters of a small config, by the formula") {
    const int64_t D = 8, F = 16, Vs = 5, Vt = 7;
    const int64_t attention = 4 * (D * D + D), ffn = 2 * D * F + F + D, norm = 2 * D;
    CHECK(attention == 288);
    CHECK(ffn == 280);
    CHECK(attention + ffn + 2 * norm == 600);        // encoder layer
    CHECK(2 * attention + ffn + 3 * norm == 904);    // decoder layer
    CHECK((Vs + Vt) * D == 96);                      // the two embedding tables
    CHECK(D * Vt + Vt == 63);                        // the generator
    CHECK(1 * (600 + 904) + 2 * norm + 96 + 63 == 1695);
    CHECK(models::Transformer(ex10::small()).num_parameters() == 1695);
    CHECK(models::Transformer(ex10::small(1, 4)).num_parameters() == 1695);   // H = 4: heads split D, add nothing
    CHECK(models::Transformer(ex10::small(1, 1)).num_parameters() == 1695);
    CHECK(models::Transformer(ex10::small(2)).num_parameters() == 1695 + 1504);   // each extra N: one encoder and one decoder layer
}

TEST_CASE("docs/10 exercise 2: a sublayer without its residual passes gradcheck; only a comparison with another model can see it") {
    // an attention sublayer (smooth everywhere, so finite differences are exact enough) in a
    // SublayerConnection, pre-norm, beside the same modules without the "x +"
    manual_seed(10);
    const int64_t D = 8, H = 2;
    models::SublayerConnection sub(D, 0.0f, /*pre_norm=*/true);
    nn::MultiHeadAttention attn(D, H, 0.0f);
    const auto self_attention = [&attn](const Tensor& y) { return attn.forward(y, y, y); };
    const TensorFn right = [&](const std::vector<Tensor>& x) { return sub.forward(x[0], self_attention); };
    const TensorFn no_residual = [&](const std::vector<Tensor>& x) { return self_attention(sub.norm->forward(x[0])); };
    const std::vector<Tensor> in = {param({1, 3, D})};   // (1, T, D)
    // both pass: each backward is the exact derivative of its own forward
    const GradcheckResult a = gradcheck(right, in), b = gradcheck(no_residual, in);
    INFO(a.report);
    INFO(b.report);
    CHECK(a.ok);
    CHECK(b.ok);
    GradcheckOptions third;   // and with a third of the default tolerances: float rounding is far from failing them
    third.atol /= 3;
    third.rtol /= 3;
    CHECK(gradcheck(right, in, third).ok);
    CHECK(gradcheck(no_residual, in, third).ok);
    // ... and they are different functions: the difference is the residual x itself
    const Tensor ya = right(in), yb = no_residual(in);
    for (int64_t i = 0; i < ya.numel(); i++) CHECK(ya.data()[i] - yb.data()[i] == doctest::Approx(in[0].data()[i]).epsilon(1e-5));
}

TEST_CASE("docs/10 exercise 3: pre-norm and post-norm: the same parameters, a normalized or an unnormalized stream") {
    manual_seed(4);
    models::Transformer pre(ex10::small(1, 2, true));
    manual_seed(4);
    models::Transformer post(ex10::small(1, 2, false));
    // the same LayerNorms in other places: the same count and the same names
    CHECK(post.num_parameters() == pre.num_parameters());
    const auto pre_named = pre.named_parameters(), post_named = post.named_parameters();
    REQUIRE(pre_named.size() == post_named.size());
    for (size_t i = 0; i < pre_named.size(); i++) CHECK(pre_named[i].first == post_named[i].first);
    // the output of encoder layer 0 for the same input: post-norm ends in a LayerNorm (gain 1,
    // bias 0 at initialization), so each row has mean 0 and variance 1; pre-norm's rows are x
    // plus two sublayers' outputs, not normalized
    manual_seed(5);
    const Tensor x = Tensor::randn({1, 5, 8}) * 3.0f + 1.0f;   // (1, 5, D): mean 1, standard deviation 3
    const Tensor post_out = (*post.encoder->layers)[0].forward(x, Mask());   // (1, 5, D)
    const Tensor pre_out = (*pre.encoder->layers)[0].forward(x, Mask());
    const Tensor post_mean = mean(post_out, -1), post_var = var(post_out, -1, /*unbiased=*/false);   // (1, 5)
    const Tensor pre_var = var(pre_out, -1, false);
    float lo = INFINITY, hi = 0.0f;
    for (int t = 0; t < 5; t++) {
        CAPTURE(t);
        CHECK(std::fabs(post_mean.at({0, t})) < 1e-5);
        CHECK(post_var.at({0, t}) == doctest::Approx(1.0).epsilon(1e-3));   // 1 - eps / variance
        lo = std::min(lo, pre_var.at({0, t}));
        hi = std::max(hi, pre_var.at({0, t}));
    }
    CHECK(std::fabs(lo - 1.69) < 0.005);    // the answer's "from 1.7 to 11.8"
    CHECK(std::fabs(hi - 11.83) < 0.005);
}

// ---------------------------------------------------------------- docs/11: cross-entropy and label smoothing

// ---------------------------------------------------------------- docs/12: Adam and the warmup schedule

// ---------------------------------------------------------------- docs/13: tokenization

// ---------------------------------------------------------------- docs/14: decoding
