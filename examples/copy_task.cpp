// The copy task: The Annotated Transformer's "first example". The model reads a random sequence
// of symbols and must output the same sequence. Trivial for a person, but the decoder can only
// solve it by learning to attend to the right source position at every step, so it is the
// smallest end-to-end test that attention, masks, backprop and the optimizer all work.
//
//   make && ./examples/copy_task            # small model: learns the task completely in seconds
//   ./examples/copy_task --paper            # The Annotated Transformer's exact configuration
//   ./examples/copy_task --paper --bf16     # ... with bf16 matrix products (mixed precision)
//   ./examples/copy_task --help
//
// main() is the training loop; the flags are in examples/options/copy_task_options.h, the data in
// examples/data/copy_task_data.h, the evaluation in examples/eval/copy_task_eval.h.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>

#include "autograd/autograd.h"
#include "examples/common/memory_budget.h"
#include "examples/common/progress.h"
#include "examples/common/run_state.h"
#include "examples/common/saved_model.h"
#include "examples/options/copy_task_options.h"
#include "examples/common/training_log.h"
#include "examples/data/copy_task_data.h"
#include "examples/eval/copy_task_eval.h"
#include "models/checkpoint.h"
#include "models/data_parallel.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"

using autograd::Tensor;
using Options = options::CopyTask;

namespace {

// What a run too big for the memory can lower.
const char* const kShrinkingFlags = "--batch or --seq-len (or the model: --d-model, --d-ff, --heads, --layers)";

// The task and the model; before training, the optimizer and the learning-rate schedule too.
void print_setup(const models::Seq2Seq& model, const Options& o, bool training) {
    std::printf("copy task: V=%lld L=%lld | model %s | %lld parameters | %s\n", (long long)o.vocab, (long long)o.seq_len,
                common::describe(model, o.train.bf16).c_str(), (long long)model.num_parameters(), common::describe_compute(o.train.shards).c_str());
    if (training)
        std::printf("training: %d steps of B=%d, Adam(0.9, 0.98, 1e-9), %s\n", o.steps, o.batch,
                    common::describe_lr_schedule(o.schedule, o.lr, o.train.lr_factor, o.train.model.d_model, o.train.warmup, o.steps).c_str());
}

// The loss on batch b: the cross-entropy of each next symbol, the mean over b's tokens.
Tensor loss_of(models::Transformer& model, const models::Batch& b) {
    const Tensor logits = model.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask);   // (B, L-1, V)
    return nn::cross_entropy(logits, b.tgt_out, {.ignore_index = data::COPY_PAD});  // (): mean per token
}

// What a saved model holds besides its weights, so --load needs nothing else. The seed is a
// string: a JSON number is exact only up to 2^53.
models::json::Object settings(const Options& o) {
    return {{"seq_len", o.seq_len}, {"step", o.steps}, {"seed", std::to_string(o.train.seed)}};
}

// What makes a run this run, for --resume to compare (run_state.h): everything that changes its
// numbers besides the model's config, which the state holds too. Not --steps: a resumed run may
// train longer.
models::json::Object identity(const Options& o) {
    return {{"--seed", std::to_string(o.train.seed)}, {"--batch", o.batch}, {"--vocab", o.vocab}, {"--seq-len", o.seq_len},
            {"--schedule", o.schedule}, {"--lr", common::exact(o.lr)}, {"--lr-factor", common::exact(o.train.lr_factor)}, {"--warmup", o.train.warmup},
            {"--shards", o.train.shards}, {"--bf16", o.train.bf16}, {"--reference", o.train.reference}};
}

// A step on the live progress line (loss, lr, tokens/s), and every --print-every steps a result
// line with the mean loss since the last one.
void report_step(common::TrainingLog& log, const Options& o, int step, int resumed_at, float loss, float lr) {
    const double tok_s = static_cast<double>(step - resumed_at) * o.batch * (o.seq_len - 1) / log.seconds();   // this process's steps
    log.step(loss, 1.0, {{"loss", common::format_value(loss)}, {"lr", common::format_value(lr, 3)}, {"tok/s", common::format_value(tok_s, 3)}});
    if (step % o.print_every != 0 && step != o.steps) return;
    const common::LossWindow w = log.take_window();
    char line[160];
    std::snprintf(line, sizeof line, "step %5d  loss %.4f  (mean of last %d: %.4f)  lr %.3e", step, loss, w.steps, w.mean, lr);
    log.result(line);
}

// The steps this process trained, their time and the final loss (after --resume: from which step,
// and that the run now stands at its last); --save's model, then --plot's curve (a failing figure
// never costs the model).
void finish_training(common::TrainingLog& log, const models::Seq2Seq& model, const Options& o, int resumed_at) {
    log.finish();
    const double secs = log.seconds();
    const int trained = o.steps - resumed_at;
    std::string resumed;
    if (!o.resume.empty())
        resumed = " (resumed after step " + std::to_string(resumed_at) + ": the run now stands at step " + std::to_string(o.steps) + ")";
    std::printf("trained %d steps%s in %.1f s (%.1f ms/step), final loss %.4f\n", trained, resumed.c_str(), secs,
                trained ? 1000.0 * secs / trained : 0.0, log.last_loss());
    if (!o.save.empty()) common::save_model(model, o.save, "copy", settings(o)), std::printf("saved %s\n", o.save.c_str());
    if (!o.plot.empty()) log.plot(o.plot, "Copy task: training loss", "train", /*log_y=*/true);
}

// Exact match on --eval fresh sequences: the same ones for a --load'ed model as after training.
void evaluate(models::Seq2Seq& model, const Options& o) {
    autograd::Rng eval_rng(o.train.seed + 1000003);   // a stream of its own, apart from the training data's
    const bool kv_cache = !o.no_kv_cache && !o.train.reference;   // --reference: the plain greedy_decode, the whole prefix each step
    const int together = std::min(o.eval_count, eval::kSequencesDecodedTogether);
    common::check_memory(common::decoding_peak_bytes(model, together, o.seq_len, o.seq_len, o.beam, kv_cache),
                         "decoding " + std::to_string(together) + " sequences of " + std::to_string(o.seq_len) + " together" +
                             (o.beam > 0 ? " (beam " + std::to_string(o.beam) + ")" : ""),
                         "--eval (below " + std::to_string(eval::kSequencesDecodedTogether) + ") or --beam");
    eval::print_exact_match(eval::exact_match(model, eval_rng, o.vocab, o.seq_len, o.eval_count, o.beam, kv_cache), o.beam);
}

// --load: the saved model's exact match (or, with --decode, its outputs for a file); no training.
int use_checkpoint(Options o) {
    const common::SavedModel saved = common::load_saved_model(o.load);
    models::Seq2Seq& model = *saved.model;   // the Transformer copy_task saves, or any other model
    common::check_load_flags(o.train, model, o.load);
    if (!o.decode.empty()) {
        eval::decode_file(model, o.decode);
        return 0;
    }
    o.vocab = model.tgt_vocab();
    o.seq_len = models::read_metadata(saved.metadata, "seq_len", o.load, models::integer_from_json);
    print_setup(model, o, false);
    std::printf("loaded %s\n", o.load.c_str());
    evaluate(model, o);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = options::parse_copy_task(argc, argv);
    try {
        autograd::FusedKernelsGuard fused_kernels(!o.train.reference);   // --reference: each layer's plain form
        std::optional<autograd::MixedPrecisionGuard> mixed_precision;
        if (o.train.bf16) mixed_precision.emplace();   // --bf16: bf16 products in training and evaluation, --load's too
        autograd::manual_seed(o.train.seed);   // model init and dropout
        if (!o.load.empty()) return use_checkpoint(o);

        // the memory, estimated from the config before the model (or anything of its size) is made
        common::check_memory(common::training_peak_bytes(o.train.model, o.batch, o.seq_len, o.seq_len - 1, /*full_logits=*/true),
                             "training on batches of " + std::to_string(o.batch) + " x " + std::to_string(o.seq_len), kShrinkingFlags);
        models::Transformer model(o.train.model);
        optim::Adam opt(model.parameters(), {.lr = 0.0f, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f});
        // The default schedule ends at 0: with Adam every weight moves by about lr each step, however
        // small its gradient, so a learning rate still high when the loss is near 0 keeps shaking a
        // solved model, and the loss spikes late (docs/12). --paper keeps the paper's Noam schedule.
        const std::unique_ptr<optim::LRSchedule> sched = common::make_lr_schedule(
            opt, o.schedule, o.lr, o.train.lr_factor, o.train.model.d_model, o.train.warmup, o.steps);   // sets opt's lr every step
        autograd::Rng data_rng(o.train.seed * 7919 + 1);   // the data stream, independent of init and dropout draws
        print_setup(model, o, true);
        common::TrainingLog log(o.steps);
        int resumed_at = 0;   // the step a --resume'd run starts after
        {
            common::InterruptWatch interrupt;   // Ctrl-C, until the loop ends: it stops after its step, and the run is saved
            int64_t step = 0;
            common::RunState run{.model = &model, .model_metadata = models::model_to_metadata(model), .opt = &opt, .sched = sched.get(), .log = &log, .rngs = {{"data", &data_rng}},
                                 .counters = {{"step", &step}}, .settings = settings(o), .identity = identity(o), .save = o.save};
            if (!o.resume.empty()) common::restore_run(o.resume, run);   // --resume: as it was after its last step
            if (step > o.steps)
                throw std::runtime_error("--steps " + std::to_string(o.steps) + " is fewer than the " + std::to_string(step) +
                                         " steps the run in '" + o.resume + "' has trained: give --steps " + std::to_string(step) + " or more");
            resumed_at = static_cast<int>(step);
            model.train();
            for (step++; step <= o.steps; step++) {
                const models::Batch b = data::make_copy_batch(data_rng, o.vocab, o.batch, o.seq_len);
                opt.zero_grad();   // first: last step's gradients are freed before this step's activations pile up
                float loss;
                if (o.train.shards == 1) {   // the whole batch in one pass
                    const Tensor batch_loss = loss_of(model, b);
                    batch_loss.backward();
                    loss = batch_loss.item();
                } else {   // b's row slices side by side, a thread each: the same gradient (models/data_parallel.h)
                    loss = models::sum_over_shards(b, o.train.shards, [&](const models::Batch& part) { return loss_of(model, part) * part.share; });
                }
                const float lr = sched->step();
                opt.step();
                report_step(log, o, static_cast<int>(step), resumed_at, loss, lr);
                if (interrupt.requested()) return common::save_interrupted(run, common::resume_path(o.save, "copy_task"), argc, argv);
            }
        }
        finish_training(log, model, o, resumed_at);
        common::remove_finished_state(o.resume, o.save, "copy_task");   // its outputs written: the state has done its work
        evaluate(model, o);
    } catch (const std::bad_alloc&) {   // past the estimate (another program took the memory, or decoding)
        std::fprintf(stderr, "copy_task: %s\n", common::out_of_memory_message(std::string(kShrinkingFlags) + ", or --eval").c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "copy_task: %s\n", e.what());
        return 1;
    }
    return 0;
}
