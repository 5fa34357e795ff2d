// Translation end to end: train the Transformer on sentence pairs, evaluate with corpus BLEU,
// translate new sentences, and draw where the decoder looks.
//
//   ./examples/translation                                   # toy English->German corpus, built in
//   ./examples/translation --data eng-fra.tsv --lowercase    # any Tatoeba/Anki TSV file
//   ./examples/translation --load translation.safetensors --translate "the dog sees the cat ."
//   ./examples/translation --load translation.safetensors --attention attention.svg --translate "..."
//   echo "the cat eats the egg ." | ./examples/translation --load translation.safetensors --stdin
//
// main() is the training loop; the data is prepared in examples/data/translation_data.h, and
// examples/eval/translation_eval.h scores and uses the trained model.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/kernels/threads.h"
#include "examples/common/args.h"
#include "examples/common/last_epochs.h"
#include "examples/common/progress.h"
#include "examples/common/svg.h"
#include "examples/common/training_flags.h"
#include "examples/data/translation_data.h"
#include "examples/eval/translation_eval.h"
#include "models/checkpoint.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"

using autograd::Tensor;
using data::Vocab;

namespace {

struct Options {
    common::TrainingFlags train{.d_ff = 512, .dropout = 0.1f, .warmup = 400};
    data::CorpusOptions corpus;
    int epochs = -1;         // -1: 10 for the toy corpus, default_epochs() for --data
    int batch = 64, beam = 4;
    int average_last = 0;    // also score the average of the last K epochs' parameters
    int bpe = -1;            // -1: automatic for --data (see --help), word level for the toy corpus
    int batch_tokens = -1;   // -1: 1000 for --data, sentence batches (--batch) for the toy corpus
    float label_smoothing = 0.1f;
    bool bleu_lowercase = false, use_stdin = false, no_kv_cache = false;
    bool tie_weights = false, no_tie_weights = false;   // neither: tied exactly when the vocabulary is shared
    std::string save = "translation.safetensors", load, translate, attention, plot;
};

Options parse_options(int argc, char** argv) {
    Options o;
    common::ArgParser p("translation", "Train a Transformer translator (toy English->German corpus, or a TSV file), report "
                                       "test BLEU, and translate sentences with a saved model.");
    p.add("--data", &o.corpus.data, "Tatoeba/Anki TSV file (source TAB target); default: the built-in toy corpus", "FILE");
    p.add("--valid", &o.corpus.valid, "separate validation TSV (default: split off --data)", "FILE");
    p.add("--test", &o.corpus.test, "separate test TSV (default: split off --data)", "FILE");
    p.flag("--lowercase", &o.corpus.lowercase, "lowercase all text before tokenizing");
    p.flag("--bleu-lowercase", &o.bleu_lowercase,
           "score case-insensitive BLEU (sacreBLEU -lc); default: case-sensitive against the raw references");
    p.add("--min-freq", &o.corpus.min_freq, "drop words seen fewer times in training (they become <unk>)").min(1);
    p.add("--bpe", &o.bpe,
          "byte-pair-encoding merges learned on both languages together (0: words). Default with --data: a quarter of "
          "the distinct training words, between 500 and 32000 (about 1000 for 5k pairs, where 500-1000 measured best and "
          "3000 no better than words; more for larger corpora, whose rarer words are worth whole units); the toy corpus "
          "stays word level (its 770 words are all frequent)").min(-1);
    p.flag("--tie-weights", &o.tie_weights,
           "one matrix for both embeddings and the pre-softmax projection (paper, section 3.4); the default with --bpe, "
           "whose vocabulary is shared");
    p.flag("--no-tie-weights", &o.no_tie_weights, "separate embedding and projection matrices even with --bpe");
    p.add("--max-len", &o.corpus.max_len, "skip training pairs longer than this many tokens").range(1, 1000);
    p.add("--epochs", &o.epochs,
          "passes over the training set. Default: 10 for the toy corpus; with --data, 1300 / sqrt(training pairs) "
          "between 1 and 30 (19 for 5k pairs, 6 for 50k, 2 for 500k): a small corpus needs many passes, a large one "
          "learns more per pass, and the steps still grow with the data (as sqrt)").min(-1);
    p.add("--batch", &o.batch, "sentence pairs per batch (B), when not batching by --batch-tokens").min(1);
    p.add("--batch-tokens", &o.batch_tokens,
          "batches of similar-length pairs with about this many source and target tokens each, padding included "
          "(paper: 25000 on 8 GPUs). Default with --data: 1000 (on 5k pairs: BLEU 14.8 against 12.1 with 2000, which halves the steps); the toy corpus: sentence batches (--batch). 0: --batch")
        .min(-1);
    common::add_training_flags(p, o.train, "random seed (data split, init, dropout, batch order)");
    p.add("--average-last", &o.average_last,
          "also score the average of the last K epochs' parameters (paper, section 6.1: the last 5 checkpoints)").min(0);
    p.add("--label-smoothing", &o.label_smoothing, "label smoothing eps (paper: 0.1)").range(0, 1);
    p.add("--beam", &o.beam, "beam width for the test score and for translating (0: greedy)").range(0, 64);
    p.add("--save", &o.save, "where to keep the best checkpoint (lowest validation loss)", "PATH");
    p.add("--load", &o.load, "use the model saved at PATH instead of training", "PATH");
    p.add("--translate", &o.translate, "translate this sentence (with --load)", "TEXT");
    p.flag("--stdin", &o.use_stdin, "translate standard input, one sentence per line (with --load); reads to the end, "
                                    "then translates in batches and prints one line per input line");
    p.flag("--no-kv-cache", &o.no_kv_cache, "decode by re-running the decoder over the whole prefix at every step "
                                            "(the simple O(T^2) reference) instead of with the key/value cache");
    p.add("--attention", &o.attention, "write the encoder-decoder attention of the translated sentence to PATH (SVG)", "PATH");
    p.add("--plot", &o.plot, "write training and validation loss curves to PATH (SVG)", "PATH");
    p.parse(argc, argv);
    common::apply_training_flags(p, o.train);
    if ((!o.translate.empty() || o.use_stdin) && o.load.empty()) p.fail("--translate and --stdin need --load PATH");
    if (!o.attention.empty() && o.translate.empty() && !o.use_stdin) p.fail("--attention needs a sentence: --translate TEXT or --stdin");
    o.corpus.seed = o.train.seed;
    o.corpus.bpe = o.bpe >= 0 ? o.bpe : o.corpus.data.empty() ? 0 : data::kAutoMerges;
    if (o.batch_tokens < 0) o.batch_tokens = o.corpus.data.empty() ? 0 : 1000;
    if (o.tie_weights && o.no_tie_weights) p.fail("--tie-weights and --no-tie-weights contradict each other");
    if (o.tie_weights && o.corpus.bpe == 0) p.fail("--tie-weights needs one vocabulary for both languages: add --bpe N");
    o.tie_weights = o.corpus.bpe > 0 && !o.no_tie_weights;
    return o;
}

// The default number of epochs for --data (see --help).
int default_epochs(size_t train_pairs) {
    return std::clamp(static_cast<int>(std::lround(1300.0 / std::sqrt(static_cast<double>(train_pairs)))), 1, 30);
}

void print_setup(const data::TranslationData& d, const models::Transformer& model, size_t batches, const Options& o) {
    std::printf("data: %s | train %zu pairs (%zu over --max-len dropped), valid %zu, test %zu | vocab %zu source, %zu target\n",
                d.name.c_str(), d.train.size(), d.dropped, d.text.valid.size(), d.text.test.size(), d.codec.src_vocab.size(),
                d.codec.tgt_vocab.size());
    if (d.codec.subwords)
        std::printf("subwords: %zu BPE merges learned jointly from %lld words (%lld distinct) in %.2f s, one shared vocabulary\n",
                    d.codec.bpe.merges().size(), (long long)d.bpe_stats.words, (long long)d.bpe_stats.distinct_words,
                    d.bpe_stats.seconds);
    std::printf("model: %s, %lld parameters | %zu batches/epoch, %d epochs | %d threads\n", common::describe(model.cfg).c_str(),
                (long long)model.num_parameters(), batches, o.epochs, autograd::kernels::max_threads());
    if (o.batch_tokens > 0) std::printf("batches of about %d source and %d target tokens (padding included)\n", o.batch_tokens, o.batch_tokens);
}

// 0..n-1 in a fresh random order (Fisher-Yates): the order of the batches in one epoch.
std::vector<size_t> shuffled(size_t n, autograd::Rng& rng) {
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    for (size_t i = n; i > 1; i--) std::swap(order[i - 1], order[rng.below(static_cast<uint32_t>(i))]);
    return order;
}

// What the training loop reports: a live progress line (epoch, loss, lr), one result line per
// epoch, and at the end the loss curves (--plot).
class TrainingLog {
public:
    TrainingLog(int epochs, size_t batches_per_epoch) : progress_(std::max<int>(1, epochs * static_cast<int>(batches_per_epoch))) {}

    void step(int epoch, float loss, int64_t ntokens, float lr) {
        steps_.push_back(static_cast<double>(steps_.size() + 1));
        losses_.push_back(loss);
        epoch_loss_ += static_cast<double>(loss) * ntokens;
        epoch_tokens_ += ntokens;
        progress_.update(static_cast<int>(steps_.size()), {{"epoch", std::to_string(epoch)}, {"loss", common::format_value(loss)},
                                                           {"lr", common::format_value(lr, 3)}});
    }

    void end_epoch(int epoch, double valid_loss, bool best) {
        const double train_loss = epoch_loss_ / std::max<int64_t>(epoch_tokens_, 1);
        char line[200];
        std::snprintf(line, sizeof line, "epoch %2d  train loss %.4f (label-smoothed)  valid loss %.4f  %s  %.0f s", epoch,
                      train_loss, valid_loss, best ? "best" : "    ", seconds());
        progress_.result(line);
        epoch_steps_.push_back(static_cast<double>(steps_.size()));
        valid_losses_.push_back(valid_loss);
        epoch_loss_ = 0.0;
        epoch_tokens_ = 0;
    }

    void finish() { progress_.finish(); }

    void plot(const std::string& path) const {
        common::write_line_plot(path, "Translation: loss per target token", "step", "cross-entropy",
                                {{"train (per batch, label-smoothed)", steps_, losses_}, {"validation", epoch_steps_, valid_losses_}});
        std::printf("wrote %s\n", path.c_str());
    }

    double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

private:
    common::Progress progress_;
    const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
    std::vector<double> steps_, losses_, epoch_steps_, valid_losses_;   // the curves for --plot
    double epoch_loss_ = 0.0;                                          // this epoch's loss summed over tokens
    int64_t epoch_tokens_ = 0;
};

// The parameters of the epoch with the lowest validation loss: what the test scores, and what
// --save writes (with everything --load needs to translate: config, vocabularies, tokenizer).
class BestEpoch {
public:
    BestEpoch(const data::TextCodec& codec, const std::string& save_path) : codec_(codec), save_path_(save_path) {}

    // Keeps (and saves) the model if valid_loss is the lowest so far; returns whether it was.
    bool update(const models::Transformer& model, int epoch, double valid_loss) {
        if (!(valid_loss < valid_loss_)) return false;
        valid_loss_ = valid_loss;
        epoch_ = epoch;
        params_.clear();
        for (const Tensor& t : model.parameters()) params_.push_back(t.to_vector());
        if (save_path_.empty()) return true;
        models::json::Object meta = {{"task", "translation"}, {"config", models::config_to_json(model.cfg)},
                                     {"epoch", epoch}, {"valid_loss", valid_loss}};
        for (auto& entry : data::codec_to_json(codec_)) meta.push_back(std::move(entry));
        nn::save(model, save_path_, models::to_metadata(meta));
        return true;
    }

    // Puts the best epoch's parameters back into the model.
    void restore(models::Transformer& model) const {
        if (params_.empty()) return;
        auto params = model.parameters();
        for (size_t i = 0; i < params.size(); i++) std::copy(params_[i].begin(), params_[i].end(), params[i].data());
        std::printf("best epoch %d (valid loss %.4f)%s\n", epoch_, valid_loss_, save_path_.empty() ? "" : (", saved to " + save_path_).c_str());
    }

private:
    const data::TextCodec& codec_;
    std::string save_path_;
    double valid_loss_ = INFINITY;
    int epoch_ = 0;
    std::vector<std::vector<float>> params_;
};

// How decoding runs, as the decoding lines on stderr say it.
const char* path_name(const Options& o) { return o.no_kv_cache ? "recomputing the prefix: --no-kv-cache" : "key/value cache"; }

// BLEU and exact match on the test split, greedy and (with --beam) beam search. `what` names the
// model scored ("test": the best epoch's; "averaged test": --average-last).
void report_test(models::Transformer& model, const data::TranslationData& d, const Options& o, const TrainingLog& log,
                 const std::string& what = "test") {
    const char* w = what.c_str();
    const eval::Score greedy = eval::score(model, d.codec, d.text.test, 0, o.bleu_lowercase, !o.no_kv_cache);
    std::printf("%s greedy: BLEU %.1f, exact match %.1f%%  [%s]\n", w, greedy.bleu.score, greedy.exact, data::to_string(greedy.bleu).c_str());
    for (size_t i = 0; i < std::min<size_t>(3, d.text.test.size()); i++)
        std::printf("  src: %s\n  ref: %s\n  out: %s\n", d.text.test[i].src.c_str(), d.text.test[i].tgt.c_str(),
                    greedy.hypotheses[i].c_str());
    const eval::Score final_score = o.beam > 0 ? eval::score(model, d.codec, d.text.test, o.beam, o.bleu_lowercase, !o.no_kv_cache) : greedy;
    if (o.beam > 0)
        std::printf("%s beam %d: BLEU %.1f, exact match %.1f%%  [%s]\n", w, o.beam, final_score.bleu.score, final_score.exact,
                    data::to_string(final_score.bleu).c_str());
    std::printf("total %.0f s\n", log.seconds());
    // the decoding's work, on stderr beside the progress: --no-kv-cache recomputes every prefix
    std::fprintf(stderr, "%s decoding: %lld decoder positions (%s)\n", w,
                 (long long)(greedy.decoder_positions + (o.beam > 0 ? final_score.decoder_positions : 0)), path_name(o));
    // The signature says which BLEU this is (sacreBLEU 2.x's notation): one reference, case,
    // tokenizer, smoothing. The score is against the references as written.
    std::printf("%s BLEU: %.1f (%s), exact match: %.1f%%  [signature: %s]\n", w, final_score.bleu.score,
                o.beam > 0 ? ("beam " + std::to_string(o.beam)).c_str() : "greedy", final_score.exact,
                data::bleu_signature({.lowercase = o.bleu_lowercase}).c_str());
}

// --load with --translate and/or --stdin: translate with a saved model; no training. Every
// sentence is read first, then they are translated in batches of similar length (one decoder
// call per step for a whole batch), and printed in the input order, an empty line for an empty
// line. The attention (--attention) is drawn for the first sentence.
int translate_with_checkpoint(const Options& o) {
    const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(o.load);
    models::Transformer model(models::read_metadata(f.metadata, "config", o.load, models::config_from_json));
    nn::load_parameters(model, f, o.load);
    const data::TextCodec codec = data::read_codec(f.metadata, o.load);
    std::vector<std::string> lines;   // --translate first, then every line of standard input
    if (!o.translate.empty()) lines.push_back(o.translate);
    for (std::string line; o.use_stdin && std::getline(std::cin, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        lines.push_back(line);
    }
    std::vector<std::string> texts;   // the non-empty lines, translated together in batches
    for (const std::string& line : lines)
        if (!line.empty()) texts.push_back(line);
    int64_t positions = 0;
    const std::vector<std::string> out = eval::translate(model, codec, texts, o.beam, !o.no_kv_cache, o.attention, &positions);
    size_t next = 0;
    for (const std::string& line : lines) std::printf("%s\n", line.empty() ? "" : out[next++].c_str());
    std::fprintf(stderr, "decoding: %lld decoder positions (%s)\n", (long long)positions, path_name(o));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse_options(argc, argv);
    try {
        if (!o.load.empty()) return translate_with_checkpoint(o);

        // 1) data: sentence pairs -> vocabularies -> id sequences -> batches of similar length
        const data::TranslationData d = data::load_translation_data(o.corpus);   // refuses splits too small to mean anything
        if (o.batch_tokens == 0) data::check_batch_fits(d, o.corpus, o.batch);
        if (o.epochs < 0) o.epochs = o.corpus.data.empty() ? 10 : default_epochs(d.train.size());
        autograd::Rng shuffle_rng(o.train.seed ^ 0x5eedULL);   // batch composition and order, every epoch
        auto make_batches = [&] {
            return o.batch_tokens > 0 ? data::token_batches(d.train, o.batch_tokens, &shuffle_rng) : data::length_batches(d.train, o.batch);
        };
        std::vector<std::vector<size_t>> batches = make_batches();

        // 2) model, optimizer, learning-rate schedule
        autograd::manual_seed(o.train.seed);   // model init and dropout
        autograd::MixedPrecisionGuard mixed_precision(o.train.bf16);   // --bf16: training and evaluation
        models::TransformerConfig cfg = common::transformer_config(o.train, d.codec.src_vocab.size(), d.codec.tgt_vocab.size());
        cfg.max_len = std::max(512, o.corpus.max_len + 2);   // positions: bos + max_len tokens + eos
        cfg.tie_weights = o.tie_weights;
        models::Transformer model(cfg);
        optim::Adam opt(model.parameters(), {.lr = 0.0f, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f});
        optim::NoamSchedule sched(opt, cfg.d_model, o.train.warmup, o.train.lr_factor);   // sets opt's lr every step
        print_setup(d, model, batches.size(), o);

        // 3) train; keep the parameters of the epoch with the best validation loss
        TrainingLog log(o.epochs, batches.size());
        BestEpoch best(d.codec, o.save);
        common::LastEpochs last(o.average_last);   // --average-last K
        for (int epoch = 1; epoch <= o.epochs; epoch++) {
            model.train();
            if (epoch > 1 && o.batch_tokens > 0) batches = make_batches();
            for (size_t i : shuffled(batches.size(), shuffle_rng)) {
                const models::Batch b = data::make_batch(d.train, batches[i]);
                opt.zero_grad();   // first: last step's gradients are freed before this step's activations pile up
                const Tensor logits = model.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask);   // (B, T, V)
                const Tensor loss = nn::cross_entropy(logits, b.tgt_out, {.ignore_index = Vocab::PAD, .label_smoothing = o.label_smoothing});
                loss.backward();
                const float lr = sched.step();
                opt.step();
                log.step(epoch, loss.item(), b.ntokens, lr);
            }
            const double valid_loss = eval::mean_loss(model, d.valid, o.batch, o.batch_tokens);
            log.end_epoch(epoch, valid_loss, best.update(model, epoch, valid_loss));
            last.add(model);
        }
        log.finish();
        best.restore(model);
        if (!o.plot.empty()) log.plot(o.plot);

        // 4) test: BLEU and exact match, greedy and beam
        report_test(model, d, o, log);
        if (!last.empty()) {
            last.average_into(model);
            std::printf("averaged the parameters of the last %zu epochs\n", last.size());
            report_test(model, d, o, log, "averaged test");
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "translation: %s\n", e.what());
        return 1;
    }
    return 0;
}
