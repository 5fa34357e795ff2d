// The threaded path of every kernel that splits its loops over OpenMP threads. Each kernel runs
// on inputs just above its threshold (autograd/kernels/parallel.h), forward and backward:
//   - on 1 and on 2 threads, which must give the same bytes (each thread writes its own
//     elements, and every sum has one fixed order);
//   - with 2 threads, the kernel must have opened exactly its number of threaded regions;
//   - its values and gradients must equal a plain reference: a serial loop, or the layer's plain
//     form, the same computation composed from primitive ops (nn/, under FusedKernelsGuard(false)).
// Every dimension a kernel splits among threads or sums over is an odd prime (or a product of
// them, as B * T rows), and no two are equal: 2 threads then get shares that differ by one, so a
// split that drops its remainder or is off by one at a bound leaves an element unwritten, which
// sizes that halve evenly would hide. The sizes come from the thresholds' names (prime_above),
// so they follow a moved threshold; the region counts say the 2-thread run really was threaded.
// Built without OpenMP (make OPENMP=0) every run is serial: the comparisons with the references
// still run, the region counts and the test that needs a real team of 2 are skipped.
// The generic ops of autograd/ops_*.cpp are the lesson's plain loops: they open no region at
// all, on any number of threads, at sizes where a kernel would (their tests below say so).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>

#include "autograd/autograd.h"
#include "autograd/kernels/attention.h"
#include "autograd/kernels/cross_entropy.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/gemm_driver.h"
#include "autograd/kernels/layer_norm.h"
#include "autograd/kernels/linear.h"
#include "autograd/kernels/parallel.h"
#include "autograd/kernels/softmax_rows.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tests/compare.h"
#include "tests/thread_count.h"
#include "tests/hooks.h"

using namespace autograd;
using namespace autograd::kernels;

namespace {

// The smallest prime above n: a size just over a threshold that 2 threads cannot halve.
constexpr int64_t prime_above(int64_t n) {
    for (int64_t p = n + 1;; p++) {
        bool prime = p > 1;
        for (int64_t d = 2; d * d <= p && prime; d++) prime = p % d != 0;
        if (prime) return p;
    }
}
static_assert(prime_above(1) == 2 && prime_above(7) == 11 && prime_above(kElementwiseParallelMin) == 65537);

// What one forward + backward produced (`step` returns outputs and gradients), and how many
// threaded regions it opened.
struct Run {
    std::vector<Tensor> tensors;
    int64_t regions;
};

Run run_on(int threads, const std::function<std::vector<Tensor>()>& step) {
    ThreadCount tc(threads);
    const int64_t before = kernels::test_hooks::threaded_regions();
    std::vector<Tensor> out = step();
    return {out, kernels::test_hooks::threaded_regions() - before};
}

// Runs `step` on 1 thread and on 2: the same bytes both times, and `regions` threaded regions
// opened on 2 threads. Returns the 2-thread results, for the comparison with a reference.
std::vector<Tensor> same_on_1_and_2_threads(const std::function<std::vector<Tensor>()>& step, int64_t regions) {
    const Run one = run_on(1, step), two = run_on(2, step);
    if (kOpenMP) CHECK(two.regions == regions);   // without OpenMP no region opens (parallel.h)
    REQUIRE(one.tensors.size() == two.tensors.size());
    for (size_t i = 0; i < one.tensors.size(); i++) {
        CAPTURE(i);
        REQUIRE(one.tensors[i].shape() == two.tensors[i].shape());
        CHECK(std::memcmp(one.tensors[i].data(), two.tensors[i].data(), one.tensors[i].numel() * sizeof(float)) == 0);
    }
    return two.tensors;
}

// The output and each leaf's gradient after one forward and one backward (upstream gradient w),
// the leaves' old gradients dropped first.
std::vector<Tensor> forward_backward(std::vector<Tensor> leaves, const std::function<Tensor()>& forward, const Tensor& w) {
    for (Tensor& t : leaves) t.zero_grad();
    const Tensor y = forward();
    y.backward(w);
    std::vector<Tensor> out = {y};
    for (const Tensor& t : leaves) out.push_back(t.grad());
    return out;
}

}  // namespace

TEST_CASE("threaded kernels: a parallel region gated by worth_threads runs on 2 threads when asked") {
    // The counter says a kernel asked for a team; this says the team really has 2 threads here.
    if (!kOpenMP) {
        MESSAGE("skipped: built without OpenMP (make OPENMP=0), so every loop runs on one thread");
        return;
    }
    ThreadCount two(2);
    int team = 0;
    #pragma omp parallel if (worth_threads(kElementwiseParallelMin + 1, kElementwiseParallelMin))
    {
        #pragma omp single
        team = team_size();
    }
    CHECK(team == 2);
    CHECK_FALSE(worth_threads(kElementwiseParallelMin, kElementwiseParallelMin));   // at the threshold: one thread
}

TEST_CASE("parallel_for, parallel_blocks, parallel_region: a team only when threaded, each index once") {
    // Not threaded, the loops open no region at all (a team of one costs 1-2.5 us, parallel.h):
    // the body runs at the caller's depth. Threaded, one level deeper, on a team of 2.
    ThreadCount two(2);
    const int64_t n = 101;   // odd: the two blocks differ by one
    for (const bool threaded : {false, true}) {
        CAPTURE(threaded);
        const bool team = threaded && kOpenMP;
        const int depth = region_depth() + (team ? 1 : 0);
        std::vector<int> seen(n, 0), depth_of(n, -1);
        parallel_for(n, threaded, [&](int64_t i) { seen[i]++, depth_of[i] = region_depth(); });
        CHECK(std::count(seen.begin(), seen.end(), 1) == n);
        CHECK(std::count(depth_of.begin(), depth_of.end(), depth) == n);

        std::vector<std::pair<int64_t, int64_t>> blocks(2, {-1, -1});
        parallel_blocks(n, threaded, [&](int64_t begin, int64_t end) {
            CHECK(region_depth() == depth);
            blocks[team_index()] = {begin, end};
        });
        if (team) CHECK(blocks == std::vector<std::pair<int64_t, int64_t>>{{0, 50}, {50, 101}});
        else CHECK(blocks[0] == std::pair<int64_t, int64_t>{0, 101});

        std::vector<int> threads_seen;
        parallel_region(threaded, [&](int size, int thread) {
            CHECK(region_depth() == depth);
            #pragma omp critical
            threads_seen.push_back(size * 10 + thread);
        });
        std::sort(threads_seen.begin(), threads_seen.end());
        CHECK(threads_seen == (team ? std::vector<int>{20, 21} : std::vector<int>{10}));
    }
    if (!kOpenMP) return;
    // Inside another thread's region (a shard's), worth_threads says no, and the loop stays on
    // its thread without a region of its own.
    int depth_inside[2] = {-1, -1};
    #pragma omp parallel num_threads(2)
    parallel_for(1, worth_threads(kElementwiseParallelMin + 1, kElementwiseParallelMin),
                 [&](int64_t) { depth_inside[team_index()] = region_depth(); });
    CHECK(depth_inside[0] == 1);
    CHECK(depth_inside[1] == 1);
}

TEST_CASE("generic elementwise ops: plain loops on the calling thread (no team on 2 threads), equal to the derivatives by hand") {
    const int64_t n = prime_above(kElementwiseParallelMin);   // big enough for a kernel's team
    manual_seed(1);
    Tensor a = Tensor::uniform({n}, -2.0f, 2.0f).requires_grad_(), b = Tensor::uniform({n}, 0.5f, 2.0f).requires_grad_();
    const Tensor w = Tensor::randn({n});
    const float *pa = a.data(), *pb = b.data(), *pw = w.data();

    struct Binary {
        const char* name;
        Tensor (*op)(const Tensor&, const Tensor&);
        double (*f)(double, double), (*da)(double, double), (*db)(double, double);   // value, d/da, d/db
    };
    const Binary binaries[] = {
        {"add", add, [](double x, double y) { return x + y; }, [](double, double) { return 1.0; }, [](double, double) { return 1.0; }},
        {"sub", sub, [](double x, double y) { return x - y; }, [](double, double) { return 1.0; }, [](double, double) { return -1.0; }},
        {"mul", mul, [](double x, double y) { return x * y; }, [](double, double y) { return y; }, [](double x, double) { return x; }},
        {"div", div, [](double x, double y) { return x / y; }, [](double, double y) { return 1.0 / y; }, [](double x, double y) { return -x / (y * y); }},
    };
    for (const Binary& op : binaries) {
        CAPTURE(std::string(op.name));
        const auto got = same_on_1_and_2_threads([&] { return forward_backward({a, b}, [&] { return op.op(a, b); }, w); }, 0);
        std::vector<float> y(n), ga(n), gb(n);
        for (int64_t i = 0; i < n; i++) {
            y[i] = static_cast<float>(op.f(pa[i], pb[i]));
            ga[i] = static_cast<float>(pw[i] * op.da(pa[i], pb[i]));
            gb[i] = static_cast<float>(pw[i] * op.db(pa[i], pb[i]));
        }
        expect_close(got[0], Tensor::from_vector(y, {n}), 1e-6, 0.0, "value");
        expect_close(got[1], Tensor::from_vector(ga, {n}), 1e-6, 0.0, "gradient of a");
        expect_close(got[2], Tensor::from_vector(gb, {n}), 1e-6, 0.0, "gradient of b");
    }

    // unary ops: y = f(x), dx = dy * f'(x), with f' written out here independently
    struct Unary {
        const char* name;
        Tensor (*op)(const Tensor&);
        double (*f)(double), (*df)(double);   // value, derivative
    };
    const Unary unaries[] = {
        {"exp", exp, [](double x) { return std::exp(x); }, [](double x) { return std::exp(x); }},
        {"tanh", tanh, [](double x) { return std::tanh(x); }, [](double x) { return 1.0 / (std::cosh(x) * std::cosh(x)); }},
        {"relu", relu, [](double x) { return x > 0 ? x : 0.0; }, [](double x) { return x > 0 ? 1.0 : 0.0; }},
        {"gelu", gelu, [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); },
         [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI); }},
    };
    for (const Unary& op : unaries) {
        CAPTURE(std::string(op.name));
        const auto got = same_on_1_and_2_threads([&] { return forward_backward({a}, [&] { return op.op(a); }, w); }, 0);
        std::vector<float> y(n), ga(n);
        for (int64_t i = 0; i < n; i++) {
            y[i] = static_cast<float>(op.f(pa[i]));
            ga[i] = static_cast<float>(pw[i] * op.df(pa[i]));
        }
        expect_close(got[0], Tensor::from_vector(y, {n}), 1e-6, 1e-7, "value");
        expect_close(got[1], Tensor::from_vector(ga, {n}), 1e-5, 1e-7, "gradient");
    }
}

TEST_CASE("generic shape copies: permute and reshape's gradient move every element to its place, on the calling thread") {
    // permute (I, J, K) -> (K, I, J): y[k][i][j] = x[i][j][k], and the gradient goes back:
    // K * I rows of J in the forward, I * J rows of K in the backward (the inverse permute).
    const int64_t I = 37, J = 41, K = prime_above(kElementwiseParallelMin / (I * J));   // K = 47
    manual_seed(2);
    Tensor x = Tensor::randn({I, J, K}).requires_grad_();
    const Tensor w = Tensor::randn({K, I, J});
    const auto got = same_on_1_and_2_threads([&] { return forward_backward({x}, [&] { return permute(x, {2, 0, 1}); }, w); }, 0);
    int64_t wrong_value = 0, wrong_grad = 0;
    for (int64_t i = 0; i < I; i++)
        for (int64_t j = 0; j < J; j++)
            for (int64_t k = 0; k < K; k++) {
                wrong_value += got[0].data()[(k * I + i) * J + j] != x.data()[(i * J + j) * K + k];
                wrong_grad += got[1].data()[(i * J + j) * K + k] != w.data()[(k * I + i) * J + j];
            }
    CHECK(wrong_value == 0);
    CHECK(wrong_grad == 0);

    // reshape shares the storage; its backward copies the gradient through unchanged
    const int64_t n = prime_above(kElementwiseParallelMin);   // (n,) -> (1, n)
    Tensor v = Tensor::randn({n}).requires_grad_();
    const Tensor wv = Tensor::randn({1, n});
    const auto r = same_on_1_and_2_threads([&] { return forward_backward({v}, [&] { return reshape(v, {1, n}); }, wv); }, 0);
    CHECK(r[1].to_vector() == wv.to_vector());
}

TEST_CASE("batched matmul: many small matrices, one gemm each on the calling thread, equal to gemm_naive per batch") {
    // small matrices: too small for gemm's own team, and matmul's loop over the batch is plain
    const int64_t Bt = 7, M = 13, K = 17, N = 11;
    manual_seed(3);
    Tensor a = Tensor::randn({Bt, M, K}).requires_grad_(), b = Tensor::randn({Bt, K, N}).requires_grad_();
    const Tensor w = Tensor::randn({Bt, M, N});
    const auto got = same_on_1_and_2_threads([&] { return forward_backward({a, b}, [&] { return matmul(a, b); }, w); }, 0);
    std::vector<float> c(Bt * M * N), da(Bt * M * K), db(Bt * K * N);
    for (int64_t i = 0; i < Bt; i++) {
        const float *A = a.data() + i * M * K, *B = b.data() + i * K * N, *W = w.data() + i * M * N;
        gemm_naive(false, false, M, N, K, A, K, B, N, c.data() + i * M * N, N, false);    // C = A B
        gemm_naive(false, true, M, K, N, W, N, B, N, da.data() + i * M * K, K, false);    // dA = dC B^T
        gemm_naive(true, false, K, N, M, A, K, W, N, db.data() + i * K * N, N, false);    // dB = A^T dC
    }
    expect_close(got[0], Tensor::from_vector(c, {Bt, M, N}), 1e-5, 1e-6, "value");
    expect_close(got[1], Tensor::from_vector(da, {Bt, M, K}), 1e-5, 1e-6, "dA");
    expect_close(got[2], Tensor::from_vector(db, {Bt, K, N}), 1e-5, 1e-6, "dB");
}

TEST_CASE("softmax and log_softmax: plain row loops on the calling thread, equal to the composition of primitives, with masked (-inf) entries") {
    const int64_t C = 131, R = prime_above(kLayerNormParallelMin / C);   // R = 251 rows: enough for a kernel's team
    manual_seed(4);
    Tensor x = (Tensor::randn({R, C}) * 3.0f).detach().requires_grad_();
    for (int64_t i = 0; i < R * C; i += 7) x.data()[i] = -std::numeric_limits<float>::infinity();   // never a whole row
    const Tensor w = Tensor::randn({R, C});
    for (bool log : {false, true}) {
        CAPTURE(log);
        auto fused = [&] { return log ? log_softmax(x) : softmax(x); };
        const auto got = same_on_1_and_2_threads([&] { return forward_backward({x}, fused, w); }, 0);
        const auto want = forward_backward({x}, [&] { return log ? log_softmax_reference(x) : softmax_reference(x); }, w);
        expect_close(got[0], want[0], 1e-5, 1e-7, "value");
        expect_close(got[1], want[1], 1e-4, 1e-6, "gradient");
    }
}

TEST_CASE("threaded cross_entropy: equal to the composition of primitives, with ignored targets and label smoothing") {
    const int64_t B = 3, V = 101, T = prime_above(kCrossEntropyParallelMin / (B * V));   // threads split B * T = 327 rows
    manual_seed(5);
    Tensor logits = Tensor::uniform({B, T, V}, -4.0f, 4.0f).requires_grad_();
    Rng g(6);
    Tokens targets = Tokens::full({B, T}, 0);
    for (int64_t i = 0; i < B * T; i++) targets[i] = static_cast<int32_t>(g.below(V));   // id 0 (padding): ~1%
    for (int64_t i = 0; i < B * T; i += 9) targets[i] = 0;                               // and every 9th
    const Tensor one = Tensor::scalar(1.0f);
    for (const nn::CrossEntropyOptions opt : {nn::CrossEntropyOptions{}, nn::CrossEntropyOptions{.ignore_index = 0, .label_smoothing = 0.1f}}) {
        CAPTURE(opt.ignore_index);
        const auto got = same_on_1_and_2_threads(
            [&] { return forward_backward({logits}, [&] { return nn::cross_entropy(logits, targets, opt); }, one); }, 2);
        const auto want = forward_backward(
            {logits}, [&] { FusedKernelsGuard plain(false); return nn::cross_entropy(logits, targets, opt); }, one);
        expect_close(got[0], want[0], 1e-5, 0.0, "loss");
        expect_close(got[1], want[1], 1e-4, 1e-9, "gradient");
    }
}

TEST_CASE("threaded layer_norm: equal to the composition of primitives, x, gain and bias gradients") {
    // threads split the R = 241 rows (forward, dx), and the C columns of dgain and dbias, which
    // sum over the rows
    const int64_t C = 137, R = prime_above(kLayerNormParallelMin / C);
    manual_seed(7);
    Tensor x = (Tensor::randn({R, C}) * 2.0f + 1.0f).detach().requires_grad_();
    Tensor gain = Tensor::uniform({C}, 0.5f, 1.5f).requires_grad_(), bias = Tensor::uniform({C}, -1.0f, 1.0f).requires_grad_();
    const Tensor w = Tensor::randn({R, C});
    const auto got = same_on_1_and_2_threads(
        [&] { return forward_backward({x, gain, bias}, [&] { return nn::layer_norm(x, gain, bias); }, w); },
        3);   // forward rows, dx rows, gain/bias column sums
    const auto want = forward_backward({x, gain, bias}, [&] { FusedKernelsGuard plain(false); return nn::layer_norm(x, gain, bias); }, w);
    expect_close(got[0], want[0], 1e-5, 1e-5, "value");
    expect_close(got[1], want[1], 1e-4, 1e-5, "dx");
    expect_close(got[2], want[2], 1e-4, 1e-4, "dgain");
    expect_close(got[3], want[3], 1e-5, 1e-4, "dbias");
}

TEST_CASE("threaded additive_score: the same bytes on 1 and 2 threads, equal to the composition of primitives") {
    // threads split the B rows (forward, and the backward's dk and dq); dv's column sums split A
    const int64_t S = 11, A = 37, B = prime_above(kAdditiveScoreParallelMin / (S * A));
    manual_seed(13);
    Tensor k = Tensor::uniform({B, S, A}, -3.0f, 3.0f).requires_grad_(), q = Tensor::uniform({B, A}, -1.0f, 1.0f).requires_grad_();
    Tensor v = Tensor::uniform({A}, -1.0f, 1.0f).requires_grad_();
    const Tensor w = Tensor::randn({B, S});
    const auto got = same_on_1_and_2_threads(
        [&] { return forward_backward({k, q, v}, [&] { return fused::additive_score(k, q, v); }, w); },
        3);   // the forward's rows, the backward's rows, dv's columns
    const auto want = forward_backward({k, q, v}, [&] { return matmul(tanh(k + unsqueeze(q, 1)), v.reshape({A, 1})).reshape({B, S}); }, w);
    expect_close(got[0], want[0], 1e-5, 1e-6, "value");
    expect_close(got[1], want[1], 1e-5, 1e-6, "dk");
    expect_close(got[2], want[2], 1e-5, 1e-6, "dq");
    expect_close(got[3], want[3], 1e-5, 1e-5, "dv");
}

TEST_CASE("threaded gru_cell: equal to the composition of primitives, gi, gh and h gradients") {
    // threads split the B = 37 rows, forward and backward; each row holds Hd = 131 states and
    // 3Hd = 393 gate arguments. Gate arguments up to ±6: saturated and unsaturated gates alike.
    const int64_t Hd = 131, B = prime_above(kGruCellParallelMin / Hd);
    manual_seed(12);
    Tensor gi = Tensor::uniform({B, 3 * Hd}, -3.0f, 3.0f).requires_grad_();   // (B, 3Hd)
    Tensor gh = Tensor::uniform({B, 3 * Hd}, -3.0f, 3.0f).requires_grad_();   // (B, 3Hd)
    Tensor h = Tensor::uniform({B, Hd}, -1.0f, 1.0f).requires_grad_();        // (B, Hd)
    const Tensor w = Tensor::randn({B, Hd});
    const auto got = same_on_1_and_2_threads(
        [&] { return forward_backward({gi, gh, h}, [&] { return fused::gru_cell(gi, gh, h); }, w); },
        2);   // forward rows, backward rows
    const auto want = forward_backward({gi, gh, h}, [&] { return gru_cell_reference(gi, gh, h); }, w);
    expect_close(got[0], want[0], 1e-5, 1e-6, "value");
    expect_close(got[1], want[1], 1e-5, 1e-6, "dgi");
    expect_close(got[2], want[2], 1e-5, 1e-6, "dgh");
    expect_close(got[3], want[3], 1e-5, 1e-6, "dh");
}

TEST_CASE("threaded linear epilogue (bias, ReLU, dropout) and bias gradient: equal to the composition of primitives") {
    // x (B, T, in): threads split the B * T = 501 rows of the epilogue and the rows * out elements
    // of the backward's mask; dx and dW run side by side, and the bias gradient, which sums over
    // the rows, on dx's thread (column_sums' split over threads is run by the layer_norm test)
    const int64_t in = 37, out = 131, B = 3, T = prime_above(kLinearParallelMin / (B * out));   // T = 167
    manual_seed(8);
    Tensor x = Tensor::randn({B, T, in}).requires_grad_();
    Tensor weight = Tensor::uniform({out, in}, -0.3f, 0.3f).requires_grad_(), bias = Tensor::uniform({out}, -0.5f, 0.5f).requires_grad_();
    const Tensor w = Tensor::randn({B, T, out});
    struct Case { nn::Activation act; float p; int64_t regions; };
    // regions: the forward epilogue, and with ReLU or dropout the backward's mask loop. The bias
    // gradient's column sums run on one thread inside gemm_pair_in's team (dx's thread, while
    // the other finishes dW), which is not counted here, as no gemm team is.
    REQUIRE(2.0 * B * T * in * out >= 2.0e6);   // dx and dW are each worth a thread: side by side
    for (const Case c : {Case{nn::Activation::none, 0.0f, 1}, Case{nn::Activation::relu, 0.0f, 2},
                         Case{nn::Activation::relu, 0.3f, 2}, Case{nn::Activation::none, 0.3f, 2}}) {
        CAPTURE(c.act == nn::Activation::relu);
        CAPTURE(c.p);
        auto fused = [&] { manual_seed(9); return nn::linear(x, weight, bias, c.act, c.p, c.p > 0.0f); };
        const auto got = same_on_1_and_2_threads([&] { return forward_backward({x, weight, bias}, fused, w); }, c.regions);
        auto plain = [&] { FusedKernelsGuard off(false); manual_seed(9); return nn::linear(x, weight, bias, c.act, c.p, c.p > 0.0f); };
        const auto want = forward_backward({x, weight, bias}, plain, w);
        expect_close(got[0], want[0], 1e-5, 1e-6, "value");
        expect_close(got[1], want[1], 1e-5, 1e-5, "dx");
        expect_close(got[2], want[2], 1e-5, 1e-4, "dweight");
        expect_close(got[3], want[3], 1e-5, 1e-4, "dbias");
    }
}

TEST_CASE("threaded dropout: the plain loop's keep decisions, scaled by 1/(1-p), in the forward and the backward") {
    const int64_t n = prime_above(kDropoutParallelMin);   // threads split the elements
    const float p = 0.3f;
    manual_seed(10);
    Tensor x = Tensor::randn({n}).requires_grad_();
    const Tensor w = Tensor::randn({n});
    // An element the kernel never writes can read 0 in fresh memory, as a dropped one does. So the
    // elements at the edges of the 2 threads' shares, where a split that drops its remainder or
    // is off by one leaves a gap, must be kept ones: the first generator seed from 11 that keeps them.
    uint64_t reseed = 11;
    auto keeps_edges = [&](uint64_t s) {
        const uint64_t seed = Rng(s).next_u64();   // what dropout takes from the generator reseeded with s
        for (int64_t i : {int64_t{0}, n / 2, n / 2 + 1, n - 1})
            if (autograd::counter_uniform(seed, i) < p) return false;
        return true;
    };
    while (!keeps_edges(reseed)) reseed++;
    const auto got = same_on_1_and_2_threads(
        [&] { return forward_backward({x}, [&] { manual_seed(reseed); return nn::dropout(x, p, true); }, w); }, 2);
    // the plain loop: element i is dropped when its counter draw is below p
    const uint64_t seed = Rng(reseed).next_u64();
    const float scale = 1.0f / (1.0f - p);
    int64_t dropped = 0, wrong = 0;
    for (int64_t i = 0; i < n; i++) {
        const bool keep = autograd::counter_uniform(seed, i) >= p;
        dropped += !keep;
        wrong += got[0].data()[i] != (keep ? x.data()[i] * scale : 0.0f);
        wrong += got[1].data()[i] != (keep ? w.data()[i] * scale : 0.0f);
    }
    CHECK(wrong == 0);
    CHECK(static_cast<double>(dropped) / n == doctest::Approx(p).epsilon(0.03));   // +-0.009: ~5 standard deviations
}

TEST_CASE("threaded attention: equal to the composition of primitives, without and with dropout") {
    // threads split the B * H = 15 (batch, head) pairs; each pair's T x S scores sum over Dk
    const int64_t B = 3, H = 5, S = 11, Dk = 7, D = H * Dk, T = prime_above(kAttentionParallelMin / (B * H * S * Dk));   // T = 17
    manual_seed(12);
    Tensor q = Tensor::randn({B, T, D}).requires_grad_(), k = Tensor::randn({B, S, D}).requires_grad_(),
           v = Tensor::randn({B, S, D}).requires_grad_();
    Mask pad = Mask::full({B, 1, S}, 1);
    for (int64_t s = 8; s < S; s++) pad[s] = 0;   // batch 0: 3 padded keys
    const Tensor w = Tensor::randn({B, T, D});
    const auto got = same_on_1_and_2_threads(
        [&] { return forward_backward({q, k, v}, [&] { return nn::scaled_dot_product_attention(q, k, v, H, pad); }, w); }, 2);
    const auto want = forward_backward({q, k, v}, [&] { FusedKernelsGuard plain(false); return nn::scaled_dot_product_attention(q, k, v, H, pad); }, w);
    const char* names[] = {"value", "dq", "dk", "dv"};
    for (int i = 0; i < 4; i++) expect_close(got[i], want[i], 1e-4, 1e-5, names[i]);
    const auto got_dropout = same_on_1_and_2_threads([&] {
        return forward_backward({q, k, v}, [&] { manual_seed(13); return nn::scaled_dot_product_attention(q, k, v, H, pad, 0.2f); }, w);
    }, 2);
    const auto want_dropout = forward_backward({q, k, v}, [&] {
        FusedKernelsGuard plain(false);
        manual_seed(13);
        return nn::scaled_dot_product_attention(q, k, v, H, pad, 0.2f);
    }, w);
    for (int i = 0; i < 4; i++) expect_close(got_dropout[i], want_dropout[i], 1e-4, 1e-5, names[i]);
}

TEST_CASE("threaded Adam updates (and SGD's plain loop): equal to the update rule evaluated in double, element by element") {
    const int64_t n = prime_above(kOptimizerParallelMin);   // threads split the elements
    manual_seed(14);
    const Tensor start = Tensor::uniform({n}, -2.0f, 2.0f);
    // three steps with the gradient g = p (of L = 0.5 * sum(p^2)), set directly so that no other
    // op runs between the steps
    auto three_steps = [&](auto make) {
        return [&, make] {
            Tensor p = Tensor::from_vector(start.to_vector(), {n}).requires_grad_();
            const auto opt = make(p);
            for (int s = 0; s < 3; s++) {
                opt->zero_grad();
                p.backward(p.detach());
                opt->step();
            }
            return std::vector<Tensor>{p.detach()};
        };
    };
    SUBCASE("Adam") {
        const auto got = same_on_1_and_2_threads(three_steps([](Tensor p) {
            return std::make_unique<optim::Adam>(std::vector<Tensor>{p}, optim::AdamOptions{.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f});
        }), 3);
        std::vector<float> want(n);
        for (int64_t i = 0; i < n; i++) {
            double p = start.data()[i], m = 0, v = 0;
            for (int t = 1; t <= 3; t++) {
                m = 0.9 * m + 0.1 * p;
                v = 0.98 * v + 0.02 * p * p;
                p -= 0.1 * (m / (1 - std::pow(0.9, t))) / (std::sqrt(v / (1 - std::pow(0.98, t))) + 1e-9);
            }
            want[i] = static_cast<float>(p);
        }
        expect_close(got[0], Tensor::from_vector(want, {n}), 1e-5, 1e-6, "parameter after 3 steps");
    }
    SUBCASE("Adam over parameters each too small for a team: one region for all of them per step") {
        // five parameters of n/4 elements (below the threshold alone, above it together), each
        // with its own gradient g = c * p; threads split each one's elements, no waiting between
        const int64_t m = n / 4;
        const float c[5] = {1.0f, -0.5f, 2.0f, 0.25f, 3.0f};
        const auto got = same_on_1_and_2_threads([&] {
            std::vector<Tensor> ps;
            for (int k = 0; k < 5; k++) ps.push_back(Tensor::from_vector(std::vector<float>(start.data() + k * 7, start.data() + k * 7 + m), {m}).requires_grad_());
            optim::Adam opt(ps, {.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f});
            for (int s = 0; s < 3; s++) {
                opt.zero_grad();
                for (int k = 0; k < 5; k++) ps[k].backward((ps[k] * c[k]).detach());
                opt.step();
            }
            std::vector<Tensor> out;
            for (const Tensor& p : ps) out.push_back(p.detach());
            return out;
        }, 3);   // one region per step, not one per parameter
        for (int k = 0; k < 5; k++) {
            CAPTURE(k);
            std::vector<float> want(m);
            for (int64_t i = 0; i < m; i++) {
                double p = start.data()[k * 7 + i], mm = 0, v = 0;
                for (int t = 1; t <= 3; t++) {
                    const double g = c[k] * p;
                    mm = 0.9 * mm + 0.1 * g;
                    v = 0.98 * v + 0.02 * g * g;
                    p -= 0.1 * (mm / (1 - std::pow(0.9, t))) / (std::sqrt(v / (1 - std::pow(0.98, t))) + 1e-9);
                }
                want[i] = static_cast<float>(p);
            }
            expect_close(got[k], Tensor::from_vector(want, {m}), 1e-5, 1e-6, "parameter after 3 steps");
        }
    }
    SUBCASE("SGD with Nesterov momentum and weight decay: one plain loop, no threads") {
        const auto got = same_on_1_and_2_threads(three_steps([](Tensor p) {
            return std::make_unique<optim::SGD>(std::vector<Tensor>{p}, optim::SGDOptions{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.5f, .nesterov = true});
        }), 0);
        std::vector<float> want(n);
        for (int64_t i = 0; i < n; i++) {
            double p = start.data()[i], buf = 0;
            for (int t = 1; t <= 3; t++) {
                const double g = p + 0.5 * p;
                buf = 0.9 * buf + g;
                p -= 0.1 * (g + 0.9 * buf);
            }
            want[i] = static_cast<float>(p);
        }
        expect_close(got[0], Tensor::from_vector(want, {n}), 1e-5, 1e-6, "parameter after 3 steps");
    }
}

// ---- busy_cores: teams give way to another program that keeps the cores busy

TEST_CASE("busy_cores: two windows in a row whose teams waited over a third of them send kernels to one thread for a while that doubles, then forgets") {
    constexpr int64_t ms = 1000000, us = 1000, window = BusyCores::kWindowMs * ms;
    BusyCores watch;
    // an idle machine's teams: they waited a small share of their time, even with one hiccup
    int64_t t = 0;
    for (int i = 0; i < 40; i++) watch.report(t += ms, 500 * us, 60 * us);    // 12%
    watch.report(t += ms, 4 * ms, 3 * ms);                                       // a 3 ms hiccup
    for (int i = 0; i < 40; i++) watch.report(t += ms, 500 * us, 60 * us);
    CHECK_FALSE(watch.busy(t));
    CHECK(watch.backoff_ns() == 0);

    // one busy window between windows on time is a hiccup: it decides nothing
    watch.reset();
    watch.report(t += ms, window, window / 2);
    CHECK_FALSE(watch.busy(t));
    watch.report(t += ms, window, window / 10);
    watch.report(t += ms, window, window / 2);
    CHECK_FALSE(watch.busy(t));
    CHECK(watch.serial_spells() == 0);

    // teams that waited 40% of two windows in a row: busy, once the second window is full
    watch.reset();   // an empty window
    watch.report(t += ms, window, 2 * window / 5);     // the first busy window
    watch.report(t += ms, window / 2, window / 5);
    CHECK_FALSE(watch.busy(t));                        // not judged yet
    watch.report(t += ms, window / 2, window / 5);
    CHECK(watch.serial_spells() == 1);
    CHECK(watch.backoff_ns() == BusyCores::kFirstBackoffMs * ms);
    CHECK(watch.busy(t));
    CHECK(watch.busy(t + BusyCores::kFirstBackoffMs * ms - 1));
    CHECK_FALSE(watch.busy(t + BusyCores::kFirstBackoffMs * ms));

    // after a decision, each try that finds the cores still busy decides at once (one window),
    // doubling the while, up to kMaxBackoffMs
    int64_t expected = BusyCores::kFirstBackoffMs * ms;
    for (int i = 0; i < 8; i++) {
        t += expected;
        watch.report(t, window, window / 2);
        expected = std::min(2 * expected, BusyCores::kMaxBackoffMs * ms);
        CAPTURE(i);
        CHECK(watch.backoff_ns() == expected);
        CHECK(watch.busy(t + expected - 1));
        CHECK_FALSE(watch.busy(t + expected));
    }
    CHECK(watch.backoff_ns() == BusyCores::kMaxBackoffMs * ms);
    // a window on time changes nothing; two busy ones after kForgetMs without any start over
    t += expected;
    watch.report(t, window, window / 4);
    CHECK_FALSE(watch.busy(t));
    CHECK(watch.backoff_ns() == BusyCores::kMaxBackoffMs * ms);
    t += BusyCores::kForgetMs * ms + 1;
    watch.report(t, window, window / 2);
    CHECK_FALSE(watch.busy(t));
    watch.report(t, window, window / 2);
    CHECK(watch.backoff_ns() == BusyCores::kFirstBackoffMs * ms);

    // waits over a third of a whole window judge it before it is full
    watch.reset();
    watch.report(t, window, window / 2);           // a first busy window
    watch.report(t, window / 4, window / 4);       // 5 of 20 ms: not yet
    CHECK_FALSE(watch.busy(t));
    watch.report(t, window / 4, window / 8);       // 7.5 ms: over a third of 20
    CHECK(watch.busy(t));
    watch.reset();
    watch.report(t, window, window / 2);
    for (int i = 0; i < 2; i++) watch.report(t, 4 * ms, 3 * ms);
    CHECK_FALSE(watch.busy(t));                    // 6 ms
    watch.report(t, 4 * ms, 3 * ms);
    CHECK(watch.busy(t));                          // 9 ms
}

TEST_CASE("busy_cores: team_wait_ns adds the late start, the longest wait at the barriers and the late finish") {
    // thread 0 starts at 0, waits 40 at barriers, finishes at 50; thread 1 starts at 30, waits 5,
    // finishes at 200; thread 2 starts at 10, waits 70, finishes at 120: 30 waited for the last
    // start, 70 at the barriers, 150 for the last finish
    const int64_t arrive[] = {0, 30, 10}, barriers[] = {40, 5, 70}, finish[] = {50, 200, 120};
    CHECK(team_wait_ns(arrive, barriers, finish, 3) == 30 + 70 + 150);
    CHECK(team_wait_ns(arrive, barriers, finish, 2) == 30 + 40 + 150);
    CHECK(team_wait_ns(arrive, barriers, finish, 1) == 0);
}

TEST_CASE("busy_cores: a thread that is late at a GEMM team's inner barrier is seen") {
    // Both threads start and finish together, but thread 1 reaches the barrier 3 ms after thread
    // 0 (as when it is taken off its core in the middle of a product), in teams that fill two
    // windows: only the barrier's timing sees it.
    if (!kOpenMP) {
        MESSAGE("skipped: built without OpenMP (make OPENMP=0), so no team ever waits");
        return;
    }
    ThreadCount two(2);
    kernels::test_hooks::busy_cores_state().reset();
    kernels::test_hooks::set_busy_cores_watch(true);
    int team = 0;
    for (int64_t filled = 0; filled <= 2 * BusyCores::kWindowMs * 1000000; filled += 3000000) {   // two windows
        gemm_driver::run_team([&](int nt, int tid) {
            if (tid == 1) {
                const int64_t until = now_ns() + 3000000;
                while (now_ns() < until) {}
            }
            gemm_driver::team_barrier(nt);
            if (tid == 0) team = nt;
        });
    }
    const bool busy = cores_busy();
    kernels::test_hooks::busy_cores_state().reset();
    kernels::test_hooks::set_busy_cores_watch(false);
    REQUIRE(team == 2);
    CHECK(busy);
}

TEST_CASE("busy_cores: while the cores are busy, kernels run on the calling thread, with the same results") {
    const int64_t C = 128, R = kLayerNormParallelMin / C + 1;
    const Tensor x = Tensor::randn({R, C}), gain = Tensor::ones({C}), bias = Tensor::zeros({C});
    const auto layer_norm = [&] { return std::vector<Tensor>{autograd::fused::layer_norm(x, gain, bias, 1e-5f)}; };   // one team over the rows
    ThreadCount two(2);
    const Run on_team = run_on(2, layer_norm);
    std::vector<float> a(301 * 203), b(203 * 517), c_team(301 * 517), c_busy(301 * 517);
    for (std::size_t i = 0; i < a.size(); i++) a[i] = float(i % 7) - 3.0f;
    for (std::size_t i = 0; i < b.size(); i++) b[i] = float(i % 5) - 2.0f;
    gemm(false, false, 301, 517, 203, a.data(), 203, b.data(), 517, c_team.data(), 517, false);

    kernels::test_hooks::set_busy_cores_watch(true);
    for (int i = 0; i < 2; i++)   // teams that waited 80% of two windows
        kernels::test_hooks::busy_cores_state().report(now_ns(), BusyCores::kWindowMs * 1000000, BusyCores::kWindowMs * 800000);
    CHECK(cores_busy());
    const Run busy = run_on(2, layer_norm);
    gemm(false, false, 301, 517, 203, a.data(), 203, b.data(), 517, c_busy.data(), 517, false);
    kernels::test_hooks::busy_cores_state().reset();
    CHECK_FALSE(cores_busy());
    kernels::test_hooks::set_busy_cores_watch(false);

    CHECK(busy.regions == 0);   // one thread did it all
    if (kOpenMP) CHECK(on_team.regions == 1);
    CHECK(std::memcmp(busy.tensors[0].data(), on_team.tensors[0].data(), R * C * sizeof(float)) == 0);
    CHECK(c_busy == c_team);
}
