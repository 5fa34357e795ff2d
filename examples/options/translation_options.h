// The translation example's command line (examples/translation.cpp): every flag, its default and
// its checks.
#pragma once
#include <string>
#include <vector>

#include "examples/common/training_flags.h"
#include "examples/data/translation_data.h"
#include "models/decoding.h"

namespace options {

// --epochs' default with --data: every model family trains for the same estimated time, so that
// the Transformer and the recurrent models meet at equal cost on any corpus, whatever its
// sentence lengths (bench/RESULTS.md, "The fair fight on text not tuned on"). The time grows with
// the work in the training set, its tokens t (sources and targets):
//   budget = kBudgetSeconds x (t / 10^6)^kBudgetExponent seconds on the reference machine,
// and the epochs are that budget over one epoch's estimated seconds
// (common::estimated_epoch_seconds, from each batch's shape), between 1 and kMostDefaultEpochs.
constexpr double kBudgetSeconds = 720, kBudgetExponent = 0.8;
constexpr int kMostDefaultEpochs = 200;

struct Translation {
    common::TrainingFlags train{.model = {.layers = 2, .d_model = 128, .d_ff = 512, .heads = 4, .dropout = 0.1f}, .warmup = 400};
    data::CorpusOptions corpus;
    int epochs = -1;         // -1: 10 for the toy corpus, default_epochs() for --data
    int batch = 64, beam = 4;
    int average_last = 0;    // also score the average of the last K epochs' parameters
    int bpe = -1;            // -1: automatic for --data (see --help), word level for the toy corpus
    int batch_tokens = -1;   // -1: 1000 for --data, sentence batches (--batch) for the toy corpus
    float label_smoothing = 0.1f;
    bool bleu_lowercase = false, use_stdin = false, no_kv_cache = false, overwrite = false;
    bool sample = false;              // --sample: draw each token instead of beam search or greedy
    models::SampleOptions sampling;   // its --temperature, --top-k, --top-p; its seed is --seed
    bool memory_report = false;    // a line of memory figures after each phase of the run
    bool no_tie_weights = false;   // neither it nor --tie-weights: tied exactly when the vocabulary is shared
    std::string save = "translation.safetensors", load, translate, attention, plot, resume;
    bool no_save = false;          // --no-save: train without writing the model (save is then "")
};

// --epochs' default for a --data corpus, as above: the epochs, and the two estimates they come from.
struct EpochBudget {
    int epochs = 1;
    double budget_seconds = 0, epoch_seconds = 0;   // on the reference machine
};
EpochBudget default_epochs(const models::Seq2Seq& model, const data::TranslationData& d,
                           const std::vector<std::vector<size_t>>& batches);
// The epochs of epoch_seconds each closest to budget_seconds, between 1 and kMostDefaultEpochs.
int epochs_that_fit(double budget_seconds, double epoch_seconds);

// Parses argv: on a bad flag, one line on stderr and exit 2 (--help: the usage, exit 0). Before
// anything runs: outputs that cannot be written, that name an input or another output, or that
// exist without --overwrite (output_files.h).
Translation parse_translation(int argc, char** argv);

}  // namespace options
