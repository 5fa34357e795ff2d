// What a translation training step costs, by model family and batch shape: the measurements the
// translation example's --data epoch rule is fitted to (examples/common/training_work.h,
// bench/RESULTS.md "The fair fight on text not tuned on").
//
//   make build/bench/bench_translation_cost
//   OMP_NUM_THREADS=2 ./build/bench/bench_translation_cost [V [steps]]
//
// For the Transformer and rnn-attention as translation --data builds them by default (N=2 D=128
// F=512 h=4 tied; a GRU of E=128 Hd=256, 2 layers, bidirectional, additive score), and for
// batches of about 1000 source and 1000 target tokens (the example's --batch-tokens default) at
// sentence lengths from 4 to 60, one line each: B, S, T, the forward pass's work
// (training_work.h: multiply-adds, the output layer's, attention scores, sequential steps), and
// the mean milliseconds of a training step (forward, backward and Adam, 2 shards as the example
// runs them). The families are alternated shape by shape, so that a drift of the machine's speed
// falls on both.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "autograd/autograd.h"
#include "models/rnn_seq2seq.h"
#include "models/transformer.h"
#include "examples/common/training_work.h"
#include "models/data_parallel.h"
#include "nn/nn.h"
#include "optim/optim.h"

namespace {

models::Batch random_batch(autograd::Rng& rng, int64_t B, int64_t S, int64_t T, int64_t V) {
    autograd::Tokens src = autograd::Tokens::full({B, S}, 0), tgt = autograd::Tokens::full({B, T + 1}, 0);
    for (auto& id : src.data) id = static_cast<int32_t>(4 + rng.below(static_cast<uint32_t>(V - 4)));
    for (auto& id : tgt.data) id = static_cast<int32_t>(4 + rng.below(static_cast<uint32_t>(V - 4)));
    return models::make_batch(src, tgt, 0);
}

double mean_step_ms(models::Seq2Seq& model, optim::Adam& opt, const models::Batch& b, int steps) {
    std::vector<double> ms;
    for (int i = 0; i < steps + 1; i++) {   // the first step warms the allocator and is not counted
        const auto t0 = std::chrono::steady_clock::now();
        opt.zero_grad();
        models::sum_over_shards(b, 2, [&](const models::Batch& part) {
            return model.loss(part, {.ignore_index = 0, .label_smoothing = 0.1f}) * part.share;
        });
        opt.step();
        if (i > 0) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    double sum = 0;   // the mean, not the median: an epoch's time is the sum of its steps, the slow ones too
    for (double m : ms) sum += m;
    return sum / static_cast<double>(ms.size());
}

}  // namespace

int main(int argc, char** argv) {
    const int64_t V = argc > 1 ? std::atoll(argv[1]) : 12000;
    const int steps = argc > 2 ? std::atoi(argv[2]) : 5;
    autograd::manual_seed(1);
    const models::TransformerConfig transformer{.src_vocab = V, .tgt_vocab = V, .layers = 2, .d_model = 128, .d_ff = 512,
                                                .heads = 4, .dropout = 0.1f, .max_len = 512, .tie_weights = true};
    const models::RNNSeq2SeqConfig rnn{.src_vocab = V, .tgt_vocab = V, .embed = 128, .hidden = 256, .layers = 2,
                                       .cell = nn::CellKind::gru, .context = models::Context::bahdanau, .bidirectional = true,
                                       .score = nn::Score::additive, .dropout = 0.1f};
    std::unique_ptr<models::Seq2Seq> models[2] = {std::make_unique<models::Transformer>(transformer),
                                                  std::make_unique<models::RNNSeq2Seq>(rnn)};
    std::unique_ptr<optim::Adam> opts[2];
    for (int f = 0; f < 2; f++) opts[f] = std::make_unique<optim::Adam>(models[f]->parameters(), optim::AdamOptions{.lr = 1e-4f});
    std::printf("family B S T multiply_adds output_multiply_adds attention_scores sequential_steps ms_per_step (V=%lld, %d threads)\n",
                (long long)V, autograd::num_threads());
    autograd::Rng rng(7);
    for (const int64_t L : {4, 6, 8, 12, 16, 24, 32, 45, 60}) {
        const int64_t S = L, T = L + 2, B = std::max<int64_t>(1, 1000 / (T + 1));
        const models::Batch b = random_batch(rng, B, S, T, V);
        for (int f = 0; f < 2; f++) {
            const common::StepWork w = common::forward_work(*models[f], B, S, T + 1);
            const double ms = mean_step_ms(*models[f], *opts[f], b, steps);
            std::printf("%s %lld %lld %lld %.0f %.0f %.0f %.0f %.2f\n", f == 0 ? "transformer" : "rnn-attention", (long long)B,
                        (long long)S, (long long)T + 1, w.multiply_adds, w.output_multiply_adds, w.attention_scores, w.sequential_steps, ms);
            std::fflush(stdout);
        }
    }
}
