// The backward engine: golden values, accumulation, fan-out, deep graphs, graph release, grad mode.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "autograd/autograd.h"
#include "tests/hooks.h"

using namespace autograd;

static Tensor leaf(float v) { return Tensor::scalar(v).requires_grad_(); }

TEST_CASE("micrograd's README example gives its published answers") {
    // From micrograd's README (Karpathy): g = 24.7041, dg/da = 138.8338, dg/db = 645.5773.
    Tensor a = leaf(-4.0f), b = leaf(2.0f);
    Tensor c = a + b;
    Tensor d = a * b + pow(b, 3.0f);
    c = c + (c + 1.0f);
    c = c + (1.0f + c + (-a));
    d = d + (d * 2.0f + relu(b + a));
    d = d + (3.0f * d + relu(b - a));
    Tensor e = c - d;
    Tensor f = pow(e, 2.0f);
    Tensor g = f / 2.0f;
    g = g + 10.0f / f;
    CHECK(g.item() == doctest::Approx(24.7041).epsilon(1e-5));
    g.backward();
    CHECK(a.grad().item() == doctest::Approx(138.8338).epsilon(1e-5));
    CHECK(b.grad().item() == doctest::Approx(645.5773).epsilon(1e-5));
}

TEST_CASE("gradients accumulate across backward calls until zero_grad") {
    Tensor x = leaf(3.0f);
    (x * x).backward();
    CHECK(x.grad().item() == 6.0f);
    (x * x).backward();
    CHECK(x.grad().item() == 12.0f);
    x.zero_grad();
    CHECK_FALSE(x.has_grad());
    (x * 5.0f).backward();
    CHECK(x.grad().item() == 5.0f);
}

TEST_CASE("fan-out: a tensor used twice receives both gradients") {
    Tensor x = leaf(2.0f);
    Tensor y = x * 3.0f;
    Tensor z = y * y + y;      // dz/dy = 2y + 1 = 13, dz/dx = 39
    z.backward();
    CHECK(x.grad().item() == 39.0f);
}

TEST_CASE("backward on a non-scalar needs an explicit gradient") {
    Tensor x = Tensor::ones({2, 3}).requires_grad_();
    Tensor y = x * 2.0f;
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("(2, 3)"), std::logic_error);
    CHECK_THROWS_WITH_AS(y.backward(Tensor::ones({3, 2})), doctest::Contains("gradient of shape (3, 2) does not match the tensor's shape (2, 3)"),
                         std::invalid_argument);
    y.backward(Tensor::full({2, 3}, 0.5f));
    CHECK(x.grad().to_vector() == std::vector<float>(6, 1.0f));
}

TEST_CASE("a chain of 100,000 ops backpropagates without recursion") {
    Tensor x = leaf(1.0f);
    Tensor y = x;
    for (int i = 0; i < 100000; i++) y = y * 1.0f;
    y.backward();
    CHECK(x.grad().item() == 1.0f);
}

TEST_CASE("a deep graph that is never backpropagated is freed without recursion") {
    const int64_t before = autograd::test_hooks::live_node_count();
    {
        Tensor y = leaf(1.0f);
        for (int i = 0; i < 200000; i++) y = y + 1.0f;
    }
    CHECK(autograd::test_hooks::live_node_count() == before);
}

TEST_CASE("the graph is released after backward unless retained") {
    Tensor x = leaf(2.0f);
    Tensor y = exp(x * x);
    y.backward(/*retain_graph=*/true);
    y.backward();                                // allowed once more: the first retained it
    CHECK(x.grad().item() == doctest::Approx(2 * (2 * 2 * std::exp(4.0f))));   // twice d/dx e^(x^2) = 2x e^(x^2)
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("retain_graph"), std::logic_error);
}

TEST_CASE("backward also releases the nodes that no gradient reached") {
    Tensor x = leaf(2.0f);
    Tensor a = x * 3.0f;
    Tensor out = Tensor::full({}, 1.0f);
    // an op whose backward sends nothing to its input (as for an input it is constant in)
    autograd::record(out, {a}, "blocks_grad", [](Node&) {});
    out.backward();
    CHECK_FALSE(x.has_grad());
    // a's graph was part of that backward, so it is freed like the rest
    CHECK_THROWS_WITH_AS((a * 1.0f).backward(), doctest::Contains("already freed"), std::logic_error);
}

TEST_CASE("graph memory comes back: no live nodes leak") {
    const int64_t before = autograd::test_hooks::live_node_count();
    {
        Tensor w = Tensor::randn({4, 4}).requires_grad_();
        for (int i = 0; i < 50; i++) {
            Tensor x = Tensor::randn({3, 4});
            Tensor loss = sum(relu(matmul(x, w)) * 2.0f);
            loss.backward();
        }
        CHECK(autograd::test_hooks::live_node_count() == before + 1);   // only w survives the loop
    }
    CHECK(autograd::test_hooks::live_node_count() == before);
}

TEST_CASE("the graph is recorded only when needed") {
    Tensor a = Tensor::ones({2});
    Tensor b = Tensor::ones({2}).requires_grad_();
    CHECK_FALSE((a * 2.0f).requires_grad());
    CHECK((a * b).requires_grad());
    CHECK_FALSE((a * b).is_leaf());
    CHECK(b.is_leaf());
    {
        NoGradGuard guard;
        CHECK_FALSE(is_grad_enabled());
        Tensor c = a * b;
        CHECK_FALSE(c.requires_grad());
        CHECK(c.is_leaf());
    }
    CHECK(is_grad_enabled());
    Tensor d = (b * 3.0f).detach();
    CHECK_FALSE(d.requires_grad());
    CHECK(d.to_vector() == std::vector<float>{3, 3});
    CHECK_THROWS_WITH_AS((b * 2.0f).requires_grad_(), doctest::Contains("only leaf tensors can change requires_grad"), std::logic_error);
    CHECK_THROWS_WITH_AS(sum(a).backward(), doctest::Contains("does not require grad"), std::logic_error);   // nothing requires grad
}

TEST_CASE("non-leaf gradients are kept only on request") {
    Tensor x = leaf(3.0f);
    Tensor y = x * 2.0f;
    Tensor z = y * y;
    y.retain_grad();
    z.backward();
    CHECK(y.grad().item() == 12.0f);
    CHECK(x.grad().item() == 24.0f);
    Tensor w = x * 2.0f;
    (w * w).backward();
    CHECK_FALSE(w.has_grad());
}

// As a leaf's, a kept non-leaf gradient adds up over backward passes until it is zeroed: the
// second pass through z = y * y (y = 2x = 6) adds dz/dy = 2y = 12 to the first pass's 12.
TEST_CASE("a retained non-leaf gradient accumulates over two backward passes, as a leaf's does") {
    Tensor x = leaf(3.0f);
    Tensor y = x * 2.0f;
    y.retain_grad();
    Tensor z = y * y;
    z.backward(/*retain_graph=*/true);
    z.backward();
    CHECK(y.grad().item() == 24.0f);
    CHECK(x.grad().item() == 48.0f);
}

TEST_CASE("anomaly mode names the op that made a NaN") {
    Tensor x = Tensor::from_vector({-1.0f, 4.0f}, {2}).requires_grad_();
    {
        Tensor y = sqrt(x);                       // NaN, but nobody is watching
        CHECK(std::isnan(y.data()[0]));
    }
    DetectAnomalyGuard guard;
    CHECK_THROWS_WITH_AS(sqrt(x), doctest::Contains("forward of 'sqrt'"), std::runtime_error);
    Tensor z = Tensor::from_vector({0.0f, 4.0f}, {2}).requires_grad_();
    Tensor s = sum(sqrt(z));                      // sqrt(0) = 0 is finite; its gradient 1/(2*0) is not
    CHECK_THROWS_WITH_AS(s.backward(), doctest::Contains("backward of 'sqrt'"), std::runtime_error);
    // overflow is reported, with the op's input shapes
    Tensor big = Tensor::from_vector({100.0f, 1.0f}, {2}).requires_grad_();
    CHECK_THROWS_WITH_AS(exp(big), doctest::Contains("forward of 'exp' produced +Inf at flat index 0 of its output (2,)"),
                         std::runtime_error);
    // deliberate -inf from masking is not an anomaly, and softmax then makes it 0
    const Tensor masked = masked_fill(Tensor::ones({2, 2}).requires_grad_(), Mask({0, 1, 0, 0}, {2, 2}),
                                      -std::numeric_limits<float>::infinity());
    CHECK(softmax(masked).at({0, 1}) == 0.0f);
}
