// The flags both examples share: the Transformer's shape, dropout, the Noam learning-rate
// schedule, the seed, the thread count and mixed precision.
//
//   common::TrainingFlags t{.d_ff = 512, .dropout = 0.1f};   // this example's defaults
//   common::add_training_flags(p, t, "random seed (init, dropout, data)");
//   p.parse(argc, argv);
//   common::apply_training_flags(p, t);                      // checks D % h, sets the threads
//   models::Transformer model(common::transformer_config(t, V_src, V_tgt));
//   autograd::MixedPrecisionGuard mixed_precision(t.bf16);  // --bf16: bf16 matrix products
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "examples/common/args.h"
#include "models/transformer.h"
#include "optim/lr_schedule.h"

namespace common {

struct TrainingFlags {
    int64_t layers = 2;         // N
    int64_t d_model = 128;      // D
    int64_t heads = 4;          // h; must divide D
    int64_t d_ff = 256;         // F
    float dropout = 0.0f;
    int warmup = 400;           // warmup steps of the Noam schedule
    float lr_factor = 1.0f;     // lr = lr_factor * Noam(step)
    uint64_t seed = 1;
    int threads = 0;            // OpenMP threads, 0: all cores
    bool bf16 = false;          // mixed precision: Linear and attention products in bf16 (docs/15)
};

// --layers --d-model --heads --d-ff --dropout --warmup --lr-factor --seed --threads --bf16, with the
// values in `t` as their defaults.
void add_training_flags(ArgParser& p, TrainingFlags& t, const std::string& seed_help);

// After parsing: exits through p.fail() unless --heads divides --d-model; applies --threads; with
// --bf16 on a CPU without AVX512_BF16, says so in one line and exits with status 2 (the portable
// bf16 path would be correct, but slower than fp32: not what --bf16 is asked for).
void apply_training_flags(const ArgParser& p, const TrainingFlags& t);

models::TransformerConfig transformer_config(const TrainingFlags& t, int64_t src_vocab, int64_t tgt_vocab);

// "N=2 D=128 F=256 h=4 dropout=0.1", for the line each example prints before training.
std::string describe(const models::TransformerConfig& cfg);

// The learning-rate schedule named by a --schedule flag, over a run of total_steps:
//   "noam":   lr = lr_factor * Noam(d_model, warmup)  (the paper's; it never comes down to 0)
//   "cosine": warmup steps from 0 to `lr`, then half a cosine down to 0 at total_steps (a run
//             shorter than its warmup is all warmup)
// Throws std::invalid_argument for another name.
std::unique_ptr<optim::LRSchedule> make_lr_schedule(optim::Optimizer& opt, const std::string& name, float lr,
                                                    float lr_factor, int64_t d_model, int warmup, int total_steps);

}  // namespace common
