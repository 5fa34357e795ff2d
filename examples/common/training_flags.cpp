#include "examples/common/training_flags.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "autograd/autograd.h"
#include "autograd/io/atomic_file.h"
#include "examples/common/memory_budget.h"
#include "models/checkpoint.h"

namespace common {

void apply_threads_flag(const ArgParser& p, int& threads) {
    if (threads > autograd::available_cores()) {   // threads past the cores only wait for each other's turn
        p.warn("--threads " + std::to_string(threads) + " is more than the " + std::to_string(autograd::available_cores()) +
               " cores this process may use: running " + std::to_string(autograd::available_cores()));
        threads = autograd::available_cores();
    }
    if (threads > 0) autograd::set_num_threads(threads);
}

void add_training_flags(ArgParser& p, TrainingFlags& t, const std::string& seed_help, const std::string& lr_factor_help) {
    p.add("--layers", &t.model.layers, "encoder and decoder layers (N)").range(1, 64);
    p.add("--d-model", &t.model.d_model, "model width (D)").range(1, 8192);
    p.add("--heads", &t.model.heads, "attention heads (h); must divide D").range(1, 256);
    p.add("--d-ff", &t.model.d_ff, "feed-forward width (F)").range(1, 65536);
    p.add("--dropout", &t.model.dropout, "dropout probability").range(0, 0.99);
    p.add("--warmup", &t.warmup, "warmup steps of the learning-rate schedule").min(1);
    p.add("--lr-factor", &t.lr_factor, lr_factor_help).range(0, 100);
    p.add("--seed", &t.seed, seed_help);
    p.add("--threads", &t.threads, "OpenMP threads (0: all cores)").range(0, 1024);
    p.add("--shards", &t.shards,
          "cut each batch into N row slices whose forward and backward passes run side by side, a thread each, "
          "their gradients added at the end (data parallelism); the same results on any number of threads; "
          "1: the whole batch in one pass, each op split between the threads").range(1, 64);
    p.flag("--bf16", &t.bf16, "mixed precision: Linear and attention products read bf16, accumulate in fp32 (needs AVX512_BF16)");
    p.flag("--reference", &t.reference,
           "train and evaluate through the plain autograd ops of nn/ (each layer's manual form) instead of the fused "
           "kernels, and decode by recomputing the whole prefix (as --no-kv-cache); the same results up to float "
           "rounding, several times slower; for stepping through what the chapters teach");
}

void add_model_flags(ArgParser& p, TrainingFlags& t) {
    p.add("--model", &t.model_kind,
          "transformer; rnn: the recurrent encoder-decoder without attention (--context); rnn-attention: with soft attention, "
          "Bahdanau et al.'s (--score) (models/rnn_seq2seq.h)", "NAME");
    p.add("--cell", &t.rnn_cell, "the recurrent models' cell: gru, lstm or rnn (default: lstm for --context sutskever, gru for "
                                 "--context cho and rnn-attention, as in the papers)", "NAME");
    p.add("--embed", &t.rnn.embed, "the recurrent models' embedding width (E)").range(1, 8192);
    p.add("--hidden", &t.rnn.hidden, "the recurrent models' state width (Hd)").range(1, 8192);
    p.add("--context", &t.rnn_context,
          "--model rnn: whose model: sutskever (the encoder's final states of every layer, (h, c) for an LSTM, start the decoder; "
          "Sutskever et al.) or cho (C = tanh(V h_S) beside every input word and at the output layer, the decoder from "
          "tanh(V' C); Cho et al.)", "NAME");
    p.add("--score", &t.rnn_score, "--model rnn-attention: the attention score: dot or general (Luong et al.), cosine, or "
                                   "additive (Bahdanau et al.); dot needs --unidirectional", "NAME");
    p.flag("--reverse-source", &t.rnn.reverse_source, "the recurrent models read each source sentence backwards (Sutskever et al.)");
    p.flag("--unidirectional", &t.rnn_unidirectional,
           "--model rnn-attention: the encoder reads forwards only (default: both ways; --model rnn's always reads one way)");
}

std::unique_ptr<models::Seq2Seq> make_model(const TrainingFlags& t, int64_t src_vocab, int64_t tgt_vocab) {
    if (t.model_kind == "transformer") {
        models::TransformerConfig c = t.model;
        c.src_vocab = src_vocab, c.tgt_vocab = tgt_vocab;
        return std::make_unique<models::Transformer>(c);
    }
    models::RNNSeq2SeqConfig c = t.rnn;
    c.src_vocab = src_vocab, c.tgt_vocab = tgt_vocab;
    return std::make_unique<models::RNNSeq2Seq>(c);
}

int64_t training_peak_bytes(const TrainingFlags& t, int64_t src_vocab, int64_t tgt_vocab, int64_t B, int64_t S, int64_t T,
                            bool full_logits) {
    if (t.model_kind == "transformer") {   // the config make_model builds, without the model
        models::TransformerConfig c = t.model;
        c.src_vocab = src_vocab, c.tgt_vocab = tgt_vocab;
        return training_peak_bytes(c, B, S, T, full_logits);
    }
    models::RNNSeq2SeqConfig c = t.rnn;
    c.src_vocab = src_vocab, c.tgt_vocab = tgt_vocab;
    return training_peak_bytes(c, B, S, T, full_logits);
}

std::string model_name(const models::Seq2Seq& model) {
    if (const auto* r = dynamic_cast<const models::RNNSeq2Seq*>(&model)) return r->cfg.attention() ? "rnn-attention" : "rnn";
    return "transformer";
}

void check_model_kind(const TrainingFlags& t, const models::Seq2Seq& loaded, const std::string& path) {
    if (t.model_given && model_name(loaded) != t.model_kind)
        throw std::runtime_error("--model " + t.model_kind + ", but '" + path + "' holds a model of kind " + model_name(loaded));
}

int64_t model_width(const TrainingFlags& t) { return t.model_kind == "transformer" ? t.model.d_model : t.rnn.hidden; }

// The flags of one kind of model given for another: an error, as a flag that does nothing.
static void refuse_flags_of_another_model(const ArgParser& p, const TrainingFlags& t) {
    const std::string kind = t.model_kind;
    auto refuse = [&](std::initializer_list<const char*> flags, bool applies, const std::string& why) {
        for (const char* f : flags)
            if (p.given(f) && !applies) p.fail(std::string(f) + " " + why + ", not to --model " + kind);
    };
    const bool rnn = kind != "transformer";
    refuse({"--d-model", "--heads", "--d-ff"}, !rnn, "applies to --model transformer");
    refuse({"--cell", "--embed", "--hidden", "--reverse-source"}, rnn, "applies to the recurrent models (rnn, rnn-attention)");
    refuse({"--context"}, kind == "rnn", "applies to --model rnn (with attention, each step has its own context)");
    refuse({"--score"}, kind == "rnn-attention", "applies to --model rnn-attention");
    refuse({"--unidirectional"}, kind == "rnn-attention", "applies to --model rnn-attention (the encoder of --model rnn reads one way)");
}

void check_load_flags(const TrainingFlags& t, const models::Seq2Seq& loaded, const std::string& path) {
    check_model_kind(t, loaded, path);
    std::vector<std::pair<std::string, std::pair<std::string, std::string>>> shape;   // flag -> (given, the file's)
    if (const auto* m = dynamic_cast<const models::Transformer*>(&loaded)) {
        const models::TransformerConfig &f = m->cfg, &g = t.model;
        shape = {{"--layers", {std::to_string(g.layers), std::to_string(f.layers)}}, {"--d-model", {std::to_string(g.d_model), std::to_string(f.d_model)}},
                 {"--heads", {std::to_string(g.heads), std::to_string(f.heads)}}, {"--d-ff", {std::to_string(g.d_ff), std::to_string(f.d_ff)}}};
    } else {
        const models::RNNSeq2SeqConfig &f = dynamic_cast<const models::RNNSeq2Seq&>(loaded).cfg, &g = t.rnn;
        shape = {{"--layers", {std::to_string(g.layers), std::to_string(f.layers)}}, {"--embed", {std::to_string(g.embed), std::to_string(f.embed)}},
                 {"--hidden", {std::to_string(g.hidden), std::to_string(f.hidden)}},
                 {"--cell", {t.rnn_cell, models::config_to_json(f).find("cell")->as_string()}}};
    }
    for (const auto& [flag, values] : shape)
        if (std::find(t.shape_flags_given.begin(), t.shape_flags_given.end(), flag) != t.shape_flags_given.end() && values.first != values.second)
            throw std::runtime_error(flag + " " + values.first + ", but the model in '" + path + "' has " + values.second +
                                     " (with --load the model comes from the file)");
}

void check_output_path(const ArgParser& p, const std::string& flag, const std::string& path) {
    if (path.empty()) return;
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_directory(path, ec)) p.fail(flag + " " + path + ": that is a folder; give a file name");
    // the save's own checks, made now: links that loop or lead to a missing folder, a device or a
    // FIFO, a name too long for the save's temporary file or for the folder, a folder that takes no file
    if (const std::string why = autograd::io::why_not_writable(path); !why.empty()) p.fail(flag + " " + path + ": " + why);
}

void apply_training_flags(const ArgParser& p, TrainingFlags& t) {
    const std::string kind = t.model_kind;
    for (const char* f : {"--layers", "--d-model", "--heads", "--d-ff", "--embed", "--hidden", "--cell"})
        if (p.has(f) && p.given(f)) t.shape_flags_given.push_back(f);
    if (kind != "transformer" && kind != "rnn" && kind != "rnn-attention")
        p.fail("--model must be transformer, rnn or rnn-attention, not '" + kind + "'");
    if (p.has("--model")) {
        refuse_flags_of_another_model(p, t);
        t.model_given = p.given("--model");
    }
    try {
        t.model.validate();   // the one check of the model's shape: --heads must divide --d-model, ...
        if (kind != "transformer") {   // the recurrent model's config (refuse_flags_of_another_model kept the others off)
            t.rnn.layers = t.model.layers;
            t.rnn.dropout = t.model.dropout;
            const bool attention = kind == "rnn-attention";
            t.rnn.context = attention ? models::Context::bahdanau : models::context_from_name(t.rnn_context);
            if (!attention && t.rnn.context == models::Context::bahdanau)
                throw std::invalid_argument("--context bahdanau is the model with attention: --model rnn-attention");
            // the papers' cells: Sutskever et al.'s LSTM, Cho et al.'s and Bahdanau et al.'s gated units (the GRU)
            const bool lstm_by_default = t.rnn.context == models::Context::sutskever;
            t.rnn.cell = nn::cell_kind_from_name(!t.rnn_cell.empty() ? t.rnn_cell : lstm_by_default ? "lstm" : "gru");
            t.rnn.score = nn::score_from_name(t.rnn_score);
            t.rnn.bidirectional = attention && !t.rnn_unidirectional;
            t.rnn.validate();   // e.g. the dot score with an encoder that reads both ways
        }
    } catch (const std::invalid_argument& e) {
        p.fail(e.what());
    }
    apply_threads_flag(p, t.threads);
    if (t.bf16 && !autograd::bf16_products_native())
        p.fail("--bf16 needs a CPU with AVX512_BF16 (vdpbf16ps), and this one has none");
}

std::string describe(const models::TransformerConfig& cfg, bool bf16) {
    char line[160];
    std::snprintf(line, sizeof line, "N=%lld D=%lld F=%lld h=%lld dropout=%.2g%s", (long long)cfg.layers, (long long)cfg.d_model,
                  (long long)cfg.d_ff, (long long)cfg.heads, cfg.dropout,
                  bf16 ? " bf16" : "");
    if (cfg.tie_weights) return std::string(line) + ", tied embeddings";
    return line;
}

std::string describe(const models::Seq2Seq& model, bool bf16) {
    if (const auto* t = dynamic_cast<const models::Transformer*>(&model)) return describe(t->cfg, bf16);
    const auto& r = dynamic_cast<const models::RNNSeq2Seq&>(model);
    return r.cfg.describe() + (bf16 ? " bf16" : "");
}

std::string describe_compute(int shards) {
    const int threads = autograd::num_threads();
    return std::to_string(threads) + (threads == 1 ? " thread, " : " threads, ") + std::to_string(shards) +
           (shards == 1 ? " shard" : " shards") + " | kernels: " +
           (autograd::fused_kernels_enabled() ? "fused" : "plain autograd ops (--reference)");
}

std::unique_ptr<optim::LRSchedule> make_lr_schedule(optim::Optimizer& opt, const std::string& name, float lr,
                                                    float lr_factor, int64_t d_model, int warmup, int total_steps) {
    if (name == "noam") return std::make_unique<optim::NoamSchedule>(opt, d_model, warmup, lr_factor);
    if (name == "cosine") {
        const int total = std::max(total_steps, 1);
        return std::make_unique<optim::WarmupCosineSchedule>(opt, lr, std::min(warmup, total), total);
    }
    throw std::invalid_argument("unknown learning-rate schedule '" + name + "' (cosine or noam)");
}

void warn_if_no_decay(const ArgParser& p, int steps, int warmup, const std::string& peak) {
    if (steps <= 0 || steps > warmup) return;
    p.warn("--steps " + std::to_string(steps) + " leaves no step after --warmup " + std::to_string(warmup) + ": the warmup is cut to " +
           std::to_string(steps) + (steps == 1 ? " step" : " steps") + " and the learning rate ends at its peak (" + peak + "), never decayed" +
           (steps > 1 ? "; give --warmup " + std::to_string(steps - 1) + " or less for a cosine to follow it" : ""));
}

std::string describe_lr_schedule(const std::string& name, float lr, float lr_factor, int64_t d_model, int warmup,
                                 int total_steps) {
    char line[160];
    if (name == "noam")
        std::snprintf(line, sizeof line, "lr = %.2g * Noam(D=%lld, warmup=%d)", lr_factor, (long long)d_model, warmup);
    else
        std::snprintf(line, sizeof line, "lr: %d warmup steps to %.2g, then a cosine down to 0 at step %d",
                      std::min(warmup, total_steps), lr, total_steps);
    return line;
}

}  // namespace common
