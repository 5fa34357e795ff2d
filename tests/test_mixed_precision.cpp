// Mixed precision: MixedPrecisionGuard switches matrix products (autograd::matmul, and the fused
// linear and attention kernels) to bf16 inputs (gemm_bf16), forward and backward, and nothing
// else; so the plain path and the fused one agree under it too. The forward values equal the
// fp32 reference computed on bf16-rounded inputs; the gradients stay within bf16's rounding of
// the fp32 ones; the backward uses the forward's precision even when it runs outside the guard;
// and a training step is bit-identical on 1 and 2 threads, as in fp32.
#include <doctest/doctest.h>

#include <cstring>

#include "autograd/autograd.h"
#include "autograd/kernels/parallel.h"
#include "examples/data/copy_task_data.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tests/compare.h"
#include "tests/gradcheck_helpers.h"
#include "tests/hooks.h"

using namespace autograd;
using V = const std::vector<Tensor>&;

namespace {

// the tensor with every element rounded to bf16 (a constant: no gradient)
Tensor rounded_to_bf16(const Tensor& x) {
    std::vector<float> r(x.data(), x.data() + x.numel());
    for (float& v : r) v = round_to_bf16(v);
    return Tensor::from_vector(r, x.shape());
}

bool same_bytes(const Tensor& a, const Tensor& b) {
    return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), a.numel() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("MixedPrecisionGuard: bf16 while alive, the previous precision after, nests") {
    CHECK(matmul_precision() == Precision::fp32);
    {
        MixedPrecisionGuard outer;
        CHECK(matmul_precision() == Precision::bf16);
        {
            MixedPrecisionGuard inner;
            CHECK(matmul_precision() == Precision::bf16);
        }
        CHECK(matmul_precision() == Precision::bf16);
    }
    CHECK(matmul_precision() == Precision::fp32);
}

// nn::linear's plain form (fused kernels off), in whatever precision is current: the reference.
static Tensor plain_linear(const Tensor& x, const Tensor& w, const Tensor& b, nn::Activation act) {
    FusedKernelsGuard plain(false);
    return nn::linear(x, w, b, act, 0.0f, true);
}

TEST_CASE("linear under mixed precision: forward = reference on bf16-rounded x and W; gradients within bf16 rounding") {
    manual_seed(12);
    const Tensor x = param({3, 5, 40}), w = param({24, 40}), b = param({24});
    for (bool relu : {false, true}) {
        CAPTURE(relu);
        const nn::Activation act = relu ? nn::Activation::relu : nn::Activation::none;
        Tensor y_bf16;
        {
            MixedPrecisionGuard bf16;
            y_bf16 = nn::linear(x, w, b, act, 0.0f, true);
        }
        const Tensor y_ref = plain_linear(rounded_to_bf16(x), rounded_to_bf16(w), b.detach(), act);
        expect_close(y_bf16, y_ref, 1e-5, 1e-6, "value: the products of the rounded inputs");
        CHECK_FALSE(same_bytes(y_bf16, nn::linear(x, w, b, act, 0.0f, true)));   // and not the fp32 value

        // gradients: the guard ends before backward(); the closure keeps the forward's precision
        auto mixed = [&](V v) { MixedPrecisionGuard bf16; return nn::linear(v[0], v[1], v[2], act, 0.0f, true); };
        auto reference = [&](V v) { return plain_linear(v[0], v[1], v[2], act); };
        expect_fused_equals_composed(mixed, reference, {x, w, b}, 2e-2, 2e-2);
    }
}

// FrozenWeightsGuard (autograd/frozen_weights.h): inside it a bf16 Linear packs its weight at the
// second call and reads that copy after; every call gives the bits of a call outside the guard.
TEST_CASE("FrozenWeightsGuard: a bf16 Linear packs W once, at its second use, with the same bits; keyed by storage and shape") {
    manual_seed(31);
    const Tensor x = param({3, 5, 40}), b = param({24}), x80 = param({2, 80});
    Tensor w = param({24, 40});   // changed at the end
    const auto packs = [] { return autograd::test_hooks::frozen_weight_packs(); };
    auto bf16_linear = [&](const Tensor& in, const Tensor& weight, const Tensor& bias) {
        MixedPrecisionGuard bf16;
        return nn::linear(in, weight, bias, nn::Activation::relu, 0.0f, false);
    };
    const Tensor expected = bf16_linear(x, w, b);
    const Tensor expected80 = bf16_linear(x80, w.reshape({12, 80}), Tensor());   // the same storage seen as (12, 80)
    CHECK_FALSE(weights_frozen());
    {
        FrozenWeightsGuard frozen;
        CHECK(weights_frozen());
        const int64_t start = packs();
        CHECK(same_bytes(bf16_linear(x, w, b), expected));   // first use: the call packs W itself
        CHECK(packs() == start);
        CHECK(same_bytes(bf16_linear(x, w, b), expected));   // second: packs the kept copy
        CHECK(packs() == start + 1);
        for (int i = 0; i < 3; i++) CHECK(same_bytes(bf16_linear(x, w, b), expected));   // then reads it
        CHECK(packs() == start + 1);
        // the same storage as another shape is another W^T
        CHECK(same_bytes(bf16_linear(x80, w.reshape({12, 80}), Tensor()), expected80));
        CHECK(same_bytes(bf16_linear(x80, w.reshape({12, 80}), Tensor()), expected80));
        CHECK(packs() == start + 2);
        {
            FrozenWeightsGuard inner;   // adds nothing: the outer guard's copies serve
            CHECK(same_bytes(bf16_linear(x, w, b), expected));
            CHECK(packs() == start + 2);
        }
        CHECK(weights_frozen());
        // fp32 products read W in place: nothing to pack
        for (int i = 0; i < 2; i++) nn::linear(x, w, b, nn::Activation::relu, 0.0f, false);
        CHECK(packs() == start + 2);
        // the promise is checked where weights are written on purpose
        optim::SGD sgd({w}, {.lr = 0.1f});
        std::string why;
        try {
            sgd.step();
        } catch (const std::logic_error& e) {
            why = e.what();
        }
        CHECK(why.find("optimizer step() inside a FrozenWeightsGuard") != std::string::npos);
    }
    CHECK_FALSE(weights_frozen());
    // after the guard, a changed weight is read afresh, in a new guard too
    w.data()[0] += 1.0f;
    const Tensor changed = bf16_linear(x, w, b);
    CHECK_FALSE(same_bytes(changed, expected));
    FrozenWeightsGuard again;
    for (int i = 0; i < 3; i++) CHECK(same_bytes(bf16_linear(x, w, b), changed));
}

TEST_CASE("attention under mixed precision: within bf16 rounding of the fp32 reference, backward outside the guard") {
    manual_seed(13);
    const int64_t B = 2, H = 2, T = 20, S = 36, D = 32;
    const Tensor q = param({B, T, D}), k = param({B, S, D}), v = param({B, S, D});
    Mask pad = Mask::full({B, 1, S}, 1);
    for (int64_t s = S - 3; s < S; s++) pad[s] = 0;
    auto mixed = [&](V x) { MixedPrecisionGuard bf16; return nn::scaled_dot_product_attention(x[0], x[1], x[2], H, pad); };
    auto reference = [&](V x) { FusedKernelsGuard plain(false); return nn::scaled_dot_product_attention(x[0], x[1], x[2], H, pad); };
    expect_fused_equals_composed(mixed, reference, {q, k, v}, 2e-2, 2e-2);

    // the backward runs in the precision the forward was recorded in, wherever it runs
    auto grads = [&](bool backward_inside_guard) {
        for (Tensor t : {q, k, v}) t.zero_grad();
        std::vector<Tensor> out;
        {
            MixedPrecisionGuard bf16;
            Tensor y = nn::scaled_dot_product_attention(q, k, v, H, pad);
            out.push_back(y);
            if (backward_inside_guard) sum(y * y).backward();
            else out.push_back(sum(y * y));
        }
        if (!backward_inside_guard) out.back().backward();
        for (Tensor t : {q, k, v}) {
            const Tensor g = t.grad();
            out.push_back(Tensor::from_vector(std::vector<float>(g.data(), g.data() + g.numel()), g.shape()));
        }
        return out;
    };
    const auto inside = grads(true), outside = grads(false);
    for (int i = 0; i < 3; i++) CHECK(same_bytes(inside[inside.size() - 3 + i], outside[outside.size() - 3 + i]));
    for (Tensor t : {q, k, v}) t.zero_grad();
}

TEST_CASE("mixed precision reaches the plain path too: plain bf16 = fused bf16, values and gradients (matmul reads the precision)") {
    manual_seed(14);
    const Tensor x = param({3, 5, 40}), w = param({24, 40}), b = param({24});
    auto linear_bf16 = [](V v) { MixedPrecisionGuard bf16; return nn::linear(v[0], v[1], v[2], nn::Activation::relu, 0.2f, true); };
    expect_fused_equals_plain([&](V v) { manual_seed(15); return linear_bf16(v); }, {x, w, b}, 1e-5, 1e-5);
    // and it is bf16: not the fp32 plain value
    Tensor plain_bf16, plain_fp32;
    {
        FusedKernelsGuard plain(false);
        plain_fp32 = nn::linear(x, w, b, nn::Activation::relu);
        MixedPrecisionGuard bf16;
        plain_bf16 = nn::linear(x, w, b, nn::Activation::relu);
    }
    CHECK_FALSE(same_bytes(plain_bf16, plain_fp32));
    const int64_t B = 2, H = 2, T = 9, S = 13, D = 16;
    const Tensor q = param({B, T, D}), k = param({B, S, D}), v = param({B, S, D});
    expect_fused_equals_plain([&](V u) { MixedPrecisionGuard bf16; return nn::scaled_dot_product_attention(u[0], u[1], u[2], H); },
                              {q, k, v}, 1e-4, 1e-5);
}

TEST_CASE("a bf16 training step is bit-identical on 1 and 2 OpenMP threads") {
    if (!kernels::kOpenMP) {
        MESSAGE("skipped: built without OpenMP (make OPENMP=0), so there is only one thread");
        return;
    }
    auto train = [](int threads) {
        kernels::set_max_threads(threads);
        manual_seed(21);
        models::Transformer model({.src_vocab = 11, .tgt_vocab = 11, .layers = 1, .d_model = 64, .d_ff = 128, .heads = 4});
        optim::Adam opt(model.parameters(), {.lr = 1e-3f});
        Rng data(22);
        MixedPrecisionGuard bf16;
        for (int step = 0; step < 3; step++) {
            const models::Batch b = data::make_copy_batch(data, 11, 48, 10);
            const Tensor loss = nn::cross_entropy(model.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask), b.tgt_out);
            opt.zero_grad();
            loss.backward();
            opt.step();
        }
        return model.parameters();
    };
    const int before = kernels::max_threads();
    const auto one = train(1), two = train(2);
    kernels::set_max_threads(before);
    REQUIRE(one.size() == two.size());
    for (size_t i = 0; i < one.size(); i++) CHECK(same_bytes(one[i], two[i]));
}
