// Every fused kernel in autograd/kernels/ against the reference beside it (x_reference: the same
// computation composed from primitive ops, whose gradients gradcheck verifies one by one):
// values, and the gradient of every input under a random upstream gradient. The kernels run
// through the autograd ops that call them (nn::linear calls linear_forward and, in its backward,
// linear_backward). gemm against gemm_naive is in test_gemm.cpp; each kernel's threaded path,
// just above its threshold, in test_threaded_kernels.cpp.
#include <doctest/doctest.h>

#include <limits>

#include "autograd/autograd.h"
#include "autograd/kernels/attention.h"
#include "autograd/kernels/cross_entropy.h"
#include "autograd/kernels/dropout.h"
#include "autograd/kernels/layer_norm.h"
#include "autograd/kernels/linear.h"
#include "autograd/kernels/softmax_rows.h"
#include "nn/nn.h"
#include "tests/compare.h"
#include "tests/gradcheck_helpers.h"

using namespace autograd;
using V = const std::vector<Tensor>&;

// The dropout draws an op makes right after manual_seed(seed): one 64-bit seed from the default
// generator.
static kernels::DropoutDraws draws_after_seed(uint64_t seed, float p) {
    return p > 0.0f ? kernels::DropoutDraws{p, Rng(seed).next_u64()} : kernels::DropoutDraws{};
}

TEST_CASE("softmax_rows: softmax and log_softmax equal softmax_reference and log_softmax_reference, with -inf entries") {
    manual_seed(1);
    const float inf = std::numeric_limits<float>::infinity();
    Tensor x = param({4, 6}, -3.0f, 3.0f);
    for (int64_t i : {1, 7, 8, 15, 22}) x.data()[i] = -inf;   // masked entries, no row entirely masked
    expect_fused_equals_composed([](V v) { return softmax(v[0]); }, [](V v) { return kernels::softmax_reference(v[0]); },
                                 {x}, 1e-6, 1e-7);
    expect_fused_equals_composed([](V v) { return log_softmax(v[0]); },
                                 [](V v) { return kernels::log_softmax_reference(v[0]); }, {x}, 1e-6, 1e-7);
    // large logits: the shift by the row max keeps both finite
    const Tensor big = (param({3, 5}) * 1e4f).detach().requires_grad_();
    expect_fused_equals_composed([](V v) { return log_softmax(v[0]); },
                                 [](V v) { return kernels::log_softmax_reference(v[0]); }, {big}, 1e-6, 1e-3);
}

TEST_CASE("linear kernel equals linear_reference: with and without bias, ReLU and dropout") {
    manual_seed(2);
    const Tensor x = param({2, 3, 4}), w = param({5, 4}), b = param({5});
    for (bool relu : {false, true})
        for (float p : {0.0f, 0.5f})
            for (bool with_bias : {true, false}) {
                CAPTURE(relu);
                CAPTURE(p);
                CAPTURE(with_bias);
                const nn::Activation act = relu ? nn::Activation::relu : nn::Activation::none;
                const kernels::DropoutDraws drop = draws_after_seed(4, p);
                auto bias = [&](V v) { return with_bias ? v[2] : Tensor(); };
                auto fused = [&](V v) { manual_seed(4); return nn::linear(v[0], v[1], bias(v), act, p, true); };
                auto reference = [&](V v) { return kernels::linear_reference(v[0], v[1], bias(v), relu, drop); };
                expect_fused_equals_composed(fused, reference, with_bias ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x, w},
                                             1e-5, 1e-6);
            }
}

TEST_CASE("layer_norm kernel equals layer_norm_reference (biased variance), also where eps dominates the variance") {
    manual_seed(3);
    const Tensor x = param({4, 6}, -3.0f, 3.0f), g = param({6}), b = param({6});
    auto fused = [](V v) { return nn::layer_norm(v[0], v[1], v[2]); };
    auto reference = [](V v) { return kernels::layer_norm_reference(v[0], v[1], v[2]); };
    expect_fused_equals_composed(fused, reference, {x, g, b}, 1e-5, 1e-6);
    // rows with a variance (~1e-6) below eps = 1e-5, where eps, not the variance, sets the scale
    const Tensor flat = (param({4, 6}) * 2e-3f).detach().requires_grad_();
    expect_fused_equals_composed(fused, reference, {flat, g, b}, 1e-5, 1e-6);
    // and a leading batch dim: (B, T, C)
    expect_fused_equals_composed(fused, reference, {param({2, 3, 6}), g, b}, 1e-5, 1e-6);
}

TEST_CASE("attention kernel equals attention_reference: masks, several gemm tiles per head, dropout") {
    struct Case {
        int64_t B, H, T, S, D;
        float p;
    };
    // small heads; then T > 12 rows and S > 32 columns (edge tiles in gemm), T != S
    for (const Case c : {Case{2, 3, 4, 5, 6, 0.0f}, Case{2, 2, 40, 36, 16, 0.0f}, Case{2, 3, 4, 5, 6, 0.3f},
                         Case{2, 2, 40, 36, 16, 0.2f}}) {
        CAPTURE(c.T);
        CAPTURE(c.p);
        manual_seed(5);
        const Tensor q = param({c.B, c.T, c.D}), k = param({c.B, c.S, c.D}), v = param({c.B, c.S, c.D});
        Mask pad = Mask::full({c.B, 1, c.S}, 1);
        for (int64_t s = c.S - 2; s < c.S; s++) pad[s] = 0;   // batch 0: its last 2 keys are padding
        Mask both = Mask::full({c.B, c.T, c.S}, 1);           // padding and a causal-style band, per (b, t)
        for (int64_t b = 0; b < c.B; b++)
            for (int64_t t = 0; t < c.T; t++)
                for (int64_t s = 0; s < c.S; s++) both[(b * c.T + t) * c.S + s] = s <= t + 1 && !(b == 1 && s == 0);
        for (const Mask& m : {Mask(), pad, both}) {
            CAPTURE(shape_str(m.shape));
            const kernels::DropoutDraws drop = draws_after_seed(6, c.p);
            auto fused = [&](V x) {
                manual_seed(6);
                return nn::scaled_dot_product_attention(x[0], x[1], x[2], c.H, m, c.p, true);
            };
            auto reference = [&](V x) { return kernels::attention_reference(x[0], x[1], x[2], c.H, m, drop); };
            expect_fused_equals_composed(fused, reference, {q, k, v}, 1e-4, 1e-5);
        }
    }
}

TEST_CASE("cross_entropy kernel equals cross_entropy_reference: ignored targets, label smoothing") {
    manual_seed(7);
    const Tokens t({2, 0, 4, 1, 3, 0}, {2, 3});    // 0 is padding
    const Tensor logits = param({2, 3, 5}, -2.0f, 2.0f);
    for (const nn::CrossEntropyOptions opt : {nn::CrossEntropyOptions{}, nn::CrossEntropyOptions{.ignore_index = 0},
                                              nn::CrossEntropyOptions{.label_smoothing = 0.2f},
                                              nn::CrossEntropyOptions{.ignore_index = 0, .label_smoothing = 0.1f}}) {
        CAPTURE(opt.ignore_index);
        CAPTURE(opt.label_smoothing);
        expect_fused_equals_composed(
            [&](V x) { return nn::cross_entropy(x[0], t, opt); },
            [&](V x) { return kernels::cross_entropy_reference(x[0], t, opt.ignore_index, opt.label_smoothing); }, {logits},
            1e-6, 1e-7);
    }
}

TEST_CASE("dropout kernel equals dropout_reference: the same elements dropped, forward and backward") {
    manual_seed(8);
    const Tensor x = param({7, 9});
    for (float p : {0.1f, 0.5f}) {
        CAPTURE(p);
        const kernels::DropoutDraws drop = draws_after_seed(9, p);
        expect_fused_equals_composed([&](V v) { manual_seed(9); return nn::dropout(v[0], p, true); },
                                     [&](V v) { return kernels::dropout_reference(v[0], drop); }, {x}, 0.0, 0.0);
    }
}
