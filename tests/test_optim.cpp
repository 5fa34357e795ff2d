// optim/: SGD, Adam, AdamW against numbers derived by hand from their formulas, the learning-rate
// schedules against their formulas, gradient clipping, a small MLP that must learn, checkpoint
// round trips that must be bit-exact, and the errors bad input must raise.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <numbers>

#include <unistd.h>

#include "autograd/autograd.h"
#include "nn/linear.h"
#include "optim/optim.h"

using namespace autograd;
using doctest::Approx;

namespace {

// Minimise L(p) = 0.5 * sum((p - target)^2) for `steps` steps, so that the gradient (computed by
// autograd) is g = p - target; without a target, g = p. Returns p after each step.
std::vector<std::vector<float>> run_quadratic(optim::Optimizer& opt, Tensor p, int steps, Tensor target = {}) {
    std::vector<std::vector<float>> after;
    for (int s = 0; s < steps; s++) {
        opt.zero_grad();
        const Tensor d = target.defined() ? p - target : p;
        Tensor loss = sum(d * d) * 0.5f;
        loss.backward();
        opt.step();
        after.push_back(p.to_vector());
    }
    return after;
}

void check_close(const std::vector<float>& got, const std::vector<double>& want, double rel = 1e-6) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); i++) {
        CAPTURE(i);
        CHECK(got[i] == Approx(want[i]).epsilon(rel));
    }
}

Tensor two_element_param() { return Tensor::from_vector({1.0f, -2.0f}, {2}).requires_grad_(); }

// A small MLP, in -> hidden -> out with tanh, built from nn::Linear.
struct MLP {
    nn::Linear l1, l2;
    MLP(int64_t in, int64_t hidden, int64_t out) : l1(in, hidden), l2(hidden, out) {}
    Tensor forward(const Tensor& x) const { return l2.forward(tanh(l1.forward(x))); }
    std::vector<Tensor> parameters() const {
        std::vector<Tensor> p = l1.parameters(), q = l2.parameters();
        p.insert(p.end(), q.begin(), q.end());
        return p;
    }
};

Tensor mse(const Tensor& pred, const Tensor& target) { return mean(pow(pred - target, 2.0f)); }

// under the temp dir, with the process id: two runs of the suite at once never share a file
std::string temp_path(const std::string& stem) {
    return (std::filesystem::temp_directory_path() / (stem + "_" + std::to_string(::getpid()) + ".safetensors")).string();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// SGD. p0 = [1, -2], g = p, lr = 0.1. Every rule below is linear in p, so p_t = c_t * p0 and the
// derivations track the scalar c (start c0 = 1, so g1 = 1):
//   plain:        c_t = c_{t-1} - 0.1 c_{t-1} = 0.9 c_{t-1}             -> 0.9, 0.81, 0.729
//   momentum 0.9: b1 = g1 = 1,             c1 = 1 - 0.1*1       = 0.9
//                 b2 = 0.9*1 + 0.9 = 1.8,  c2 = 0.9 - 0.1*1.8   = 0.72
//                 b3 = 0.9*1.8 + 0.72 = 2.34, c3 = 0.72 - 0.234 = 0.486
//   nesterov 0.9: b1 = 1,     step g + 0.9 b = 1.9,               c1 = 1 - 0.19 = 0.81
//                 b2 = 0.9 + 0.81 = 1.71, step 0.81 + 1.539 = 2.349, c2 = 0.81 - 0.2349 = 0.5751
//                 b3 = 1.539 + 0.5751 = 2.1141, step 0.5751 + 1.90269 = 2.47779, c3 = 0.327321
//   weight decay 0.5: g' = g + 0.5 p = 1.5 c, c_t = c_{t-1} (1 - 0.15) -> 0.85, 0.7225, 0.614125
//   weight decay 0.5 + momentum 0.9: g'1 = 1.5, b1 = 1.5, c1 = 1 - 0.15 = 0.85
//                 g'2 = 1.275, b2 = 1.35 + 1.275 = 2.625, c2 = 0.85 - 0.2625 = 0.5875
//                 g'3 = 0.88125, b3 = 2.3625 + 0.88125 = 3.24375, c3 = 0.5875 - 0.324375 = 0.263125
TEST_CASE("optim SGD: first three steps match the hand-derived values") {
    struct Case { const char* name; optim::SGDOptions opt; double c[3]; };
    const Case cases[] = {
        {"plain", {.lr = 0.1f}, {0.9, 0.81, 0.729}},
        {"momentum", {.lr = 0.1f, .momentum = 0.9f}, {0.9, 0.72, 0.486}},
        {"nesterov", {.lr = 0.1f, .momentum = 0.9f, .nesterov = true}, {0.81, 0.5751, 0.327321}},
        {"weight decay", {.lr = 0.1f, .weight_decay = 0.5f}, {0.85, 0.7225, 0.614125}},
        {"weight decay + momentum", {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.5f}, {0.85, 0.5875, 0.263125}},
    };
    for (const Case& c : cases) {
        CAPTURE(std::string(c.name));
        Tensor p = two_element_param();
        optim::SGD opt({p}, c.opt);
        const auto after = run_quadratic(opt, p, 3);
        for (int t = 0; t < 3; t++) check_close(after[t], {c.c[t] * 1.0, c.c[t] * -2.0});
        CHECK(opt.step_count() == 3);
    }
}

// ---------------------------------------------------------------------------------------------
// Adam. p0 = [1, -2], g = p, lr = 0.1, the paper's betas (0.9, 0.98), eps = 1e-9. Element 0:
//   t=1: g1 = 1.     m1 = (1-b1) g1 = 0.1          v1 = (1-b2) g1^2 = 0.02
//        m_hat = m1 / (1-0.9) = 1   v_hat = v1 / (1-0.98) = 1   p1 = 1 - 0.1 * 1/(1 + eps) = 0.9
//        (the first step is always lr * sign(g): bias correction makes m_hat = g, v_hat = g^2)
//   t=2: g2 = 0.9.   m2 = 0.9*0.1 + 0.1*0.9 = 0.18  v2 = 0.98*0.02 + 0.02*0.81 = 0.0358
//        m_hat = 0.18 / (1-0.81) = 0.947368421      v_hat = 0.0358 / (1-0.9604) = 0.904040404
//        p2 = 0.9 - 0.1 * 0.947368421 / 0.950810395 = 0.800362004
//   t=3: g3 = 0.800362004  m3 = 0.2420362   v3 = 0.0478955868
//        m_hat = m3 / (1-0.729) = 0.893122511        v_hat = v3 / (1-0.941192) = 0.814439987
//        p3 = 0.800362004 - 0.1 * 0.893122511 / 0.902463288 = 0.701397036
// Element 1 the same way from g1 = -2: p = -1.9, -1.80014192, -1.70053193.
// (Intermediate values evaluated in double precision with a few lines of Python.)
TEST_CASE("optim Adam: first three steps with the paper's betas match the hand-derived values") {
    for (bool fused : {true, false}) {   // the fused update, and Adam::step's plain loop
        CAPTURE(fused);
        FusedKernelsGuard path(fused);
        Tensor p = two_element_param();
        optim::Adam opt({p}, {.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f});
        const auto after = run_quadratic(opt, p, 3);
        check_close(after[0], {0.9, -1.9});
        check_close(after[1], {0.800362004, -1.80014192});
        check_close(after[2], {0.701397036, -1.70053193});
    }
}

// The threaded update of a large parameter: "threaded Adam and SGD updates" in test_threaded_kernels.cpp.

// Weight decay lambda = 0.5, lr = 0.1, default betas (0.9, 0.999), eps = 1e-8, from p0 = [1, -2],
// now with L = 0.5 * sum((p - [2, 1])^2), so g = p - [2, 1] is not proportional to p (Adam is blind
// to a gradient's scale, so with g = p an L2 term 0.5 p would change nothing). Element 0:
// Adam (L2):  g' = g + 0.5 p.
//   t=1: g' = -1 + 0.5 = -0.5. The first step is lr * sign(g'): p1 = 1.1, the same as without decay.
//   t=2: g' = (1.1 - 2) + 0.55 = -0.35   m = 0.9*(-0.05) + 0.1*(-0.35) = -0.08
//        v = 0.999*0.00025 + 0.001*0.1225 = 0.00037225
//        m_hat = -0.08 / 0.19 = -0.421052632    v_hat = 0.00037225 / 0.001999 = 0.18621811
//        p2 = 1.1 + 0.1 * 0.421052632 / 0.431529964 = 1.19757205   (no decay: 1.19958777)
//   t=3: p3 = 1.28934611.   Element 1 from g' = -3 - 1 = -4: -1.9, -1.80011785, -1.70043862.
// AdamW: p = p * (1 - lr*lambda) = 0.95 p first, then the Adam step on the plain gradient g:
//   t=1: g = -1.  p1 = 0.95 * 1 + 0.1 = 1.05
//   t=2: g = 1.05 - 2 = -0.95   m = 0.9*(-0.1) + 0.1*(-0.95) = -0.185
//        v = 0.999*0.001 + 0.001*0.9025 = 0.0019015
//        m_hat = -0.973684211   v_hat = 0.951225614
//        p2 = 0.95 * 1.05 + 0.1 * 0.973684211 / 0.975307958 = 1.09733351
//   t=3: p3 = 1.14202467.   Element 1 from g = -3: -1.8, -1.61023906, -1.43036961.
//   (Adding the L2 term as well would give p2 = 1.09675155: the two decays are not the same thing.)
TEST_CASE("optim AdamW decays the weights directly, Adam adds L2 to the gradient") {
    const Tensor target = Tensor::from_vector({2.0f, 1.0f}, {2});
    SUBCASE("Adam with L2 weight decay") {
        for (bool fused : {true, false}) {   // the fused update, and Adam::step's plain loop
            CAPTURE(fused);
            FusedKernelsGuard path(fused);
            Tensor p = two_element_param();
            optim::Adam opt({p}, {.lr = 0.1f, .weight_decay = 0.5f});
            const auto after = run_quadratic(opt, p, 3, target);
            check_close(after[0], {1.1, -1.9});
            check_close(after[1], {1.19757205, -1.80011785});
            check_close(after[2], {1.28934611, -1.70043862});
        }
    }
    SUBCASE("AdamW") {
        for (bool fused : {true, false}) {
            CAPTURE(fused);
            FusedKernelsGuard path(fused);
            Tensor p = two_element_param();
            optim::AdamW opt({p}, {.lr = 0.1f, .weight_decay = 0.5f});
            const auto after = run_quadratic(opt, p, 3, target);
            check_close(after[0], {1.05, -1.8});
            check_close(after[1], {1.09733351, -1.61023906});
            check_close(after[2], {1.14202467, -1.43036961});
        }
    }
    SUBCASE("AdamW's default weight decay is PyTorch's 0.01, also with other options given") {
        Tensor p = two_element_param();
        CHECK(optim::AdamW({p}).options().weight_decay == 0.01f);
        CHECK(optim::AdamW({p}, {.lr = 3e-4f}).options().weight_decay == 0.01f);
        CHECK(optim::Adam({p}).options().weight_decay == 0.0f);
        CHECK(optim::AdamW({p}).name() == "AdamW");
    }
}

// Adam::step's plain loop (fused kernels off) is the reference of the fused update
// (autograd::fused::adam_update: the same loop on the threads, memory fetched ahead): the same
// bits, for Adam and AdamW, over parameters of sizes that are not multiples of the chunks it
// fetches ahead, one of them above the threshold for a thread team, on 1 and 2 threads.
TEST_CASE("optim Adam: the fused update gives the plain loop's bits") {
    const int64_t sizes[] = {1, 63, 200, 40009};   // 40009 > 2^15: a team splits it
    auto train = [&](bool fused, bool decoupled, int threads) {
        autograd::FusedKernelsGuard path(fused);
        const int before = autograd::num_threads();
        autograd::set_num_threads(threads);
        manual_seed(17);
        std::vector<Tensor> ps;
        for (int64_t n : sizes) ps.push_back(Tensor::randn({n}).requires_grad_());
        const optim::AdamOptions o{.lr = 0.05f, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-8f, .weight_decay = 0.1f};
        std::unique_ptr<optim::Optimizer> opt = decoupled ? std::unique_ptr<optim::Optimizer>(new optim::AdamW(ps, {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay}))
                                                          : std::unique_ptr<optim::Optimizer>(new optim::Adam(ps, o));
        for (int s = 0; s < 4; s++) {
            opt->zero_grad();
            for (Tensor& p : ps) p.backward((p * p - 0.5f * p).detach());   // g = p^2 - p / 2
            opt->step();
        }
        autograd::set_num_threads(before);
        std::vector<float> out;
        for (const Tensor& p : ps) out.insert(out.end(), p.data(), p.data() + p.numel());
        return out;
    };
    for (bool decoupled : {false, true}) {
        CAPTURE(decoupled);
        const std::vector<float> plain = train(false, decoupled, 1);
        CHECK(plain != train(false, !decoupled, 1));   // the weight decay's two forms differ
        for (int threads : {1, 2}) {
            CAPTURE(threads);
            const std::vector<float> fused = train(true, decoupled, threads);
            REQUIRE(fused.size() == plain.size());
            CHECK(std::memcmp(fused.data(), plain.data(), plain.size() * sizeof(float)) == 0);
        }
    }
}

// decay_matrices_only with each form of weight decay, Adam's L2 and AdamW's decoupled one: the
// fused update and the plain loop give the same bits; the vectors (a bias, a gain) move exactly as
// with no weight decay at all, and every matrix (2 and 3 dims) differs from that.
TEST_CASE("optim Adam with L2 and AdamW with decoupled decay, decay_matrices_only on and off: fused = plain, and only the matrices decay") {
    const Shape shapes[] = {{7}, {5, 3}, {1}, {2, 3, 4}, {11}};   // vectors and matrices interleaved
    auto train = [&](bool fused, bool decoupled, float weight_decay, bool matrices_only) {
        autograd::FusedKernelsGuard path(fused);
        manual_seed(18);
        std::vector<Tensor> ps;
        for (const Shape& s : shapes) ps.push_back(Tensor::randn(s).requires_grad_());
        const optim::AdamOptions o{.lr = 0.05f, .weight_decay = weight_decay, .decay_matrices_only = matrices_only};
        std::unique_ptr<optim::Optimizer> opt;
        if (decoupled) opt = std::make_unique<optim::AdamW>(ps, optim::AdamWOptions{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, matrices_only});
        else opt = std::make_unique<optim::Adam>(ps, o);
        for (int s = 0; s < 3; s++) {
            opt->zero_grad();
            for (Tensor& p : ps) p.backward((p * p - 0.5f * p).detach());   // g = p^2 - p / 2
            opt->step();
        }
        std::vector<std::vector<float>> out;
        for (const Tensor& p : ps) out.push_back(p.to_vector());
        return out;
    };
    for (const bool decoupled : {false, true}) {
        const std::vector<std::vector<float>> undecayed = train(false, decoupled, 0.0f, false);
        for (const bool matrices_only : {false, true}) {
            CAPTURE(decoupled);
            CAPTURE(matrices_only);
            const std::vector<std::vector<float>> plain = train(false, decoupled, 0.5f, matrices_only);
            CHECK(train(true, decoupled, 0.5f, matrices_only) == plain);   // bit for bit
            for (size_t i = 0; i < plain.size(); i++) {
                CAPTURE(i);
                const bool decays = !matrices_only || shapes[i].size() >= 2;
                CHECK((plain[i] != undecayed[i]) == decays);
            }
        }
    }
}

TEST_CASE("optim: step skips parameters without a gradient; zero_grad clears gradients") {
    Tensor used = Tensor::from_vector({1.0f}, {1}).requires_grad_();
    Tensor unused = Tensor::from_vector({5.0f}, {1}).requires_grad_();
    optim::Adam opt({used, unused}, {.lr = 0.1f});
    for (int s = 0; s < 5; s++) {
        opt.zero_grad();
        sum(used * used).backward();
        opt.step();
    }
    CHECK(unused.to_vector()[0] == 5.0f);      // untouched, no crash
    CHECK(opt.step_count() == 5);
    // Its first gradient arrives at step 6: for this parameter that is Adam's t = 1, so the bias
    // correction makes the move lr * sign(g) = 0.1 (corrected with the global t = 6 it would be 0.052)
    opt.zero_grad();
    CHECK_FALSE(used.has_grad());
    sum(unused * unused).backward();
    opt.step();
    CHECK(unused.to_vector()[0] == Approx(4.9).epsilon(1e-6));
}

// ---------------------------------------------------------------------------------------------
// Schedules
TEST_CASE("optim NoamSchedule follows Vaswani et al. eq. 3") {
    Tensor p = two_element_param();
    optim::Adam opt({p}, {.lr = 1.0f, .beta2 = 0.98f, .eps = 1e-9f});
    optim::NoamSchedule sched(opt, /*d_model=*/512, /*warmup=*/4000);
    auto formula = [](double s) { return std::pow(512.0, -0.5) * std::min(std::pow(s, -0.5), s * std::pow(4000.0, -1.5)); };
    for (int64_t s : {1, 2, 100, 1000, 3999, 4000, 4001, 10000, 100000}) {
        CAPTURE(s);
        CHECK(sched.lr_at(s) == Approx(formula(static_cast<double>(s))).epsilon(1e-6));
    }
    // the known values: peak 512^-0.5 * 4000^-0.5 = 6.98771e-4 at step 4000; 1.74693e-7 at step 1
    CHECK(sched.lr_at(4000) == Approx(6.98771243e-4).epsilon(1e-6));
    CHECK(sched.lr_at(1) == Approx(1.74692811e-7).epsilon(1e-6));
    // linear during warmup, 1/sqrt(step) after: half the peak at steps 2000 and 16000
    CHECK(sched.lr_at(2000) == Approx(sched.lr_at(4000) / 2).epsilon(1e-6));
    CHECK(sched.lr_at(16000) == Approx(sched.lr_at(4000) / 2).epsilon(1e-6));
    CHECK(sched.lr_at(3999) < sched.lr_at(4000));
    CHECK(sched.lr_at(4001) < sched.lr_at(4000));
    // factor scales everything
    optim::NoamSchedule doubled(opt, 512, 4000, 2.0f);
    CHECK(doubled.lr_at(123) == Approx(2 * sched.lr_at(123)).epsilon(1e-6));
    // step() numbers steps from 1 and sets the optimizer's lr
    CHECK(sched.current_step() == 0);
    CHECK(sched.step() == sched.lr_at(1));
    CHECK(opt.lr() == sched.lr_at(1));
    CHECK(sched.step() == sched.lr_at(2));
    CHECK(sched.current_step() == 2);
    sched.set_step(3999);                      // resuming: the next step is 4000
    CHECK(sched.step() == sched.lr_at(4000));
    CHECK(opt.lr() == sched.lr_at(4000));
}

TEST_CASE("optim WarmupCosineSchedule: linear warmup, cosine decay, then min_lr") {
    Tensor p = two_element_param();
    optim::SGD opt({p});
    // peak 1e-3 at step 10, cosine down to 1e-5 at step 110
    optim::WarmupCosineSchedule sched(opt, 1e-3f, /*warmup=*/10, /*total_steps=*/110, /*min_lr=*/1e-5f);
    CHECK(sched.lr_at(1) == Approx(1e-4).epsilon(1e-6));
    CHECK(sched.lr_at(5) == Approx(5e-4).epsilon(1e-6));
    CHECK(sched.lr_at(10) == Approx(1e-3).epsilon(1e-6));
    // a quarter of the way: min + (peak - min) (1 + cos(pi/4)) / 2; half way: the mean of peak and min
    CHECK(sched.lr_at(35) == Approx(1e-5 + (1e-3 - 1e-5) * (1 + std::cos(std::numbers::pi / 4)) / 2).epsilon(1e-6));
    CHECK(sched.lr_at(60) == Approx((1e-3 + 1e-5) / 2).epsilon(1e-6));
    CHECK(sched.lr_at(110) == Approx(1e-5).epsilon(1e-6));
    CHECK(sched.lr_at(111) == 1e-5f);
    CHECK(sched.lr_at(100000) == 1e-5f);
    for (int s = 1; s <= 3; s++) CHECK(sched.step() == sched.lr_at(s));
    CHECK(opt.lr() == sched.lr_at(3));
}

// ---------------------------------------------------------------------------------------------
// Gradient clipping. Gradients [3, 0] and [4] have global norm sqrt(9 + 0 + 16) = 5.
TEST_CASE("optim clip_grad_norm returns the global norm and rescales only above max_norm") {
    Tensor a = Tensor::zeros({2}).requires_grad_();
    Tensor b = Tensor::zeros({1}).requires_grad_();
    Tensor no_grad = Tensor::zeros({3}).requires_grad_();      // never gets a gradient: skipped
    auto set_grads = [&](float ga0, float b0) {
        a.zero_grad();
        b.zero_grad();
        sum(a * Tensor::from_vector({ga0, 0.0f}, {2})).backward();   // d/da = [ga0, 0]
        sum(b * b0).backward();                                       // d/db = [b0]
    };
    SUBCASE("above max_norm: scaled by max_norm / (norm + 1e-6)") {
        set_grads(3.0f, 4.0f);
        CHECK(optim::clip_grad_norm({a, b, no_grad}, 1.0f) == Approx(5.0));
        const double scale = 1.0 / (5.0 + 1e-6);
        CHECK(a.grad().to_vector()[0] == Approx(3.0 * scale).epsilon(1e-6));
        CHECK(a.grad().to_vector()[1] == 0.0f);
        CHECK(b.grad().to_vector()[0] == Approx(4.0 * scale).epsilon(1e-6));
        CHECK_FALSE(no_grad.has_grad());
        // the new norm is max_norm
        CHECK(optim::clip_grad_norm({a, b}, 100.0f) == Approx(1.0).epsilon(1e-5));
    }
    SUBCASE("below max_norm: a no-op") {
        set_grads(3.0f, 4.0f);
        CHECK(optim::clip_grad_norm({a, b}, 10.0f) == Approx(5.0));
        CHECK(a.grad().to_vector() == std::vector<float>{3.0f, 0.0f});
        CHECK(b.grad().to_vector() == std::vector<float>{4.0f});
    }
    SUBCASE("a non-finite norm is returned and the gradients are left alone") {
        set_grads(std::numeric_limits<float>::infinity(), 4.0f);
        CHECK(std::isinf(optim::clip_grad_norm({a, b}, 1.0f)));
        CHECK(b.grad().to_vector() == std::vector<float>{4.0f});
    }
}

// ---------------------------------------------------------------------------------------------
// End to end: fit y = sin(x) on 64 points of [-3, 3] with a 1-32-1 tanh MLP and Adam.
// Predicting the mean (0) would give MSE = mean(sin^2) = 0.5 - sin(6)/12 ~ 0.52; the threshold
// 0.01 asks the net to explain more than 98% of the variance. It reaches 0.0008 in 400 steps with
// -march=native and 0.0006 with x86-64-v2 or x86-64 builds (the starting loss is ~0.15): a margin
// of 12x. An optimizer that does not descend stays far above.
TEST_CASE("optim Adam trains a small MLP to fit sin(x)") {
    manual_seed(42);
    const int N = 64;
    std::vector<float> xs(N), ys(N);
    for (int i = 0; i < N; i++) {
        xs[i] = -3.0f + 6.0f * static_cast<float>(i) / (N - 1);
        ys[i] = std::sin(xs[i]);
    }
    const Tensor x = Tensor::from_vector(xs, {N, 1});   // (N, 1)
    const Tensor y = Tensor::from_vector(ys, {N, 1});   // (N, 1)
    MLP net(1, 32, 1);
    optim::Adam opt(net.parameters(), {.lr = 0.02f});
    float first = 0, last = 0;
    for (int step = 0; step < 400; step++) {
        Tensor loss = mse(net.forward(x), y);
        if (step == 0) first = loss.item();
        last = loss.item();
        opt.zero_grad();
        loss.backward();
        opt.step();
    }
    const float final_loss = mse(net.forward(x), y).item();
    INFO("first loss " << first << ", last " << last << ", final " << final_loss);
    CHECK(final_loss < 0.01f);
}

// ---------------------------------------------------------------------------------------------
// Checkpointing: stopping after 3 steps and resuming from the saved state must give bit-for-bit
// the same parameters as never stopping.
TEST_CASE("optim state round trip: save, resume, and continue bit-exactly") {
    using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
    struct Maker { const char* name; Make make; };
    const Maker makers[] = {
        {"adam", [](std::vector<Tensor> p) { return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions{.lr = 0.01f, .beta2 = 0.98f}); }},
        {"adamw", [](std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions{.lr = 0.01f, .weight_decay = 0.1f}); }},
        {"sgd", [](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions{.lr = 0.05f, .momentum = 0.9f, .nesterov = true}); }},
    };
    manual_seed(7);
    const Tensor x = Tensor::randn({8, 3});   // (8, 3)
    const Tensor y = Tensor::randn({8, 2});   // (8, 2)
    for (const Maker& m : makers) {
        CAPTURE(std::string(m.name));
        MLP net(3, 5, 2);
        auto train = [&](optim::Optimizer& opt, int steps) {
            for (int s = 0; s < steps; s++) {
                opt.zero_grad();
                mse(net.forward(x), y).backward();
                opt.step();
            }
        };
        auto snapshot = [&] {
            std::vector<std::vector<float>> v;
            for (const Tensor& p : net.parameters()) v.push_back(p.to_vector());
            return v;
        };
        const std::string path = temp_path(std::string("test_optim_roundtrip_") + m.name);

        auto opt = m.make(net.parameters());
        train(*opt, 3);
        optim::save_optimizer(*opt, path, {{"note", "three steps"}});
        const auto saved_params = snapshot();
        train(*opt, 3);
        const auto a = snapshot();

        // restore the parameters, resume a fresh optimizer from the file
        std::vector<Tensor> params = net.parameters();
        for (size_t i = 0; i < params.size(); i++) std::copy(saved_params[i].begin(), saved_params[i].end(), params[i].data());
        auto resumed = m.make(net.parameters());
        optim::load_optimizer(*resumed, path);
        CHECK(resumed->step_count() == 3);
        CHECK(resumed->lr() == opt->lr());
        train(*resumed, 3);
        const auto b = snapshot();
        CHECK(a == b);                          // bitwise: std::vector<float> ==
        CHECK(resumed->step_count() == 6);

        // the file holds the documented records and metadata
        const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(path);
        CHECK(f.metadata.at("note") == "three steps");
        CHECK(f.metadata.at("optim.type") == resumed->name());
        const std::string buf = std::string(m.name) == "sgd" ? "sgd.momentum_buffer.0" : std::string(m.name) + ".m.0";
        REQUIRE(f.find(buf) != nullptr);
        CHECK(f.find(buf)->shape == net.l1.weight.shape());
        CHECK(f.find("optim.step_count") != nullptr);
        std::filesystem::remove(path);
    }
}

TEST_CASE("optim load_state_records rejects mismatched state with a clear message and changes nothing") {
    manual_seed(3);
    MLP net(3, 4, 2);
    optim::Adam opt(net.parameters(), {.lr = 0.01f});
    const Tensor x = Tensor::randn({5, 3});
    const Tensor y = Tensor::randn({5, 2});
    opt.zero_grad();
    mse(net.forward(x), y).backward();
    opt.step();
    const autograd::io::SafetensorsFile good{optim::state_metadata(opt), optim::state_records(opt)};

    // the target: a different optimizer that has taken one step; any failed load must leave it as it was
    MLP other(3, 4, 2);
    optim::Adam target(other.parameters(), {.lr = 0.5f});
    mse(other.forward(x), y).backward();
    target.step();
    const auto before = optim::state_records(target);
    auto unchanged = [&] {
        const auto now = optim::state_records(target);
        REQUIRE(now.size() == before.size());
        for (size_t i = 0; i < now.size(); i++) CHECK(now[i].bytes == before[i].bytes);
        CHECK(target.lr() == 0.5f);
    };

    SUBCASE("a missing buffer") {
        autograd::io::SafetensorsFile f = good;
        std::erase_if(f.tensors, [](const autograd::io::TensorRecord& r) { return r.name == "adam.v.1"; });
        CHECK_THROWS_WITH_AS(optim::load_state_records(target, f), doctest::Contains("missing 'adam.v.1'"), std::runtime_error);
        unchanged();
    }
    SUBCASE("mismatched shapes") {
        MLP wide(4, 3, 2);                                // l1.weight (3, 4) instead of (4, 3)
        optim::Adam mismatched(wide.parameters());
        CHECK_THROWS_WITH_AS(optim::load_state_records(mismatched, good),
                             doctest::Contains("'adam.m.0' is F32 (4, 3), expected F32 (3, 4)"), std::runtime_error);
    }
    SUBCASE("a different number of parameters") {
        optim::Adam fewer({other.l1.weight, other.l1.bias});
        CHECK_THROWS_WITH_AS(optim::load_state_records(fewer, good), doctest::Contains("the state is for 4 parameters, this optimizer has 2"),
                             std::runtime_error);
    }
    SUBCASE("an unexpected record under the optimizer's prefix") {
        autograd::io::SafetensorsFile f = good;
        f.tensors.push_back(autograd::io::f32_record("adam.m.9", {1}, std::vector<float>{0}.data()));
        f.tensors.push_back(autograd::io::f32_record("model.weight", {1}, std::vector<float>{0}.data()));   // not ours: ignored
        CHECK_THROWS_WITH_AS(optim::load_state_records(target, f), doctest::Contains("unexpected 'adam.m.9'"), std::runtime_error);
        try {
            optim::load_state_records(target, f);
        } catch (const std::runtime_error& e) {
            CHECK(std::string(e.what()).find("model.weight") == std::string::npos);
        }
        unchanged();
    }
    SUBCASE("state of another optimizer type") {
        optim::AdamW adamw(other.parameters());
        CHECK_THROWS_WITH_AS(optim::load_state_records(adamw, good), doctest::Contains("saved by Adam, this optimizer is AdamW"),
                             std::runtime_error);
        autograd::io::SafetensorsFile no_type = good;
        no_type.metadata.clear();
        CHECK_THROWS_WITH_AS(optim::load_state_records(target, no_type), doctest::Contains("not an optimizer state"), std::runtime_error);
        unchanged();
    }
    SUBCASE("through a file: the message names the path") {
        const std::string path = temp_path("test_optim_bad_state");
        optim::SGD sgd(other.parameters(), {.momentum = 0.9f});
        optim::save_optimizer(sgd, path);
        CHECK_THROWS_WITH_AS(optim::load_optimizer(target, path), doctest::Contains(path.c_str()), std::runtime_error);
        unchanged();
        std::filesystem::remove(path);
    }
    SUBCASE("records of the right shape with impossible values") {
        autograd::io::SafetensorsFile f = good;
        const int64_t minus_one = -1;
        std::erase_if(f.tensors, [](const autograd::io::TensorRecord& r) { return r.name == "optim.step_count"; });
        f.tensors.push_back(autograd::io::i64_record("optim.step_count", {}, &minus_one));
        CHECK_THROWS_WITH_AS(optim::load_state_records(target, f), doctest::Contains("negative step_count -1"), std::runtime_error);
        unchanged();
        const int64_t too_many[4] = {1, 1, 2, 1};                 // 2 updates of a parameter in 1 step
        std::erase_if(f.tensors, [](const autograd::io::TensorRecord& r) { return r.name.rfind("optim.", 0) == 0; });
        const int64_t one = 1;
        const float lr = 0.01f;
        f.tensors.push_back(autograd::io::i64_record("optim.step_count", {}, &one));
        f.tensors.push_back(autograd::io::f32_record("optim.lr", {}, &lr));
        f.tensors.push_back(autograd::io::i64_record("optim.param_steps", {4}, too_many));
        CHECK_THROWS_WITH_AS(optim::load_state_records(target, f), doctest::Contains("param_steps[2] = 2 is outside [0, step_count = 1]"),
                             std::runtime_error);
        unchanged();
    }
    SUBCASE("several problems are reported together") {
        autograd::io::SafetensorsFile f = good;
        std::erase_if(f.tensors, [](const autograd::io::TensorRecord& r) { return r.name == "adam.v.1" || r.name == "optim.lr"; });
        CHECK_THROWS_WITH_AS(optim::load_state_records(target, f),
                             "load_state_records (Adam): the state does not fit this optimizer (2 problems):\n"
                             "  missing 'optim.lr'\n  missing 'adam.v.1'",
                             std::runtime_error);
        unchanged();
    }
    SUBCASE("a good state loads") {
        optim::load_state_records(target, good);
        CHECK(target.lr() == 0.01f);
        CHECK(target.step_count() == 1);
    }
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("optim: bad arguments throw std::invalid_argument with clear messages") {
    Tensor p = two_element_param();
    using E = std::invalid_argument;
    using doctest::Contains;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_WITH_AS(optim::SGD({}, {}), Contains("empty parameter list"), E);
    CHECK_THROWS_WITH_AS(optim::SGD({p}, {.lr = -0.1f}), Contains("learning rate must be finite and >= 0"), E);
    CHECK_THROWS_WITH_AS(optim::Adam({p}, {.lr = nan}), Contains("learning rate"), E);
    CHECK_THROWS_WITH_AS(optim::SGD({Tensor::ones({2})}), Contains("does not require grad"), E);
    CHECK_THROWS_WITH_AS(optim::SGD({p * 2.0f}), Contains("only leaf tensors"), E);
    CHECK_THROWS_WITH_AS(optim::SGD({p, p}), Contains("appears twice"), E);
    CHECK_THROWS_WITH_AS(optim::SGD({p}, {.momentum = -0.5f}), Contains("momentum must be"), E);
    CHECK_THROWS_WITH_AS(optim::SGD({p}, {.weight_decay = -1.0f}), Contains("weight_decay must be"), E);
    CHECK_THROWS_WITH_AS(optim::SGD({p}, {.nesterov = true}), Contains("nesterov = true needs momentum > 0"), E);
    CHECK_THROWS_WITH_AS(optim::Adam({p}, {.beta1 = 1.0f}), Contains("beta1 must be in [0, 1)"), E);
    CHECK_THROWS_WITH_AS(optim::Adam({p}, {.beta2 = -0.1f}), Contains("beta2 must be in [0, 1)"), E);
    CHECK_THROWS_WITH_AS(optim::Adam({p}, {.beta2 = nan}), Contains("beta2 must be in [0, 1)"), E);
    CHECK_THROWS_WITH_AS(optim::Adam({p}, {.eps = -1e-8f}), Contains("eps must be"), E);
    CHECK_THROWS_WITH_AS(optim::AdamW({p}, {.weight_decay = -0.01f}), Contains("AdamW: weight_decay must be"), E);

    optim::SGD opt({p});
    CHECK_THROWS_WITH_AS(opt.set_lr(-1.0f), Contains("learning rate"), E);
    CHECK(opt.lr() == 0.01f);
    CHECK_THROWS_WITH_AS(optim::save_optimizer(opt, temp_path("never_written"), {{"optim.type", "x"}}), Contains("reserved"), E);
    optim::SGD heavy({p}, {.momentum = 0.9f});                      // one buffer ("momentum_buffer") of 2 floats
    CHECK(heavy.state_buffer(0, 0) == nullptr);                     // before the first step: not allocated, all 0
    CHECK_THROWS_WITH_AS(heavy.set_state(1, 0.1f, {1}, {{{0.0f}}}), Contains("buffer 'momentum_buffer' of parameter 0 has 1 floats, expected 2"), E);
    CHECK_THROWS_WITH_AS(heavy.set_state(1, 0.1f, {1, 1}, {{{0.0f, 0.0f}}}), Contains("2 param_steps for 1 parameters"), E);
    CHECK_THROWS_WITH_AS(heavy.set_state(1, nan, {1}, {{{0.0f, 0.0f}}}), Contains("not a valid learning rate"), E);
    CHECK(heavy.step_count() == 0);
    heavy.set_state(3, 0.1f, {2}, {{{0.5f, -0.5f}}});
    CHECK(heavy.step_count() == 3);
    CHECK(heavy.state_buffer(0, 0)[1] == -0.5f);

    CHECK_THROWS_WITH_AS(optim::NoamSchedule(opt, 0, 4000), Contains("d_model must be > 0"), E);
    CHECK_THROWS_WITH_AS(optim::NoamSchedule(opt, 512, 0), Contains("warmup must be > 0"), E);
    CHECK_THROWS_WITH_AS(optim::NoamSchedule(opt, 512, 10).lr_at(0), Contains("steps are numbered from 1"), E);
    CHECK_THROWS_WITH_AS(optim::WarmupCosineSchedule(opt, 1e-3f, 10, 100, 1e-2f), Contains("min_lr must be in [0, peak_lr]"), E);
    CHECK_THROWS_WITH_AS(optim::WarmupCosineSchedule(opt, 1e-3f, 200, 100), Contains("warmup <= total_steps"), E);
    CHECK_THROWS_WITH_AS(optim::WarmupCosineSchedule(opt, -1.0f, 10, 100), Contains("peak_lr must be"), E);
    CHECK_THROWS_WITH_AS(optim::clip_grad_norm({p}, -1.0f), Contains("max_norm must be >= 0"), E);
}
