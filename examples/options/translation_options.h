// The translation example's command line (examples/translation.cpp): every flag, its default and
// its checks.
#pragma once
#include <string>

#include "examples/common/training_flags.h"
#include "examples/data/translation_data.h"
#include "models/decoding.h"

namespace options {

// --epochs' default with --data: scale / sqrt(training pairs), between 1 and 30
// (data::default_epochs). Chosen by validation loss on a 4,519-pair and a 41,808-pair corpus, so
// that the default Transformer trains in no more time than the default rnn-attention
// (bench/RESULTS.md, "The fair fight on real text"): at 41,808 pairs 15 epochs against 6, where
// a Transformer epoch takes about a third of an rnn-attention one.
constexpr double kTransformerEpochScale = 3000, kRecurrentEpochScale = 1300;

struct Translation {
    common::TrainingFlags train{.model = {.layers = 2, .d_model = 128, .d_ff = 512, .heads = 4, .dropout = 0.1f}, .warmup = 400};
    data::CorpusOptions corpus;
    int epochs = -1;         // -1: 10 for the toy corpus, default_epochs() with the family's scale for --data
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

// --epochs' default for a --data corpus of train_pairs training pairs and --model model_kind.
int default_epochs(const std::string& model_kind, size_t train_pairs);

// Parses argv: on a bad flag, one line on stderr and exit 2 (--help: the usage, exit 0). Before
// anything runs: outputs that cannot be written, that name an input or another output, or that
// exist without --overwrite (output_files.h).
Translation parse_translation(int argc, char** argv);

}  // namespace options
