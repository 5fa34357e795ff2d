// The flags both examples share: the Transformer's shape and dropout (written straight into a
// models::TransformerConfig), the Noam learning-rate schedule, the seed, the thread count and the
// batch's shards, mixed precision and --reference.
//
//   common::TrainingFlags t{.model = {.layers = 2, .d_model = 128, .d_ff = 512, .heads = 4}};   // this example's defaults
//   common::add_training_flags(p, t, "random seed (init, dropout, data)");
//   p.parse(argc, argv);
//   common::apply_training_flags(p, t);                  // validates t.model, sets the threads
//   t.model.src_vocab = t.model.tgt_vocab = V;           // once the data is known
//   autograd::FusedKernelsGuard fused(!t.reference);     // --reference: the plain autograd ops of nn/
//   autograd::MixedPrecisionGuard mixed_precision(t.bf16);   // --bf16: bf16 matrix products
//   models::Transformer model(t.model);
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "examples/common/args.h"
#include "models/rnn_seq2seq.h"
#include "models/transformer.h"
#include "optim/lr_schedule.h"

namespace common {

struct TrainingFlags {
    std::string model_kind = "transformer";   // --model: transformer, rnn or rnn-attention (add_model_flags)
    models::TransformerConfig model;   // --layers --d-model --heads --d-ff --dropout; the vocab sizes come with the data
    // --model rnn / rnn-attention: --cell --embed --hidden --context --score --reverse-source
    // --unidirectional, and --layers --dropout (apply_training_flags copies those two in)
    models::RNNSeq2SeqConfig rnn{.embed = 128, .hidden = 256};
    std::string rnn_cell = "", rnn_context = "sutskever", rnn_score = "additive";   // --cell (""; the model's own) --context --score
    bool rnn_unidirectional = false;   // --unidirectional (rnn-attention)
    bool model_given = false;          // --model was on the command line (apply_training_flags)
    std::vector<std::string> shape_flags_given = {};   // the model-shaping flags on the command line (apply_training_flags)
    int warmup = 400;                  // warmup steps of the learning-rate schedule
    float lr_factor = 1.0f;            // lr = lr_factor * Noam(step)
    uint64_t seed = 1;
    int threads = 0;                   // OpenMP threads, 0: all cores
    int shards = 2;                    // row slices of a batch, run side by side (models/data_parallel.h)
    bool bf16 = false;                 // mixed precision: Linear and attention products in bf16 (docs/16)
    bool reference = false;            // every layer runs its plain form (autograd ops), no fused kernel
};

// --layers --d-model --heads --d-ff --dropout --warmup --lr-factor --seed --threads --shards
// --bf16 --reference, with the values in `t` as their defaults. lr_factor_help, when given, is
// --lr-factor's help (an example whose default depends on its data says so there).
void add_training_flags(ArgParser& p, TrainingFlags& t, const std::string& seed_help,
                        const std::string& lr_factor_help = "factor of the Noam schedule");

// --model and the recurrent models' flags (the translation example).
void add_model_flags(ArgParser& p, TrainingFlags& t);

// The model the flags describe, for vocabularies of these sizes: a Transformer (t.model) or a
// recurrent encoder-decoder (t.rnn), with or without attention.
std::unique_ptr<models::Seq2Seq> make_model(const TrainingFlags& t, int64_t src_vocab, int64_t tgt_vocab);
// The peak of one training step (memory_budget.h) of the model make_model would make, from its
// config alone: checked before the model is built, a model larger than the memory never is.
int64_t training_peak_bytes(const TrainingFlags& t, int64_t src_vocab, int64_t tgt_vocab, int64_t B, int64_t S, int64_t T,
                            bool full_logits);
// "transformer", "rnn" or "rnn-attention": the --model that makes a model of this kind.
std::string model_name(const models::Seq2Seq& model);
// With --load: throws std::runtime_error naming both when a --model given on the command line
// is not the kind of model the file holds (its own config is what the program then uses).
void check_model_kind(const TrainingFlags& t, const models::Seq2Seq& loaded, const std::string& path);

// With --load: the model comes from the file. Throws std::runtime_error when a model-shaping flag
// given on the command line (--layers, --d-model, --heads, --d-ff, --embed, --hidden, --cell, ...)
// disagrees with the file's model, naming the flag, its value and the file's.
void check_load_flags(const TrainingFlags& t, const models::Seq2Seq& loaded, const std::string& path);

// Before training: a PATH an output flag names must be writable now (its folder exists and takes
// a new file; no loop of symbolic links, no device or FIFO there, a name that fits), so that no
// hour of training ends in "cannot write". Exits through p.fail otherwise.
void check_output_path(const ArgParser& p, const std::string& flag, const std::string& path);

// The width the Noam schedule scales by: d_model, or a recurrent model's Hd.
int64_t model_width(const TrainingFlags& t);

// After parsing: exits through p.fail() with TransformerConfig::validate()'s message when the
// model's flags do not fit together (--heads must divide --d-model), and when --reference and
// --bf16 are both given; when a flag of one kind of model is given for another (--heads for
// --model rnn, --score without attention, ...); applies --threads; with --bf16 on a CPU without AVX512_BF16, says so in
// one line and exits with status 2 (the portable bf16 path would be correct, but slower than
// fp32: not what --bf16 is asked for).
void apply_training_flags(const ArgParser& p, TrainingFlags& t);

// --threads N: more than the cores this process may use is lowered to them, with a warning (the
// extra threads would only wait for each other's turn); then the library runs on N (0: all cores).
void apply_threads_flag(const ArgParser& p, int& threads);

// "N=2 D=128 F=256 h=4 dropout=0.1", for the line each example prints before training; a
// recurrent model as RNNSeq2SeqConfig::describe says it.
std::string describe(const models::TransformerConfig& cfg, bool bf16);
std::string describe(const models::Seq2Seq& model, bool bf16);

// "2 threads, 2 shards | kernels: fused" (or "kernels: plain autograd ops (--reference)" inside a
// FusedKernelsGuard that turns them off): how the layers run, for the same line.
std::string describe_compute(int shards);

// The learning-rate schedule named by a --schedule flag, over a run of total_steps:
//   "noam":   lr = lr_factor * Noam(d_model, warmup)  (the paper's; it never comes down to 0)
//   "cosine": warmup steps from 0 to `lr`, then half a cosine down to 0 at total_steps (a run
//             shorter than its warmup is all warmup)
// Throws std::invalid_argument for another name.
std::unique_ptr<optim::LRSchedule> make_lr_schedule(optim::Optimizer& opt, const std::string& name, float lr,
                                                    float lr_factor, int64_t d_model, int warmup, int total_steps);

// A warmup-then-cosine schedule whose --steps leave no step after --warmup is cut short: the
// warmup is squeezed into the run, and the learning rate ends at its peak, never decayed. Says so
// in one line on stderr, naming both flags (a warning, not a refusal: such a command is usually a
// short trial). Nothing for --steps 0, which trains nothing.
void warn_if_no_decay(const ArgParser& p, int steps, int warmup, const std::string& peak);

// The same schedule in words: "lr = 0.5 * Noam(D=512, warmup=400)", or "lr: 100 warmup steps
// to 0.003, then a cosine down to 0 at step 600".
std::string describe_lr_schedule(const std::string& name, float lr, float lr_factor, int64_t d_model, int warmup,
                                 int total_steps);

}  // namespace common
