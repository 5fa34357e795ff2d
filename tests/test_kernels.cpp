// Every fused kernel in autograd/kernels/ against the plain form of its layer: each nn function
// (nn::linear, layer_norm, scaled_dot_product_attention, dropout, cross_entropy, gru_step) run
// twice, with fused kernels on and off (FusedKernelsGuard), on the same inputs and from the same seed:
// values, and the gradient of every input under a random upstream gradient. The plain form is
// composed from primitive ops whose gradients gradcheck verifies one by one. A backward that a
// chapter derives is also held, on raw arrays, to its plain twin in the kernel's own file
// (layer_norm_backward_reference, ...: the chapter's formula as a loop). gemm against
// gemm_naive is in test_gemm.cpp; each kernel's threaded path, just above its threshold, in
// test_threaded_kernels.cpp; a whole training run both ways in test_fused_kernels.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/kernels/attention.h"
#include "autograd/kernels/cross_entropy.h"
#include "autograd/kernels/fast_math.h"
#include "autograd/kernels/layer_norm.h"
#include "autograd/kernels/linear_cross_entropy.h"
#include "autograd/kernels/parallel.h"
#include "autograd/kernels/prefetch.h"
#include "models/decoder_cache.h"
#include "nn/nn.h"
#include "tests/compare.h"
#include "tests/gradcheck_helpers.h"
#include "tests/thread_count.h"

using namespace autograd;
using V = const std::vector<Tensor>&;

// ---- a kernel's backward against its plain twin (`x_backward_reference` beside `x_backward` in
// autograd/kernels/x.cpp: the chapter's formula as one loop per row, adding into zeros), on raw
// arrays. The kernel is run in both modes of its GradOut: store (=) into a buffer of NaN, which
// it must overwrite everywhere, and add (+=) onto a gradient already there.
namespace plain_twin {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// n floats drawn uniformly from [lo, hi), from a generator of their own
std::vector<float> uniform(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
    Rng g(seed);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& e : v) e = g.uniform(lo, hi);
    return v;
}

// a + b, elementwise: what an add-mode kernel must leave where a was
std::vector<float> plus(std::vector<float> a, const std::vector<float>& b) {
    for (size_t i = 0; i < a.size(); i++) a[i] += b[i];
    return a;
}

// The elements of got further from want than 1e-5 relative, or 1e-5 of want's largest |element|
// absolute (NaN counts): the kernel and the reference add the same terms in another order (a
// vectorized reduction, blocked products), a few float ulps of the largest term apart. A wrong
// term moves a gradient by far more.
int64_t elements_off(const std::vector<float>& got, const std::vector<float>& want) {
    REQUIRE(got.size() == want.size());
    double scale = 0.0;
    for (float w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
    int64_t off = 0;
    for (size_t i = 0; i < got.size(); i++)
        off += !(std::fabs(static_cast<double>(got[i]) - want[i]) <= 1e-5 * (scale + std::fabs(static_cast<double>(want[i]))));
    return off;
}
void expect_same(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    INFO(what);
    CHECK(elements_off(got, want) == 0);
}

}  // namespace plain_twin

TEST_CASE("softmax and log_softmax equal softmax_reference and log_softmax_reference, with -inf entries") {
    manual_seed(1);
    const float inf = std::numeric_limits<float>::infinity();
    Tensor x = param({4, 6}, -3.0f, 3.0f);
    for (int64_t i : {1, 7, 8, 15, 22}) x.data()[i] = -inf;   // masked entries, no row entirely masked
    expect_fused_equals_composed([](V v) { return softmax(v[0]); }, [](V v) { return softmax_reference(v[0]); }, {x}, 1e-6,
                                 1e-7);
    expect_fused_equals_composed([](V v) { return log_softmax(v[0]); }, [](V v) { return log_softmax_reference(v[0]); }, {x},
                                 1e-6, 1e-7);
    // large logits: the shift by the row max keeps both finite
    const Tensor big = (param({3, 5}) * 1e4f).detach().requires_grad_();
    expect_fused_equals_composed([](V v) { return log_softmax(v[0]); }, [](V v) { return log_softmax_reference(v[0]); }, {big},
                                 1e-6, 1e-3);
}

TEST_CASE("linear: fused equals plain, with and without bias, ReLU and dropout") {
    manual_seed(2);
    const Tensor x = param({2, 3, 4}), w = param({5, 4}), b = param({5});
    for (bool relu : {false, true})
        for (float p : {0.0f, 0.5f})
            for (bool with_bias : {true, false}) {
                CAPTURE(relu);
                CAPTURE(p);
                CAPTURE(with_bias);
                const nn::Activation act = relu ? nn::Activation::relu : nn::Activation::none;
                auto f = [&](V v) { manual_seed(4); return nn::linear(v[0], v[1], with_bias ? v[2] : Tensor(), act, p, true); };
                expect_fused_equals_plain(f, with_bias ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x, w}, 1e-5, 1e-6);
            }
}

TEST_CASE("layer_norm: fused equals plain (biased variance), also where eps dominates the variance") {
    manual_seed(3);
    const Tensor x = param({4, 6}, -3.0f, 3.0f), g = param({6}), b = param({6});
    auto f = [](V v) { return nn::layer_norm(v[0], v[1], v[2]); };
    expect_fused_equals_plain(f, {x, g, b}, 1e-5, 1e-6);
    // rows with a variance (~1e-6) below eps = 1e-5, where eps, not the variance, sets the scale
    const Tensor flat = (param({4, 6}) * 2e-3f).detach().requires_grad_();
    expect_fused_equals_plain(f, {flat, g, b}, 1e-5, 1e-6);
    // and a leading batch dim: (B, T, C)
    expect_fused_equals_plain(f, {param({2, 3, 6}), g, b}, 1e-5, 1e-6);
}

// The backward chapter 5 derives, dx = r (g - mean(g) - x̂ mean(g ⊙ x̂)), dγ and dβ, as
// layer_norm_backward computes it (vectorized row sums, a thread team over rows and one over
// columns) against layer_norm_backward_reference, the plain loop beside it. Sizes odd, prime and
// all different, the last above kLayerNormParallelMin so that 2 threads split it; row 0 constant
// where R > 1 (variance 0: eps alone sets r).
TEST_CASE("layer_norm_backward equals layer_norm_backward_reference: odd sizes, a constant row, store and add, 1 and 2 threads") {
    using namespace plain_twin;
    struct Size { int64_t R, C; };
    for (const Size size : {Size{1, 5}, Size{7, 3}, Size{13, 11}, Size{131, 257}})
        for (const int threads : {1, 2}) {
            const int64_t R = size.R, C = size.C;
            CAPTURE(R);
            CAPTURE(C);
            CAPTURE(threads);
            ThreadCount tc(threads);
            const kernels::LayerNormDims d{R, C};
            std::vector<float> x = uniform(R * C, 1, -3.0f, 3.0f);
            if (R > 1) std::fill(x.begin(), x.begin() + C, 0.5f);
            const std::vector<float> gain = uniform(C, 2, 0.5f, 1.5f), bias = uniform(C, 3), dy = uniform(R * C, 4);
            std::vector<float> y(R * C), mean(R), rstd(R);
            kernels::layer_norm_forward(y.data(), mean.data(), rstd.data(), x.data(), gain.data(), bias.data(), d, 1e-5f);

            std::vector<float> dx(R * C, 0.0f), dgain(C, 0.0f), dbias(C, 0.0f);   // the reference, into zeros
            kernels::layer_norm_backward_reference(dx.data(), dgain.data(), dbias.data(), dy.data(), x.data(), mean.data(),
                                                   rstd.data(), gain.data(), d);
            // store: every element written over the NaN
            std::vector<float> sx(R * C, kNaN), sg(C, kNaN), sb(C, kNaN);
            kernels::layer_norm_backward({sx.data(), false}, {sg.data(), false}, {sb.data(), false}, dy.data(), x.data(),
                                         mean.data(), rstd.data(), gain.data(), d);
            expect_same(sx, dx, "store: dx");
            expect_same(sg, dgain, "store: dgain");
            expect_same(sb, dbias, "store: dbias");
            // add: onto gradients from another op
            const std::vector<float> before_x = uniform(R * C, 5), before_g = uniform(C, 6), before_b = uniform(C, 7);
            std::vector<float> ax = before_x, ag = before_g, ab = before_b;
            kernels::layer_norm_backward({ax.data(), true}, {ag.data(), true}, {ab.data(), true}, dy.data(), x.data(),
                                         mean.data(), rstd.data(), gain.data(), d);
            expect_same(ax, plus(before_x, dx), "add: dx");
            expect_same(ag, plus(before_g, dgain), "add: dgain");
            expect_same(ab, plus(before_b, dbias), "add: dbias");
        }
    // the comparison can fail: with one element of dy changed by 0.01 for the reference only, its
    // row of dx, and dγ and dβ at its column, come out different
    const int64_t R = 13, C = 11;
    const kernels::LayerNormDims d{R, C};
    const std::vector<float> x = uniform(R * C, 1, -3.0f, 3.0f), gain = uniform(C, 2, 0.5f, 1.5f), bias = uniform(C, 3);
    const std::vector<float> dy = uniform(R * C, 4);
    std::vector<float> y(R * C), mean(R), rstd(R);
    kernels::layer_norm_forward(y.data(), mean.data(), rstd.data(), x.data(), gain.data(), bias.data(), d, 1e-5f);
    std::vector<float> sx(R * C), sg(C), sb(C);
    kernels::layer_norm_backward({sx.data(), false}, {sg.data(), false}, {sb.data(), false}, dy.data(), x.data(), mean.data(),
                                 rstd.data(), gain.data(), d);
    std::vector<float> dy_changed = dy;
    dy_changed[5 * C + 7] += 0.01f;
    std::vector<float> dx(R * C, 0.0f), dgain(C, 0.0f), dbias(C, 0.0f);
    kernels::layer_norm_backward_reference(dx.data(), dgain.data(), dbias.data(), dy_changed.data(), x.data(), mean.data(),
                                           rstd.data(), gain.data(), d);
    CHECK(elements_off(sx, dx) == C);   // row 5, every element: through mean(g) and mean(g ⊙ x̂)
    CHECK(elements_off(sg, dgain) == 1);
    CHECK(elements_off(sb, dbias) == 1);
}

// Tolerance: the kernel rounds as the plain form does (autograd::sigmoid's formula, the same
// terms) except where the compiler fuses a multiply and an add (gi_n + r gh_n, (1 − z) n + z h)
// and where the backward groups its products differently (g (h − n) where the plain form adds
// g h and −g n): a few float32 ulps. Measured worst: 6e-8 on values and gradients below 1.4
// (2.2e-5 relative, on a gradient of 2.7e-3); over a whole GRU layer (test_recurrent.cpp), 1.2e-7
// on values below 1 and 4.8e-7 on gradients below 2.6. A wrong term moves them by 1e-2 and more.
// At gate arguments of ±30 and more the sigmoids and tanh are flat and the gradients nearly 0:
// that case checks that nothing overflows (a NaN fails expect_close) and saturates alike.
TEST_CASE("gru_step: fused equals plain: odd shapes, large gate pre-activations (gi and b_hh up to ±30), gi made from h") {
    const int64_t B = 5, Hd = 7;   // gi and gh (5, 21), weight_hh (21, 7)
    manual_seed(15);
    const Tensor h = param({B, Hd}), w_hh = param({3 * Hd, Hd}, -0.5f, 0.5f), b_hh = param({3 * Hd});
    auto step = [](V v) { return nn::gru_step(v[0], v[1], v[2], v[3]); };
    for (float scale : {1.0f, 30.0f}) {
        CAPTURE(scale);
        // gi and b_hh scaled: gate arguments up to ±60, most of the sigmoids and tanhs saturated
        const Tensor gi = (param({B, 3 * Hd}) * scale).detach().requires_grad_();
        const Tensor b = (b_hh * scale).detach().requires_grad_();
        expect_fused_equals_plain(step, {gi, h, w_hh, b}, 1e-5, 1e-6);
    }
    // gi's producer is h itself (gi = h W_ih^T + b_ih): h's gradient comes from three ops, gi's
    // linear, gh's linear and the cell, each storing or adding as it finds h's gradient
    const Tensor w_ih = param({3 * Hd, Hd}), b_ih = param({3 * Hd});
    auto from_h = [](V v) { return nn::gru_step(nn::linear(v[0], v[3], v[4]), v[0], v[1], v[2]); };
    expect_fused_equals_plain(from_h, {h, w_hh, b_hh, w_ih, b_ih}, 1e-5, 1e-6);
    // the reference of the tests that hand the fused op gh (compare.h) is the plain form, bit for bit
    FusedKernelsGuard plain(false);
    const Tensor gi = param({B, 3 * Hd});
    CHECK(gru_cell_reference(gi, nn::linear(h, w_hh, b_hh), h).to_vector() == nn::gru_step(gi, h, w_hh, b_hh).to_vector());
}

// When gi and gh are one tensor, the kernel stores dgi into its new gradient and adds dgh to it.
TEST_CASE("gru_cell: fused equals the composition when gi and gh are one tensor") {
    manual_seed(16);
    const Tensor g = param({3, 15}, -2.0f, 2.0f), h = param({3, 5});   // B 3, Hd 5
    expect_fused_equals_composed([](V v) { return fused::gru_cell(v[0], v[0], v[1]); },
                                 [](V v) { return gru_cell_reference(v[0], v[0], v[1]); }, {g, h}, 1e-5, 1e-6);
}

// A padding mask (B, 1, S) with batch 0's last 2 keys padded, and a (B, T, S) mask with padding
// and a causal-style band per (b, t) where batch 1 may never see key 0.
static Mask padding_mask(int64_t B, int64_t S) {
    Mask pad = Mask::full({B, 1, S}, 1);
    for (int64_t s = S - 2; s < S; s++) pad[s] = 0;
    return pad;
}
static Mask band_mask(int64_t B, int64_t T, int64_t S) {
    Mask both = Mask::full({B, T, S}, 1);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t s = 0; s < S; s++) both[(b * T + t) * S + s] = s <= t + 1 && !(b == 1 && s == 0);
    return both;
}

TEST_CASE("attention: fused equals plain: masks, several gemm tiles per head, dropout") {
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
        for (const Mask& m : {Mask(), padding_mask(c.B, c.S), band_mask(c.B, c.T, c.S)}) {
            CAPTURE(shape_str(m.shape));
            auto f = [&](V x) {
                manual_seed(6);
                return nn::scaled_dot_product_attention(x[0], x[1], x[2], c.H, m, c.p);
            };
            expect_fused_equals_plain(f, {q, k, v}, 1e-4, 1e-5);
        }
    }
}

// The kernel stores into a gradient that does not exist yet when q, k and v are three tensors,
// and adds when two are one tensor: their gradients are one buffer, written head by head.
TEST_CASE("attention: fused equals plain when q, k and v are one tensor, or two of them are") {
    manual_seed(7);
    const int64_t B = 2, H = 2, T = 5, D = 8;
    const Tensor x = param({B, T, D}), y = param({B, T, D});
    for (float p : {0.0f, 0.25f}) {
        CAPTURE(p);
        auto self = [&](V v) { manual_seed(8); return nn::scaled_dot_product_attention(v[0], v[0], v[0], H, Mask(), p); };
        expect_fused_equals_plain(self, {x}, 1e-5, 1e-6);
        auto kv_one = [&](V v) { manual_seed(8); return nn::scaled_dot_product_attention(v[0], v[1], v[1], H, Mask(), p); };
        expect_fused_equals_plain(kv_one, {x, y}, 1e-5, 1e-6);
        auto qk_one = [&](V v) { manual_seed(8); return nn::scaled_dot_product_attention(v[0], v[0], v[1], H, Mask(), p); };
        expect_fused_equals_plain(qk_one, {x, y}, 1e-5, 1e-6);
    }
}

// The kernel's backward (four gemm calls per head, the (b, h) pairs split over threads, stored or
// added) against attention_backward_reference, the plain loops docs/07 derives, on raw arrays.
// The sizes are odd primes, all different, so that a head, a row or a transpose mixed up cannot
// hide behind symmetry, and B*H*T*S*Dk is above kAttentionParallelMin, so 2 threads split the
// 15 (b, h) pairs 8 : 7. The mask hides keys 8 to 10 from every query and query 3 of batch 2
// from every key: the reference alone must give those exact zeros.
TEST_CASE("attention_backward equals attention_backward_reference: mask, dropout, 1 and 2 threads, store and add") {
    using namespace autograd::kernels;
    const int64_t B = 3, H = 5, T = 7, S = 11, Dk = 17, D = H * Dk;
    static_assert(3 * 5 * 7 * 11 * 17 > kAttentionParallelMin);
    manual_seed(21);
    auto draw = [](int64_t n) { return Tensor::randn({n}).to_vector(); };
    const std::vector<float> q = draw(B * T * D), k = draw(B * S * D), v = draw(B * S * D), dout = draw(B * T * D),
                             g0 = draw(B * S * D);   // what a gradient held before the kernel adds to it
    Mask allowed = band_mask(B, T, S);               // (B, T, S): key s <= t + 1, and batch 1 never key 0
    for (int64_t s = 0; s < S; s++) allowed[(2 * T + 3) * S + s] = 0;   // query 3 of batch 2 sees no key
    const AttentionDims d{B, H, T, S, Dk, S};
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const int64_t nq = B * T * D, nk = B * S * D;
    struct Grads { std::vector<float> dq, dk, dv; };
    auto reference = [&](const std::vector<float>& P, const DropoutDraws& drop, const std::vector<float>& q_,
                         const std::vector<float>& k_, const std::vector<float>& v_, const std::vector<float>& dout_) {
        Grads r{std::vector<float>(nq, 0.0f), std::vector<float>(nk, 0.0f), std::vector<float>(nk, 0.0f)};   // zero-filled: it adds
        attention_backward_reference(r.dq.data(), r.dk.data(), r.dv.data(), dout_.data(), q_.data(), k_.data(), v_.data(), P.data(),
                                     B, H, T, S, Dk, drop);
        return r;
    };
    auto as_tensor = [](const std::vector<float>& x) { return Tensor::from_vector(x, {int64_t(x.size())}); };
    auto expect_equal = [&](const Grads& got, const Grads& want, const char* what) {
        INFO(what);
        expect_close(as_tensor(got.dq), as_tensor(want.dq), 1e-5, 1e-6, "dq");
        expect_close(as_tensor(got.dk), as_tensor(want.dk), 1e-5, 1e-6, "dk");
        expect_close(as_tensor(got.dv), as_tensor(want.dv), 1e-5, 1e-6, "dv");
    };
    auto max_diff = [](const Grads& a, const Grads& b) {
        float m = 0.0f;
        for (auto [x, y] : {std::pair{&a.dq, &b.dq}, std::pair{&a.dk, &b.dk}, std::pair{&a.dv, &b.dv}})
            for (size_t i = 0; i < x->size(); i++) m = std::max(m, std::fabs((*x)[i] - (*y)[i]));
        return m;
    };
    for (bool masked : {false, true})
        for (float p : {0.0f, 0.3f}) {
            CAPTURE(masked);
            CAPTURE(p);
            const DropoutDraws drop = p > 0.0f ? DropoutDraws(p, 1234) : DropoutDraws();
            std::vector<float> out(nq), P(B * H * T * S);
            attention_forward(out.data(), P.data(), q.data(), k.data(), v.data(), masked ? allowed.data.data() : nullptr, d, drop);
            const Grads want = reference(P, drop, q, k, v, dout);
            Grads first_run;
            for (int threads : {1, 2}) {
                CAPTURE(threads);
                ThreadCount tc(threads);
                // stored into buffers of garbage (NaN: an element the kernel skips shows)
                Grads stored{std::vector<float>(nq, nan), std::vector<float>(nk, nan), std::vector<float>(nk, nan)};
                attention_backward({stored.dq.data(), false}, {stored.dk.data(), false}, {stored.dv.data(), false}, dout.data(),
                                   q.data(), k.data(), v.data(), P.data(), d, drop);
                expect_equal(stored, want, "stored");
                // added to what the gradients held: g0 + the reference's
                Grads added{std::vector<float>(g0.begin(), g0.begin() + nq), g0, g0}, want_added = want;
                attention_backward({added.dq.data(), true}, {added.dk.data(), true}, {added.dv.data(), true}, dout.data(),
                                   q.data(), k.data(), v.data(), P.data(), d, drop);
                for (int64_t i = 0; i < nq; i++) want_added.dq[i] += g0[i];
                for (int64_t i = 0; i < nk; i++) want_added.dk[i] += g0[i], want_added.dv[i] += g0[i];
                expect_equal(added, want_added, "added");
                if (threads == 1) first_run = stored;
                else CHECK(max_diff(stored, first_run) == 0.0f);   // each thread writes its own heads: the same bits
            }
            // The mask's exact zeros, from the reference: keys 8 to 10 get no dk and no dv, nor,
            // in batch 1, key 0; query 3 of batch 2 gets no dq. Without the mask they are not zero.
            auto row_is_zero = [&](const std::vector<float>& g, int64_t rows, int64_t b, int64_t r) {
                for (int64_t i = 0; i < D; i++)
                    if (g[(b * rows + r) * D + i] != 0.0f) return false;
                return true;
            };
            for (int64_t b = 0; b < B; b++)
                for (int64_t s = 8; s < S; s++) {
                    CHECK(row_is_zero(want.dk, S, b, s) == masked);
                    CHECK(row_is_zero(want.dv, S, b, s) == masked);
                }
            CHECK(row_is_zero(want.dk, S, 1, 0) == masked);
            CHECK(row_is_zero(want.dq, T, 2, 3) == masked);
            // Every input counts: change one (an element the mask leaves visible, or the draws'
            // seed) and the reference no longer equals the kernel's gradients.
            auto changed = [](std::vector<float> x) { x[0] += 1.0f; return x; };
            CHECK(max_diff(reference(P, drop, changed(q), k, v, dout), want) > 1e-3f);      // dk = dSc^T Q
            CHECK(max_diff(reference(P, drop, q, changed(k), v, dout), want) > 1e-3f);      // dq = dSc K
            CHECK(max_diff(reference(P, drop, q, k, changed(v), dout), want) > 1e-3f);      // dP = dO V^T
            CHECK(max_diff(reference(P, drop, q, k, v, changed(dout)), want) > 1e-3f);      // all three
            CHECK(max_diff(reference(changed(P), drop, q, k, v, dout), want) > 1e-3f);      // the weights
            if (p > 0.0f) {
                CHECK(max_diff(reference(P, DropoutDraws(p, 1235), q, k, v, dout), want) > 1e-3f);   // other draws
                CHECK(max_diff(reference(P, DropoutDraws(), q, k, v, dout), want) > 1e-3f);          // no dropout
            }
        }
}

// The fused op attends to the first `keys` rows of k and v when they hold more (a decoder's
// cache, allocated for the longest output): the same as nn's attention over copies of the prefix,
// and the rows past it get no gradient.
TEST_CASE("fused::attention over a prefix of k and v (keys) = attention over a copy of the prefix") {
    const int64_t B = 2, H = 2, T = 3, S_alloc = 7, D = 8;
    manual_seed(11);
    const Tensor q = param({B, T, D}), k = param({B, S_alloc, D}), v = param({B, S_alloc, D});
    for (int64_t keys : {int64_t{1}, int64_t{4}, S_alloc})
        for (bool masked : {false, true})
            for (float p : {0.0f, 0.25f}) {
                CAPTURE(keys);
                CAPTURE(masked);
                CAPTURE(p);
                const Mask m = masked ? band_mask(B, T, keys) : Mask();
                auto prefix = [&](V x) {   // k and v (B, S_alloc, D), attended to through their first `keys` rows
                    manual_seed(12);
                    return autograd::fused::attention(x[0], x[1], x[2], H, m, p, keys).out;
                };
                auto copied = [&](V x) {
                    manual_seed(12);
                    return nn::scaled_dot_product_attention(x[0], narrow(x[1], 1, 0, keys), narrow(x[2], 1, 0, keys), H, m, p);
                };
                expect_fused_equals_composed(prefix, copied, {q, k, v}, 1e-6, 1e-7);
                const autograd::fused::Attention a = autograd::fused::attention(q, k, v, H, m, p, keys);
                CHECK(a.weights.shape() == Shape{B, H, T, keys});
                CHECK(a.out.shape() == Shape{B, T, D});
            }
}

// Beam search's hypotheses read their sentence's memory keys and values in place: query row b of
// q attends to slot slot[b] of k and v, which hold fewer slots (3) than q has rows (5). The
// fused kernel offsets its pointers by the slot; the plain path gathers the slots with
// index_select; both equal attention over that gathered copy.
TEST_CASE("attend_to_cache with a slot map: fused = plain = attention over the gathered slots") {
    const int64_t B = 5, slots = 3, H = 2, T = 3, KV = 7, D = 6;
    const std::vector<int64_t> slot{2, 0, 2, 1, 0};
    const Tokens ids({2, 0, 2, 1, 0}, {B});
    manual_seed(13);
    const Tensor q = param({B, T, D}), k = param({slots, KV, D}), v = param({slots, KV, D});
    CHECK_THROWS_WITH_AS(models::attend_to_cache(q, k, v, H, Mask(), KV, slot),
                         doctest::Contains("attend_to_cache: decoding with a cache needs autograd::NoGradGuard"), std::logic_error);
    NoGradGuard no_grad;
    const Tensor kg = index_select(k, 0, ids), vg = index_select(v, 0, ids);   // (B, KV, D): slot slot[b] in row b
    for (int64_t keys : {int64_t{4}, KV})
        for (bool masked : {false, true}) {
            CAPTURE(keys);
            CAPTURE(masked);
            const Mask m = masked ? band_mask(B, T, keys) : Mask();
            auto run = [&](bool fused) {
                FusedKernelsGuard path(fused);
                return models::attend_to_cache(q, k, v, H, m, keys, slot);
            };
            const nn::AttentionOutput fused = run(true), plain = run(false);
            const nn::AttentionOutput copy = nn::scaled_dot_product_attention_with_weights(q, narrow(kg, 1, 0, keys), narrow(vg, 1, 0, keys), H, m);
            CHECK(fused.out.shape() == Shape{B, T, D});
            CHECK(fused.weights.shape() == Shape{B, H, T, keys});
            CHECK(plain.out.to_vector() == [&] { FusedKernelsGuard off(false); return nn::scaled_dot_product_attention(q, narrow(kg, 1, 0, keys), narrow(vg, 1, 0, keys), H, m); }().to_vector());
            CHECK(fused.out.to_vector() == autograd::fused::attention(q, kg, vg, H, m, 0.0f, keys).out.to_vector());   // the same kernel on a copy: the same bits
            expect_close(fused.out, plain.out, 1e-5, 1e-6, "fused vs plain, out");
            expect_close(fused.weights, plain.weights, 1e-5, 1e-6, "fused vs plain, weights");
            expect_close(copy.out, plain.out, 1e-5, 1e-6, "the copy vs plain, out");
        }
    for (bool fused : {true, false}) {
        CAPTURE(fused);
        FusedKernelsGuard path(fused);
        CHECK_THROWS_WITH_AS(models::attend_to_cache(q, k, v, H, Mask(), KV, {2, 0, 3, 1, 0}),
                             doctest::Contains("slot 3 of k (3, 7, 6) with 3 slots"), std::invalid_argument);
        CHECK_THROWS_WITH_AS(models::attend_to_cache(q, k, v, H, Mask(), KV, {2, 0}),
                             doctest::Contains("2 slots for the 5 rows of q (5, 3, 6)"), std::invalid_argument);
        CHECK_THROWS_WITH_AS(models::attend_to_cache(q, k, v, H, Mask(), KV + 1, slot),
                             doctest::Contains("length 8 is outside [0, 7]"), std::invalid_argument);
    }
}

TEST_CASE("cross_entropy: fused equals plain: ignored targets, label smoothing") {
    manual_seed(7);
    const Tokens t({2, 0, 4, 1, 3, 0}, {2, 3});    // 0 is padding
    const Tensor logits = param({2, 3, 5}, -2.0f, 2.0f);
    for (const nn::CrossEntropyOptions opt : {nn::CrossEntropyOptions{}, nn::CrossEntropyOptions{.ignore_index = 0},
                                              nn::CrossEntropyOptions{.label_smoothing = 0.2f},
                                              nn::CrossEntropyOptions{.ignore_index = 0, .label_smoothing = 0.1f}}) {
        CAPTURE(opt.ignore_index);
        CAPTURE(opt.label_smoothing);
        expect_fused_equals_plain([&](V x) { return nn::cross_entropy(x[0], t, opt); }, {logits}, 1e-6, 1e-7);
    }
    // every target ignored: loss 0 and zero gradient both ways
    const Tokens pad = Tokens::full({2, 3}, 0);
    expect_fused_equals_plain([&](V x) { return nn::cross_entropy(x[0], pad, {.ignore_index = 0, .label_smoothing = 0.1f}); },
                              {logits}, 0.0, 0.0);
}

// The backward chapter 11 derives, dz = dloss (p - q) / n on the counted rows and 0 on the
// ignored ones, as cross_entropy_backward computes it (a thread team over rows) against
// cross_entropy_backward_reference, the plain loop beside it: one-hot and smoothed targets,
// ignored rows, every row ignored, the gradient stored, added, and stored over the logits
// themselves (as linear_cross_entropy does). The last size is above kCrossEntropyParallelMin.
TEST_CASE("cross_entropy_backward equals cross_entropy_backward_reference: ignored rows, label smoothing, store, add and in place, 1 and 2 threads") {
    using namespace plain_twin;
    struct Size { int64_t R, V; };
    struct Options { int32_t ignore_index; float eps; };
    const float dloss = 0.7f;
    // the forward's lse, and the kernel's backward in each mode next to the reference's
    const auto check = [&](const std::vector<float>& logits, const std::vector<int32_t>& targets, const kernels::CrossEntropyDims& d) {
        std::vector<float> lse(d.R);
        kernels::cross_entropy_forward(lse.data(), logits.data(), targets.data(), d);
        std::vector<float> want(d.R * d.V, 0.0f);
        kernels::cross_entropy_backward_reference(want.data(), dloss, logits.data(), lse.data(), targets.data(), d);
        std::vector<float> stored(d.R * d.V, kNaN);
        kernels::cross_entropy_backward({stored.data(), false}, dloss, logits.data(), lse.data(), targets.data(), d);
        expect_same(stored, want, "store");
        const std::vector<float> before = uniform(d.R * d.V, 8);
        std::vector<float> added = before;
        kernels::cross_entropy_backward({added.data(), true}, dloss, logits.data(), lse.data(), targets.data(), d);
        expect_same(added, plus(before, want), "add");
        std::vector<float> in_place = logits;
        kernels::cross_entropy_backward({in_place.data(), false}, dloss, in_place.data(), lse.data(), targets.data(), d);
        expect_same(in_place, want, "store over the logits");
        return want;
    };
    for (const Size size : {Size{1, 7}, Size{5, 3}, Size{11, 13}, Size{131, 257}})
        for (const Options opt : {Options{-100, 0.0f}, Options{2, 0.0f}, Options{2, 0.1f}, Options{-100, 0.3f}})
            for (const int threads : {1, 2}) {
                CAPTURE(size.R);
                CAPTURE(size.V);
                CAPTURE(opt.ignore_index);
                CAPTURE(opt.eps);
                CAPTURE(threads);
                ThreadCount tc(threads);
                const kernels::CrossEntropyDims d{size.R, size.V, opt.ignore_index, opt.eps};
                Rng g(9);
                std::vector<int32_t> targets(size.R);
                for (int64_t r = 0; r < size.R; r++) targets[r] = r % 3 == 1 ? 2 : static_cast<int32_t>(g.below(size.V));   // 2: padding
                const std::vector<float> want = check(uniform(size.R * size.V, 10, -4.0f, 4.0f), targets, d);
                if (opt.ignore_index == 2 && size.R > 1)   // row 1 is ignored: its gradient is 0
                    CHECK(std::all_of(want.begin() + size.V, want.begin() + 2 * size.V, [](float v) { return v == 0.0f; }));
            }
    // every row ignored: n = 0, a zero gradient (stored as zeros, not NaN)
    const kernels::CrossEntropyDims all{5, 3, 2, 0.1f};
    const std::vector<float> zero = check(uniform(15, 11), std::vector<int32_t>(5, 2), all);
    CHECK(zero == std::vector<float>(15, 0.0f));
    // the comparison can fail: with row 3's target moved to another class for the reference only,
    // that row comes out different (p - q, with q's peak elsewhere), and only that row
    const kernels::CrossEntropyDims d{5, 7, -100, 0.1f};
    const std::vector<float> logits = uniform(35, 12, -4.0f, 4.0f);
    const std::vector<int32_t> targets = {4, 0, 6, 2, 5};
    std::vector<float> lse(5), stored(35);
    kernels::cross_entropy_forward(lse.data(), logits.data(), targets.data(), d);
    kernels::cross_entropy_backward({stored.data(), false}, dloss, logits.data(), lse.data(), targets.data(), d);
    std::vector<int32_t> moved = targets;
    moved[3] = 3;
    std::vector<float> want(35, 0.0f);
    kernels::cross_entropy_backward_reference(want.data(), dloss, logits.data(), lse.data(), moved.data(), d);
    CHECK(elements_off(stored, want) == 2);   // row 3 at classes 2 and 3
}

// The generator and the loss in one, chunk by chunk (autograd/kernels/linear_cross_entropy.h),
// against nn::linear then nn::cross_entropy on the plain path: the loss and the gradients of x, W
// and b under a random dloss, for chunks that divide the rows and chunks that do not, one row at
// a time, and every row in one chunk (the two fused ops, unchanged).
TEST_CASE("linear_cross_entropy: chunked equals linear + cross_entropy: uneven chunks, ignored targets, label smoothing, no bias") {
    manual_seed(21);
    const int64_t D = 5, vocab = 11;   // x (2, 7, D): R = 14 rows; every size differs
    const Tensor x = param({2, 7, D}), w = param({vocab, D}), b = param({vocab});
    std::vector<int32_t> ids;
    Rng g(3);
    for (int i = 0; i < 14; i++) ids.push_back(i % 5 == 2 ? 0 : static_cast<int32_t>(g.uniform(0.0f, 1.0f) * (vocab - 1)) + 1);   // 0: padding
    const Tokens t(ids, {2, 7});
    for (const int64_t chunk : {1, 3, 5, 13, 14, 0})
        for (const nn::CrossEntropyOptions opt : {nn::CrossEntropyOptions{}, nn::CrossEntropyOptions{.ignore_index = 0, .label_smoothing = 0.1f}})
            for (const bool with_bias : {true, false}) {
                CAPTURE(chunk);
                CAPTURE(opt.label_smoothing);
                CAPTURE(with_bias);
                const Tensor bias = with_bias ? b : Tensor();
                auto chunked = [&](V v) {
                    return fused::linear_cross_entropy(v[0], v[1], with_bias ? v[2] : Tensor(), t, opt.ignore_index, opt.label_smoothing, chunk);
                };
                auto plain = [&](V v) {
                    FusedKernelsGuard off(false);
                    return nn::cross_entropy(nn::linear(v[0], v[1], with_bias ? v[2] : Tensor()), t, opt);
                };
                expect_fused_equals_composed(chunked, plain, with_bias ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x, w}, 1e-5, 1e-6);
                // chunks of fewer rows than R make the new op; a single chunk is the two fused ops
                CHECK(std::string(chunked({x, w, b}).op()) == (chunk >= 1 && chunk < 14 ? "linear_cross_entropy" : "cross_entropy"));
                // the loss is the same number, whatever the chunks: each row's loss added in row order
                CHECK(chunked({x, w, b}).item() == fused::linear_cross_entropy(x, w, bias, t, opt.ignore_index, opt.label_smoothing, 14).item());
            }
    // every target ignored: loss 0 and zero gradients
    const Tokens pad = Tokens::full({2, 7}, 0);
    expect_fused_equals_composed([&](V v) { return fused::linear_cross_entropy(v[0], v[1], v[2], pad, 0, 0.1f, 4); },
                                 [&](V v) { FusedKernelsGuard off(false); return nn::cross_entropy(nn::linear(v[0], v[1], v[2]), pad, {.ignore_index = 0, .label_smoothing = 0.1f}); },
                                 {x, w, b}, 0.0, 0.0);
}

// The gradient chapter 11 derives for the generator and the loss together, dz = (p - q) / n and
// then the Linear's backward with it, as linear_cross_entropy_forward computes it (chunks of rows,
// gemm, store-or-add per chunk) against linear_cross_entropy_backward_reference, the plain loop
// beside it: chunks of one row. The kernel stores (=) every gradient, over NaN here; the add is
// scale_saved_gradient's, in the backward (tested through the op above). The last size is above
// kCrossEntropyParallelMin.
TEST_CASE("linear_cross_entropy_forward's gradient equals linear_cross_entropy_backward_reference: uneven chunks, ignored rows, label smoothing, no bias, 1 and 2 threads") {
    using namespace plain_twin;
    struct Size { int64_t R, D, V; };
    struct Options { int32_t ignore_index; float eps; };
    // the kernel's dx, dW, db (stored over NaN) and the reference's (added into zeros)
    struct Gradients { std::vector<float> dx, dw, db; };
    const auto kernel = [](const std::vector<float>& x, const std::vector<float>& w, const float* b, const std::vector<int32_t>& targets,
                           const kernels::LinearCrossEntropyDims& d) {
        Gradients got{std::vector<float>(d.R * d.D, kNaN), std::vector<float>(d.V * d.D, kNaN), std::vector<float>(d.V, kNaN)};
        std::vector<float> scratch(std::min(d.R, d.chunk_rows) * d.V);
        kernels::linear_cross_entropy_forward(got.dx.data(), got.dw.data(), b ? got.db.data() : nullptr, scratch.data(), x.data(),
                                              w.data(), b, targets.data(), d, kernels::Precision::fp32);
        return got;
    };
    const auto reference = [](const std::vector<float>& x, const std::vector<float>& w, const float* b, const std::vector<int32_t>& targets,
                              const kernels::LinearCrossEntropyDims& d) {
        Gradients want{std::vector<float>(d.R * d.D, 0.0f), std::vector<float>(d.V * d.D, 0.0f), std::vector<float>(d.V, 0.0f)};
        kernels::linear_cross_entropy_backward_reference(want.dx.data(), want.dw.data(), b ? want.db.data() : nullptr, x.data(), w.data(),
                                                         b, targets.data(), d);
        return want;
    };
    for (const Size size : {Size{1, 3, 5}, Size{7, 5, 11}, Size{13, 17, 3}, Size{37, 19, 1031}})
        for (const Options opt : {Options{-100, 0.0f}, Options{0, 0.1f}})
            for (const bool with_bias : {true, false})
                for (const int threads : {1, 2}) {
                    CAPTURE(size.R);
                    CAPTURE(size.D);
                    CAPTURE(size.V);
                    CAPTURE(opt.ignore_index);
                    CAPTURE(opt.eps);
                    CAPTURE(with_bias);
                    CAPTURE(threads);
                    ThreadCount tc(threads);
                    const std::vector<float> x = uniform(size.R * size.D, 13), w = uniform(size.V * size.D, 14), b = uniform(size.V, 15);
                    Rng g(16);
                    std::vector<int32_t> targets(size.R);
                    for (int64_t r = 0; r < size.R; r++) targets[r] = r % 4 == 2 ? 0 : static_cast<int32_t>(g.below(size.V));   // 0: padding
                    const float* bias = with_bias ? b.data() : nullptr;
                    const kernels::LinearCrossEntropyDims whole{size.R, size.D, size.V, opt.ignore_index, opt.eps, size.R};
                    const Gradients want = reference(x, w, bias, targets, whole);
                    for (const int64_t chunk : {int64_t{1}, int64_t{4}, size.R}) {   // 4: uneven
                        CAPTURE(chunk);
                        kernels::LinearCrossEntropyDims d = whole;
                        d.chunk_rows = chunk;
                        const Gradients got = kernel(x, w, bias, targets, d);
                        expect_same(got.dx, want.dx, "dx");
                        expect_same(got.dw, want.dw, "dW");
                        if (with_bias) expect_same(got.db, want.db, "db");
                    }
                }
    // the comparison can fail: with one element of x changed by 0.01 for the reference only, its
    // row's logits and so its dz move, and with them dx, dW and db
    const kernels::LinearCrossEntropyDims d{7, 5, 11, -100, 0.1f, 3};
    const std::vector<float> x = uniform(35, 13), w = uniform(55, 14), b = uniform(11, 15);
    const std::vector<int32_t> targets = {3, 0, 10, 7, 1, 4, 9};
    const Gradients got = kernel(x, w, b.data(), targets, d);
    std::vector<float> x_changed = x;
    x_changed[2 * 5 + 1] += 0.01f;
    const Gradients want = reference(x_changed, w, b.data(), targets, d);
    CHECK(elements_off(got.dx, want.dx) > 0);
    CHECK(elements_off(got.dw, want.dw) > 0);
    CHECK(elements_off(got.db, want.db) > 0);
}

TEST_CASE("linear_cross_entropy: gradcheck of the chunked op, and nn::linear_cross_entropy on both paths refuses what the two ops refuse") {
    manual_seed(22);
    const Tensor x = param({7, 4}), w = param({6, 4}), b = param({6});
    const Tokens t({3, 0, 5, 1, 0, 2, 4}, {7});
    CHECK_GRAD([&](V v) { return fused::linear_cross_entropy(v[0], v[1], v[2], t, 0, 0.2f, 3); }, x, w, b);
    check_backward_adds([&](V v) { return fused::linear_cross_entropy(v[0], v[1], v[2], t, 0, 0.2f, 3); }, {x, w, b});
    for (const bool on : {true, false}) {
        CAPTURE(on);
        FusedKernelsGuard path(on);
        CHECK_THROWS_WITH_AS(nn::linear_cross_entropy(x, param({6, 5}), b, t), doctest::Contains("(7, 4)"), std::invalid_argument);
        CHECK_THROWS_WITH_AS(nn::linear_cross_entropy(x, w, param({5}), t), doctest::Contains("bias"), std::invalid_argument);
        CHECK_THROWS_WITH_AS(nn::linear_cross_entropy(x, w, b, Tokens({1, 2}, {2})), doctest::Contains("targets of shape (2,)"),
                             std::invalid_argument);
        CHECK_THROWS_WITH_AS(nn::linear_cross_entropy(x, w, b, Tokens({3, 0, 6, 1, 0, 2, 4}, {7})), doctest::Contains("target 6"),
                             std::out_of_range);
    }
}

// What the op is for: a training step's tensors never hold the (R, V) logits whole. Two linear +
// cross_entropy ops hold the logits and then their gradient, 2 R V floats at once; chunked, the
// peak is a chunk's logits and the saved gradients (R D + V D + V floats).
TEST_CASE("linear_cross_entropy: the peak of a forward and backward is a chunk of logits, not the whole (R, V); without gradients, no gradient is made") {
    manual_seed(23);
    const int64_t R = 300, D = 8, vocab = 4000, chunk = 20;
    const double logits_bytes = 4.0 * R * vocab;   // 4.8 MB
    const Tensor x = param({R, D}), w = param({vocab, D}), b = param({vocab});
    std::vector<int32_t> ids(R);
    for (int64_t r = 0; r < R; r++) ids[r] = static_cast<int32_t>((r * 7919) % vocab);
    const Tokens t(ids, {R});
    auto peak_of = [&](int64_t chunk_rows, bool grad) {
        for (Tensor leaf : {x, w, b}) leaf.zero_grad();
        const std::size_t live = autograd::tensor_bytes_live();
        autograd::reset_peak_memory();
        float loss = 0.0f;
        {
            std::optional<NoGradGuard> no_grad;
            if (!grad) no_grad.emplace();
            const Tensor l = fused::linear_cross_entropy(x, w, b, t, -100, 0.1f, chunk_rows);
            if (grad) l.backward();
            loss = l.item();
        }
        return std::pair<double, float>{static_cast<double>(autograd::tensor_bytes_peak() - live), loss};
    };
    // (pairs, not structured bindings: clang 14 cannot CAPTURE those)
    const std::pair<double, float> whole = peak_of(R, true);   // one chunk: the two ops
    const std::pair<double, float> chunked = peak_of(chunk, true);
    const std::pair<double, float> no_grad = peak_of(chunk, false);
    CAPTURE(whole.first);
    CAPTURE(chunked.first);
    CAPTURE(no_grad.first);
    CHECK(whole.first >= 2 * logits_bytes);
    CHECK(chunked.first < 0.25 * logits_bytes);                // a chunk (4%) and dx, dW, db twice (saved, then the leaves')
    CHECK(no_grad.first < 4.0 * chunk * vocab + 64 * 1024);    // a chunk of logits, nothing else
    CHECK(chunked.second == whole.second);
    CHECK(no_grad.second == whole.second);
}

TEST_CASE("dropout: fused equals plain: the same elements dropped, forward and backward") {
    manual_seed(8);
    const Tensor x = param({7, 9});
    for (float p : {0.1f, 0.5f}) {
        CAPTURE(p);
        expect_fused_equals_plain([&](V v) { manual_seed(9); return nn::dropout(v[0], p, true); }, {x}, 0.0, 0.0);
    }
}

TEST_CASE("add_dropout: fused equals plain x + dropout(y), and the separate fused ops bit for bit, forward and backward") {
    manual_seed(8);
    const Tensor x = param({7, 9}), y = param({7, 9});
    for (float p : {0.1f, 0.5f}) {
        CAPTURE(p);
        expect_fused_equals_plain([&](V v) { manual_seed(9); return nn::add_dropout(v[0], v[1], p, true); }, {x, y}, 0.0, 0.0);
        // x and y one tensor: dy adds to dx
        expect_fused_equals_plain([&](V v) { manual_seed(9); return nn::add_dropout(v[0], v[0], p, true); }, {x}, 0.0, 0.0);
    }
    // One pass gives the bits of the two fused ops it replaces (the copy task's losses in README
    // did not move): values and both gradients compared as bytes, over enough elements that
    // every vector loop's body and tail run.
    const int64_t n = 3 * 4099;
    Tensor a = param({n}), b = param({n});
    auto run = [&](bool one_pass) {
        a.zero_grad();
        b.zero_grad();
        manual_seed(11);
        const Tensor out = one_pass ? nn::add_dropout(a, b, 0.3f, true) : a + nn::dropout(b, 0.3f, true);
        CHECK(std::string(out.op()) == (one_pass ? "add_dropout" : "add"));
        manual_seed(12);
        out.backward(Tensor::randn({n}));
        return std::vector<std::vector<float>>{out.to_vector(), a.grad().to_vector(), b.grad().to_vector()};
    };
    const auto fused = run(true), separate = run(false);
    for (size_t k = 0; k < fused.size(); k++) {
        CAPTURE(k);
        CHECK(std::memcmp(fused[k].data(), separate[k].data(), n * sizeof(float)) == 0);
    }
}

TEST_CASE("dropout: a dropped element is x * 0 in both paths, bit for bit: zero keeps x's sign, NaN stays NaN") {
    // The kernels multiply by the keep factor (autograd/kernels/dropout.h), as the plain path's
    // x * dropout_keep does: a negative x dropped gives -0, an inf or NaN gives NaN.
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const int64_t n = 4096;
    std::vector<float> xs(n);
    for (int64_t i = 0; i < n; i++) xs[i] = i % 4 == 0 ? -1.5f : i % 4 == 1 ? 2.0f : i % 4 == 2 ? -inf : nan;
    const Tensor x = Tensor::from_vector(xs, {n});
    const float p = 0.5f;
    manual_seed(31);
    const Tensor fused = nn::dropout(x, p, true);
    manual_seed(31);
    const Tensor keep = dropout_keep({n}, p);
    int64_t dropped = 0, differ = 0;
    for (int64_t i = 0; i < n; i++) {
        const float want = xs[i] * keep.data()[i], got = fused.data()[i];
        differ += std::memcmp(&want, &got, sizeof(float)) != 0;
        if (keep.data()[i] == 0.0f) {
            dropped++;
            if (i % 4 == 0) CHECK(std::signbit(got));   // -1.5 * 0 = -0
            if (i % 4 >= 2) CHECK(std::isnan(got));     // -inf * 0 and NaN * 0 are NaN
        }
    }
    CHECK(differ == 0);
    CHECK(dropped > n / 4);   // p = 0.5: about half
}

TEST_CASE("in_chunks_fetching_ahead (kernels/prefetch.h) hands out every element of [begin, end) once, in order") {
    // The prefetches it makes change nothing; what must hold is the chunks: Adam's update runs
    // over them. Ranges shorter than a chunk, a chunk and a bit, and long enough to prefetch.
    std::vector<float> a(1000, 1.0f);
    for (int64_t begin : {0, 5}) {
        for (int64_t n : {0, 1, 63, 64, 65, 128, 191, 192, 193, 700}) {
            std::vector<int64_t> seen, want;
            bool chunks_ok = true;   // each chunk non-empty and at most 64 long
            kernels::in_chunks_fetching_ahead(begin, begin + n, {a.data()}, {a.data()}, [&](int64_t c, int64_t c_end) {
                chunks_ok = chunks_ok && c < c_end && c_end - c <= 64;
                for (int64_t j = c; j < c_end; j++) seen.push_back(j);
            });
            for (int64_t i = 0; i < n; i++) want.push_back(begin + i);
            CAPTURE(begin);
            CAPTURE(n);
            CHECK(chunks_ok);
            CHECK(seen == want);
        }
    }
}

// ---- kernels/fast_math.h: the fused kernels' exp, tanh and sigmoid

TEST_CASE("exp_fast, tanh_fast, sigmoid_fast: within a few ulp of the double-precision functions everywhere; NaN stays NaN") {
    double worst_exp = 0, worst_tanh = 0, worst_sigmoid = 0;
    for (double x = -90.0; x <= 90.0; x += 3.7e-4) {   // about 490,000 points, every binade from 1e-4 up
        const float f = static_cast<float>(x);
        const double e = std::exp(double(f)), t = std::tanh(double(f)), sg = 1.0 / (1.0 + std::exp(-double(f)));
        if (f > -87.3f && f < 88.3f) worst_exp = std::max(worst_exp, std::fabs(kernels::exp_fast(f) - e) / e);
        if (t != 0.0) worst_tanh = std::max(worst_tanh, std::fabs(kernels::tanh_fast(f) - t) / std::fabs(t));
        if (sg > 1e-30) worst_sigmoid = std::max(worst_sigmoid, std::fabs(kernels::sigmoid_fast(f) - sg) / sg);
    }
    INFO("worst relative errors: exp " << worst_exp << ", tanh " << worst_tanh << ", sigmoid " << worst_sigmoid);
    CHECK(worst_exp < 1.2e-7);       // 2 ulp of a float (2^-23 = 1.19e-7 relative at most per ulp)
    CHECK(worst_tanh < 4e-7);
    CHECK(worst_sigmoid < 4e-7);
    // tiny arguments keep their digits (the expm1 series near 0, not 1 - e^-2x)
    for (float f : {1e-30f, -1e-12f, 3e-6f, 0.01f, -0.17f, 0.18f}) CHECK(kernels::tanh_fast(f) == doctest::Approx(std::tanh(double(f))).epsilon(4e-7));
    // saturation, no overflow, no NaN from large arguments; NaN passes through
    CHECK(kernels::tanh_fast(1e30f) == 1.0f);
    CHECK(kernels::tanh_fast(-1e30f) == -1.0f);
    CHECK(kernels::sigmoid_fast(-1e30f) >= 0.0f);
    CHECK(kernels::sigmoid_fast(1e30f) == 1.0f);
    CHECK(std::isfinite(kernels::exp_fast(1e30f)));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(std::isnan(kernels::exp_fast(nan)));
    CHECK(std::isnan(kernels::tanh_fast(nan)));
    CHECK(std::isnan(kernels::sigmoid_fast(nan)));
}

// ---- the additive attention's score (kernels/additive_score.h)

TEST_CASE("additive_score: fused equals plain, values and every gradient; gradcheck of the fused op") {
    // B 3, S 5, A 7: all different; k and q up to +-4, so some tanh saturate
    manual_seed(61);
    Tensor k = Tensor::uniform({3, 5, 7}, -4.0f, 4.0f).requires_grad_(), q = Tensor::uniform({3, 7}, -1.0f, 1.0f).requires_grad_();
    Tensor v = Tensor::uniform({7}, -1.0f, 1.0f).requires_grad_();
    const Tensor w = Tensor::randn({3, 5});
    auto run = [&](bool fused) {
        for (Tensor* t : {&k, &q, &v}) t->zero_grad();
        const Tensor e = fused ? autograd::fused::additive_score(k, q, v)
                               : matmul(tanh(k + unsqueeze(q, 1)), v.reshape({7, 1})).reshape({3, 5});   // nn::SoftAttention's plain form
        sum(e * w).backward();
        return std::vector<Tensor>{e.detach(), k.grad(), q.grad(), v.grad()};
    };
    const std::vector<Tensor> fused = run(true), plain = run(false);
    const char* names[] = {"value", "dk", "dq", "dv"};
    for (int i = 0; i < 4; i++) expect_close(fused[i], plain[i], 1e-5, 1e-6, names[i]);
    CHECK_GRAD([&](const std::vector<Tensor>&) { return autograd::fused::additive_score(k, q, v); }, k, q, v);
    check_backward_adds([&](const std::vector<Tensor>& x) { return autograd::fused::additive_score(x[0], x[1], x[2]); }, {k, q, v});
}
