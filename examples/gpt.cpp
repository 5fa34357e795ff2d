// GPT: the Transformer's decoder alone, trained to predict the next character of Tiny Shakespeare
// with nanoGPT's CPU "baby GPT" settings, then sampled (docs/10a-gpt.md).
//
//   make && ./examples/gpt                          # 2,000 steps on Tiny Shakespeare, then 500 characters
//   ./examples/gpt --data my.txt --steps 500        # any UTF-8 text
//   ./examples/gpt --save gpt.safetensors && ./examples/gpt --load gpt.safetensors --prompt "ROMEO:"
//   ./examples/gpt --help
//
// main() is the training loop; the flags are in examples/options/gpt_options.h, the text and its
// characters (or subwords) in examples/data/text_data.h.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "examples/common/memory_budget.h"
#include "examples/common/progress.h"
#include "examples/common/run_state.h"
#include "examples/common/training_log.h"
#include "examples/data/text_data.h"
#include "examples/options/gpt_options.h"
#include "models/checkpoint.h"
#include "models/gpt.h"
#include "models/gpt_sampling.h"
#include "nn/nn.h"
#include "optim/optim.h"

using autograd::Tensor;
using autograd::Tokens;
using Options = options::Gpt;

namespace {

// The text split as nanoGPT splits it: the first 90% of the tokens to train on, the last 10% to validate.
struct Corpus {
    data::CorpusCodec codec;
    std::vector<int32_t> train, valid;
};

Corpus load_corpus(const Options& o, const std::string& path) {
    const std::string text = data::read_text_file(path);
    Corpus c{o.bpe > 0 ? data::CorpusCodec::subwords(text, o.bpe) : data::CorpusCodec::characters(text), {}, {}};
    const std::vector<int32_t> ids = c.codec.encode(text);
    const size_t n = ids.size() * 9 / 10;
    c.train.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
    c.valid.assign(ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end());
    for (const auto& [name, part] : {std::pair{"training", &c.train}, {"validation", &c.valid}})
        if (static_cast<int64_t>(part->size()) < o.model.block_size + 1)
            throw std::runtime_error("'" + path + "': its " + name + " part holds " + std::to_string(part->size()) +
                                     " tokens, fewer than a window of --block-size " + std::to_string(o.model.block_size) +
                                     " + 1 (use more text" + (o.model.block_size > 1 ? " or a smaller --block-size" : "") +
                                     (o.bpe > 0 ? ", or fewer --bpe merges, whose subwords are fewer tokens than characters" : "") + ")");
    return c;
}

// B windows of T tokens from `ids` starting at `starts`: inputs x (B, T) and targets y (B, T), y = x shifted by one.
struct Batch {
    Tokens x, y;
};
Batch windows(const std::vector<int32_t>& ids, const std::vector<int64_t>& starts, int64_t T) {
    const int64_t B = static_cast<int64_t>(starts.size());
    Batch b{Tokens::full({B, T}, 0), Tokens::full({B, T}, 0)};
    for (int64_t i = 0; i < B; i++)
        for (int64_t t = 0; t < T; t++) {
            b.x[i * T + t] = ids[static_cast<size_t>(starts[i] + t)];
            b.y[i * T + t] = ids[static_cast<size_t>(starts[i] + t + 1)];
        }
    return b;
}
std::vector<int64_t> random_starts(autograd::Rng& rng, size_t n_ids, int64_t B, int64_t T) {
    std::vector<int64_t> starts(static_cast<size_t>(B));
    for (int64_t& s : starts) s = static_cast<int64_t>(rng.below(static_cast<uint32_t>(n_ids - static_cast<size_t>(T))));
    return starts;
}

// The mean loss over the same --eval-batches batches every time (drawn once from their own seed).
struct EvalSet {
    std::vector<Batch> train, valid;
};
EvalSet make_eval_set(const Corpus& c, const Options& o) {
    autograd::Rng rng(o.seed + 1000003);
    EvalSet e;
    for (int i = 0; i < o.eval_batches; i++) {
        e.train.push_back(windows(c.train, random_starts(rng, c.train.size(), o.batch, o.model.block_size), o.model.block_size));
        e.valid.push_back(windows(c.valid, random_starts(rng, c.valid.size(), o.batch, o.model.block_size), o.model.block_size));
    }
    return e;
}
double mean_loss(models::GPT& model, const std::vector<Batch>& batches) {
    autograd::NoGradGuard no_grad;
    model.eval();
    double sum = 0;
    for (const Batch& b : batches) sum += model.loss(b.x, b.y).item();
    model.train();
    return sum / static_cast<double>(batches.size());
}

// --prompt as the codec's ids, at least one. `source` says where the codec comes from ("the text
// 'x'"): a prompt it cannot read is named with it, and the default prompt (a newline) as such.
std::vector<int32_t> prompt_ids(const data::CorpusCodec& codec, const Options& o, const std::string& source) {
    std::vector<int32_t> ids;
    try {
        ids = codec.encode(o.prompt);
    } catch (const std::invalid_argument& e) {
        if (o.prompt == "\n")
            throw std::runtime_error("the default --prompt is a newline, and " + source + " has none (a text of one line): "
                                     "give --prompt TEXT, in characters it holds");
        throw std::runtime_error("--prompt: " + std::string(e.what()) + " (" + source + ")");
    }
    if (ids.empty())   // subwords: a prompt of spaces alone holds no word
        throw std::runtime_error("--prompt '" + o.prompt + "' holds no token for the model to continue: give a word or a character");
    return ids;
}

// --prompt continued by --tokens sampled tokens, as text.
std::string sample(models::GPT& model, const data::CorpusCodec& codec, const Options& o, double* tokens_per_second = nullptr) {
    const std::vector<int32_t> prompt = prompt_ids(codec, o, "the model's characters");
    model.eval();
    const auto t0 = std::chrono::steady_clock::now();
    const Tokens out = models::generate(model, Tokens(prompt, {1, static_cast<int64_t>(prompt.size())}),
                                        {.new_tokens = o.tokens, .temperature = o.temperature, .top_k = o.top_k,
                                         .top_p = o.top_p, .seed = o.seed, .kv_cache = !o.no_kv_cache});
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (tokens_per_second) *tokens_per_second = secs > 0 ? static_cast<double>(o.tokens) / secs : 0.0;
    model.train();
    return codec.decode(out.data);
}

models::json::Object settings(const Corpus& c, const Options& o) {
    return {{"codec", c.codec.to_json()}, {"seed", std::to_string(o.seed)}, {"steps", o.steps}};
}

// What makes a run this run, for --resume to compare (run_state.h): the text (its size and
// checksum), and every flag that changes the numbers besides the model's config, which the state
// holds too. Not --steps: a resumed run may train longer.
models::json::Object identity(const Options& o) {
    return {{"--data", common::file_fingerprint(o.data)}, {"--bpe", o.bpe}, {"--seed", std::to_string(o.seed)},
            {"--batch", o.batch}, {"--lr", common::exact(o.lr)}, {"--min-lr", common::exact(o.min_lr)}, {"--warmup", o.warmup},
            {"--weight-decay", common::exact(o.weight_decay)}, {"--beta2", common::exact(o.beta2)}, {"--clip", common::exact(o.clip)},
            {"--eval-batches", o.eval_batches}, {"--reference", o.reference}};
}

// The flags that make a training step smaller, for the messages about memory.
constexpr const char* kShrinkingFlags = "--batch or --block-size (or the model: --d-model, --layers), or --eval-batches";

void print_setup(const models::GPT& model, const Corpus& c, const Options& o, const std::string& path) {
    std::printf("gpt: %s | %s, V=%lld | %zu train / %zu validation tokens\n", path.c_str(),
                c.codec.is_subwords() ? "subwords" : "characters", (long long)c.codec.size(), c.train.size(), c.valid.size());
    const double uni = data::unigram_cross_entropy(c.train, c.valid, c.codec.size()),
                 bi = data::bigram_cross_entropy(c.train, c.valid, c.codec.size());
    std::printf("validation text: unigram %.4f nats/token (perplexity %.2f), bigram %.4f (perplexity %.2f), uniform %.4f\n", uni,
                std::exp(uni), bi, std::exp(bi), std::log(static_cast<double>(c.codec.size())));
    std::printf("model N=%lld D=%lld h=%lld T=%lld dropout=%g | %lld parameters | %d thread%s | kernels: %s\n",
                (long long)o.model.layers, (long long)o.model.d_model, (long long)o.model.heads, (long long)o.model.block_size,
                o.model.dropout, (long long)model.num_parameters(), autograd::num_threads(),
                autograd::num_threads() == 1 ? "" : "s", o.reference ? "plain autograd ops (--reference)" : "fused");
    std::printf("training: %d steps of B=%d, AdamW(0.9, %g, weight decay %g on matrices), lr: %d warmup steps to %g, then a "
                "cosine down to %g at step %d, clip %g\n",
                o.steps, o.batch, o.beta2, o.weight_decay, o.warmup, o.lr, o.min_lr, o.steps, o.clip);
}

void report_eval(common::TrainingLog& log, models::GPT& model, const EvalSet& e, int step) {
    const double train = mean_loss(model, e.train), valid = mean_loss(model, e.valid);
    char line[160];
    std::snprintf(line, sizeof line, "step %5d  train loss %.4f  val loss %.4f  (perplexity %.2f)  %.0f s", step, train, valid,
                  std::exp(valid), log.seconds());
    log.result(line);
    log.add_valid(valid);
}

// --load: the saved model writes from --prompt.
int use_checkpoint(const Options& o) {
    const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(o.load);   // checks the checksums the file has
    if (!f.checksummed)
        std::fprintf(stderr, "note: '%s' carries no checksums: damage to it cannot be detected\n", o.load.c_str());
    const std::unique_ptr<models::GPT> model = models::gpt_from_metadata(f, o.load);
    // an interrupted run's state holds the model and the optimizer's tensors: its model samples,
    // and a line says what the file is and how to go on training it
    const bool state = common::note_if_run_state(f, o.load);
    nn::load_parameters(*model, f, o.load, /*allow_unexpected=*/state);
    const data::CorpusCodec codec = models::read_metadata(f.metadata, "codec", o.load, data::CorpusCodec::from_json);
    if (codec.size() != model->cfg.vocab)
        throw std::runtime_error("'" + o.load + "': its codec holds " + std::to_string(codec.size()) + " tokens, its model " +
                                 std::to_string(model->cfg.vocab));
    prompt_ids(codec, o, "the model in '" + o.load + "'");
    std::printf("loaded %s: N=%lld D=%lld h=%lld T=%lld, V=%lld\n", o.load.c_str(), (long long)model->cfg.layers,
                (long long)model->cfg.d_model, (long long)model->cfg.heads, (long long)model->cfg.block_size, (long long)codec.size());
    double tok_s = 0;
    const std::string text = sample(*model, codec, o, &tok_s);
    std::printf("sample (%lld tokens, temperature %g, %.0f tokens/s):\n%s\n", (long long)o.tokens, o.temperature, tok_s, text.c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o = options::parse_gpt(argc, argv);
    try {
        autograd::FusedKernelsGuard fused_kernels(!o.reference);   // --reference: each layer's plain form
        autograd::manual_seed(o.seed);                              // model init and dropout
        if (!o.load.empty()) return use_checkpoint(o);

        const std::string& path = o.data;
        const Corpus corpus = load_corpus(o, path);
        o.model.vocab = corpus.codec.size();
        prompt_ids(corpus.codec, o, "the text '" + path + "'");   // a prompt the model cannot read fails now, not after training
        // the memory, estimated from the shapes before anything of that size is made: the model,
        // AdamW's moments, a step's activations, and the evaluation's windows (x and y, 2 x --eval-batches)
        const double eval_set_bytes = 2.0 * 2.0 * o.eval_batches * o.batch * static_cast<double>(o.model.block_size) * sizeof(int32_t);
        common::check_memory(common::gpt_training_peak_bytes(o.model, o.batch, o.model.block_size) +
                                 static_cast<int64_t>(std::min(eval_set_bytes, 1e18)),
                             "training on batches of " + std::to_string(o.batch) + " x " + std::to_string(o.model.block_size),
                             kShrinkingFlags);
        models::GPT model(o.model);
        optim::AdamW opt(model.parameters(), {.lr = 0.0f, .beta1 = 0.9f, .beta2 = o.beta2, .eps = 1e-8f,
                                              .weight_decay = o.weight_decay, .decay_matrices_only = true});
        const int total = std::max(o.steps, 1);   // (a run shorter than its warmup is all warmup)
        optim::WarmupCosineSchedule sched(opt, o.lr, std::min(o.warmup, total), total, o.min_lr);   // sets opt's lr every step
        autograd::Rng data_rng(o.seed * 7919 + 1);                                   // the batches' stream
        const EvalSet eval_set = make_eval_set(corpus, o);
        print_setup(model, corpus, o, path);
        common::TrainingLog log(std::max(o.steps, 1));
        int64_t resumed_at = 0;   // the step a --resume'd run starts after
        {
            common::InterruptWatch interrupt;   // Ctrl-C, until the loop ends: it stops after its step, and the run is saved
            int64_t step = 0;
            common::RunState run{.model = &model, .model_metadata = models::gpt_to_metadata(model), .opt = &opt, .sched = &sched,
                                 .log = &log, .rngs = {{"data", &data_rng}}, .counters = {{"step", &step}},
                                 .settings = settings(corpus, o), .identity = identity(o), .save = o.save};
            if (!o.resume.empty()) common::restore_run(o.resume, run);   // --resume: as it was after its last step
            else report_eval(log, model, eval_set, 0);
            if (step > o.steps)
                throw std::runtime_error("--steps " + std::to_string(o.steps) + " is fewer than the " + std::to_string(step) +
                                         " steps the run in '" + o.resume + "' has trained: give --steps " + std::to_string(step) + " or more");
            resumed_at = step;
            model.train();
            for (step++; step <= o.steps; step++) {
                if (o.sample_every > 0 && (step - 1) % o.sample_every == 0)
                    std::printf("sample at step %lld:\n%s\n", (long long)step - 1, sample(model, corpus.codec, o).c_str());
                const Batch b = windows(corpus.train, random_starts(data_rng, corpus.train.size(), o.batch, o.model.block_size),
                                        o.model.block_size);
                opt.zero_grad();
                const Tensor loss = model.loss(b.x, b.y);   // (): the mean over B x T next tokens
                loss.backward();
                if (o.clip > 0) optim::clip_grad_norm(opt.params(), o.clip);
                const float lr = sched.step();
                opt.step();
                const double tok_s = static_cast<double>(step - resumed_at) * o.batch * o.model.block_size / log.seconds();
                log.step(loss.item(), 1.0, {{"loss", common::format_value(loss.item())}, {"lr", common::format_value(lr, 3)},
                                            {"tok/s", common::format_value(tok_s, 3)}});
                if (step % o.eval_every == 0 || step == o.steps) report_eval(log, model, eval_set, static_cast<int>(step));
                if (interrupt.requested()) return common::save_interrupted(run, common::resume_path(o.save, "gpt"), argc, argv);
            }
        }
        log.finish();
        const int64_t trained = o.steps - resumed_at;
        const std::string resumed = o.resume.empty() ? "" : " (resumed after step " + std::to_string(resumed_at) +
                                                               ": the run now stands at step " + std::to_string(o.steps) + ")";
        std::printf("trained %lld steps%s in %.1f s (%.1f ms/step)\n", (long long)trained, resumed.c_str(), log.seconds(),
                    trained ? 1000.0 * log.seconds() / static_cast<double>(trained) : 0.0);
        if (!o.save.empty()) {
            models::json::Object meta = models::gpt_to_metadata(model);
            for (auto& entry : settings(corpus, o)) meta.push_back(entry);
            nn::save(model, o.save, models::to_metadata(meta));
            std::printf("saved %s\n", o.save.c_str());
        }
        if (!o.plot.empty()) log.plot(o.plot, "GPT: cross-entropy per token", "train (each batch)", /*log_y=*/false);
        common::remove_finished_state(o.resume, o.save, "gpt");   // its outputs written: the state it resumed from has done its work
        double tok_s = 0;
        const std::string text = sample(model, corpus.codec, o, &tok_s);
        std::printf("sample (%lld tokens, temperature %g, %.0f tokens/s):\n%s\n", (long long)o.tokens, o.temperature, tok_s, text.c_str());
    } catch (const std::bad_alloc&) {   // past the estimate (another program took the memory)
        std::fprintf(stderr, "gpt: %s\n", common::out_of_memory_message(kShrinkingFlags).c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gpt: %s\n", e.what());
        return 1;
    }
    return 0;
}
