#include "examples/options/translation_options.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "examples/common/args.h"
#include "examples/common/output_files.h"
#include "examples/common/run_state.h"
#include "examples/common/training_work.h"

namespace options {

Translation parse_translation(int argc, char** argv) {
    Translation o;
    common::ArgParser p("translation", "Train a translator (the Transformer, or a recurrent encoder-decoder with or without "
                                       "attention) on the toy English->German corpus or a TSV file, report test BLEU, and "
                                       "translate sentences with a saved model.");
    p.add("--data", &o.corpus.data, "Tatoeba/Anki TSV file (source TAB target; a regular file of at most 2^30 bytes, as "
                                    "--valid and --test); default: the built-in toy corpus", "FILE");
    p.add("--valid", &o.corpus.valid, "separate validation TSV (default: split off --data)", "FILE");
    p.add("--test", &o.corpus.test, "separate test TSV (default: split off --data)", "FILE");
    p.flag("--lowercase", &o.corpus.lowercase, "lowercase all text before tokenizing");
    p.flag("--bleu-lowercase", &o.bleu_lowercase,
           "score case-insensitive BLEU (sacreBLEU -lc); default: case-sensitive against the raw references");
    p.add("--min-freq", &o.corpus.min_freq, "drop words seen fewer times in training (they become <unk>)").min(1);
    p.add("--bpe", &o.bpe,
          "byte-pair-encoding merges learned on both languages together (0: words). Default with --data: a quarter of "
          "the distinct training words, between 500 and 32000; the toy corpus stays word level (its 770 words are "
          "all frequent)").min(-1);
    p.flag("--tie-weights", &o.train.model.tie_weights,
           "one matrix for both embeddings and the pre-softmax projection (paper, section 3.4); the default with subwords "
           "(--data, or --bpe N), whose vocabulary is shared");
    p.flag("--no-tie-weights", &o.no_tie_weights, "separate embedding and projection matrices even with --bpe");
    p.add("--max-len", &o.corpus.max_len, "skip training pairs longer than this many tokens").range(1, data::kLongestMaxLen);
    p.add("--epochs", &o.epochs,
          "passes over the training set. Default: 10 for the toy corpus; with --data, as many as fit the same estimated "
          "time for every --model, a time that grows with the corpus's tokens (the header says both estimates)").min(-1);
    p.add("--batch", &o.batch, "sentence pairs per batch (B), when not batching by --batch-tokens").min(1);
    p.add("--batch-tokens", &o.batch_tokens,
          "batches of similar-length pairs with about this many source and target tokens each, padding included "
          "(paper: 25000 on 8 GPUs). Default with --data: 1000; the toy corpus: sentence batches (--batch). 0: --batch")
        .min(-1);
    common::add_training_flags(p, o.train, "random seed (data split, init, dropout, batch order, --sample's draws)",
                               "factor of the Noam schedule. Default: 1; with --data, 0.5 for the Transformer (bench/RESULTS.md, "
                               "\"The fair fight on real text\")");
    common::add_model_flags(p, o.train);
    p.add("--average-last", &o.average_last,
          "also score the average of the last K epochs' parameters (paper, section 6.1: the last 5 checkpoints)").min(0);
    p.add("--label-smoothing", &o.label_smoothing, "label smoothing eps (paper: 0.1)").range(0, 1);
    p.add("--beam", &o.beam, "beam width for the test score and for translating (0: greedy)").range(0, 64);
    p.flag("--sample", &o.sample, "translate (the test score, --translate, --stdin) by drawing each token from the model's "
                                  "distribution instead of beam search: a different translation for each --seed");
    p.add("--temperature", &o.sampling.temperature, "with --sample, T > 0: p ~ exp(logit / T); below 1 sharper (towards greedy), "
                                                    "above 1 flatter (towards uniform)", "T").min(0);
    p.add("--top-k", &o.sampling.top_k, "with --sample: draw among the K most likely tokens only (0: all)", "K").min(0);
    p.add("--top-p", &o.sampling.top_p, "with --sample: draw among the fewest most likely tokens whose probability reaches P "
                                        "(nucleus sampling; 1: all)", "P").range(0, 1);
    p.add("--save", &o.save, "where to keep the best checkpoint (lowest validation loss), written at each epoch that "
                             "lowers it. A file already there is refused unless --overwrite", "PATH")
        .if_empty("to save nothing, give --no-save");
    p.flag("--no-save", &o.no_save, "train and test without writing the model anywhere");
    p.add("--load", &o.load, "use the model saved at PATH instead of training", "PATH");
    p.add("--translate", &o.translate, "translate this sentence (with --load)", "TEXT");
    p.flag("--stdin", &o.use_stdin, "translate standard input, one sentence per line (with --load); reads to the end, "
                                    "then translates in batches and prints one line per input line");
    p.flag("--no-kv-cache", &o.no_kv_cache, "decode by re-running the decoder over the whole prefix at every step "
                                            "(the simple O(T^2) reference) instead of with the key/value cache");
    p.add("--attention", &o.attention, "write the encoder-decoder attention of the translated sentence to PATH (SVG)", "PATH");
    p.flag("--memory-report", &o.memory_report,
           "print the memory held after each phase (data, each epoch's training and validation, test decoding): "
           "tensor bytes live and at their peak, the process's RSS and peak RSS, and what the corpus takes");
    p.add("--plot", &o.plot, "write training and validation loss curves to PATH (SVG)", "PATH");
    p.add("--resume", &o.resume, "continue the run whose state an interrupt (Ctrl-C) saved at PATH. Give the flags and files "
                                 "that run had: other --data/--valid/--test contents, vocabularies, --seed, --batch, "
                                 "--batch-tokens, --max-len, --min-freq, --lowercase, --bpe, --label-smoothing, --warmup, "
                                 "--lr-factor, --shards, --bf16, --reference, --average-last or model flags are refused. These "
                                 "may change: --epochs (not below the epochs begun), --save, --plot, --threads, --beam, "
                                 "--sample and its flags, --no-kv-cache, --bleu-lowercase, --memory-report, --overwrite", "PATH");
    common::add_overwrite_flag(p, &o.overwrite);
    p.parse(argc, argv);
    if (o.no_save && p.given("--save")) p.fail("--no-save and --save contradict each other: give one");
    if (o.no_save) o.save.clear();
    if ((!o.translate.empty() || o.use_stdin) && o.load.empty()) p.fail("--translate and --stdin need --load PATH");
    for (const char* f : {"--temperature", "--top-k", "--top-p"})
        if (p.given(f) && !o.sample) p.fail(std::string(f) + " does nothing without --sample");
    if (o.sample && p.given("--beam")) p.fail("--sample and --beam each choose how to decode: give one");
    if (o.sample) o.beam = 0;
    if (!(o.sampling.temperature > 0.0f)) p.fail("--temperature must be > 0, got 0 (towards 0 sampling is greedy: --beam 0)");
    if (!(o.sampling.top_p > 0.0f)) p.fail("--top-p must be > 0, got 0 (1 keeps every token)");
    o.sampling.seed = o.train.seed;   // --sample's draws
    if (!o.load.empty())   // the model and its vocabularies come from the file: what would train or read a corpus does nothing
        for (const char* f : {"--data", "--valid", "--test", "--lowercase", "--bleu-lowercase", "--min-freq", "--bpe", "--tie-weights",
                              "--no-tie-weights", "--max-len", "--epochs", "--batch", "--batch-tokens", "--warmup", "--lr-factor",
                              "--dropout", "--shards", "--seed", "--average-last", "--label-smoothing", "--save", "--no-save", "--plot",
                              "--resume", "--memory-report", "--context", "--score", "--reverse-source", "--unidirectional"})
            if (p.given(f) && !(o.sample && f == std::string("--seed")))   // --seed also picks --sample's draws
                p.fail(std::string(f) + " does nothing with --load (the model comes from the file; nothing trains)");
    if (!o.attention.empty() && o.translate.empty() && !o.use_stdin) p.fail("--attention needs a sentence: --translate TEXT or --stdin");
    if (!o.load.empty() && o.attention.empty() && p.given("--overwrite"))   // as copy_task --load refuses it
        p.fail("--overwrite does nothing with --load unless --attention writes a file (nothing else is written)");
    if (!o.load.empty() && o.translate.empty() && !o.use_stdin)
        p.fail("--load needs something to translate: --translate TEXT or --stdin (the test score comes at the end of training)");
    // every file the run writes, checked before anything trains (--load writes only --attention's)
    for (const auto& [flag, path] : {std::pair{"--save", o.save}, {"--plot", o.plot}, {"--attention", o.attention}})
        if (o.load.empty() || flag == std::string("--attention")) common::check_output_path(p, flag, path);
    common::RunFiles files;   // no output may name an input or another output, nor replace a file unasked
    for (const auto& [flag, path] : {std::pair{"--data", o.corpus.data}, {"--valid", o.corpus.valid}, {"--test", o.corpus.test}, {"--load", o.load}})
        files.input(flag, path);
    if (o.load.empty()) common::add_training_files(files, o.save, o.resume, "translation");
    files.output("--plot", o.plot);
    files.output("--attention", o.attention);
    files.check(p, o.overwrite);
    o.corpus.seed = o.train.seed;
    o.corpus.bpe = o.bpe >= 0 ? o.bpe : o.corpus.data.empty() ? 0 : data::kAutoMerges;
    if (o.batch_tokens < 0) o.batch_tokens = o.corpus.data.empty() ? 0 : 1000;
    models::TransformerConfig& m = o.train.model;   // its vocab sizes are set when the data is read
    if (m.tie_weights && o.no_tie_weights) p.fail("--tie-weights and --no-tie-weights contradict each other");
    if (m.tie_weights && o.corpus.bpe == 0) p.fail("--tie-weights needs one vocabulary for both languages: add --bpe N");
    if (o.train.model_kind != "transformer" && (p.given("--tie-weights") || p.given("--no-tie-weights") || o.no_kv_cache))
        p.fail(std::string(p.given("--tie-weights") ? "--tie-weights" : p.given("--no-tie-weights") ? "--no-tie-weights" : "--no-kv-cache") +
               " applies to --model transformer, not to the recurrent models");
    m.tie_weights = o.corpus.bpe != 0 && !o.no_tie_weights;   // learned merges (--bpe N, or the default with --data): one vocabulary
    m.max_len = std::max(512, o.corpus.max_len + 2);   // positions: bos + max_len tokens + eos
    common::apply_training_flags(p, o.train);
    // On real text the Transformer's Noam peak at D = 128 (lr 4.4e-3 at step 400) is too high: half
    // of it reaches a lower validation loss on both corpus sizes searched (bench/RESULTS.md)
    if (!o.corpus.data.empty() && o.train.model_kind == "transformer" && !p.given("--lr-factor")) o.train.lr_factor = 0.5f;
    return o;
}

EpochBudget default_epochs(const models::Seq2Seq& model, const data::TranslationData& d,
                           const std::vector<std::vector<size_t>>& batches) {
    double tokens = 0;   // the training set's work: its tokens, both sides
    for (const data::Example& e : d.train) tokens += static_cast<double>(e.src.size() + e.tgt.size());
    std::vector<common::BatchShape> shapes;
    for (const std::vector<size_t>& batch : batches) {
        common::BatchShape b{static_cast<int64_t>(batch.size()), 0, 0};
        for (size_t i : batch)   // src: tokens <eos>; tgt: <bos> tokens <eos>, of which the decoder reads all but the last
            b.src_len = std::max<int64_t>(b.src_len, static_cast<int64_t>(d.train[i].src.size())),
            b.tgt_len = std::max<int64_t>(b.tgt_len, static_cast<int64_t>(d.train[i].tgt.size()) - 1);
        shapes.push_back(b);
    }
    EpochBudget e;
    e.budget_seconds = kBudgetSeconds * std::pow(tokens / 1e6, kBudgetExponent);
    e.epoch_seconds = common::estimated_epoch_seconds(model, shapes);
    e.epochs = epochs_that_fit(e.budget_seconds, e.epoch_seconds);
    return e;
}

int epochs_that_fit(double budget_seconds, double epoch_seconds) {
    return static_cast<int>(std::clamp(std::round(budget_seconds / epoch_seconds), 1.0, double(kMostDefaultEpochs)));
}

}  // namespace options
