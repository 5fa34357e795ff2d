// Before the Transformer: the argument for attention, measured. Every system learns the same
// sequence task (copy, or reverse) at growing lengths, from the same seed, with the same budget
// of steps and batches, at about the same number of parameters (the table prints them); one
// table then says how each does on fresh sequences:
//   - the encoder-decoders without attention squeeze the source into a state of fixed size
//     (Sutskever et al.'s LSTM: the encoder's final (h, c) starts the decoder; Cho et al.'s GRU:
//     one context vector C, at every step) and lose whole sequences as they grow. Reading the source
//     backwards (Sutskever et al.'s trick) puts the first outputs close to their inputs, and gets
//     more tokens right;
//   - with soft attention (Bahdanau et al., scored four ways: dot, general, cosine, additive) the
//     decoder looks up the source position it needs at every step (align%), and length stops
//     mattering. Reading backwards stops mattering too: their encoder reads both ways, so its
//     states are the same either way round, the two directions swapped;
//   - the Transformer attends too, and runs all positions of a layer together (--timing).
//
// The systems (--models), as eval::make_system builds them (examples/eval/compare_eval.h):
//   rnn-sutskever, rnn-sutskever-reversed   Sutskever et al., the source read forwards or backwards
//   rnn-cho                                 Cho et al. (a GRU, as in their paper)
//   rnn-dot, rnn-general, rnn-cosine, rnn-additive   attention with that score (rnn-dot's encoder reads one way)
//   rnn-additive-reversed                   rnn-additive, the source read backwards
//   transformer                             one layer a side
//
//   make && ./examples/compare_models                    # the whole comparison, a few minutes on 2 cores
//   ./examples/compare_models --task reverse --plot figs  # the reverse task, with its figures
//   ./examples/compare_models --models rnn-sutskever,rnn-additive --lengths 10,30 --timing
//   ./examples/compare_models --quick                     # seconds: 3 systems, lengths 4 and 6
//
// main() is the experiment: for each system, for each length, train (the loop just above main),
// score, print a row. The systems, the scores and the table are in examples/eval/compare_eval.h.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "examples/common/args.h"
#include "examples/common/output_files.h"
#include "examples/common/progress.h"
#include "examples/common/run_state.h"
#include "examples/common/training_flags.h"
#include "examples/eval/compare_eval.h"
#include "models/data_parallel.h"
#include "nn/nn.h"
#include "optim/optim.h"

using autograd::Tensor;

namespace {

struct Options {
    common::TrainingFlags train;   // --seed --threads --shards --reference; each system has its own shape
    std::string task_name = "copy", lengths_text = "5,10,20,40", models_text;
    eval::Task task = eval::Task::copy;
    std::vector<int64_t> lengths;
    std::vector<std::string> models;
    int64_t vocab = 11;
    int steps = 400, batch = 32, warmup = 100, eval_count = 500;
    float lr = 1e-2f;      // the peak of the schedule: warmup to it, then a cosine down to 0
    float clip = 1.0f;     // the gradients' global norm at most this (0: no clipping)
    bool timing = false, quick = false, overwrite = false;
    std::string plot;
};

// "a,b,,c" -> {"a", "b", "", "c"}; "a," -> {"a", ""}
std::vector<std::string> split_commas(const std::string& text) {
    std::vector<std::string> parts;
    std::stringstream in(text);
    for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
    if (!text.empty() && text.back() == ',') parts.push_back("");
    return parts;
}

Options parse_options(int argc, char** argv) {
    Options o;
    for (const std::string& name : eval::systems()) o.models_text += (o.models_text.empty() ? "" : ",") + name;
    common::ArgParser p("compare_models", "Train RNN encoder-decoders with and without attention, and a Transformer, on the "
                                          "same task at growing lengths, then print one table of how each does.");
    p.add("--task", &o.task_name, "copy (the target is the source) or reverse (the start symbol, then the source backwards)", "NAME");
    p.add("--lengths", &o.lengths_text, "sequence lengths L (with the start symbol), comma-separated", "L1,L2,...");
    p.add("--models", &o.models_text,
          "systems to compare, comma-separated: " + eval::system_names() + ". rnn-sutskever: the LSTM encoder's final (h, c) "
          "starts the decoder (Sutskever et al. 2014), -reversed: the source read backwards; rnn-cho: the GRU's C = tanh(V h_S) at every "
          "step (Cho et al. 2014); rnn-dot, rnn-general, rnn-cosine, rnn-additive: soft attention (Bahdanau et al. 2014) with "
          "that score (dot s.h and general s.Wh: Luong et al. 2015; additive: Bahdanau et al.'s; rnn-dot's encoder reads one "
          "way); transformer: one layer a side", "A,B,...");
    p.add("--vocab", &o.vocab, "number of symbols V, including 0 (never used) and the start symbol 1").range(3, 100000);
    p.add("--steps", &o.steps, "training steps of each system at each length").min(0);
    p.add("--batch", &o.batch, "sequences per step (B)").min(1);
    p.add("--lr", &o.lr, "peak learning rate: --warmup steps up to it, then half a cosine down to 0").range(0, 1);
    p.add("--warmup", &o.warmup, "warmup steps of the learning rate").min(1);
    p.add("--clip", &o.clip, "clip the gradients' global norm to this (0: no clipping)").min(0);
    p.add("--eval", &o.eval_count, "fresh sequences each trained system is scored on").min(1);
    p.add("--seed", &o.train.seed, "random seed: initial weights, training data and test sequences, the same for every system");
    p.add("--threads", &o.train.threads, "OpenMP threads (0: all cores)").range(0, 1024);
    p.add("--shards", &o.train.shards, "cut each batch into N row slices trained side by side, a thread each (data parallelism)").range(1, 64);
    p.flag("--reference", &o.train.reference, "train and evaluate through the plain autograd ops of nn/ instead of the fused kernels");
    p.flag("--timing", &o.timing, "also time a training step of the Transformer and rnn-additive at each length on 1 and 2 threads");
    p.add("--plot", &o.plot, "write exact_match.svg and attention.svg (the attention systems at the longest length) to DIR", "DIR");
    common::add_overwrite_flag(p, &o.overwrite);
    p.flag("--quick", &o.quick, "a run of seconds: rnn-sutskever, rnn-additive and transformer at lengths 4 and 6, 150 steps of 32, "
                                "100 test sequences (flags given beside it win)");
    p.parse(argc, argv);
    auto preset = [&](const char* flag, auto& field, auto value) { if (!p.given(flag)) field = value; };
    if (o.quick) {
        preset("--lengths", o.lengths_text, std::string("4,6"));
        preset("--models", o.models_text, std::string("rnn-sutskever,rnn-additive,transformer"));
        preset("--steps", o.steps, 150);
        preset("--batch", o.batch, 32);
        preset("--warmup", o.warmup, 15);
        preset("--eval", o.eval_count, 100);
    }
    try {
        o.task = eval::task_from_name(o.task_name);
        for (const std::string& m : split_commas(o.models_text)) {
            if (std::count(o.models.begin(), o.models.end(), m)) p.fail("--models names '" + m + "' twice");
            eval::make_system(m, o.vocab);   // throws for an unknown name, listing the others
            o.models.push_back(m);
        }
    } catch (const std::invalid_argument& e) {
        p.fail(e.what());
    }
    if (o.models.empty()) p.fail("--models names no system: give one or more of " + eval::system_names());
    const std::string bad_lengths = "--lengths must be whole numbers from 2 to 4096 separated by commas, got '" + o.lengths_text + "'";
    if (o.lengths_text.empty()) p.fail(bad_lengths);
    for (const std::string& l : split_commas(o.lengths_text)) {
        char* end = nullptr;
        const long long L = std::strtoll(l.c_str(), &end, 10);
        if (l.empty() || *end != '\0' || L < 2 || L > 4096) p.fail(bad_lengths);
        if (std::count(o.lengths.begin(), o.lengths.end(), L)) p.fail("--lengths names " + l + " twice (each length is one row per system)");
        o.lengths.push_back(L);
    }
    common::apply_training_flags(p, o.train);   // --threads
    if (!o.plot.empty()) {   // before the first step: a folder that cannot be made or written fails now, not after the runs
        std::error_code ec;
        std::filesystem::create_directories(o.plot, ec);
        if (ec) p.fail("--plot " + o.plot + ": cannot make that folder: " + ec.message());
        common::check_output_path(p, "--plot", (std::filesystem::path(o.plot) / "exact_match.svg").string());
        common::RunFiles files;   // the two figures: not replaced unasked
        for (const char* name : {"exact_match.svg", "attention.svg"})
            files.output("--plot", (std::filesystem::path(o.plot) / name).string());
        files.check(p, o.overwrite);
    }
    common::warn_if_no_decay(p, o.steps, o.warmup, "--lr " + common::exact(o.lr));
    return o;
}

// The task, the budget, and the systems with their shapes.
void print_setup(const Options& o) {
    std::string lengths;
    for (int64_t L : o.lengths) {   // (appended piece by piece: GCC 12 warns, wrongly, on " " + string)
        lengths += ' ';
        lengths += std::to_string(L);
    }
    std::printf("compare models: %s task, V=%lld, lengths%s | %s\n", eval::task_name(o.task), (long long)o.vocab, lengths.c_str(),
                common::describe_compute(o.train.shards).c_str());
    std::printf("training, each system at each length: %d steps of B=%d, Adam(0.9, 0.98, 1e-9), %s, %s; seed %llu\n", o.steps,
                o.batch, common::describe_lr_schedule("cosine", o.lr, 1, 0, o.warmup, o.steps).c_str(),
                o.clip > 0 ? ("gradient norm clipped at " + common::format_value(o.clip)).c_str() : "no clipping",
                (unsigned long long)o.train.seed);
    std::printf("scored on %d fresh sequences: exact%% and token%% of greedy decoding; align%%: outputs whose largest attention "
                "weight is on their symbol's source position (or, for an RNN, on the state that read it one step before)\n",
                o.eval_count);
    for (const std::string& m : o.models)
        std::printf("  %-22s %s\n", m.c_str(), common::describe(*eval::make_system(m, o.vocab), o.train.bf16).c_str());
}

struct Trained {
    double loss = 0;          // the mean loss of the last 10 steps
    double ms_per_step = 0;   // the median step's time
};

// The training loop: `steps` batches of fresh sequences of length L, each through the model's
// forward and backward in --shards slices, the gradients clipped, the learning rate scheduled.
// The data comes from a stream of its own for (seed, L): every system sees the same batches.
Trained train(models::Seq2Seq& model, const Options& o, int64_t L, int steps, const std::function<void(float)>& after_step = {}) {
    optim::Adam opt(model.parameters(), {.lr = 0.0f, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f});
    const auto sched = common::make_lr_schedule(opt, "cosine", o.lr, 1.0f, 0, o.warmup, steps);   // sets opt's lr every step
    autograd::Rng data_rng(o.train.seed * 7919 + static_cast<uint64_t>(L));
    std::vector<double> losses, ms;
    model.train();
    for (int step = 1; step <= steps; step++) {
        const auto t0 = std::chrono::steady_clock::now();
        const models::Batch b = eval::make_task_batch(o.task, data_rng, o.vocab, o.batch, L);
        opt.zero_grad();
        const float loss = models::sum_over_shards(b, o.train.shards, [&](const models::Batch& part) {
            return model.loss(part, {}) * part.share;   // cross_entropy(model.logits(...), part.tgt_out), x the part's share
        });   // each part's forward, then its backward
        if (o.clip > 0) optim::clip_grad_norm(model.parameters(), o.clip);
        sched->step();
        opt.step();
        losses.push_back(loss);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        if (after_step) after_step(loss);
    }
    Trained t;
    const size_t last = std::min<size_t>(10, losses.size());
    for (size_t i = losses.size() - last; i < losses.size(); i++) t.loss += losses[i] / static_cast<double>(last);
    if (!ms.empty()) std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end()), t.ms_per_step = ms[ms.size() / 2];
    return t;
}

// --timing: the median training step of the Transformer and rnn-additive at each length, on 1
// and on 2 threads, and how much longer the longest length's step takes than the shortest's.
// The RNN's encoder and decoder run their L steps one after another; the Transformer's layers
// take all L positions in each matrix product.
void print_timing(const Options& o) {
    const int steps = 12, threads_before = autograd::num_threads();
    const std::vector<std::string> who = {"transformer", "rnn-additive"};
    std::printf("\ntraining step time, ms: the median of %d steps of B=%d (%d shards) on 1 and on 2 threads (x1, x2)\n%6s", steps,
                o.batch, o.train.shards, "L");
    for (const std::string& m : who) std::printf(" %16s %16s", (m + " x1").c_str(), (m + " x2").c_str());
    std::printf("\n");
    std::vector<double> first, last;   // each column's time at the first and the last length
    for (int64_t L : o.lengths) {
        std::printf("%6lld", (long long)L);
        last.clear();
        for (const std::string& m : who)
            for (int threads : {1, 2}) {
                autograd::set_num_threads(threads);
                autograd::manual_seed(o.train.seed);
                last.push_back(train(*eval::make_system(m, o.vocab), o, L, steps).ms_per_step);
                std::printf(" %16.1f", last.back());
            }
        std::printf("\n");
        if (first.empty()) first = last;
    }
    std::printf("%6s", "ratio");   // the last length's time over the first's
    for (size_t c = 0; c < first.size(); c++) std::printf(" %15.1fx", last[c] / first[c]);
    std::printf("   (L=%lld over L=%lld)\n", (long long)o.lengths.back(), (long long)o.lengths.front());
    autograd::set_num_threads(threads_before);
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse_options(argc, argv);
    try {
        autograd::FusedKernelsGuard fused_kernels(!o.train.reference);   // --reference: each layer's plain form
        print_setup(o);
        common::Progress progress(std::max<int>(1, o.steps * static_cast<int>(o.models.size() * o.lengths.size())));
        int done = 0;   // steps, over all runs: the live line on stderr
        std::printf("%s\n", eval::table_header().c_str());
        std::vector<eval::Row> rows;
        for (const std::string& system : o.models)
            for (int64_t L : o.lengths) {
                autograd::manual_seed(o.train.seed);   // the same initial draws for every system
                const std::unique_ptr<models::Seq2Seq> model = eval::make_system(system, o.vocab);
                const Trained t = train(*model, o, L, o.steps, [&](float loss) {
                    progress.update(++done, {{"system", system}, {"L", std::to_string(L)}, {"loss", common::format_value(loss)}});
                });
                autograd::Rng test_rng(o.train.seed + 1000003 + static_cast<uint64_t>(L));   // the same test sequences for all
                rows.push_back({system, model->num_parameters(), L, t.loss, t.ms_per_step,
                                eval::score(*model, o.task, test_rng, o.vocab, L, o.eval_count)});
                progress.result(eval::table_row(rows.back()));
            }
        progress.finish();
        if (o.timing) print_timing(o);
        if (!o.plot.empty()) eval::write_plots(o.plot, rows, o.task);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "compare_models: %s\n", e.what());
        return 1;
    }
    return 0;
}
