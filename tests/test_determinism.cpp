// Determinism: the same seed gives bit-identical training, whatever the thread count, and a run
// resumed from a checkpoint continues exactly as the uninterrupted run.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>

#include <unistd.h>   // getpid: temp file names unique to this run

#include "autograd/kernels/parallel.h"
#include "examples/data/copy_task_data.h"
#include "models/checkpoint.h"
#include "models/data_parallel.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tests/thread_count.h"

using namespace autograd;

namespace {

models::TransformerConfig small_cfg() {
    // dropout on, so the generator stream is part of what must match; sizes big enough that gemm
    // and attention split over threads (the row kernels stay below their thresholds here: their
    // threaded paths are tested one by one in test_threaded_kernels.cpp)
    return {.src_vocab = 11, .tgt_vocab = 11, .layers = 2, .d_model = 64, .d_ff = 128, .heads = 4, .dropout = 0.1f};
}

struct Run {
    models::Transformer model;
    optim::Adam opt;
    optim::NoamSchedule sched;
    Rng data;
    int shards;   // each batch in this many row slices, side by side (models/data_parallel.h)
    explicit Run(uint64_t seed, int shards_ = 1)
        : model((manual_seed(seed), small_cfg())),
          opt(model.parameters(), {.lr = 0.0f, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f}),
          sched(opt, 64, 10),
          data(seed + 1),
          shards(shards_) {}
    float steps(int n) {
        float last = 0.0f;
        for (int i = 0; i < n; i++) {
            const models::Batch b = data::make_copy_batch(data, 11, 48, 10);
            opt.zero_grad();
            last = models::sum_over_shards(b, shards, [&](const models::Batch& p) {
                return nn::cross_entropy(model.logits(p.src, p.tgt_in, p.src_mask, p.tgt_mask), p.tgt_out) * p.share;
            });
            sched.step();
            opt.step();
        }
        return last;
    }
};

bool same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); i++)
        if (a[i].numel() != b[i].numel() || std::memcmp(a[i].data(), b[i].data(), a[i].numel() * sizeof(float)) != 0) return false;
    return true;
}

}  // namespace

TEST_CASE("same seed: bit-identical losses and parameters") {
    // one after the other: both draw dropout masks from the global generator that Run reseeds
    Run a(5);
    const float la = a.steps(4);
    Run b(5);
    const float lb = b.steps(4);
    CHECK(la == lb);
    CHECK(same_bits(a.model.parameters(), b.model.parameters()));
    Run c(6);
    c.steps(4);
    CHECK_FALSE(same_bits(a.model.parameters(), c.model.parameters()));   // and the seed matters
}

TEST_CASE("bit-identical results with 1 and 2 OpenMP threads") {
    if (!autograd::kernels::kOpenMP) {
        MESSAGE("skipped: built without OpenMP (make OPENMP=0), so there is only one thread");
        return;
    }
    const int before = autograd::kernels::max_threads();
    autograd::kernels::set_max_threads(1);
    Run one(7);
    const float l1 = one.steps(4);
    autograd::kernels::set_max_threads(2);
    Run two(7);
    const float l2 = two.steps(4);
    autograd::kernels::set_max_threads(before);
    CHECK(l1 == l2);
    CHECK(same_bits(one.model.parameters(), two.model.parameters()));
}

TEST_CASE("data-parallel steps: the same bits on 1, 2 and 3 threads; the shard count changes the answer") {
    // dropout on: each shard draws its masks from its own generator, whichever thread runs it
    for (int shards : {2, 3}) {
        CAPTURE(shards);
        std::vector<float> losses;
        std::vector<std::vector<Tensor>> params;
        for (int threads : {1, 2, 3}) {
            ThreadCount tc(threads);
            Run run(7, shards);
            losses.push_back(run.steps(4));
            params.push_back(run.model.parameters());
        }
        CHECK(losses[0] == losses[1]);
        CHECK(losses[0] == losses[2]);
        CHECK(same_bits(params[0], params[1]));
        CHECK(same_bits(params[0], params[2]));
        Run whole(7, 1);
        const float l1 = whole.steps(4);
        CHECK(l1 != losses[0]);   // other dropout masks, other sums: another answer
        CHECK_FALSE(same_bits(whole.model.parameters(), params[0]));
    }
}

TEST_CASE("resume: N steps + checkpoint + N steps equals 2N steps straight") {
    const int N = 3;
    Run straight(8);
    straight.steps(2 * N);

    const auto dir = std::filesystem::temp_directory_path();
    const std::string model_path = (dir / ("resume_model_" + std::to_string(::getpid()) + ".safetensors")).string();
    const std::string opt_path = (dir / ("resume_opt_" + std::to_string(::getpid()) + ".safetensors")).string();
    {
        Run first(8);
        first.steps(N);
        // everything a resumed run needs: parameters, optimizer state, schedule step, both generators
        nn::save(first.model, model_path,
                 models::to_metadata({{"rng", models::rng_to_json(default_rng())}, {"data_rng", models::rng_to_json(first.data)},
                                      {"step", first.sched.current_step()}}));
        optim::save_optimizer(first.opt, opt_path);
    }
    manual_seed(12345);   // scramble the global generator: the checkpoint must restore it
    Run resumed(99);      // different init and data stream, overwritten by the load
    const nn::Metadata meta = nn::load(resumed.model, model_path);
    optim::load_optimizer(resumed.opt, opt_path);
    resumed.sched.set_step(models::read_metadata(meta, "step", model_path, models::integer_from_json));
    default_rng() = models::read_metadata(meta, "rng", model_path, models::rng_from_json);
    resumed.data = models::read_metadata(meta, "data_rng", model_path, models::rng_from_json);
    resumed.steps(N);
    CHECK(same_bits(straight.model.parameters(), resumed.model.parameters()));
    std::filesystem::remove(model_path);
    std::filesystem::remove(opt_path);
}

TEST_CASE("generator state as JSON: round trip, and bad input named") {
    namespace json = models::json;
    Rng g(1);
    g.normal();   // leaves the second Box-Muller normal waiting: it must travel too
    Rng h = models::rng_from_json(json::parse(json::dump(models::rng_to_json(g))));
    CHECK(h.normal() == g.normal());
    CHECK(h.next_u64() == g.next_u64());
    const auto error = [](const std::string& text) {
        try {
            models::rng_from_json(json::parse(text));
        } catch (const std::runtime_error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK(error(R"({"state":["1","2","3","18446744073709551615"],"spare":0.5,"has_spare":true})") == "");
    CHECK(error(R"({"state":["1","2","3"],"spare":0,"has_spare":false})") == "key 'state': expected 4 words, got 3");
    CHECK(error(R"({"state":["0","0","0","0"],"spare":0,"has_spare":false})") ==
          "key 'state': the four words are all 0 (xoshiro256** would draw only zeros)");
    CHECK(error(R"({"state":["1","2","3","-4"],"spare":0,"has_spare":false})") ==
          "key 'state': expected an unsigned 64-bit integer in decimal, got '-4'");
    CHECK(error(R"({"state":["1","2","3",4],"spare":0,"has_spare":false})") == "key 'state': json: expected a string, got a number");
    CHECK(error(R"({"state":["1","2","3","4"],"spare":0,"has_spare":2})") == "key 'has_spare': json: expected a bool, got a number");
    CHECK(error(R"({"state":["1","2","3","4"],"has_spare":false})") == "missing key 'spare'");
    CHECK(error(R"({"state":["1","2","3","4"],"spare":0,"has_spare":false,"extra":1})") == "unknown key 'extra'");
}
