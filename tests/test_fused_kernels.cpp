// One switch trains through the plain path: the copy-task model trained twice from the same seed,
// with fused kernels on and under FusedKernelsGuard(false), gives the same losses and the same
// parameters up to float rounding, dropout included (both paths draw the same masks). And the
// switch really changes the path: the two runs record different ops.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "examples/data/copy_task_data.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"

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
