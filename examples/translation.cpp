// Translation end to end: train the Transformer on sentence pairs, evaluate with corpus BLEU,
// translate new sentences, and draw where the decoder looks.
//
//   ./examples/translation                                   # toy English->German corpus, built in
//   ./examples/translation --data eng-fra.tsv --lowercase    # any Tatoeba/Anki TSV file
//   ./examples/translation --load translation.safetensors --translate "the dog sees the cat ."
//   ./examples/translation --load translation.safetensors --attention attention.svg --translate "..."
//   echo "the cat eats the egg ." | ./examples/translation --load translation.safetensors --stdin
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "examples/common/args.h"
#include "examples/common/heatmap_terminal.h"
#include "examples/common/progress.h"
#include "examples/common/svg.h"
#include "examples/data/bleu.h"
#include "examples/data/tokenizer.h"
#include "examples/data/toy_grammar.h"
#include "examples/data/tsv.h"
#include "examples/data/vocab.h"
#include "models/decoding.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"

using autograd::Mask;
using autograd::Tensor;
using autograd::Tokens;
using data::Vocab;

namespace {

struct Options {
    std::string data, valid, test, save = "translation.safetensors", load, translate, attention, plot;
    bool lowercase = false, bleu_lowercase = false, use_stdin = false;
    int epochs = 10, batch = 64, warmup = 400, beam = 4, threads = 0, min_freq = 1, max_len = 50;
    int64_t layers = 2, d_model = 128, heads = 4, d_ff = 512;
    float dropout = 0.1f, lr_factor = 1.0f, label_smoothing = 0.1f;
    uint64_t seed = 1;
};

// One training example as ids: src = tokens + <eos>; tgt = <bos> tokens <eos>.
struct Example {
    std::vector<int32_t> src, tgt;
};

struct Batch {
    Tokens src, tgt_in, tgt_out;   // (B, S), (B, T), (B, T)
    Mask src_mask, tgt_mask;       // (B, 1, S), (B, T, T)
    int64_t tokens = 0;            // non-padding target tokens
};

std::vector<std::string> tok(const std::string& s, const Options& o) { return data::tokenize(s, o.lowercase); }

Batch make_batch(const std::vector<Example>& ex, const std::vector<size_t>& idx) {
    const int64_t B = static_cast<int64_t>(idx.size());
    int64_t S = 0, T = 0;
    for (size_t i : idx) {
        S = std::max<int64_t>(S, ex[i].src.size());
        T = std::max<int64_t>(T, ex[i].tgt.size() - 1);
    }
    Batch b;
    b.src = Tokens::full({B, S}, Vocab::PAD);
    b.tgt_in = Tokens::full({B, T}, Vocab::PAD);
    b.tgt_out = Tokens::full({B, T}, Vocab::PAD);
    for (int64_t r = 0; r < B; r++) {
        const Example& e = ex[idx[r]];
        std::copy(e.src.begin(), e.src.end(), b.src.data.begin() + r * S);
        for (size_t t = 0; t + 1 < e.tgt.size(); t++) {
            b.tgt_in[r * T + t] = e.tgt[t];        // <bos> y1 y2 ...
            b.tgt_out[r * T + t] = e.tgt[t + 1];   // y1 y2 ... <eos>
            b.tokens++;
        }
    }
    b.src_mask = models::padding_mask(b.src, Vocab::PAD);
    b.tgt_mask = models::target_mask(b.tgt_in, Vocab::PAD);
    return b;
}

// Sort by length so each batch holds sentences of about the same length: little padding, so
// little compute spent on it. Returns batches of indices; their order is shuffled per epoch.
std::vector<std::vector<size_t>> length_batches(const std::vector<Example>& ex, int batch) {
    std::vector<size_t> order(ex.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return std::make_pair(ex[a].src.size(), ex[a].tgt.size()) < std::make_pair(ex[b].src.size(), ex[b].tgt.size());
    });
    std::vector<std::vector<size_t>> out;
    for (size_t i = 0; i < order.size(); i += batch)
        out.emplace_back(order.begin() + i, order.begin() + std::min(order.size(), i + batch));
    return out;
}

// Mean cross-entropy per target token (no label smoothing) over a whole set, in eval mode.
double evaluate_loss(models::Transformer& model, const std::vector<Example>& ex, int batch) {
    autograd::NoGradGuard no_grad;
    model.eval();
    double total = 0.0;
    int64_t n = 0;
    for (const auto& idx : length_batches(ex, batch)) {
        const Batch b = make_batch(ex, idx);
        const Tensor logits = model.forward(b.src, b.tgt_in, b.src_mask, b.tgt_mask);   // (B, T, V)
        total += nn::cross_entropy(logits, b.tgt_out, {.ignore_index = Vocab::PAD}).item() * b.tokens;
        n += b.tokens;
    }
    return n ? total / n : 0.0;
}

std::vector<int32_t> encode_source(const Vocab& v, const std::vector<std::string>& tokens) { return v.encode(tokens, false, true); }

// Translate sentences (already encoded source ids) greedily in length-sorted batches, or with beam search.
std::vector<std::vector<int32_t>> translate_ids(models::Transformer& model, const std::vector<std::vector<int32_t>>& srcs,
                                                int beam, int64_t max_len) {
    model.eval();
    std::vector<std::vector<int32_t>> out(srcs.size());
    if (beam > 0) {
        for (size_t i = 0; i < srcs.size(); i++) {
            const Tokens src(srcs[i], {1, static_cast<int64_t>(srcs[i].size())});
            const auto h = models::beam_search(model, src, models::padding_mask(src, Vocab::PAD),
                                               {.beam_size = beam, .max_len = max_len, .bos = Vocab::BOS, .eos = Vocab::EOS,
                                                .length_penalty = 0.6f});
            out[i] = h.tokens;
        }
        return out;
    }
    std::vector<Example> ex(srcs.size());
    for (size_t i = 0; i < srcs.size(); i++) ex[i].src = srcs[i], ex[i].tgt = {Vocab::BOS, Vocab::EOS};
    for (const auto& idx : length_batches(ex, 100)) {
        const Batch b = make_batch(ex, idx);
        const Tokens ys = models::greedy_decode(model, b.src, b.src_mask, max_len, Vocab::BOS, Vocab::EOS, Vocab::PAD);
        const int64_t L = ys.size(1);
        for (size_t r = 0; r < idx.size(); r++) out[idx[r]].assign(ys.data.begin() + r * L, ys.data.begin() + (r + 1) * L);
    }
    return out;
}

struct Score {
    data::BleuResult bleu;
    double exact = 0.0;
};

// BLEU as sacreBLEU computes it: hypotheses (detokenized model output) against the references as
// written in the data, case-sensitive unless --bleu-lowercase. Exact match compares the same
// 13a token sequences, so it does not depend on spacing either.
Score score(models::Transformer& model, const Vocab& sv, const Vocab& tv, const std::vector<data::Pair>& pairs,
            const Options& o, int beam, std::vector<std::string>* hyps_out = nullptr) {
    std::vector<std::vector<int32_t>> srcs;
    std::vector<std::string> refs, hyps;
    for (const auto& p : pairs) {
        srcs.push_back(encode_source(sv, tok(p.src, o)));
        refs.push_back(p.tgt);
    }
    const auto outs = translate_ids(model, srcs, beam, o.max_len + 2);
    const data::BleuOptions bleu_opt{.lowercase = o.bleu_lowercase};
    auto normalized = [&](const std::string& line) {
        return data::tokenize_13a(o.bleu_lowercase ? data::to_lower_utf8(line) : line);
    };
    Score s;
    for (size_t i = 0; i < outs.size(); i++) {
        hyps.push_back(data::detokenize(tv.decode(outs[i])));
        s.exact += normalized(hyps.back()) == normalized(refs[i]);
    }
    s.exact = pairs.empty() ? 0.0 : 100.0 * s.exact / pairs.size();
    s.bleu = data::corpus_bleu(hyps, refs, bleu_opt);
    if (hyps_out) *hyps_out = hyps;
    return s;
}

// Everything a checkpoint needs to translate on its own: config, both vocabularies, tokenizer flag.
nn::Metadata checkpoint_metadata(const models::TransformerConfig& cfg, const Vocab& sv, const Vocab& tv, const Options& o,
                                 int epoch, double valid_loss) {
    return {{"task", "translation"},           {"config", cfg.to_string()},       {"src_vocab", sv.serialize()},
            {"tgt_vocab", tv.serialize()},     {"lowercase", o.lowercase ? "1" : "0"}, {"max_len", std::to_string(o.max_len)},
            {"epoch", std::to_string(epoch)},  {"valid_loss", std::to_string(valid_loss)}};
}

// Translate one sentence; optionally draw the encoder-decoder attention of every layer and head.
std::string translate_sentence(models::Transformer& model, const Vocab& sv, const Vocab& tv, const std::string& text,
                               const Options& o, bool show_attention) {
    const std::vector<std::string> src_tokens = tok(text, o);
    const std::vector<int32_t> src_ids = encode_source(sv, src_tokens);
    const std::vector<int32_t> out = translate_ids(model, {src_ids}, o.beam, o.max_len + 2)[0];
    const std::vector<std::string> out_tokens = tv.decode(out);
    if (show_attention && !o.attention.empty()) {
        // One teacher-forced pass over the chosen output refreshes every layer's last_attention.
        autograd::NoGradGuard no_grad;
        const int64_t S = static_cast<int64_t>(src_ids.size()), T = static_cast<int64_t>(out.size()) - 1;
        const Tokens src(src_ids, {1, S}), ys(std::vector<int32_t>(out.begin(), out.end() - 1), {1, T});
        const Mask sm = models::padding_mask(src, Vocab::PAD);
        model.decode(model.encode(src, sm), sm, ys, models::subsequent_mask(T));
        std::vector<std::string> cols, rows;
        for (int32_t id : src_ids) cols.push_back(sv.token(id));
        for (int64_t t = 1; t <= T; t++) rows.push_back(tv.token(out[t]));   // row t: the token predicted there
        std::vector<common::Heatmap> maps;
        common::Heatmap mean_last{"last layer, mean over heads", rows, cols, std::vector<float>(T * S, 0.0f)};
        const auto& layers = *model.decoder->layers;
        for (size_t l = 0; l < layers.size(); l++) {
            const Tensor& w = layers[l].src_attn->last_attention;   // (1, H, T, S)
            const int64_t H = w.size(1);
            for (int64_t h = 0; h < H; h++) {
                common::Heatmap m{"layer " + std::to_string(l + 1) + ", head " + std::to_string(h + 1), rows, cols, {}};
                m.values.assign(w.data() + h * T * S, w.data() + (h + 1) * T * S);
                if (l + 1 == layers.size())
                    for (int64_t i = 0; i < T * S; i++) mean_last.values[i] += m.values[i] / static_cast<float>(H);
                maps.push_back(std::move(m));
            }
        }
        common::write_heatmaps(o.attention, "Encoder-decoder attention: \"" + text + "\"", maps,
                               static_cast<int>(layers[0].src_attn->h));
        std::fprintf(stderr, "%s", common::terminal_heatmap(mean_last, isatty(2)).c_str());
        std::fprintf(stderr, "wrote %s (%zu heatmaps: %zu layers x %lld heads)\n", o.attention.c_str(), maps.size(), layers.size(),
                     (long long)layers[0].src_attn->h);
    }
    return data::detokenize(out_tokens);
}

int run_inference(const Options& o_in) {
    Options o = o_in;
    const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(o.load);
    for (const char* key : {"config", "src_vocab", "tgt_vocab"})
        if (!f.metadata.count(key))
            throw std::runtime_error("'" + o.load + "' has no '" + key + "' metadata: not a checkpoint written by ./examples/translation");
    models::Transformer model(models::TransformerConfig::from_string(f.metadata.at("config")));
    nn::load_parameters(model, f, o.load);
    const Vocab sv = Vocab::deserialize(f.metadata.at("src_vocab")), tv = Vocab::deserialize(f.metadata.at("tgt_vocab"));
    o.lowercase = f.metadata.count("lowercase") && f.metadata.at("lowercase") == "1";
    if (f.metadata.count("max_len")) o.max_len = std::stoi(f.metadata.at("max_len"));
    if (!o.translate.empty()) std::printf("%s\n", translate_sentence(model, sv, tv, o.translate, o, true).c_str());
    if (o.use_stdin) {
        std::string line;
        bool first = o.translate.empty();
        while (std::getline(std::cin, line)) {
            if (!line.empty() && line.back() == '\r') line.pop_back();
            std::printf("%s\n", line.empty() ? "" : translate_sentence(model, sv, tv, line, o, first).c_str());
            std::fflush(stdout);
            first = false;
        }
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    common::ArgParser p("translation", "Train a Transformer translator (toy English->German corpus, or a TSV file), report "
                                       "test BLEU, and translate sentences with a saved model.");
    p.add("--data", &o.data, "Tatoeba/Anki TSV file (source TAB target); default: the built-in toy corpus", "FILE");
    p.add("--valid", &o.valid, "separate validation TSV (default: split off --data)", "FILE");
    p.add("--test", &o.test, "separate test TSV (default: split off --data)", "FILE");
    p.flag("--lowercase", &o.lowercase, "lowercase all text before tokenizing");
    p.flag("--bleu-lowercase", &o.bleu_lowercase,
           "score case-insensitive BLEU (sacreBLEU -lc); default: case-sensitive against the raw references");
    p.add("--min-freq", &o.min_freq, "drop words seen fewer times in training (they become <unk>)").min(1);
    p.add("--max-len", &o.max_len, "skip training pairs longer than this many tokens").range(1, 1000);
    p.add("--epochs", &o.epochs, "passes over the training set").min(0);
    p.add("--batch", &o.batch, "sentence pairs per batch (B)").min(1);
    p.add("--layers", &o.layers, "encoder and decoder layers (N)").range(1, 64);
    p.add("--d-model", &o.d_model, "model width (D)").range(1, 8192);
    p.add("--heads", &o.heads, "attention heads (h); must divide D").range(1, 256);
    p.add("--d-ff", &o.d_ff, "feed-forward width (F)").range(1, 65536);
    p.add("--dropout", &o.dropout, "dropout probability").range(0, 0.99);
    p.add("--label-smoothing", &o.label_smoothing, "label smoothing eps (paper: 0.1)").range(0, 1);
    p.add("--warmup", &o.warmup, "warmup steps of the Noam schedule").min(1);
    p.add("--lr-factor", &o.lr_factor, "factor of the Noam schedule").range(0, 100);
    p.add("--beam", &o.beam, "beam width for the test score and for translating (0: greedy)").range(0, 64);
    p.add("--seed", &o.seed, "random seed (data split, init, dropout, batch order)");
    p.add("--threads", &o.threads, "OpenMP threads (0: all cores)").range(0, 1024);
    p.add("--save", &o.save, "where to keep the best checkpoint (lowest validation loss)", "PATH");
    p.add("--load", &o.load, "use the model saved at PATH instead of training", "PATH");
    p.add("--translate", &o.translate, "translate this sentence (with --load)", "TEXT");
    p.flag("--stdin", &o.use_stdin, "translate standard input, one sentence per line (with --load)");
    p.add("--attention", &o.attention, "write the encoder-decoder attention of the translated sentence to PATH (SVG)", "PATH");
    p.add("--plot", &o.plot, "write training and validation loss curves to PATH (SVG)", "PATH");
    p.parse(argc, argv);
    auto usage_error = [](const std::string& msg) {
        std::fprintf(stderr, "translation: %s (see --help)\n", msg.c_str());
        return 2;
    };
    if (o.d_model % o.heads != 0) return usage_error("--d-model must be a multiple of --heads");
    if ((!o.translate.empty() || o.use_stdin) && o.load.empty()) return usage_error("--translate and --stdin need --load PATH");
    if (!o.attention.empty() && o.translate.empty() && !o.use_stdin)
        return usage_error("--attention needs a sentence: --translate TEXT or --stdin");
    if (o.threads > 0) omp_set_num_threads(o.threads);

    try {
        if (!o.load.empty()) return run_inference(o);

        // ---- 1) data
        data::DataSplits splits;
        std::string source_name;
        if (o.data.empty()) {
            splits = data::make_toy_corpus(o.seed);
            source_name = "toy English->German grammar";
        } else {
            const data::TsvResult r = data::read_tsv(o.data);
            for (const std::string& w : r.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
            if (r.skipped) std::fprintf(stderr, "%s: skipped %zu malformed line(s)\n", o.data.c_str(), r.skipped);
            if (o.valid.empty() != o.test.empty()) throw std::runtime_error("--valid and --test go together");
            if (o.valid.empty()) {
                splits = data::split_pairs(r.pairs, o.seed, 0.05, 0.05);
            } else {
                splits.train = r.pairs;
                splits.valid = data::read_tsv(o.valid).pairs;
                splits.test = data::read_tsv(o.test).pairs;
            }
            source_name = o.data;
        }
        std::vector<std::vector<std::string>> src_tok, tgt_tok;
        size_t too_long = 0;
        for (const auto& pr : splits.train) {
            auto s = tok(pr.src, o), t = tok(pr.tgt, o);
            if (s.empty() || t.empty() || static_cast<int>(std::max(s.size(), t.size())) > o.max_len) { too_long++; continue; }
            src_tok.push_back(std::move(s));
            tgt_tok.push_back(std::move(t));
        }
        if (src_tok.empty()) throw std::runtime_error("no training pairs left after the length filter (--max-len " + std::to_string(o.max_len) + ")");
        const Vocab sv = Vocab::build(src_tok, o.min_freq), tv = Vocab::build(tgt_tok, o.min_freq);
        std::vector<Example> train, valid;
        for (size_t i = 0; i < src_tok.size(); i++) train.push_back({encode_source(sv, src_tok[i]), tv.encode(tgt_tok[i], true, true)});
        for (const auto& pr : splits.valid) {
            auto s = tok(pr.src, o), t = tok(pr.tgt, o);
            if (!s.empty() && !t.empty()) valid.push_back({encode_source(sv, s), tv.encode(t, true, true)});
        }
        std::printf("data: %s | train %zu pairs (%zu over --max-len dropped), valid %zu, test %zu | vocab %zu source, %zu target\n",
                    source_name.c_str(), train.size(), too_long, splits.valid.size(), splits.test.size(), sv.size(), tv.size());

        // ---- 2) model and optimizer
        autograd::manual_seed(o.seed);
        models::TransformerConfig cfg{.src_vocab = static_cast<int64_t>(sv.size()), .tgt_vocab = static_cast<int64_t>(tv.size()),
                                      .layers = o.layers, .d_model = o.d_model, .d_ff = o.d_ff, .heads = o.heads,
                                      .dropout = o.dropout, .max_len = std::max<int64_t>(512, o.max_len + 2)};
        models::Transformer model(cfg);
        optim::Adam opt(model.parameters(), {.lr = 0.0f, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f});
        optim::NoamSchedule sched(opt, cfg.d_model, o.warmup, o.lr_factor);
        const auto batches = length_batches(train, o.batch);
        std::printf("model: N=%lld D=%lld F=%lld h=%lld dropout=%.2g, %lld parameters | %zu batches/epoch, %d epochs | %d threads\n",
                    (long long)cfg.layers, (long long)cfg.d_model, (long long)cfg.d_ff, (long long)cfg.heads, cfg.dropout,
                    (long long)model.num_parameters(), batches.size(), o.epochs, omp_get_max_threads());

        // ---- 3) train; keep the parameters with the best validation loss
        data::SplitMix64 shuffle_rng(o.seed ^ 0x5eedULL);
        std::vector<double> ep_x, train_curve, valid_curve, step_x, step_loss;
        std::vector<std::vector<float>> best_params;
        double best_valid = INFINITY;
        int best_epoch = 0, step = 0;
        const auto t0 = std::chrono::steady_clock::now();
        common::Progress progress(std::max<int>(1, o.epochs * static_cast<int>(batches.size())));
        for (int epoch = 1; epoch <= o.epochs; epoch++) {
            std::vector<size_t> order(batches.size());
            std::iota(order.begin(), order.end(), 0);
            for (size_t i = order.size(); i > 1; i--) std::swap(order[i - 1], order[shuffle_rng.below(i)]);   // Fisher-Yates
            model.train();
            double epoch_loss = 0.0;
            int64_t epoch_tokens = 0;
            for (size_t bi : order) {
                const Batch b = make_batch(train, batches[bi]);
                const Tensor logits = model.forward(b.src, b.tgt_in, b.src_mask, b.tgt_mask);   // (B, T, V)
                const Tensor loss = nn::cross_entropy(logits, b.tgt_out, {.ignore_index = Vocab::PAD, .label_smoothing = o.label_smoothing});
                opt.zero_grad();
                loss.backward();
                const float lr = sched.step();
                opt.step();
                step++;
                epoch_loss += loss.item() * b.tokens;
                epoch_tokens += b.tokens;
                step_x.push_back(step);
                step_loss.push_back(loss.item());
                progress.update(step, {{"epoch", std::to_string(epoch)}, {"loss", common::format_value(loss.item())},
                                       {"lr", common::format_value(lr, 3)}});
            }
            const double vl = evaluate_loss(model, valid, o.batch);
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            char line[200];
            std::snprintf(line, sizeof line, "epoch %2d  train loss %.4f (label-smoothed)  valid loss %.4f  %s  %.0f s", epoch,
                          epoch_loss / std::max<int64_t>(epoch_tokens, 1), vl, vl < best_valid ? "best" : "    ", secs);
            progress.result(line);
            ep_x.push_back(step);
            train_curve.push_back(epoch_loss / std::max<int64_t>(epoch_tokens, 1));
            valid_curve.push_back(vl);
            if (vl < best_valid) {
                best_valid = vl;
                best_epoch = epoch;
                best_params.clear();
                for (const Tensor& t : model.parameters()) best_params.push_back(t.to_vector());
                if (!o.save.empty()) nn::save(model, o.save, checkpoint_metadata(cfg, sv, tv, o, epoch, vl));
            }
        }
        progress.finish();
        if (!best_params.empty()) {   // evaluate the best epoch's parameters, as saved
            auto params = model.parameters();
            for (size_t i = 0; i < params.size(); i++) std::copy(best_params[i].begin(), best_params[i].end(), params[i].data());
            std::printf("best epoch %d (valid loss %.4f)%s\n", best_epoch, best_valid,
                        o.save.empty() ? "" : (", saved to " + o.save).c_str());
        }
        if (!o.plot.empty()) {
            common::write_line_plot(o.plot, "Translation: loss per target token", "step", "cross-entropy",
                                    {{"train (per batch, label-smoothed)", step_x, step_loss}, {"validation", ep_x, valid_curve}});
            std::printf("wrote %s\n", o.plot.c_str());
        }

        // ---- 4) test: BLEU and exact match, greedy and beam
        std::vector<std::string> hyps;
        const Score g = score(model, sv, tv, splits.test, o, 0, &hyps);
        std::printf("test greedy: BLEU %.1f, exact match %.1f%%  [%s]\n", g.bleu.score, g.exact, data::to_string(g.bleu).c_str());
        for (size_t i = 0; i < std::min<size_t>(3, splits.test.size()); i++)
            std::printf("  src: %s\n  ref: %s\n  out: %s\n", splits.test[i].src.c_str(), splits.test[i].tgt.c_str(), hyps[i].c_str());
        Score final_score = g;
        if (o.beam > 0) {
            final_score = score(model, sv, tv, splits.test, o, o.beam);
            std::printf("test beam %d: BLEU %.1f, exact match %.1f%%  [%s]\n", o.beam, final_score.bleu.score, final_score.exact,
                        data::to_string(final_score.bleu).c_str());
        }
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("total %.0f s\n", secs);
        // The signature says which BLEU this is (sacreBLEU 2.x's notation): one reference, case,
        // tokenizer, smoothing. The score is against the references as written.
        std::printf("test BLEU: %.1f (%s), exact match: %.1f%%  [signature: %s]\n", final_score.bleu.score,
                    o.beam > 0 ? ("beam " + std::to_string(o.beam)).c_str() : "greedy", final_score.exact,
                    data::bleu_signature({.lowercase = o.bleu_lowercase}).c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "translation: %s\n", e.what());
        return 1;
    }
    return 0;
}
