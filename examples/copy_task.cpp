// The copy task: The Annotated Transformer's "first example". The model reads a random sequence
// of symbols and must output the same sequence. Trivial for a person, but the decoder can only
// solve it by learning to attend to the right source position at every step, so it is the
// smallest end-to-end test that attention, masks, backprop and the optimizer all work.
//
//   make && ./examples/copy_task            # small model: learns the task completely in seconds
//   ./examples/copy_task --paper            # The Annotated Transformer's exact configuration
//   ./examples/copy_task --help
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "examples/common/args.h"
#include "examples/common/progress.h"
#include "examples/common/svg.h"
#include "examples/data/copy_task_data.h"
#include "models/decoding.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"

using autograd::Rng;
using autograd::Mask;
using autograd::Tensor;
using autograd::Tokens;

namespace {

using data::COPY_PAD;
using data::COPY_START;
using data::make_copy_batch;
using data::random_sequences;

std::string join(const Tokens& t, int64_t row) {
    std::string s;
    const int64_t L = t.size(1);
    for (int64_t i = 0; i < L; i++) {
        if (i) s += ' ';
        s += std::to_string(t[row * L + i]);
    }
    return s;
}

struct Options {
    int64_t vocab = 11, seq_len = 10;
    int steps = 1200, batch = 128, warmup = 200, eval_count = 1000, beam = 0, threads = 0, print_every = 100;
    int64_t layers = 2, d_model = 128, heads = 4, d_ff = 256;
    float dropout = 0.0f, lr_factor = 1.0f;
    uint64_t seed = 1;
    bool paper = false;
    std::string save, load, plot, decode;
};

// The Annotated Transformer's configuration: 20 epochs of 20 batches of 80, N=2, D=512, F=2048,
// h=8, dropout 0.1, Adam(0.9, 0.98, 1e-9) with lr = 0.5 * Noam(D=512, warmup=400).
void apply_paper_preset(Options& o, const common::ArgParser& p) {
    auto set = [&](const char* flag, auto& field, auto value) { if (!p.given(flag)) field = value; };
    set("--steps", o.steps, 400);
    set("--batch", o.batch, 80);
    set("--layers", o.layers, int64_t{2});
    set("--d-model", o.d_model, int64_t{512});
    set("--heads", o.heads, int64_t{8});
    set("--d-ff", o.d_ff, int64_t{2048});
    set("--dropout", o.dropout, 0.1f);
    set("--warmup", o.warmup, 400);
    set("--lr-factor", o.lr_factor, 0.5f);
    set("--print-every", o.print_every, 20);
}

// Exact match of greedy (or beam) decoding on `count` fresh random sequences.
int evaluate(models::Transformer& model, const Options& o, Rng& rng, Tokens& shown_src, Tokens& shown_out,
             std::vector<std::string>& misses) {
    model.eval();
    int correct = 0;
    const int64_t chunk = 250;
    for (int64_t done = 0; done < o.eval_count; done += chunk) {
        const int64_t n = std::min<int64_t>(chunk, o.eval_count - done);
        const Tokens src = random_sequences(rng, o.vocab, n, o.seq_len);   // (n, L)
        const Mask src_mask = models::padding_mask(src, COPY_PAD);
        Tokens out;
        if (o.beam > 0) {
            out = Tokens::full({n, o.seq_len}, COPY_PAD);
            for (int64_t i = 0; i < n; i++) {
                const Tokens one(std::vector<int32_t>(src.data.begin() + i * o.seq_len, src.data.begin() + (i + 1) * o.seq_len),
                                 {1, o.seq_len});
                const models::Hypothesis h = models::beam_search(
                    model, one, models::padding_mask(one, COPY_PAD), {.beam_size = o.beam, .max_len = o.seq_len, .bos = COPY_START});
                std::copy(h.tokens.begin(), h.tokens.end(), out.data.begin() + i * o.seq_len);
            }
        } else {
            out = models::greedy_decode(model, src, src_mask, o.seq_len, COPY_START);   // (n, L)
        }
        for (int64_t i = 0; i < n; i++) {
            const bool ok = std::equal(src.data.begin() + i * o.seq_len, src.data.begin() + (i + 1) * o.seq_len,
                                       out.data.begin() + i * o.seq_len);
            correct += ok;
            if (!ok && misses.size() < 6) misses.push_back("  src: " + join(src, i) + "\n  out: " + join(out, i) + "   <- wrong");
        }
        if (done == 0) { shown_src = src; shown_out = out; }
    }
    return correct;
}

// --decode: greedy-decode each line of `path` (source ids separated by spaces) and print only the
// outputs, one line each. tests/reference/make_reference.py compares them with PyTorch's.
void decode_lines(models::Transformer& model, const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read '" + path + "'");
    model.eval();
    std::string line;
    for (int lineno = 1; std::getline(in, line); lineno++) {
        std::istringstream is(line);
        std::vector<int32_t> ids;
        for (int32_t id; is >> id;) ids.push_back(id);
        if (!is.eof()) throw std::runtime_error(path + ":" + std::to_string(lineno) + ": expected token ids separated by spaces");
        if (ids.empty()) continue;
        const Tokens src(ids, {1, static_cast<int64_t>(ids.size())});   // (1, S)
        const Tokens out = models::greedy_decode(model, src, models::padding_mask(src, COPY_PAD), src.size(1), COPY_START);
        std::printf("%s\n", join(out, 0).c_str());
    }
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    common::ArgParser p("copy_task", "Train an encoder-decoder Transformer to copy random symbol sequences, then report "
                                     "exact match on fresh sequences.");
    p.add("--steps", &o.steps, "training steps (batches)").min(0);
    p.add("--batch", &o.batch, "sequences per batch (B)").min(1);
    p.add("--layers", &o.layers, "encoder and decoder layers (N)").range(1, 64);
    p.add("--d-model", &o.d_model, "model width (D)").range(1, 8192);
    p.add("--heads", &o.heads, "attention heads (h); must divide D").range(1, 256);
    p.add("--d-ff", &o.d_ff, "feed-forward width (F)").range(1, 65536);
    p.add("--dropout", &o.dropout, "dropout probability").range(0, 0.99);
    p.add("--warmup", &o.warmup, "warmup steps of the Noam schedule").min(1);
    p.add("--lr-factor", &o.lr_factor, "factor of the Noam schedule").range(0, 100);
    p.add("--vocab", &o.vocab, "number of symbols V, including 0 (never used) and the start symbol 1").range(3, 100000);
    p.add("--seq-len", &o.seq_len, "sequence length L, including the start symbol").range(2, 4096);
    p.add("--eval", &o.eval_count, "fresh sequences for the final exact-match test").min(1);
    p.add("--seed", &o.seed, "random seed (model init, dropout, data)");
    p.add("--threads", &o.threads, "OpenMP threads (0: all cores)").range(0, 1024);
    p.add("--print-every", &o.print_every, "print the loss every this many steps").min(1);
    p.flag("--paper", &o.paper, "The Annotated Transformer's configuration (N=2, D=512, F=2048, h=8, 400 steps of 80)");
    p.add("--save", &o.save, "write the trained model to PATH (safetensors)", "PATH");
    p.add("--load", &o.load, "evaluate the model saved at PATH instead of training", "PATH");
    p.add("--decode", &o.decode, "with --load: greedy-decode the sequences in PATH (one per line, ids separated by "
                                 "spaces) and print only the outputs", "PATH");
    p.add("--beam", &o.beam, "evaluate with beam search of this width (0: greedy)").range(0, 64);
    p.add("--plot", &o.plot, "write the training-loss curve to PATH as SVG", "PATH");
    p.parse(argc, argv);
    if (o.paper) apply_paper_preset(o, p);
    if (o.d_model % o.heads != 0) {
        std::fprintf(stderr, "copy_task: --d-model (%lld) must be a multiple of --heads (%lld)\n", (long long)o.d_model,
                     (long long)o.heads);
        return 2;
    }
    if (o.threads > 0) omp_set_num_threads(o.threads);

    try {
        autograd::manual_seed(o.seed);
        Rng data_rng(o.seed * 7919 + 1);   // data stream, independent of init and dropout draws
        models::TransformerConfig cfg{.src_vocab = o.vocab, .tgt_vocab = o.vocab, .layers = o.layers, .d_model = o.d_model,
                                      .d_ff = o.d_ff, .heads = o.heads, .dropout = o.dropout};
        if (!o.load.empty()) {   // the checkpoint's config wins
            const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(o.load);
            if (!f.metadata.count("config"))
                throw std::runtime_error("'" + o.load + "' has no 'config' metadata: not a checkpoint written by --save");
            cfg = models::TransformerConfig::from_string(f.metadata.at("config"));
            o.vocab = cfg.src_vocab;
            if (f.metadata.count("seq_len")) o.seq_len = std::stoll(f.metadata.at("seq_len"));
        }
        models::Transformer model(cfg);
        if (!o.decode.empty()) {
            if (o.load.empty()) throw std::runtime_error("--decode needs a model: give --load PATH");
            nn::load(model, o.load);
            decode_lines(model, o.decode);
            return 0;
        }
        std::printf("copy task: V=%lld L=%lld | model N=%lld D=%lld F=%lld h=%lld dropout=%.2g | %lld parameters | %d threads\n",
                    (long long)o.vocab, (long long)o.seq_len, (long long)cfg.layers, (long long)cfg.d_model,
                    (long long)cfg.d_ff, (long long)cfg.heads, cfg.dropout, (long long)model.num_parameters(),
                    omp_get_max_threads());

        float final_loss = NAN;
        if (!o.load.empty()) {
            nn::load(model, o.load);
            std::printf("loaded %s\n", o.load.c_str());
        } else {
            std::printf("training: %d steps of B=%d, Adam(0.9, 0.98, 1e-9), lr = %.2g * Noam(D=%lld, warmup=%d)\n", o.steps,
                        o.batch, o.lr_factor, (long long)cfg.d_model, o.warmup);
            optim::Adam opt(model.parameters(), {.lr = 0.0f, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f});
            optim::NoamSchedule sched(opt, cfg.d_model, o.warmup, o.lr_factor);
            common::Progress progress(std::max(o.steps, 1));
            std::vector<double> xs, ys;
            const auto t0 = std::chrono::steady_clock::now();
            double window_loss = 0.0;
            int window = 0;
            model.train();
            for (int step = 1; step <= o.steps; step++) {
                const data::CopyBatch b = make_copy_batch(data_rng, o.vocab, o.batch, o.seq_len);
                const Tensor logits = model.forward(b.src, b.tgt_in, b.src_mask, b.tgt_mask);        // (B, L-1, V)
                const Tensor loss = nn::cross_entropy(logits, b.tgt_out, {.ignore_index = COPY_PAD});   // mean over tokens
                opt.zero_grad();
                loss.backward();
                const float lr = sched.step();
                opt.step();

                final_loss = loss.item();
                xs.push_back(step);
                ys.push_back(final_loss);
                window_loss += final_loss;
                window++;
                const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                const double tok_s = static_cast<double>(step) * o.batch * (o.seq_len - 1) / secs;
                progress.update(step, {{"loss", common::format_value(final_loss)},
                                       {"lr", common::format_value(lr, 3)},
                                       {"tok/s", common::format_value(tok_s, 3)}});
                if (step % o.print_every == 0 || step == o.steps) {
                    char line[160];
                    std::snprintf(line, sizeof line, "step %5d  loss %.4f  (mean of last %d: %.4f)  lr %.3e", step, final_loss,
                                  window, window_loss / window, lr);
                    progress.result(line);
                    window_loss = 0.0;
                    window = 0;
                }
            }
            progress.finish();
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::printf("trained %d steps in %.1f s (%.1f ms/step), final loss %.4f\n", o.steps, secs,
                        o.steps ? 1000.0 * secs / o.steps : 0.0, final_loss);
            if (!o.plot.empty()) {
                common::write_line_plot(o.plot, "Copy task: training loss", "step", "cross-entropy", {{"train", xs, ys}},
                                        {.log_y = true});
                std::printf("wrote %s\n", o.plot.c_str());
            }
            if (!o.save.empty()) {
                nn::save(model, o.save, {{"config", cfg.to_string()}, {"task", "copy"}, {"seq_len", std::to_string(o.seq_len)},
                                         {"step", std::to_string(o.steps)}, {"seed", std::to_string(o.seed)}});
                std::printf("saved %s\n", o.save.c_str());
            }
        }

        Rng eval_rng(o.seed + 1000003);   // fresh sequences the model has not seen
        Tokens shown_src, shown_out;
        std::vector<std::string> misses;
        const int correct = evaluate(model, o, eval_rng, shown_src, shown_out, misses);
        std::printf("examples (%s decoding):\n", o.beam > 0 ? ("beam " + std::to_string(o.beam)).c_str() : "greedy");
        for (int64_t i = 0; i < std::min<int64_t>(3, shown_src.size(0)); i++)
            std::printf("  src: %s\n  out: %s\n", join(shown_src, i).c_str(), join(shown_out, i).c_str());
        if (!misses.empty()) std::printf("mistakes (first %zu):\n", misses.size());
        for (const std::string& m : misses) std::printf("%s\n", m.c_str());
        std::printf("exact match: %d/%d (%.1f%%)\n", correct, o.eval_count, 100.0 * correct / o.eval_count);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "copy_task: %s\n", e.what());
        return 1;
    }
    return 0;
}
