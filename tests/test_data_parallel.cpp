// Data parallelism (autograd/data_parallel.h, models/data_parallel.h): a batch cut into shards,
// each shard's forward and backward on its own thread, the gradients added in shard order.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "autograd/autograd.h"
#include "autograd/data_parallel.h"
#include "autograd/kernels/busy_cores.h"
#include "autograd/kernels/threads.h"
#include "examples/data/copy_task_data.h"
#include "models/batch.h"
#include "models/data_parallel.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "tests/hooks.h"
#include "tests/thread_count.h"

using namespace autograd;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.numel() * sizeof(float)) == 0;
}

// Shard s's loss: sum(relu(x_s W) * c_s), x_s (40, 64) and c_s (40, 48) fixed per shard.
Tensor shard_loss(const Tensor& w, int s) {
    Rng r(100 + s);
    std::vector<float> x(40 * 64), c(40 * 48);
    for (float& v : x) v = r.uniform(-1.0f, 1.0f);
    for (float& v : c) v = r.uniform(-1.0f, 1.0f);
    const Tensor h = relu(matmul(Tensor::from_vector(x, {40, 64}), w));   // (40, 48)
    return sum(h * Tensor::from_vector(c, {40, 48}));                     // ()
}

Tensor fresh_weight() {
    Rng r(7);
    std::vector<float> v(64 * 48);
    for (float& x : v) x = r.uniform(-0.5f, 0.5f);
    return Tensor::from_vector(v, {64, 48}).requires_grad_();
}

}  // namespace

TEST_CASE("for_each_shard: a leaf's grad is its shards' grads added in shard order, the same bits on 1, 2 and 3 threads") {
    // what the shards compute, one at a time, each into a leaf of its own
    std::vector<Tensor> alone;
    for (int s = 0; s < 3; s++) {
        Tensor w = fresh_weight();
        shard_loss(w, s).backward();
        alone.push_back(w.grad());
    }
    std::vector<float> expected(64 * 48);
    for (size_t i = 0; i < expected.size(); i++) expected[i] = (alone[0].data()[i] + alone[1].data()[i]) + alone[2].data()[i];
    const Tensor want = Tensor::from_vector(expected, {64, 48});
    // the other order of adding differs somewhere: the test can tell the orders apart
    bool order_matters = false;
    for (size_t i = 0; i < expected.size(); i++)
        order_matters = order_matters || expected[i] != (alone[0].data()[i] + alone[2].data()[i]) + alone[1].data()[i];
    CHECK(order_matters);

    for (int threads : {1, 2, 3}) {
        CAPTURE(threads);
        ThreadCount tc(threads);
        Tensor w = fresh_weight();
        std::vector<float> losses(3);
        for_each_shard(3, [&](int s) {
            const Tensor loss = shard_loss(w, s);   // the forward; for_each_shard runs its backward
            losses[s] = loss.item();
            return loss;
        });
        CHECK(same_bits(w.grad(), want));
        CHECK(losses[1] != losses[0]);   // the shards did differ
        CHECK(w.is_leaf());
    }
}

// A leaf a shard's graph reaches more than once (a tied weight, here w in w ⊙ w and in the
// product) has one stand-in in that shard: its gradient is the sum of every use, as in a plain
// backward, and the parents of a shard's nodes are its stand-ins while the leaf stays a leaf.
TEST_CASE("for_each_shard: a leaf used twice in one shard's graph gets one stand-in, and the gradient of both uses") {
    auto twice = [](const Tensor& w, int s) { return shard_loss(w, s) + sum(w * w) * static_cast<float>(s + 1); };
    std::vector<Tensor> alone;   // each shard's gradient on its own: both uses summed
    for (int s = 0; s < 2; s++) {
        Tensor w = fresh_weight();
        twice(w, s).backward();
        alone.push_back(w.grad());
    }
    const Tensor want = alone[0] + alone[1];   // g_0 + g_1, shard 1's uses added together first
    for (int threads : {1, 2}) {
        CAPTURE(threads);
        ThreadCount tc(threads);
        Tensor w = fresh_weight();
        for_each_shard(2, [&](int s) { return twice(w, s); });
        CHECK(same_bits(w.grad(), want));
    }
}

TEST_CASE("for_each_shard: shard s draws from its own generator, seeded by the s-th of S draws of the default one") {
    std::vector<std::vector<float>> seen_by_threads;
    for (int threads : {1, 2}) {
        ThreadCount tc(threads);
        manual_seed(42);
        std::vector<std::vector<float>> draws(3);
        for_each_shard(3, [&](int s) {
            draws[s] = Tensor::rand({5}).to_vector();
            return Tensor();   // no loss: nothing to backpropagate
        });
        const float after = default_rng().uniform();
        // the same by hand
        manual_seed(42);
        std::vector<uint64_t> seeds;
        for (int s = 0; s < 3; s++) seeds.push_back(default_rng().next_u64());
        for (int s = 0; s < 3; s++) {
            Rng own(seeds[s]);
            for (int i = 0; i < 5; i++) CHECK(draws[s][i] == own.uniform());
        }
        CHECK(after == default_rng().uniform());   // the default generator moved by exactly 3 draws
        CHECK(draws[0] != draws[1]);
        for (auto& d : draws) seen_by_threads.push_back(d);
    }
    for (int i = 0; i < 3; i++) CHECK(seen_by_threads[i] == seen_by_threads[3 + i]);
}

TEST_CASE("for_each_shard: shards run side by side on 2 threads, each with the caller's modes") {
    if (!kernels::kOpenMP) {
        MESSAGE("skipped: built without OpenMP (make OPENMP=0), so there is only one thread");
        return;
    }
    ThreadCount tc(2);
    std::vector<std::thread::id> ids(2);
    std::vector<int> kernel_threads(2);
    // one byte per shard: std::vector<bool> packs both flags into one word, and two threads
    // writing neighbouring bits of one word race (one write can undo the other)
    std::vector<char> bf16(2), fused(2), grad(2), together(2);
    std::atomic<int> started{0};
    {
        MixedPrecisionGuard mixed(true);
        FusedKernelsGuard plain(false);
        NoGradGuard no_grad;
        for_each_shard(2, [&](int s) {
            // each shard waits (up to 2 s) for the other to start: both start only side by side
            started++;
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
            while (started.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::microseconds(100));
            together[s] = started.load() == 2;
            ids[s] = std::this_thread::get_id();
            kernel_threads[s] = kernels::max_threads();
            bf16[s] = matmul_precision() == Precision::bf16;
            fused[s] = fused_kernels_enabled();
            grad[s] = is_grad_enabled();
            return Tensor();
        });
    }
    CHECK(together == std::vector<char>{true, true});
    CHECK(ids[1] != ids[0]);
    CHECK(kernel_threads == std::vector<int>{1, 1});   // no team inside the team
    CHECK(bf16 == std::vector<char>{true, true});
    CHECK(fused == std::vector<char>{false, false});
    CHECK(grad == std::vector<char>{false, false});
    CHECK(kernels::max_threads() == 2);
}

TEST_CASE("for_each_shard: a shard team that waits for a late thread is seen as busy cores, and the next shards run on the calling thread") {
    // As beside another busy program: shard 1 takes 3 ms longer than shard 0 (its thread off its
    // core), in teams that fill two windows of kernels/busy_cores.h. The team's wait at its end
    // decides "busy"; the shards then run one after the other on the calling thread, as the
    // kernels do, until the backoff ends.
    if (!kernels::kOpenMP) {
        MESSAGE("skipped: built without OpenMP (make OPENMP=0), so there is only one thread");
        return;
    }
    ThreadCount tc(2);
    kernels::test_hooks::busy_cores_state().reset();
    kernels::test_hooks::set_busy_cores_watch(true);
    const int64_t window = kernels::BusyCores::kWindowMs * 1000000;
    for (int64_t filled = 0; filled <= 2 * window && !kernels::cores_busy(); filled += 3000000)
        for_each_shard(2, [&](int s) {
            if (s == 1) {
                const int64_t until = kernels::now_ns() + 3000000;
                while (kernels::now_ns() < until) {}
            }
            return Tensor();
        });
    const bool busy = kernels::cores_busy();
    std::vector<std::thread::id> ids(2);
    for_each_shard(2, [&](int s) {
        ids[s] = std::this_thread::get_id();
        return Tensor();
    });
    const int64_t spells = kernels::serial_spells();
    kernels::test_hooks::busy_cores_state().reset();
    kernels::test_hooks::set_busy_cores_watch(false);
    CHECK(busy);
    CHECK(spells >= 1);
    CHECK(ids[0] == std::this_thread::get_id());   // both on the calling thread (the backoff is 50 ms)
    CHECK(ids[1] == std::this_thread::get_id());
}

TEST_CASE("for_each_shard: errors") {
    const auto nothing = [](int) { return Tensor(); };
    CHECK_THROWS_WITH_AS(for_each_shard(0, nothing), "for_each_shard: needs at least 1 shard, got 0", std::invalid_argument);
    CHECK_THROWS_WITH_AS(for_each_shard(2, [&](int) {
                             for_each_shard(2, nothing);
                             return Tensor();
                         }),
                         "for_each_shard: called inside a shard (shards do not nest)", std::logic_error);
    // an exception in shard 1: the other shards still run, the lowest shard's error comes out, and
    // no stand-in's gradient is merged (the leaf keeps shard 0's)
    for (int threads : {1, 2}) {
        ThreadCount tc(threads);
        Tensor w = fresh_weight();
        std::vector<int> ran(3, 0);
        CHECK_THROWS_WITH_AS(for_each_shard(3, [&](int s) {
                                 ran[s] = 1;
                                 const Tensor loss = shard_loss(w, s);
                                 if (s >= 1) throw std::runtime_error("shard " + std::to_string(s) + " failed");
                                 return loss;
                             }),
                             "shard 1 failed", std::runtime_error);
        CHECK(ran == std::vector<int>{1, 1, 1});
        Tensor w0 = fresh_weight();
        shard_loss(w0, 0).backward();
        CHECK(same_bits(w.grad(), w0.grad()));
    }
}

TEST_CASE("split_batch: consecutive row slices with their own token counts and shares") {
    // 5 rows, the last two shorter (padded with 0)
    const Tokens src({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {5, 2});
    const Tokens tgt({1, 3, 4, 2, 1, 5, 6, 2, 1, 7, 8, 2, 1, 9, 2, 0, 1, 2, 0, 0}, {5, 4});
    const models::Batch b = models::make_batch(src, tgt, 0);
    REQUIRE(b.ntokens == 3 + 3 + 3 + 2 + 1);
    const std::vector<models::Batch> parts = models::split_batch(b, 2);
    REQUIRE(parts.size() == 2);
    CHECK(parts[0].src.shape == Shape{3, 2});
    CHECK(parts[1].src.shape == Shape{2, 2});
    CHECK(parts[1].src.data == std::vector<int32_t>{7, 8, 9, 10});
    CHECK(parts[1].tgt_out.data == std::vector<int32_t>{9, 2, 0, 2, 0, 0});
    CHECK(parts[1].src_mask.shape == Shape{2, 1, 2});
    CHECK(parts[1].tgt_mask.shape == Shape{2, 3, 3});
    CHECK(std::equal(parts[1].tgt_mask.data.begin(), parts[1].tgt_mask.data.end(), b.tgt_mask.data.begin() + 3 * 9));
    CHECK(parts[0].ntokens == 9);
    CHECK(parts[1].ntokens == 3);
    CHECK(b.share == 1.0f);
    CHECK(parts[0].share == 0.75f);   // 9 of 12 tokens, from 3 of the 5 rows
    CHECK(parts[1].share == 0.25f);
    // a part's part: shares of shares
    CHECK(models::split_batch(parts[0], 3)[2].share == doctest::Approx(0.75 * 3 / 9.0));
    // more parts than rows: the last ones are empty
    const std::vector<models::Batch> many = models::split_batch(b, 7);
    CHECK(many[4].src.shape == Shape{1, 2});
    CHECK(many[5].src.shape == Shape{0, 2});
    CHECK(many[6].ntokens == 0);
    CHECK_THROWS_WITH_AS(models::split_batch(b, 0), "split_batch: needs at least 1 part, got 0", std::invalid_argument);
    // a batch of no rows: every part empty
    const models::Batch none = models::make_batch(Tokens({}, {0, 2}), Tokens({}, {0, 4}), 0);
    const std::vector<models::Batch> empty = models::split_batch(none, 2);
    CHECK(empty[1].src.shape == Shape{0, 2});
    CHECK(empty[1].ntokens == 0);
    CHECK(empty[1].share == 0.0f);
}

TEST_CASE("sum_over_shards: the batch's loss and gradient, parts weighted by their tokens") {
    models::TransformerConfig cfg{.src_vocab = 11, .tgt_vocab = 11, .layers = 1, .d_model = 32, .d_ff = 64, .heads = 4, .dropout = 0.0f};
    manual_seed(3);
    models::Transformer model(cfg);
    model.train();
    // a batch whose rows have different numbers of tokens: the first 5 of 12 rows are short, so
    // weighting the parts by rows instead of tokens would give another gradient
    Rng rng(9);
    models::Batch b = data::make_copy_batch(rng, 11, 12, 8);
    Tokens tgt_out = b.tgt_out;
    for (int64_t r = 0; r < 5; r++)
        for (int64_t t = 2; t < tgt_out.size(1); t++) tgt_out[r * tgt_out.size(1) + t] = data::COPY_PAD;
    b = models::make_batch(b.src, [&] {   // rebuild tgt (B, T + 1) from tgt_in and the padded tgt_out
        Tokens tgt = Tokens::full({12, tgt_out.size(1) + 1}, data::COPY_PAD);
        for (int64_t r = 0; r < 12; r++) {
            tgt[r * tgt.size(1)] = b.tgt_in[r * b.tgt_in.size(1)];
            for (int64_t t = 0; t < tgt_out.size(1); t++) tgt[r * tgt.size(1) + t + 1] = tgt_out[r * tgt_out.size(1) + t];
        }
        return tgt;
    }(), data::COPY_PAD);
    const std::vector<models::Batch> parts = models::split_batch(b, 2);
    REQUIRE(parts[0].ntokens != parts[1].ntokens);
    auto loss_of = [&](const models::Batch& p) {
        return nn::cross_entropy(model.logits(p.src, p.tgt_in, p.src_mask, p.tgt_mask), p.tgt_out,
                                 {.ignore_index = data::COPY_PAD, .label_smoothing = 0.1f});
    };
    auto grads = [&] {
        std::vector<Tensor> g;
        for (Tensor& p : model.parameters()) g.push_back(p.grad()), p.zero_grad();
        return g;
    };
    // the examples' step: each part's mean loss weighted by its share of the batch's tokens
    auto step = [&](const models::Batch& part) { return loss_of(part) * part.share; };
    const Tensor plain = loss_of(b);
    plain.backward();
    const std::vector<Tensor> want = grads();

    CHECK(models::sum_over_shards(b, 1, step) == plain.item());   // shards = 1: exactly the plain step
    const std::vector<Tensor> one = grads();
    for (size_t i = 0; i < want.size(); i++) CHECK(same_bits(one[i], want[i]));

    for (int shards : {2, 3, 12, 15}) {
        CAPTURE(shards);
        const float loss = models::sum_over_shards(b, shards, step);
        CHECK(loss == doctest::Approx(plain.item()).epsilon(1e-5));
        const std::vector<Tensor> got = grads();
        double worst = 0.0, scale = 0.0;
        for (size_t i = 0; i < want.size(); i++)
            for (int64_t j = 0; j < want[i].numel(); j++) {
                worst = std::max(worst, std::fabs(double(got[i].data()[j]) - want[i].data()[j]));
                scale = std::max(scale, std::fabs(double(want[i].data()[j])));
            }
        CHECK(worst <= 1e-5 * scale);
    }
    CHECK_THROWS_WITH_AS(models::sum_over_shards(b, 0, step), "sum_over_shards: shards must be at least 1, got 0",
                         std::invalid_argument);
    // a part without tokens is not run: 12 rows in 15 parts leave 3 empty (parts run side by side:
    // each writes only its own slot, found by its first row's source tokens)
    std::vector<int64_t> seen(15, -1);
    const std::vector<models::Batch> pieces = models::split_batch(b, 15);
    const float total = models::sum_over_shards(b, 15, [&](const models::Batch& part) {
        for (size_t i = 0; i < pieces.size(); i++)
            if (pieces[i].ntokens > 0 && pieces[i].src.data == part.src.data) seen[i] = part.ntokens;
        return Tensor::scalar(part.share);   // no graph: nothing to backpropagate
    });
    for (size_t i = 0; i < 15; i++) CHECK(seen[i] == (i < 12 ? pieces[i].ntokens : -1));
    CHECK(total == doctest::Approx(1.0));   // the shares add up to the whole batch
}
