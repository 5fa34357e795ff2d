// Translation end to end: train the Transformer on sentence pairs, evaluate with corpus BLEU,
// translate new sentences, and draw where the decoder looks.
//
//   ./examples/translation                                   # toy English->German corpus, built in
//   ./examples/translation --data eng-fra.tsv --lowercase    # any Tatoeba/Anki TSV file
//   ./examples/translation --load translation.safetensors --translate "the dog sees the cat ."
//   ./examples/translation --load translation.safetensors --attention attention.svg --translate "..."
//   echo "the cat eats the egg ." | ./examples/translation --load translation.safetensors --stdin
//   ./examples/translation --load translation.safetensors --sample --top-k 5 --seed 7 --translate "..."
//
// main() is the training loop; the flags are in examples/options/translation_options.h, the data
// is prepared in examples/data/translation_data.h, and examples/eval/translation_eval.h scores and
// uses the trained model.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/io/crc32c.h"
#include "examples/common/kept_epochs.h"
#include "examples/common/memory_budget.h"
#include "examples/common/memory_report.h"
#include "examples/common/progress.h"
#include "examples/common/run_state.h"
#include "examples/common/saved_model.h"
#include "examples/common/training_log.h"
#include "examples/options/translation_options.h"
#include "examples/data/translation_data.h"
#include "examples/eval/translation_eval.h"
#include "models/checkpoint.h"
#include "models/data_parallel.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"

using autograd::Tensor;
using data::Vocab;
using Options = options::Translation;

namespace {

void print_setup(const data::TranslationData& d, const models::Seq2Seq& model, size_t batches, const Options& o,
                 const std::optional<options::EpochBudget>& budget) {
    std::printf("data: %s | train %zu pairs (%zu over --max-len dropped), valid %zu, test %zu | vocab %zu source, %zu target\n",
                d.name.c_str(), d.train.size(), d.dropped, d.text.valid.size(), d.text.test.size(), d.codec.src_vocab.size(),
                d.codec.tgt_vocab.size());
    if (d.codec.subwords)
        std::printf("subwords: %zu BPE merges learned jointly from %lld words (%lld distinct) in %.2f s, one shared vocabulary\n",
                    d.codec.bpe.merges().size(), (long long)d.bpe_stats.words, (long long)d.bpe_stats.distinct_words,
                    d.bpe_stats.seconds);
    std::printf("model: %s, %lld parameters | %zu batches/epoch, %d epochs | %s\n", common::describe(model, o.train.bf16).c_str(),
                (long long)model.num_parameters(), batches, o.epochs, common::describe_compute(o.train.shards).c_str());
    if (o.batch_tokens > 0) std::printf("batches of about %d source and %d target tokens (padding included)\n", o.batch_tokens, o.batch_tokens);
    if (budget)
        std::printf("epochs: %d, to fit an estimated %.0f s of training on this corpus at %.1f s an epoch (both on 2 cores of "
                    "the reference machine; --epochs sets them)\n", budget->epochs, budget->budget_seconds, budget->epoch_seconds);
    std::printf("training: Adam(0.9, 0.98), %s, label smoothing %g\n",
                common::describe_lr_schedule("noam", 0, o.train.lr_factor, common::model_width(o.train), o.train.warmup, 0).c_str(),
                o.label_smoothing);
}

// What makes a run this run, for --resume to compare (run_state.h): the data files (size and
// checksum), the vocabularies and merges made from them, and every flag that changes the numbers
// besides the model's config, which the state holds too. Not --epochs: a resumed run may train longer.
models::json::Object identity(const Options& o, const data::TranslationData& d) {
    models::json::Object id;
    for (const auto& [flag, path] : {std::pair{"--data", o.corpus.data}, {"--valid", o.corpus.valid}, {"--test", o.corpus.test}})
        id.push_back({flag, path.empty() ? models::json::Value("(none)") : common::file_fingerprint(path)});
    const std::string codec = models::json::dump(models::json::Value(data::codec_to_json(d.codec)));
    id.push_back({"vocabularies and merges", "crc32c " + autograd::io::crc32c_hex(autograd::io::crc32c(codec.data(), codec.size()))});
    for (auto& entry : models::json::Object{{"--seed", std::to_string(o.train.seed)}, {"--lowercase", o.corpus.lowercase},
                                             {"--min-freq", o.corpus.min_freq}, {"--bpe", o.corpus.bpe}, {"--max-len", o.corpus.max_len},
                                             {"--batch", o.batch}, {"--batch-tokens", o.batch_tokens}, {"--label-smoothing", common::exact(o.label_smoothing)},
                                             {"--warmup", o.train.warmup}, {"--lr-factor", common::exact(o.train.lr_factor)}, {"--shards", o.train.shards},
                                             {"--bf16", o.train.bf16}, {"--reference", o.train.reference}, {"--average-last", o.average_last}})
        id.push_back(std::move(entry));
    return id;
}

// What a run too big for the memory can lower.
const char* const kShrinkingFlags = "--batch-tokens (or --batch), --max-len (or the model: --d-model, --d-ff, --layers, --hidden)";

// Before training: the largest batch's step must fit in the memory this process may use
// (memory_budget.h); refused with the figure otherwise.
void check_training_memory(const common::TrainingFlags& t, const data::TranslationData& d, const std::vector<std::vector<size_t>>& batches) {
    int64_t peak = 0;
    for (const std::vector<size_t>& batch : batches) {
        size_t S = 0, T = 0;   // the batch padded to its longest source and target
        for (size_t i : batch) S = std::max(S, d.train[i].src.size()), T = std::max(T, d.train[i].tgt.size());
        peak = std::max(peak, common::training_peak_bytes(t, d.codec.src_vocab.size(), d.codec.tgt_vocab.size(),
                                                          static_cast<int64_t>(batch.size()), static_cast<int64_t>(S),
                                                          static_cast<int64_t>(T), /*full_logits=*/false));
    }
    common::check_memory(peak, "training on these batches", kShrinkingFlags);
}

// This epoch's batches: by --batch-tokens, grouped anew every epoch; else fixed sentence batches.
std::vector<std::vector<size_t>> epoch_batches(const data::TranslationData& d, const Options& o, autograd::Rng& rng) {
    return o.batch_tokens > 0 ? data::token_batches(d.train, o.batch_tokens, &rng) : data::length_batches(d.train, o.batch);
}

// The weights, the config, and everything else --load needs to translate: the vocabularies and
// the tokenizer.
void save_checkpoint(const models::Seq2Seq& model, const data::TextCodec& codec, int epoch, double valid_loss,
                     const std::string& path) {
    models::json::Object settings = {{"epoch", epoch}, {"valid_loss", valid_loss}};
    for (auto& entry : data::codec_to_json(codec)) settings.push_back(std::move(entry));
    common::save_model(model, path, "translation", std::move(settings));
}

// After an epoch's training: the validation loss, the epoch's line, and the parameters kept for
// the test (--save writes them too) if they are the best so far, or for --average-last.
// Returns whether it saved.
bool end_epoch(models::Seq2Seq& model, const data::TranslationData& d, const Options& o, int epoch,
               common::TrainingLog& log, common::KeptEpochs& kept, const common::MemoryReport& memory) {
    // between phases, the memory one phase freed goes back to the system: training's free blocks
    // are not the shapes the validation asks for, and what the save copied is not needed again
    // (peak RSS, docs/15)
    autograd::release_free_memory();
    memory.phase("training " + std::to_string(epoch));
    const double valid_loss = eval::mean_loss(model, d.valid, o.batch, o.batch_tokens);
    memory.phase("validation " + std::to_string(epoch));
    const bool best = kept.add(model, epoch, valid_loss);
    if (best && !o.save.empty()) save_checkpoint(model, d.codec, epoch, valid_loss, o.save);
    autograd::release_free_memory();
    memory.phase("kept and saved " + std::to_string(epoch));
    log.add_valid(valid_loss);
    char line[200];
    const double epoch_seconds = log.lap();   // training and validation (and the save)
    std::snprintf(line, sizeof line, "epoch %2d  train loss %.4f (label-smoothed)  valid loss %.4f  %s  %.0f s (this epoch %.0f s)",
                  epoch, log.take_window().mean, valid_loss, best ? "best" : "    ", log.seconds(), epoch_seconds);
    log.result(line);
    return best && !o.save.empty();
}

// Does decoding run one position per step (the key/value cache, a recurrent model's carried
// state)? Not with --no-kv-cache, nor with --reference, whose greedy decoding is the plain
// greedy_decode: the whole prefix at every step.
bool kv_cache(const Options& o) { return !o.no_kv_cache && !o.train.reference; }

// How decoding runs, as the decoding lines on stderr say it: the cache or not, and bf16 products
// (--bf16, which a --load'ed model decodes with too).
std::string path_name(const Options& o) {
    const std::string path = !kv_cache(o) ? "recomputing the prefix: --no-kv-cache or --reference"
                             : o.train.model_kind != "transformer" ? "the recurrent state" : "key/value cache";
    return o.train.bf16 ? path + ", bf16 products" : path;
}

// The decoder the test score and the translations use: "beam 4", "greedy", or "sample T 0.8, top-k 5".
std::string decoder_name(const Options& o) {
    if (!o.sample) return o.beam > 0 ? "beam " + std::to_string(o.beam) : "greedy";
    char name[96];
    std::snprintf(name, sizeof name, "sample T %g", o.sampling.temperature);
    std::string s = name;
    if (o.sampling.top_k > 0) s += ", top-k " + std::to_string(o.sampling.top_k);
    if (o.sampling.top_p < 1.0f) {
        std::snprintf(name, sizeof name, ", top-p %g", o.sampling.top_p);
        s += name;
    }
    return s;
}

// BLEU and exact match on the test split, greedy and (with --beam or --sample) beam search or
// sampling. `what` names the model scored ("test": the best epoch's; "averaged test": --average-last).
void report_test(models::Seq2Seq& model, const data::TranslationData& d, const Options& o, const common::TrainingLog& log,
                 const common::MemoryReport& memory, const std::string& what = "test") {
    const char* w = what.c_str();
    const eval::Score greedy = eval::score(model, d.codec, d.text.test, 0, o.bleu_lowercase, kv_cache(o));
    memory.phase(what + " greedy");
    std::printf("%s greedy: BLEU %.1f, exact match %.1f%%  [%s]\n", w, greedy.bleu.score, greedy.exact, data::to_string(greedy.bleu).c_str());
    for (size_t i = 0; i < std::min<size_t>(3, d.text.test.size()); i++)
        std::printf("  src: %s\n  ref: %s\n  out: %s\n", d.text.test[i].src.c_str(), d.text.test[i].tgt.c_str(),
                    greedy.hypotheses[i].c_str());
    const bool other = o.beam > 0 || o.sample;   // a decoder besides greedy
    const eval::Score final_score = other ? eval::score(model, d.codec, d.text.test, o.beam, o.bleu_lowercase, kv_cache(o),
                                                        o.sample ? &o.sampling : nullptr) : greedy;
    if (other) memory.phase(what + (o.sample ? " sample" : " beam"));
    if (other)
        std::printf("%s %s: BLEU %.1f, exact match %.1f%%  [%s]\n", w, decoder_name(o).c_str(), final_score.bleu.score, final_score.exact,
                    data::to_string(final_score.bleu).c_str());
    std::printf("%s BLEU by source length: %s\ntotal %.0f s\n", w, eval::describe(final_score.by_length).c_str(), log.seconds());
    // the decoding's work, on stderr beside the progress: --no-kv-cache recomputes every prefix
    std::fprintf(stderr, "%s decoding: %lld decoder positions (%s)\n", w,
                 (long long)(greedy.decoder_positions + (other ? final_score.decoder_positions : 0)), path_name(o).c_str());
    // The signature says which BLEU this is (sacreBLEU 2.x's notation): one reference, case,
    // tokenizer, smoothing. The score is against the references as written.
    std::printf("%s BLEU: %.1f (%s), exact match: %.1f%%  [signature: %s]\n", w, final_score.bleu.score,
                decoder_name(o).c_str(), final_score.exact,
                data::bleu_signature({.lowercase = o.bleu_lowercase}).c_str());
}

// --load with --translate and/or --stdin: translate with a saved model; no training. Every
// sentence is read first, then they are translated in batches of similar length (one decoder
// call per step for a whole batch), and printed in the input order, an empty line for an empty
// line. A --stdin line that cannot be translated (not UTF-8, too long) is named on stderr and
// answered with an empty line, the others translated; the status is then 1. The attention
// (--attention) is drawn for the first sentence.
int translate_with_checkpoint(Options o) {
    const common::SavedModel saved = common::load_saved_model(o.load);
    models::Seq2Seq& model = *saved.model;
    common::check_load_flags(o.train, model, o.load);   // a --model or --d-model ... that disagrees with the file is an error
    o.train.model_kind = common::model_name(model);     // the file's kind, which the decoding line names
    const data::TextCodec codec = data::read_codec(saved.metadata, o.load);
    std::vector<std::string> lines;   // --translate first, then every line of standard input
    if (!o.translate.empty()) lines.push_back(o.translate);
    for (std::string line; o.use_stdin && std::getline(std::cin, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        lines.push_back(line);
    }
    std::vector<std::string> texts;   // the non-empty lines, translated together in batches, each checked first
    std::vector<bool> skipped(lines.size(), false);   // --stdin lines that cannot be read: one bad line spoils no other
    const size_t first_stdin = o.translate.empty() ? 0 : 1;   // lines[0] is --translate's when given
    for (size_t i = 0; i < lines.size(); i++) {
        if (lines[i].empty()) continue;
        try {
            eval::check_sentence(codec, model.max_len(), lines[i], i < first_stdin ? "--translate" : "--stdin line " + std::to_string(i - first_stdin + 1));
        } catch (const std::runtime_error& e) {
            if (i < first_stdin) throw;   // --translate's sentence is the whole request
            std::fprintf(stderr, "translation: %s (skipped: its output line is empty)\n", e.what());
            skipped[i] = true;
            continue;
        }
        texts.push_back(lines[i]);
    }
    int64_t positions = 0;
    const std::vector<std::string> out = eval::translate(model, codec, texts, o.beam, kv_cache(o), o.attention, &positions,
                                                         o.sample ? &o.sampling : nullptr);
    size_t next = 0;
    for (size_t i = 0; i < lines.size(); i++) std::printf("%s\n", lines[i].empty() || skipped[i] ? "" : out[next++].c_str());
    std::fprintf(stderr, "decoding: %lld decoder positions (%s)\n", (long long)positions, path_name(o).c_str());
    return std::count(skipped.begin(), skipped.end(), true) > 0 ? 1 : 0;   // a script sees that a line was skipped
}

}  // namespace

int main(int argc, char** argv) {
    Options o = options::parse_translation(argc, argv);
    try {
        autograd::FusedKernelsGuard fused_kernels(!o.train.reference);   // --reference: each layer's plain form
        const common::MemoryReport memory(o.memory_report);
        std::optional<autograd::MixedPrecisionGuard> mixed_precision;
        if (o.train.bf16) mixed_precision.emplace();   // --bf16: training and evaluation, --load's too
        if (!o.load.empty()) return translate_with_checkpoint(o);

        // 1) data: sentence pairs -> vocabularies -> id sequences -> batches of similar length
        const data::TranslationData d = data::load_translation_data(o.corpus);   // refuses splits too small to mean anything
        if (o.batch_tokens == 0) data::check_batch_fits(d, o.corpus, o.batch);
        autograd::Rng shuffle_rng(o.train.seed ^ 0x5eedULL);   // batch composition and order, as the current epoch begins
        autograd::Rng first_epoch = shuffle_rng;
        std::vector<std::vector<size_t>> batches = epoch_batches(d, o, first_epoch);   // how many, for the lines below
        autograd::release_free_memory();   // the pages the data's old copies left (load_translation_data): tens of MB
        memory.phase("data", data::corpus_bytes(d, batches));

        // 2) model, optimizer, learning-rate schedule
        autograd::manual_seed(o.train.seed);   // model init and dropout
        check_training_memory(o.train, d, batches);   // from the config: before the model's weights exist
        const std::unique_ptr<models::Seq2Seq> made = common::make_model(o.train, d.codec.src_vocab.size(), d.codec.tgt_vocab.size());
        models::Seq2Seq& model = *made;   // --model: the Transformer or a recurrent encoder-decoder
        data::check_eval_lengths(d, o.corpus, model.max_len());   // a sentence too long to validate or test on: now, not later
        std::optional<options::EpochBudget> budget;   // --data: the epochs that fit the time every family gets (translation_options.h)
        if (o.epochs < 0 && !o.corpus.data.empty()) budget = options::default_epochs(model, d, batches);
        if (o.epochs < 0) o.epochs = budget ? budget->epochs : 10;
        optim::Adam opt(model.parameters(), {.lr = 0.0f, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f});
        optim::NoamSchedule sched(opt, common::model_width(o.train), o.train.warmup, o.train.lr_factor);   // sets opt's lr every step
        print_setup(d, model, batches.size(), o, budget);
        memory.phase("model");

        // 3) train; keep the parameters of the epoch with the best validation loss, and the last --average-last
        common::TrainingLog log(o.epochs * static_cast<int>(batches.size()));
        common::KeptEpochs kept(o.average_last);
        int saved_epoch = 0;   // the epoch this process last wrote to --save
        {
            common::InterruptWatch interrupt;   // Ctrl-C, until training ends: it stops before its next step, and the run is saved
            int64_t epoch = 1, done = 0;        // done: the batches of this epoch already trained
            common::RunState run{.model = &model, .model_metadata = models::model_to_metadata(model), .opt = &opt, .sched = &sched, .log = &log, .kept = &kept,
                                 .rngs = {{"shuffle", &shuffle_rng}}, .counters = {{"epoch", &epoch}, {"batches_done", &done}},
                                 .settings = data::codec_to_json(d.codec), .identity = identity(o, d), .save = o.save};
            if (!o.resume.empty()) common::restore_run(o.resume, run);   // --resume: as it was when it stopped
            const int64_t trained = epoch - 1 + (done > 0);   // epochs begun
            if (o.epochs < trained)
                throw std::runtime_error("--epochs " + std::to_string(o.epochs) + " is fewer than the " + std::to_string(trained) +
                                         " epochs the run in '" + o.resume + "' has begun: give --epochs " + std::to_string(trained) + " or more");
            for (; epoch <= o.epochs; epoch++, done = 0) {
                model.train();
                autograd::Rng rng = shuffle_rng;   // this epoch's draws: a resumed epoch makes the same ones again
                batches = epoch_batches(d, o, rng);
                const std::vector<size_t> order = data::shuffled_indices(batches.size(), rng);
                for (; done < static_cast<int64_t>(order.size()); done++) {
                    if (interrupt.requested()) return common::save_interrupted(run, common::resume_path(o.save, "translation"), argc, argv);
                    const models::Batch b = data::make_batch(d.train, batches[order[done]]);
                    opt.zero_grad();   // first: last step's gradients are freed before this step's activations pile up
                    // forward and backward of b's --shards row slices side by side: the same gradient as one pass over b
                    const float loss = models::sum_over_shards(b, o.train.shards, [&](const models::Batch& part) {
                        // cross_entropy(model.logits(part...), part.tgt_out): the generator fused into the loss, so the
                        // (rows, T, V) logits are never held whole (models/seq2seq.h)
                        return model.loss(part, {.ignore_index = Vocab::PAD, .label_smoothing = o.label_smoothing})
                               * part.share;   // mean per token, x the part's share of b's tokens
                    });   // each part's forward, then its backward
                    const float lr = sched.step();
                    opt.step();
                    log.step(loss, static_cast<double>(b.ntokens), {{"epoch", std::to_string(epoch)},
                             {"loss", common::format_value(loss)}, {"lr", common::format_value(lr, 3)}});
                }
                shuffle_rng = rng;   // the next epoch's draws go on from here
                if (end_epoch(model, d, o, static_cast<int>(epoch), log, kept, memory)) saved_epoch = static_cast<int>(epoch);
            }
        }
        log.finish();
        kept.restore_best(model);
        // a resumed run whose best epoch came before it: that epoch is in the old process's file, so
        // it is written to this --save now, and the line below is true whatever --save was before
        if (kept.best_epoch() > 0 && !o.save.empty() && saved_epoch != kept.best_epoch())
            save_checkpoint(model, d.codec, kept.best_epoch(), kept.best_valid_loss(), o.save);
        if (kept.best_epoch() > 0)
            std::printf("best epoch %d (valid loss %.4f)%s\n", kept.best_epoch(), kept.best_valid_loss(),
                        o.save.empty() ? "" : (", saved to " + o.save).c_str());
        if (!o.plot.empty()) log.plot(o.plot, "Translation: loss per target token", "train (per batch, label-smoothed)");
        common::remove_finished_state(o.resume, o.save, "translation");   // its outputs written: the state has done its work

        // 4) test: BLEU and exact match, greedy and beam
        report_test(model, d, o, log, memory);
        if (kept.averaging()) {
            kept.average_last_into(model);
            std::printf("averaged the parameters of the last %zu epochs\n", kept.last_size());
            report_test(model, d, o, log, memory, "averaged test");
        }
    } catch (const std::bad_alloc&) {   // past the estimate (another program took the memory, or decoding)
        std::fprintf(stderr, "translation: %s\n", common::out_of_memory_message(kShrinkingFlags).c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "translation: %s\n", e.what());
        return 1;
    }
    return 0;
}
