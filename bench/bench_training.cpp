// Training-step benchmark: median time per step and tokens/s of the copy task's Transformer, plus
// the process's peak resident memory. One configuration per run, so peak RSS is that config's:
//   ./build/bench/bench_training default | d128 | paper  [steps [shards]]
// Each step cuts its batch into the examples' --shards row slices (default 2), which the threads
// take side by side (models/data_parallel.h); a third argument sets another count.
// "serial spells" at the end of the line counts the times the busy-cores watch
// (autograd/kernels/busy_cores.h) found the threads waiting for a core and sent the kernels to
// one thread for a while: a 2-thread median with several is partly a 1-thread one.
// A "-bf16" suffix (paper-bf16, d128-bf16) trains under MixedPrecisionGuard: the Linear and
// attention products in bf16 (docs/16), like torch_copy_task.py --bf16 (torch.autocast).
// The configurations match bench/torch_copy_task.py (the same model and loop in PyTorch) run as
//   default: (ours only) N=2 D=128 F=256 h=4, B=128, no dropout  (the example's default)
//   d128:    --d_model 128 --d_ff 512   (N=2, h=8, B=80, dropout 0.1)
//   paper:   the defaults               (N=2, D=512, F=2048, h=8, B=80, dropout 0.1)
// and bench/torch_rnn_seq2seq.py (its defaults):
//   rnn-attention: the GRU encoder-decoder with additive attention (models/rnn_seq2seq.h),
//            E=64 Hd=128, a bidirectional encoder, B=64, sequences of 20, no dropout
// To compare thread counts, alternate whole runs (OMP_NUM_THREADS=1, 2, 1, 2, ...) and take the
// median of the per-pair ratios. (Alternating 1 and 2 threads step by step inside one process
// read 1.6x where alternated runs read 1.85x: the 2-thread steps paid for caches the 1-thread
// steps had warmed on one core, and for waking the second thread.)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/kernels/busy_cores.h"
#include "autograd/kernels/parallel.h"
#include "autograd/mixed_precision.h"
#include "examples/common/training_flags.h"
#include "examples/data/copy_task_data.h"
#include "models/data_parallel.h"
#include "models/rnn_seq2seq.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"

int main(int argc, char** argv) {
    std::string name = argc > 1 ? argv[1] : "default";
    const std::string suffix = "-bf16";
    const bool bf16 = name.size() > suffix.size() && name.ends_with(suffix);
    if (bf16) name.resize(name.size() - suffix.size());
    autograd::MixedPrecisionGuard mixed_precision(bf16);
    models::TransformerConfig cfg{.src_vocab = 11, .tgt_vocab = 11, .layers = 2};
    int64_t B = 80, steps = 30, L = 10;
    const bool rnn = name == "rnn-attention";
    if (name == "default") {
        cfg.d_model = 128, cfg.d_ff = 256, cfg.heads = 4, cfg.dropout = 0.0f, B = 128, steps = 100;
    } else if (name == "d128") {
        cfg.d_model = 128, cfg.d_ff = 512, cfg.heads = 8, cfg.dropout = 0.1f, steps = 100;
    } else if (name == "paper") {
        cfg.d_model = 512, cfg.d_ff = 2048, cfg.heads = 8, cfg.dropout = 0.1f;
    } else if (rnn) {
        B = 64, L = 20, steps = 30;
    } else {
        std::fprintf(stderr, "bench_training: unknown config '%s' (default, d128, paper, rnn-attention; -bf16 suffix for mixed precision)\n", name.c_str());
        return 2;
    }
    if (argc > 2) steps = std::max(1, std::atoi(argv[2]));
    const int64_t warmup = 3;
    // --shards of the examples: their default, or the third argument
    const int shards = argc > 3 ? std::max(1, std::atoi(argv[3])) : common::TrainingFlags{}.shards;

    autograd::manual_seed(0);
    autograd::Rng rng(1);
    const models::RNNSeq2SeqConfig rcfg{.src_vocab = 11, .tgt_vocab = 11, .embed = 64, .hidden = 128, .cell = nn::CellKind::gru,
                                        .context = models::Context::bahdanau, .bidirectional = true, .dropout = 0.0f};
    std::unique_ptr<models::Seq2Seq> made;
    if (rnn) made = std::make_unique<models::RNNSeq2Seq>(rcfg);
    else made = std::make_unique<models::Transformer>(cfg);
    models::Seq2Seq& model = *made;
    optim::Adam opt(model.parameters(), {.lr = 0.0f, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f});
    optim::NoamSchedule sched(opt, cfg.d_model, 400, 0.5f);
    model.train();
    std::vector<double> ms;
    for (int64_t s = 0; s < warmup + steps; s++) {
        const auto t0 = std::chrono::steady_clock::now();
        const models::Batch b = data::make_copy_batch(rng, 11, B, L);
        opt.zero_grad();   // first: last step's gradients are freed before this step's activations pile up
        models::sum_over_shards(b, shards, [&](const models::Batch& part) {   // as the examples train
            return nn::cross_entropy(model.logits(part.src, part.tgt_in, part.src_mask, part.tgt_mask), part.tgt_out) * part.share;
        });
        sched.step();
        opt.step();
        const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (s >= warmup) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    const std::string shape = rnn ? rcfg.describe() : common::describe(cfg, bf16);
    std::printf("%-10s %s B=%lld threads=%d shards=%d | median %7.1f ms/step "
                "(min %.1f, max %.1f, %lld steps) | %7.0f tokens/s | peak RSS %.0f MB (tensors %.0f MB) | serial spells %lld\n",
                (name + (bf16 ? suffix : "")).c_str(), shape.c_str(), (long long)B, autograd::kernels::max_threads(), shards, median, ms.front(), ms.back(), (long long)steps,
                B * (L - 1) / (median / 1000.0), ru.ru_maxrss / 1024.0,
                autograd::kernels::memory_stats().peak_live_bytes / 1048576.0,
                (long long)autograd::kernels::serial_spells());
    return 0;
}
