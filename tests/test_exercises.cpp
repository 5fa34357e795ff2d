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

namespace {

// The table, ids and upstream gradient of docs/06's Embedding example: W (4, 2), ids [2, 0, 2],
// dy (3, 2).
Tensor docs06_table() { return Tensor::from_vector({0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f}, {4, 2}).requires_grad_(); }
const Tokens docs06_ids({2, 0, 2}, {3});
Tensor docs06_dy() { return Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}); }

// index_select along dim 0 of a (V, D) table, with exercise 2's slip: the backward writes (=) a
// row's gradient where autograd::index_select adds (+=) it, so a repeated id keeps only its last
// row's gradient.
Tensor index_select_overwriting(const Tensor& table, const Tokens& ids) {
    const int64_t D = table.size(1), m = ids.numel();
    Shape shape = ids.shape;
    shape.push_back(D);
    Tensor y = Tensor::empty(shape);   // (..., D)
    for (int64_t j = 0; j < m; j++)
        for (int64_t i = 0; i < D; i++) y.data()[j * D + i] = table.data()[ids[j] * D + i];
    record(y, {table}, "index_select_overwriting", [ids, D, m](Node& self) {
        const float* dy = self.grad.data();
        float* dw = self.parent_grad(0);
        for (int64_t j = 0; j < m; j++)
            for (int64_t i = 0; i < D; i++) dw[ids[j] * D + i] = dy[j * D + i];   // the slip: = for +=
    });
    return y;
}

// Exercise 3's slip: dropout that zeroes with probability p but forgets to scale the survivors
// by 1/(1-p); the same keep decisions as nn::dropout (counter_uniform(seed, i) >= p).
Tensor dropout_unscaled(const Tensor& x, float p) {
    const uint64_t seed = default_rng().next_u64();   // one seed per application, as nn::dropout draws it
    Tensor mask = Tensor::empty(x.shape());
    for (int64_t i = 0; i < x.numel(); i++) mask.data()[i] = counter_uniform(seed, uint64_t(i)) >= p ? 1.0f : 0.0f;
    return x * mask;
}

}  // namespace

TEST_CASE("docs/06 exercise 1: the embedding is a matmul by a one-hot matrix, with the same gradient") {
    Tensor a = docs06_table(), b = docs06_table();
    const Tensor looked_up = index_select(a, 0, docs06_ids);   // (3, 2)
    // O (3, 4): row j is one-hot at ids[j]
    Tensor one_hot = Tensor::zeros({3, 4});
    for (int64_t j = 0; j < 3; j++) one_hot.data()[j * 4 + docs06_ids[j]] = 1.0f;
    const Tensor multiplied = matmul(one_hot, b);             // (3, 4)(4, 2) = (3, 2)
    CHECK(multiplied.to_vector() == looked_up.to_vector());
    looked_up.backward(docs06_dy());
    multiplied.backward(docs06_dy());
    // dW = O^T dy (chapter 2's dB = A^T dC): row v is the sum of dy's rows j with ids[j] = v
    CHECK(b.grad().to_vector() == a.grad().to_vector());
    CHECK(a.grad().to_vector() == std::vector<float>{3, 4, 0, 0, 6, 8, 0, 0});
    // the work: the matmul's 3 * 4 * 2 = 24 multiply-adds, 18 of them by a zero, for 3 * 2 = 6 copies
    int64_t by_zero = 0;
    for (int64_t j = 0; j < 3; j++)
        for (int64_t v = 0; v < 4; v++) by_zero += one_hot.data()[j * 4 + v] == 0.0f ? 2 : 0;
    CHECK(one_hot.numel() * 2 == 24);
    CHECK(by_zero == 18);
}

TEST_CASE("docs/06 exercise 2: index_select's backward with = instead of +=: gradcheck fails on the repeated id's row") {
    // the worked example: id 2's row gets dy's last row [5, 6] instead of the sum [6, 8]
    {
        Tensor w = docs06_table();
        index_select_overwriting(w, docs06_ids).backward(docs06_dy());
        CHECK(w.grad().to_vector() == std::vector<float>{3, 4, 0, 0, 5, 6, 0, 0});
    }
    // the check of "index_select gathers rows by integer ids; repeated ids accumulate"
    // (tests/test_ops.cpp), same inputs: right passes, the slip fails on row 1 (id 1, used twice)
    manual_seed(8);
    const Tensor table = Tensor::uniform({5, 3}, -1.0f, 1.0f).requires_grad_();   // (V, D)
    const Tokens ids({4, 1, 1, 0}, {2, 2});                                        // (B, T), id 1 twice
    CHECK(gradcheck([&](const std::vector<Tensor>& x) { return index_select(x[0], 0, ids); }, {table}).ok);
    const GradcheckResult r = gradcheck([&](const std::vector<Tensor>& x) { return index_select_overwriting(x[0], ids); }, {table});
    INFO(r.report);
    CHECK_FALSE(r.ok);
    CHECK(r.report.find("gradcheck failed: 3 mismatches") != std::string::npos);
    // the report's three lines, as docs/06 quotes them: elements 3, 4, 5 of the (5, 3) table are row 1
    const struct { int element; double analytic, numeric; } lines[] = {
        {4, 0.688573, 1.47808}, {5, 0.810451, 0.0587425}, {3, 0.573634, -0.151848}};
    size_t at = 0;
    for (const auto& line : lines) {
        CAPTURE(line.element);
        const std::string head = "input 0 (5, 3) element " + std::to_string(line.element) + ": analytic ";
        at = r.report.find(head, at);   // in this order: worst first
        REQUIRE(at != std::string::npos);
        size_t used = 0;
        const double analytic = std::stod(r.report.substr(at + head.size()), &used);
        const std::string rest = r.report.substr(at + head.size() + used);
        REQUIRE(rest.rfind(" vs numeric ", 0) == 0);
        const double numeric = std::stod(rest.substr(12));
        CHECK(std::fabs(analytic - line.analytic) < 1e-6);
        CHECK(std::fabs(numeric - line.numeric) < 1e-5);
    }
    sum(index_select_overwriting(table, ids)).backward();
    CHECK(table.grad().at({1, 0}) == 1.0f);   // the test's CHECK(table.grad().at({1, 0}) == 2.0f) fails: 1 != 2
}

TEST_CASE("docs/06 exercise 3: dropout without the 1/(1-p): gradcheck passes, the mean is 1 - p") {
    // gradcheck cannot see it: the backward is the right derivative of the wrong forward
    CHECK(gradcheck([](const std::vector<Tensor>& x) { manual_seed(4); return dropout_unscaled(x[0], 0.4f); },
                    {Tensor::uniform({3, 5}, -1.0f, 1.0f).requires_grad_()})
              .ok);
    // the mean of 10,000 ones at p = 0.1 from manual_seed(0): 8,956 kept, so 0.8956 unscaled and
    // 8956 / 0.9 / 10000 = 0.9951 scaled (docs/06's dropout section)
    const auto mean = [](const Tensor& t) {
        double s = 0.0;
        for (float v : t.to_vector()) s += v;
        return s / double(t.numel());
    };
    manual_seed(0);
    const double unscaled = mean(dropout_unscaled(Tensor::ones({10000}), 0.1f));
    manual_seed(0);
    const double scaled = mean(nn::dropout(Tensor::ones({10000}), 0.1f, true));
    CHECK(std::fabs(unscaled - 0.8956) < 1e-6);
    CHECK(std::fabs(scaled - 0.8956 / 0.9) < 1e-6);
    // evaluation is the identity either way: the next layer sees 1 / 0.9 = 1.11 times the training scale
    CHECK(std::fabs(1.0 / 0.9 - 1.1111) < 0.5e-4);
    // "dropout: inverted scaling, identity in eval, seeded" (tests/test_nn.cpp) draws 10,000 ones at
    // p = 0.25 after manual_seed(4): each of the 7,534 kept elements is 1 there, not 1/0.75
    manual_seed(4);
    const Tensor kept = dropout_unscaled(Tensor::ones({10000}), 0.25f);
    int64_t ones = 0;
    for (float v : kept.to_vector()) ones += v == 1.0f;
    CHECK(ones == 7534);
}

// ---------------------------------------------------------------- docs/07: attention

// ---------------------------------------------------------------- docs/08: masks

// ---------------------------------------------------------------- docs/09: positional encoding

// ---------------------------------------------------------------- docs/10: the encoder-decoder

// ---------------------------------------------------------------- docs/11: cross-entropy and label smoothing

// ---------------------------------------------------------------- docs/12: Adam and the warmup schedule

// ---------------------------------------------------------------- docs/13: tokenization

// ---------------------------------------------------------------- docs/14: decoding
