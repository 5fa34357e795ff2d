// Every differentiable op against finite differences (gradcheck), plus forward values and errors.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "autograd/autograd.h"
#include "tests/gradcheck_helpers.h"

using namespace autograd;


TEST_CASE("gradcheck itself catches a wrong backward") {
    // a deliberately wrong op: forward 2x, backward claims 3x
    auto wrong = [](const std::vector<Tensor>& x) {
        Tensor y = Tensor::empty(x[0].shape());
        for (int64_t i = 0; i < y.numel(); i++) y.data()[i] = 2.0f * x[0].data()[i];
        record(y, {x[0]}, "wrong", [](Node& self) {
            float* dx = self.parent_grad(0);
            for (int64_t i = 0; i < self.numel(); i++) dx[i] += 3.0f * self.grad[i];
        });
        return y;
    };
    manual_seed(0);
    CHECK_FALSE(gradcheck(wrong, {param({3})}).ok);
}

TEST_CASE("gradcheck reports the worst five mismatches, worst first") {
    // forward 2x; backward claims (2 + i/10) x for element i: the error grows with i
    auto wrong = [](const std::vector<Tensor>& x) {
        Tensor y = x[0] * 2.0f;
        Tensor out = Tensor::empty(y.shape());
        std::copy_n(y.data(), y.numel(), out.data());
        record(out, {x[0]}, "wrong", [](Node& self) {
            float* dx = self.parent_grad(0);
            for (int64_t i = 0; i < self.numel(); i++) dx[i] += (2.0f + 0.1f * static_cast<float>(i)) * self.grad[i];
        });
        return out;
    };
    manual_seed(0);
    const GradcheckResult r = gradcheck(wrong, {param({8})});
    INFO(r.report);
    CHECK_FALSE(r.ok);
    CHECK(r.report.find("7 mismatches") != std::string::npos);   // element 0 is right
    const size_t e7 = r.report.find("element 7"), e6 = r.report.find("element 6"), e3 = r.report.find("element 3");
    CHECK(e7 < e6);
    CHECK(e6 < e3);
    CHECK(e3 != std::string::npos);
    CHECK(r.report.find("element 2:") == std::string::npos);   // only the worst five
}

// GELU's forward with the derivative of its tanh approximation, 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'
// with u = sqrt(2/pi) (x + 0.044715 x^3): a plausible slip, within 8.7e-4 of the exact derivative (8.0e-4 of it, at x = 2.02)
static Tensor gelu_with_tanh_derivative(const Tensor& x) {
    Tensor y;
    {
        NoGradGuard no_grad;
        y = gelu(x);
    }
    record(y, {x}, "gelu_wrong", [](Node& self) {
        const float* px = self.parent_data(0);
        float* dx = self.parent_grad(0);
        const float c = std::sqrt(2.0f / static_cast<float>(M_PI));
        for (int64_t i = 0; i < self.numel(); i++) {
            const float v = px[i], t = std::tanh(c * (v + 0.044715f * v * v * v));
            dx[i] += self.grad[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * c * (1.0f + 3.0f * 0.044715f * v * v));
        }
    });
    return y;
}

TEST_CASE("gradcheck's default tolerance catches GELU with its tanh approximation's derivative") {
    manual_seed(2);
    const Tensor x = param({4, 6}, -3.0f, 3.0f);
    CHECK(gradcheck([](const std::vector<Tensor>& v) { return gelu(v[0]); }, {x}).ok);
    const GradcheckResult wrong = gradcheck([](const std::vector<Tensor>& v) { return gelu_with_tanh_derivative(v[0]); }, {x});
    INFO(wrong.report);
    CHECK_FALSE(wrong.ok);
}

TEST_CASE("elementwise binary ops with broadcasting") {
    manual_seed(1);
    const std::vector<std::pair<Shape, Shape>> shapes = {
        {{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{2, 3, 4}, {3, 1}}, {{1, 4}, {3, 1}}, {{2, 1, 4}, {1, 3, 1}}, {{}, {2, 3}}};
    for (const auto& pair : shapes) {
        const Shape &sa = pair.first, &sb = pair.second;   // not a structured binding: CAPTURE's lambda captures them
        CAPTURE(shape_str(sa));
        CAPTURE(shape_str(sb));
        CHECK_GRAD([](const std::vector<Tensor>& x) { return x[0] + x[1]; }, param(sa), param(sb));
        CHECK_GRAD([](const std::vector<Tensor>& x) { return x[0] - x[1]; }, param(sa), param(sb));
        CHECK_GRAD([](const std::vector<Tensor>& x) { return x[0] * x[1]; }, param(sa), param(sb));
        CHECK_GRAD([](const std::vector<Tensor>& x) { return x[0] / x[1]; }, param(sa), param(sb, 0.5f, 2.0f));
    }
    // only one side requires grad
    CHECK_GRAD([](const std::vector<Tensor>& x) { return x[0] * x[1]; }, param({2, 3}), Tensor::randn({3}));
    // the same tensor on both sides: both partial derivatives land in one gradient
    CHECK_GRAD([](const std::vector<Tensor>& x) { return x[0] * x[0]; }, param({2, 3}));
    CHECK_GRAD([](const std::vector<Tensor>& x) { return x[0] / x[0] + x[0] - exp(x[0]); }, param({4}, 0.5f, 2.0f));
}

TEST_CASE("broadcast forward values follow NumPy") {
    const Tensor a = Tensor::from_vector({1, 2, 3}, {3, 1});
    const Tensor b = Tensor::from_vector({10, 20}, {1, 2});
    CHECK((a + b).shape() == Shape{3, 2});
    CHECK((a + b).to_vector() == std::vector<float>{11, 21, 12, 22, 13, 23});
    CHECK_THROWS_WITH_AS(Tensor::ones({2, 3}) + Tensor::ones({4}), doctest::Contains("add: shapes (2, 3) and (4,)"),
                         std::invalid_argument);
}

TEST_CASE("elementwise scalar and unary ops") {
    manual_seed(2);
    using V = const std::vector<Tensor>&;
    CHECK_GRAD([](V x) { return x[0] + 2.5f; }, param({2, 3}));
    CHECK_GRAD([](V x) { return x[0] * -1.5f; }, param({2, 3}));
    CHECK_GRAD([](V x) { return 1.0f - x[0]; }, param({2, 3}));
    CHECK_GRAD([](V x) { return x[0] / 4.0f; }, param({2, 3}));
    CHECK_GRAD([](V x) { return 3.0f / x[0]; }, param({2, 3}, 0.5f, 2.0f));
    CHECK_GRAD([](V x) { return -x[0]; }, param({2, 3}));
    CHECK_GRAD([](V x) { return pow(x[0], 3.0f); }, param({2, 3}));
    CHECK_GRAD([](V x) { return pow(x[0], -0.5f); }, param({2, 3}, 0.5f, 2.0f));
    CHECK_GRAD([](V x) { return exp(x[0]); }, param({2, 3}));
    CHECK_GRAD([](V x) { return log(x[0]); }, param({2, 3}, 0.5f, 2.0f));
    CHECK_GRAD([](V x) { return sqrt(x[0]); }, param({2, 3}, 0.5f, 2.0f));
    CHECK_GRAD([](V x) { return tanh(x[0]); }, param({2, 3}));
    CHECK_GRAD([](V x) { return sigmoid(x[0]); }, param({2, 3}, -4.0f, 4.0f));
    // large |x|: the derivative y (1 - y) is small but not zero at +-9, and 0 (not NaN) at +-150, where e^-150 underflows
    // (forward values up to 1e30: "unary forward values"; gradcheck's steps vanish there, x +- 0.02 = x)
    Tensor big = Tensor::from_vector({-9.0f, 9.0f, -20.0f, 20.0f, -90.0f, 90.0f, -150.0f, 150.0f}, {8}).requires_grad_();
    CHECK_GRAD([](V x) { return sigmoid(x[0]); }, big);
    CHECK_GRAD([](V x) { return gelu(x[0]); }, param({4, 6}, -3.0f, 3.0f));   // enough points to tell tanh-GELU's derivative apart
    // relu has a kink at 0: keep the inputs away from it
    Tensor r = Tensor::from_vector({-1.5f, -0.3f, 0.2f, 0.9f, 2.0f, -2.0f}, {2, 3}).requires_grad_();
    CHECK_GRAD([](V x) { return relu(x[0]); }, r);
}

TEST_CASE("unary forward values") {
    const Tensor x = Tensor::from_vector({-1.0f, 0.0f, 1.0f}, {3});
    CHECK(relu(x).to_vector() == std::vector<float>{0, 0, 1});
    // torch.sigmoid(torch.tensor([-1., 0., 1.])) = [0.2689, 0.5000, 0.7311]; 1 / (1 + e^-x) by hand
    CHECK(sigmoid(x).data()[0] == doctest::Approx(1.0 / (1.0 + std::exp(1.0))).epsilon(1e-6));
    CHECK(sigmoid(x).data()[1] == 0.5f);
    CHECK(sigmoid(x).data()[2] == doctest::Approx(1.0 / (1.0 + std::exp(-1.0))).epsilon(1e-6));
    // no overflow at any size: e^-|x| <= 1, so 0 and 1 at the far ends, never NaN or inf
    const Tensor far = sigmoid(Tensor::from_vector({-1e30f, -100.0f, 100.0f, 1e30f, -std::numeric_limits<float>::infinity()}, {5}));
    CHECK(far.data()[0] == 0.0f);
    CHECK((far.data()[1] > 0.0f && far.data()[1] < 1e-43f));   // e^-100 = 3.7e-44, a subnormal float: e / (1 + e) keeps it
    CHECK(far.data()[2] == 1.0f);
    CHECK(far.data()[3] == 1.0f);
    CHECK(far.data()[4] == 0.0f);
    // torch.nn.functional.gelu(torch.tensor([-1., 0., 1.])) = [-0.1587, 0.0000, 0.8413]
    CHECK(gelu(x).data()[0] == doctest::Approx(-0.158655));
    CHECK(gelu(x).data()[2] == doctest::Approx(0.841345));
}

TEST_CASE("masked_fill: masked positions take the value and pass no gradient") {
    manual_seed(3);
    Mask m({0, 1, 0, 0, 1, 1}, {2, 3});
    Tensor x = param({2, 3});
    Tensor y = masked_fill(x, m, -5.0f);
    CHECK(y.at({0, 1}) == -5.0f);
    CHECK(y.at({0, 0}) == x.at({0, 0}));
    CHECK_GRAD([&](const std::vector<Tensor>& v) { return masked_fill(v[0], m, -5.0f); }, param({2, 3}));
    // a (B, 1, S) padding mask broadcast over (B, T, S) scores
    Mask pad({0, 0, 1, 0, 1, 1}, {2, 1, 3});
    CHECK_GRAD([&](const std::vector<Tensor>& v) { return masked_fill(v[0], pad, 0.0f); }, param({2, 4, 3}));
    Tensor z = Tensor::ones({2, 4, 3}).requires_grad_();
    sum(masked_fill(z, pad, 0.0f)).backward();
    CHECK(z.grad().at({1, 2, 1}) == 0.0f);
    CHECK(z.grad().at({1, 2, 0}) == 1.0f);
    CHECK_THROWS_WITH_AS(masked_fill(x, Mask::full({3, 3}, 0), 0.0f), doctest::Contains("masked_fill: shapes (2, 3) and (3, 3)"),
                         std::invalid_argument);
}

TEST_CASE("reductions: sum, mean, max, var, all and along a dim, keepdim") {
    manual_seed(4);
    using V = const std::vector<Tensor>&;
    CHECK_GRAD([](V x) { return sum(x[0]); }, param({2, 3, 4}));
    CHECK_GRAD([](V x) { return mean(x[0]); }, param({2, 3, 4}));
    CHECK_GRAD([](V x) { return max(x[0]); }, param({2, 3, 4}));
    CHECK_GRAD([](V x) { return var(x[0]); }, param({2, 3, 4}));
    CHECK_GRAD([](V x) { return var(x[0], false); }, param({2, 3, 4}));
    for (int dim : {0, 1, 2, -1}) {
        for (bool keep : {false, true}) {
            CAPTURE(dim);
            CAPTURE(keep);
            CHECK_GRAD([=](V x) { return sum(x[0], dim, keep); }, param({2, 3, 4}));
            CHECK_GRAD([=](V x) { return mean(x[0], dim, keep); }, param({2, 3, 4}));
            CHECK_GRAD([=](V x) { return max(x[0], dim, keep); }, param({2, 3, 4}));
            CHECK_GRAD([=](V x) { return var(x[0], dim, true, keep); }, param({2, 3, 4}));
            CHECK_GRAD([=](V x) { return var(x[0], dim, false, keep); }, param({2, 3, 4}));
        }
    }
    const Tensor t = Tensor::from_vector({1, 5, 3, 4, 2, 6}, {2, 3});
    CHECK(sum(t, 1).to_vector() == std::vector<float>{9, 12});
    CHECK(sum(t, 1, true).shape() == Shape{2, 1});
    CHECK(sum(t, 0).to_vector() == std::vector<float>{5, 7, 9});
    CHECK(mean(t, -1).to_vector() == std::vector<float>{3, 4});
    CHECK(max(t, 1).to_vector() == std::vector<float>{5, 6});
    CHECK(argmax(t, 1).data == std::vector<int32_t>{1, 2});
    CHECK(var(t, 1, true).to_vector() == std::vector<float>{4, 4});              // torch.var(unbiased)
    CHECK(var(t, 1, false).data()[0] == doctest::Approx(8.0 / 3.0));            // torch.var(unbiased=False)
    CHECK(sum(t).dim() == 0);
    CHECK_THROWS_WITH_AS(sum(t, 2), doctest::Contains("sum: dim 2 is out of range for a tensor with 2 dims"), std::out_of_range);
    CHECK_THROWS_WITH_AS(var(Tensor::ones({3, 1}), 1, true), doctest::Contains("var: unbiased variance needs at least 2 elements"),
                         std::invalid_argument);
}

TEST_CASE("matmul: 2-D, batched, broadcast batch dims, transposes") {
    manual_seed(5);
    using V = const std::vector<Tensor>&;
    CHECK_GRAD([](V x) { return matmul(x[0], x[1]); }, param({3, 4}), param({4, 5}));
    CHECK_GRAD([](V x) { return matmul(x[0], x[1]); }, param({2, 3, 4}), param({2, 4, 5}));
    CHECK_GRAD([](V x) { return matmul(x[0], x[1]); }, param({2, 3, 4}), param({4, 5}));      // x @ W
    CHECK_GRAD([](V x) { return matmul(x[0], x[1]); }, param({2, 1, 3, 4}), param({3, 4, 2}));  // batch broadcast
    CHECK_GRAD([](V x) { return matmul(x[0], x[1]); }, param({4, 3}), param({2, 2, 3, 5}));
    // broadcast batch dims where every size differs (above, batch (2, 1) against (3,) gives a 3
    // beside M = 3, and (2, 2) batches mirror each other): a batch stride on the wrong side shows here
    CHECK_GRAD([](V x) { return matmul(x[0], x[1]); }, param({5, 1, 3, 4}), param({2, 4, 7}));      // -> (5, 2, 3, 7)
    CHECK_GRAD([](V x) { return matmul(x[0], x[1]); }, param({3, 4}), param({5, 2, 4, 7}));         // -> (5, 2, 3, 7)
    CHECK_GRAD([](V x) { return matmul(x[0], x[1], true, true); }, param({5, 1, 4, 3}), param({2, 7, 4}));
    for (bool ta : {false, true})
        for (bool tb : {false, true}) {
            CAPTURE(ta);
            CAPTURE(tb);
            const Shape sa = ta ? Shape{2, 4, 3} : Shape{2, 3, 4}, sb = tb ? Shape{2, 5, 4} : Shape{2, 4, 5};
            CHECK_GRAD([=](V x) { return matmul(x[0], x[1], ta, tb); }, param(sa), param(sb));
            CHECK_GRAD([=](V x) { return matmul(x[0], x[1], ta, tb); }, param(sa), param(Shape(sb.begin() + 1, sb.end())));
        }
    const Tensor a = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
    const Tensor b = Tensor::from_vector({1, 0, 0, 1, 1, 1}, {3, 2});
    CHECK(matmul(a, b).to_vector() == std::vector<float>{4, 5, 10, 11});
    CHECK(matmul(a, a, false, true).to_vector() == std::vector<float>{14, 32, 32, 77});   // a a^T
    CHECK(matmul(a, a, true, false).shape() == Shape{3, 3});                              // a^T a
    CHECK_THROWS_WITH_AS(matmul(Tensor::ones({2, 3}), Tensor::ones({4, 5})),
                         doctest::Contains("matmul: shapes (2, 3) and (4, 5)"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(matmul(Tensor::ones({3}), Tensor::ones({3, 2})), doctest::Contains("at least 2 dims, got shapes (3,) and (3, 2)"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(matmul(Tensor::ones({2, 2, 3}), Tensor::ones({3, 3, 2})), doctest::Contains("matmul (batch dims): shapes (2,) and (3,)"),
                         std::invalid_argument);
}

TEST_CASE("matmul with many small batches equals per-batch products") {
    manual_seed(6);
    const Tensor a = Tensor::randn({4, 8, 10, 16}), b = Tensor::randn({4, 8, 10, 16});   // (B, H, T, Dk)
    const Tensor s = matmul(a, b, false, true);                                           // (B, H, T, T)
    const Tensor a0 = narrow(narrow(a, 0, 3, 1), 1, 5, 1).reshape({10, 16});
    const Tensor b0 = narrow(narrow(b, 0, 3, 1), 1, 5, 1).reshape({10, 16});
    const Tensor s0 = matmul(a0, b0, false, true);
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 10; j++) CHECK(s.at({3, 5, i, j}) == doctest::Approx(s0.at({i, j})));
}

TEST_CASE("shape ops") {
    manual_seed(7);
    using V = const std::vector<Tensor>&;
    CHECK_GRAD([](V x) { return reshape(x[0], {4, 6}) * 2.0f; }, param({2, 3, 4}));
    CHECK_GRAD([](V x) { return permute(x[0], {2, 0, 1}); }, param({2, 3, 4}));
    CHECK_GRAD([](V x) { return transpose(x[0], 1, -1); }, param({2, 3, 4}));
    CHECK_GRAD([](V x) { return unsqueeze(x[0], 1) * 1.5f; }, param({2, 3}));
    CHECK_GRAD([](V x) { return squeeze(x[0], 1) * 1.5f; }, param({2, 1, 3}));
    CHECK_GRAD([](V x) { return cat({x[0], x[1], x[0]}, 1); }, param({2, 3, 2}), param({2, 1, 2}));
    CHECK_GRAD([](V x) { return cat({x[0], x[1]}, 0); }, param({2, 3}), param({1, 3}));
    CHECK_GRAD([](V x) { return narrow(x[0], 1, 1, 2); }, param({2, 4, 3}));
    CHECK_GRAD([](V x) { return slice(x[0], -1, 1, 3); }, param({2, 4}));
    // the same ops where every size differs (above, the 2s of (2, 3, 2), a narrowed (2, 2, 3) or a
    // sliced (2, 2) line up, so a stride taken from the wrong dim could pass unseen)
    CHECK_GRAD([](V x) { return cat({x[0], x[1]}, 1); }, param({2, 3, 5}), param({2, 7, 5}));
    CHECK_GRAD([](V x) { return cat({x[0], x[1], x[0]}, 2); }, param({2, 3, 5}), param({2, 3, 7}));
    CHECK_GRAD([](V x) { return narrow(x[0], 1, 1, 3); }, param({2, 5, 7}));
    CHECK_GRAD([](V x) { return narrow(x[0], 2, 2, 4); }, param({2, 5, 7}));
    CHECK_GRAD([](V x) { return narrow(x[0], 0, 1, 2); }, param({3, 5, 7}));
    CHECK_GRAD([](V x) { return slice(x[0], -1, 2, 6); }, param({3, 7}));

    const Tensor t = Tensor::arange(24).reshape({2, 3, 4});
    const Tensor p = permute(t, {2, 0, 1});
    CHECK(p.shape() == Shape{4, 2, 3});
    CHECK(p.at({3, 1, 2}) == t.at({1, 2, 3}));
    CHECK(transpose(t, 0, 2).at({3, 2, 1}) == t.at({1, 2, 3}));
    CHECK(unsqueeze(t, -1).shape() == Shape{2, 3, 4, 1});
    CHECK(cat({t, t}, -1).shape() == Shape{2, 3, 8});
    CHECK(cat({t, t}, -1).at({1, 2, 7}) == t.at({1, 2, 3}));
    CHECK(narrow(t, 2, 1, 2).at({1, 1, 0}) == t.at({1, 1, 1}));
    CHECK_THROWS_WITH_AS(narrow(t, 2, 3, 2), doctest::Contains("narrow: window [3, 5) is outside dim 2 of size 4"), std::out_of_range);
    CHECK_THROWS_WITH_AS(permute(t, {0, 0, 1}), doctest::Contains("permute: dim 0 repeated"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(squeeze(t, 0), doctest::Contains("squeeze: dim 0 of shape (2, 3, 4) is not 1"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(cat({t, Tensor::ones({2, 2, 2})}, 1), doctest::Contains("cat: shapes (2, 3, 4) and (2, 2, 2) differ outside dim 1"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(transpose(t, 0, 3), doctest::Contains("transpose: dim 3 is out of range"), std::out_of_range);
}

TEST_CASE("index_select gathers rows by integer ids; repeated ids accumulate") {
    manual_seed(8);
    Tensor table = param({5, 3});                  // (V, D)
    const Tokens ids({4, 1, 1, 0}, {2, 2});        // (B, T), id 1 twice
    const Tensor e = index_select(table, 0, ids);  // (B, T, D)
    CHECK(e.shape() == Shape{2, 2, 3});
    CHECK(e.at({0, 0, 2}) == table.at({4, 2}));
    CHECK_GRAD([&](const std::vector<Tensor>& x) { return index_select(x[0], 0, ids); }, table);
    CHECK_GRAD([&](const std::vector<Tensor>& x) { return index_select(x[0], 1, Tokens({2, 0, 2}, {3})); }, param({2, 3, 2}));
    sum(index_select(table, 0, ids)).backward();
    CHECK(table.grad().at({1, 0}) == 2.0f);       // used twice
    CHECK(table.grad().at({2, 0}) == 0.0f);       // never used
    CHECK_THROWS_WITH_AS(index_select(table, 0, Tokens({5}, {1})), doctest::Contains("id 5"), std::out_of_range);
    CHECK_THROWS_WITH_AS(index_select(table, 0, Tokens({-1}, {1})), doctest::Contains("id -1 at position 0 is out of range [0, 5)"),
                         std::out_of_range);
}

TEST_CASE("index_select backward: fewer or more ids than rows, repeated ids, along each dim of a 3-D tensor") {
    manual_seed(10);
    using V = const std::vector<Tensor>&;
    // a (3, 5, 2): every size differs, and no ids count below equals the size of the dim it gathers
    const std::vector<std::pair<int64_t, Tokens>> cases = {
        {0, Tokens({2, 2, 0, 2}, {4})},                                     // 4 ids of 3 rows, id 2 three times, row 1 never
        {0, Tokens({1, 2, 1, 0, 2, 2, 1, 0}, {2, 4})},                      // ids (2, 4) -> out (2, 4, 5, 2)
        {0, Tokens({2}, {1})},                                              // one id of 3
        {1, Tokens({4, 0, 4, 4}, {4})},                                     // 4 ids of 5 rows
        {1, Tokens({3, 0, 4, 3, 1, 2, 3, 4, 0, 3, 2, 1, 4}, {13})},         // 13 ids of 5
        {1, Tokens({4, 1, 4, 4, 0, 1}, {3, 2})},                            // ids (3, 2) -> out (3, 3, 2, 2)
        {2, Tokens({1, 1, 0, 1, 1}, {5})},                                  // 5 ids of 2
        {-1, Tokens({0, 0, 0}, {3})},                                       // the last dim, counted from the end
    };
    for (const auto& c : cases) {
        const int64_t dim = c.first;
        const Tokens ids = c.second;   // copies: CAPTURE and the lambda capture them
        CAPTURE(dim);
        CAPTURE(shape_str(ids.shape));
        CHECK_GRAD([=](V x) { return index_select(x[0], dim, ids); }, param({3, 5, 2}));
    }
    // by hand, with upstream gradient 0, 1, 2, ... in the output's flat order: row r receives the
    // sum of the output rows that gathered it, and a row never gathered gets exactly 0
    auto grad_of = [](int64_t dim, const Tokens& ids) {
        Tensor a = Tensor::zeros({3, 5, 2}).requires_grad_();
        const Tensor y = index_select(a, dim, ids);
        y.backward(Tensor::arange(static_cast<float>(y.numel())).reshape(y.shape()));
        return a.grad().to_vector();
    };
    // dim 0, ids {2, 2, 0, 2}: out (4, 5, 2), output row j holds upstream values 10j .. 10j + 9;
    // row 2 gets rows 0, 1 and 3: 0 + 10 + 30 + 3k = 40 + 3k; row 0 gets row 2: 20 + k; row 1 nothing
    std::vector<float> dim0(30, 0.0f);
    for (int k = 0; k < 10; k++) {
        dim0[0 * 10 + k] = 20.0f + k;
        dim0[2 * 10 + k] = 40.0f + 3.0f * k;
    }
    CHECK(grad_of(0, Tokens({2, 2, 0, 2}, {4})) == dim0);
    // dim 1, ids {4, 0, 4, 4}: out (3, 4, 2), output [o, j] holds 8o + 2j and 8o + 2j + 1;
    // a[o, 4] gets j = 0, 2, 3: (24o + 10, 24o + 13); a[o, 0] gets j = 1: (8o + 2, 8o + 3)
    const std::vector<float> dim1 = {2, 3, 0, 0, 0, 0, 0, 0, 10, 13,       // o = 0: rows 0..4 of (5, 2)
                                     10, 11, 0, 0, 0, 0, 0, 0, 34, 37,     // o = 1
                                     18, 19, 0, 0, 0, 0, 0, 0, 58, 61};    // o = 2
    CHECK(grad_of(1, Tokens({4, 0, 4, 4}, {4})) == dim1);
}

TEST_CASE("softmax and log_softmax: gradcheck, stability, masked rows, equal to the composition of primitives") {
    manual_seed(9);
    using V = const std::vector<Tensor>&;
    CHECK_GRAD([](V x) { return softmax(x[0]); }, param({3, 5}, -3.0f, 3.0f));
    CHECK_GRAD([](V x) { return log_softmax(x[0]); }, param({2, 3, 5}, -3.0f, 3.0f));
    // softmax rows sum to 1; logits of 1e4 neither overflow nor NaN
    const Tensor big = Tensor::from_vector({1e4f, 0.0f, -1e4f, 1e4f}, {1, 4});
    const Tensor s = softmax(big);
    CHECK(s.at({0, 0}) == doctest::Approx(0.5));
    CHECK(s.at({0, 1}) == 0.0f);
    const Tensor ls = log_softmax(big);
    CHECK(ls.at({0, 0}) == doctest::Approx(-std::log(2.0)));
    CHECK(std::isfinite(ls.at({0, 2})));
    // a fully masked row (all -inf) gives zeros from softmax, not NaN
    const float inf = std::numeric_limits<float>::infinity();
    Tensor masked = Tensor::from_vector({-inf, -inf, -inf, 1.0f, 2.0f, -inf}, {2, 3}).requires_grad_();
    const Tensor sm = softmax(masked);
    for (int j = 0; j < 3; j++) CHECK(sm.at({0, j}) == 0.0f);
    CHECK(sm.at({1, 2}) == 0.0f);
    CHECK(sm.at({1, 0}) + sm.at({1, 1}) == doctest::Approx(1.0));
    sum(sm * Tensor::randn({2, 3})).backward();
    for (float g : masked.grad().to_vector()) CHECK_FALSE(std::isnan(g));
    for (int j = 0; j < 3; j++) CHECK(masked.grad().at({0, j}) == 0.0f);   // nothing flows into a fully masked row
    CHECK(masked.grad().at({1, 2}) == 0.0f);                                 // nor into a masked entry
    // log_softmax: the fully masked row stays -inf and, being a constant, passes no gradient
    // (docs/04); a masked entry of a partly masked row gets dy (dy_i/dx_i = 1 - e^(y_i) = 1)
    masked.zero_grad();
    const Tensor lsm = log_softmax(masked);
    for (int j = 0; j < 3; j++) CHECK(lsm.at({0, j}) == -inf);
    CHECK(lsm.at({1, 2}) == -inf);
    CHECK(std::exp(lsm.at({1, 0})) + std::exp(lsm.at({1, 1})) == doctest::Approx(1.0));
    lsm.backward(Tensor::from_vector({0.5f, -1.0f, 2.0f, 1.0f, 1.0f, 3.0f}, {2, 3}));
    for (float g : masked.grad().to_vector()) CHECK_FALSE(std::isnan(g));
    for (int j = 0; j < 3; j++) CHECK(masked.grad().at({0, j}) == 0.0f);
    CHECK(masked.grad().at({1, 2}) == 3.0f);
    // (equal to softmax_reference and log_softmax_reference, values and gradients: test_kernels.cpp)
    // gradient through masked_fill + softmax: masked positions get exactly zero
    Mask m({0, 0, 1, 0, 1, 1}, {2, 3});
    CHECK_GRAD([&](V x) { return softmax(masked_fill(x[0], m, -inf)); }, param({2, 3}));
}

TEST_CASE("sum_to folds a broadcast gradient back to the input's shape") {
    // the hand example of docs/01: z = x + y with x (2, 3), y (3,), L = sum(z^2), dz = 2z
    const std::vector<float> dz = {22, 44, 66, 28, 50, 72};
    CHECK(sum_to(dz.data(), {2, 3}, {3}) == std::vector<float>{50, 94, 138});
    CHECK(sum_to(dz.data(), {2, 3}, {2, 1}) == std::vector<float>{132, 150});
    CHECK(sum_to(dz.data(), {2, 3}, {}) == std::vector<float>{282});
    CHECK(sum_to(dz.data(), {2, 3}, {2, 3}) == dz);
    // and it agrees with what add's backward accumulates into a broadcast input
    Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
    Tensor y = Tensor::from_vector({10, 20, 30}, {3}).requires_grad_();
    sum(pow(x + y, 2.0f)).backward();
    CHECK(y.grad().to_vector() == std::vector<float>{50, 94, 138});
    CHECK_THROWS_WITH_AS(sum_to(dz.data(), {2, 3}, {4}), doctest::Contains("sum_to: shapes (2, 3) and (4,)"), std::invalid_argument);
}

TEST_CASE("every op's backward adds into an existing gradient instead of overwriting it") {
    manual_seed(12);
    using V = const std::vector<Tensor>&;
    const Tensor pos = param({3, 4}, 0.5f, 2.0f);
    struct NamedOp { const char* name; TensorFn fn; };
    const std::vector<NamedOp> unary = {
        {"neg", [](V x) { return -x[0]; }},            {"add_scalar", [](V x) { return x[0] + 2.0f; }},
        {"mul_scalar", [](V x) { return x[0] * 3.0f; }}, {"pow", [](V x) { return pow(x[0], 3.0f); }},
        {"exp", [](V x) { return exp(x[0]); }},        {"log", [](V x) { return log(x[0]); }},
        {"sqrt", [](V x) { return sqrt(x[0]); }},      {"tanh", [](V x) { return tanh(x[0]); }},
        {"relu", [](V x) { return relu(x[0]); }},      {"gelu", [](V x) { return gelu(x[0]); }},
        {"sigmoid", [](V x) { return sigmoid(x[0]); }},
        {"sum", [](V x) { return sum(x[0]); }},        {"sum dim", [](V x) { return sum(x[0], 1); }},
        {"mean", [](V x) { return mean(x[0]); }},      {"mean dim", [](V x) { return mean(x[0], 0, true); }},
        {"max", [](V x) { return max(x[0]); }},        {"max dim", [](V x) { return max(x[0], 1); }},
        {"var", [](V x) { return var(x[0]); }},        {"var dim", [](V x) { return var(x[0], 1, false); }},
        {"reshape", [](V x) { return reshape(x[0], {2, 6}); }}, {"permute", [](V x) { return permute(x[0], {1, 0}); }},
        {"unsqueeze", [](V x) { return unsqueeze(x[0], 0); }},  {"narrow", [](V x) { return narrow(x[0], 1, 1, 2); }},
        {"cat", [](V x) { return cat({x[0], x[0]}, 0); }},
        {"index_select", [](V x) { return index_select(x[0], 0, Tokens({2, 0, 2, 2, 1}, {5})); }},   // 5 ids of 3 rows
        {"masked_fill", [](V x) { return masked_fill(x[0], Mask({0, 1, 0, 0}, {1, 4}), -1.0f); }},
        {"softmax", [](V x) { return softmax(x[0]); }}, {"log_softmax", [](V x) { return log_softmax(x[0]); }},
    };
    for (const NamedOp& op : unary) {
        CAPTURE(std::string(op.name));
        check_backward_adds(op.fn, {pos});
    }
    const Tensor a = param({3, 4}), b = param({3, 4}, 0.5f, 2.0f), row = param({4}, 0.5f, 2.0f), m = param({4, 5});
    const std::vector<NamedOp> binary = {
        {"add", [](V x) { return x[0] + x[1]; }}, {"sub", [](V x) { return x[0] - x[1]; }},
        {"mul", [](V x) { return x[0] * x[1]; }}, {"div", [](V x) { return x[0] / x[1]; }},
    };
    for (const NamedOp& op : binary) {
        CAPTURE(std::string(op.name));
        check_backward_adds(op.fn, {a, b});     // same shapes
        check_backward_adds(op.fn, {a, row});   // broadcast
    }
    check_backward_adds([](V x) { return matmul(x[0], x[1]); }, {a, m});
    check_backward_adds([](V x) { return matmul(x[0], x[1], true, false); }, {b, a});
    check_backward_adds([](V x) { return matmul(x[0], x[1]); }, {param({2, 3, 4}), m});            // x @ W
    check_backward_adds([](V x) { return matmul(x[0], x[1]); }, {param({2, 3, 4}), param({2, 4, 2})});
}
