// One switch trains through the plain path: the copy-task model trained twice from the same seed,
// with fused kernels on and under FusedKernelsGuard(false), gives the same losses and the same
// parameters up to float rounding, dropout included (both paths draw the same masks). And the
// switch really changes the path: the two runs record different ops. Then every option of every
// nn function with a fused branch, walked (activation, bias, dropout, training, label smoothing,
// ignored targets, each attention score), and the whole GPT and recurrent models in training,
// dropout on and off, each fused and plain alike. (Adam's branch: tests/test_optim.cpp; the
// kernels' own cases and the cached attention: tests/test_kernels.cpp.)
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "examples/data/copy_task_data.h"
#include "models/batch.h"
#include "models/gpt.h"
#include "models/rnn_seq2seq.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tests/compare.h"
#include "tests/gradcheck_helpers.h"

using namespace autograd;

namespace {

struct Run {
    std::vector<float> losses;                                   // one per step
    std::vector<std::pair<std::string, Tensor>> parameters;      // after the last step
    std::set<std::string> ops;                                   // the op names of the first step's graph
};

// Every op name in the graph that made `root` (before backward() frees it).
std::set<std::string> ops_of(const Tensor& root) {
    std::set<std::string> ops;
    std::set<const Node*> seen;
    std::vector<const Node*> todo = {&root.node()};
    while (!todo.empty()) {
        const Node* n = todo.back();
        todo.pop_back();
        if (!seen.insert(n).second) continue;
        ops.insert(n->op);
        for (const auto& p : n->parents) todo.push_back(p.get());
    }
    return ops;
}

// `steps` Adam steps (Noam schedule) of a tiny copy-task Transformer with dropout 0.1 and label
// smoothing 0.1, on batches of 8 sequences of 10 symbols (T = 9 decoder positions).
Run train(bool fused, int steps) {
    FusedKernelsGuard path(fused);
    manual_seed(25);   // the same initial parameters and the same dropout seeds in both runs
    models::Transformer model({.src_vocab = 11, .tgt_vocab = 11, .layers = 2, .d_model = 32, .d_ff = 64, .heads = 4,
                               .dropout = 0.1f});
    optim::Adam opt(model.parameters(), {.lr = 0.0f, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f});
    optim::NoamSchedule sched(opt, model.cfg.d_model, 10, 1.0f);
    Rng data(7);
    model.train();
    Run run;
    for (int step = 0; step < steps; step++) {
        const models::Batch b = data::make_copy_batch(data, 11, /*B=*/8, /*L=*/10);
        const Tensor loss = nn::cross_entropy(model.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask), b.tgt_out,
                                              {.ignore_index = data::COPY_PAD, .label_smoothing = 0.1f});
        if (step == 0) run.ops = ops_of(loss);
        run.losses.push_back(loss.item());
        opt.zero_grad();
        loss.backward();
        sched.step();
        opt.step();
    }
    run.parameters = model.named_parameters();
    return run;
}

}  // namespace

TEST_CASE("fused and plain paths train the copy-task model to the same losses and parameters, with dropout") {
    const int steps = 30;
    const Run fused = train(true, steps), plain = train(false, steps);

    // the switch is read: the fused run records the fused ops, the plain run their primitives
    for (const char* op : {"linear", "linear_relu_dropout", "layer_norm", "attention", "cross_entropy", "dropout", "add_dropout"}) {
        CAPTURE(op);
        CHECK(fused.ops.count(op) == 1);
        CHECK(plain.ops.count(op) == 0);
    }
    for (const char* op : {"matmul", "softmax", "log_softmax", "masked_fill", "nll_loss", "mean", "relu"}) {
        CAPTURE(op);
        CHECK(plain.ops.count(op) == 1);
        CHECK(fused.ops.count(op) == 0);
    }

    // Tolerances: the two paths compute the same formulas with their float sums in a different
    // order (a fused row loop against separate primitive ops; double against float in the loss),
    // so each step's values differ in the last bits, about 1e-7 relative, and the differences
    // grow a little over the run as Adam feeds them back (30 steps here end near 5e-6 in the
    // parameters). So: losses within 1e-5 relative, parameters within 1e-4 absolute (weights are
    // around 0.1-1). A real difference (another dropout mask, a wrong term) moves the loss by 1e-2
    // or more from the first step.
    for (int s = 0; s < steps; s++) {
        CAPTURE(s);
        CHECK(plain.losses[s] == doctest::Approx(fused.losses[s]).epsilon(1e-5));
    }
    CHECK(fused.losses.back() < fused.losses.front() - 0.2f);   // and it learned something
    REQUIRE(fused.parameters.size() == plain.parameters.size());
    double worst = 0.0;
    std::string worst_name;
    for (size_t i = 0; i < fused.parameters.size(); i++) {
        const Tensor &a = fused.parameters[i].second, &b = plain.parameters[i].second;
        REQUIRE(a.shape() == b.shape());
        // w_k's bias adds the same q.b_k to every score of a query row, which softmax ignores: its
        // gradient is rounding noise in both paths (docs/07), different noise, and Adam turns
        // noise into steps of about the learning rate. No output depends on it.
        if (fused.parameters[i].first.find("w_k.bias") != std::string::npos) continue;
        for (int64_t j = 0; j < a.numel(); j++) {
            const double d = std::fabs(static_cast<double>(a.data()[j]) - b.data()[j]);
            if (d > worst) worst = d, worst_name = fused.parameters[i].first;
        }
    }
    INFO("largest parameter difference " << worst << " in " << worst_name);
    CHECK(worst < 1e-4);
}

// ---- every option, both paths

using V = const std::vector<Tensor>&;

namespace {

// The elements dropout zeroed: 0 in `dropped`, not 0 in `kept` (the same computation without dropout).
int64_t zeroed(const Tensor& dropped, const Tensor& kept) {
    REQUIRE(dropped.shape() == kept.shape());
    int64_t n = 0;
    for (int64_t i = 0; i < kept.numel(); i++) n += dropped.data()[i] == 0.0f && kept.data()[i] != 0.0f;
    return n;
}

}  // namespace

TEST_CASE("fused equals plain for every option of every layer with a fused branch: linear's activations, bias, dropout and "
          "training; dropout and add_dropout; both losses; each soft-attention score") {
    manual_seed(71);
    const Tensor x = param({2, 3, 5}), w = param({7, 5}), b = param({7}), y = param({2, 3, 7});
    // nn::linear: every activation, with and without a bias, dropout on and off, in training and in evaluation
    for (const nn::Activation act : {nn::Activation::none, nn::Activation::relu, nn::Activation::gelu})
        for (const bool with_bias : {true, false})
            for (const float p : {0.0f, 0.4f})
                for (const bool training : {true, false}) {
                    CAPTURE(static_cast<int>(act));
                    CAPTURE(with_bias);
                    CAPTURE(p);
                    CAPTURE(training);
                    const Tensor bias = with_bias ? b : Tensor();
                    auto f = [&](V v) { manual_seed(72); return nn::linear(v[0], v[1], with_bias ? v[2] : Tensor(), act, p, training); };
                    expect_fused_equals_plain(f, with_bias ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x, w}, 1e-5, 1e-6);
                    for (const bool fused : {true, false}) {   // and on each path the option is read: dropout only in training
                        CAPTURE(fused);
                        FusedKernelsGuard path(fused);
                        NoGradGuard no_grad;
                        manual_seed(72);
                        const Tensor out = nn::linear(x, w, bias, act, p, training), none = nn::linear(x, w, bias, act, 0.0f, false);
                        if (p > 0.0f && training) CHECK(zeroed(out, none) > 0);
                        else CHECK(out.to_vector() == none.to_vector());
                    }
                }
    // dropout and add_dropout: in training the two paths drop the same elements; in evaluation nothing is dropped
    const Tensor z = param({2, 3, 7});
    for (const float p : {0.0f, 0.4f})
        for (const bool training : {true, false}) {
            CAPTURE(p);
            CAPTURE(training);
            expect_fused_equals_plain([&](V v) { manual_seed(73); return nn::dropout(v[0], p, training); }, {y}, 1e-6, 1e-7);
            expect_fused_equals_plain([&](V v) { manual_seed(73); return nn::add_dropout(v[0], v[1], p, training); }, {y, z}, 1e-6, 1e-7);
            for (const bool fused : {true, false}) {
                CAPTURE(fused);
                FusedKernelsGuard path(fused);
                NoGradGuard no_grad;
                manual_seed(73);
                const Tensor dropped = nn::dropout(y, p, training), added = nn::add_dropout(y, z, p, training);
                if (p > 0.0f && training) {
                    CHECK(zeroed(dropped, y) > 0);
                    CHECK(zeroed(added - y, z) > 0);
                } else {
                    CHECK(dropped.to_vector() == y.to_vector());
                    CHECK(added.to_vector() == (y + z).to_vector());
                }
            }
        }
    // the losses: label smoothing on and off, ignored targets or none; the output layer's with and without a bias
    const Tokens targets({3, 0, 6, 1, 0, 2}, {2, 3});
    for (const float eps : {0.0f, 0.15f})
        for (const int32_t ignore : {-100, 0}) {
            CAPTURE(eps);
            CAPTURE(ignore);
            const nn::CrossEntropyOptions opt{.ignore_index = ignore, .label_smoothing = eps};
            expect_fused_equals_plain([&](V v) { return nn::cross_entropy(v[0], targets, opt); }, {y}, 1e-5, 1e-6);
            for (const bool with_bias : {true, false}) {
                CAPTURE(with_bias);
                expect_fused_equals_plain([&](V v) { return nn::linear_cross_entropy(v[0], v[1], with_bias ? v[2] : Tensor(), targets, opt); },
                                          with_bias ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x, w}, 1e-5, 1e-6);
            }
        }
    // soft attention, each score, over a padded batch: the context and the gradients of the query, the values and every weight
    const Mask mask({1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0}, {3, 1, 5});   // rows of 5, 3 and 4 real positions
    for (const nn::Score score : {nn::Score::dot, nn::Score::general, nn::Score::cosine, nn::Score::additive}) {
        CAPTURE(nn::score_name(score));
        const int64_t Q = 4, Dv = score == nn::Score::dot ? 4 : 6, A = score == nn::Score::additive ? 7 : 4;
        manual_seed(74);
        const nn::SoftAttention attention(score, Q, Dv, A);
        std::vector<Tensor> leaves = {param({3, Q}, -2.0f, 2.0f), param({3, 5, Dv}, -2.0f, 2.0f)};
        for (const Tensor& p : attention.parameters()) leaves.push_back(p);
        expect_fused_equals_plain([&](V v) { return attention.forward(v[0], attention.keys(v[1]), v[1], mask).context; }, leaves, 1e-5,
                                  1e-6);
    }
}

TEST_CASE("fused equals plain for whole models in training, from the same seed: GPT with and without dropout; the recurrent "
          "models of two layers with each score and each cell, with and without dropout, with label smoothing") {
    // one training step's loss and every parameter's gradient, on the path `fused`
    struct Step {
        float loss;
        std::vector<Tensor> grads;
    };
    auto step = [](nn::Module& model, const std::function<Tensor()>& loss_of, bool fused) {
        FusedKernelsGuard path(fused);
        model.train();
        model.zero_grad();
        manual_seed(75);   // the same dropout masks on both paths
        const Tensor loss = loss_of();
        loss.backward();
        Step s{loss.item(), {}};
        for (const Tensor& p : model.parameters()) s.grads.push_back(p.grad().detach());
        return s;
    };
    auto expect_same_step = [&](nn::Module& model, const std::function<Tensor()>& loss_of) {
        const Step fused = step(model, loss_of, true), plain = step(model, loss_of, false);
        CHECK(fused.loss == doctest::Approx(plain.loss).epsilon(1e-5));
        const auto named = model.named_parameters();
        for (size_t i = 0; i < plain.grads.size(); i++) expect_close(fused.grads[i], plain.grads[i], 1e-3, 1e-5, "gradient of " + named[i].first);
        return fused.loss;
    };
    Rng rng(76);
    for (const float p : {0.0f, 0.2f}) {
        CAPTURE(p);
        manual_seed(77);
        models::GPT gpt({.vocab = 7, .block_size = 6, .layers = 2, .heads = 3, .d_model = 12, .dropout = p});
        Tokens ids = Tokens::full({2, 5}, 0), next = Tokens::full({2, 5}, 0);
        for (int32_t& t : ids.data) t = static_cast<int32_t>(rng.below(7));
        for (int32_t& t : next.data) t = static_cast<int32_t>(rng.below(7));
        const float trained = expect_same_step(gpt, [&] { return gpt.loss(ids, next); });
        gpt.eval();
        const float evaluated = gpt.loss(ids, next).item();   // dropout moves the loss in training only
        if (p == 0.0f) CHECK(evaluated == doctest::Approx(trained).epsilon(1e-6));
        else CHECK(std::fabs(evaluated - trained) > 1e-3);
    }
    const Tokens src({1, 3, 4, 5, 2, 1, 6, 8, 0, 0, 1, 7, 7, 3, 0}, {3, 5});
    models::Batch b;
    b.src = src, b.src_mask = models::padding_mask(src, 0);
    b.tgt_in = Tokens({1, 2, 3, 4, 1, 5, 5, 6, 1, 6, 2, 2}, {3, 4}), b.tgt_out = Tokens({2, 3, 4, 6, 5, 5, 6, 0, 6, 2, 2, 3}, {3, 4});
    for (const nn::Score score : {nn::Score::dot, nn::Score::general, nn::Score::cosine, nn::Score::additive})
        for (const nn::CellKind cell : {nn::CellKind::gru, nn::CellKind::lstm})
            for (const float p : {0.0f, 0.3f}) {
                CAPTURE(nn::score_name(score));
                CAPTURE(static_cast<int>(cell));
                CAPTURE(p);
                manual_seed(78);
                models::RNNSeq2Seq model({.src_vocab = 9, .tgt_vocab = 7, .embed = 5, .hidden = 6, .layers = 2, .cell = cell,
                                          .context = models::Context::bahdanau, .bidirectional = score != nn::Score::dot,
                                          .score = score, .dropout = p});
                expect_same_step(model, [&] { return model.loss(b, {.ignore_index = 0, .label_smoothing = 0.1f}); });
            }
}
