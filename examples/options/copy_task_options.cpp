#include "examples/options/copy_task_options.h"

#include <utility>

#include "examples/common/args.h"
#include "examples/common/output_files.h"
#include "examples/common/run_state.h"

namespace options {

// The Annotated Transformer's configuration: 20 epochs of 20 batches of 80, N=2, D=512, F=2048,
// h=8, dropout 0.1, Adam(0.9, 0.98, 1e-9) with lr = 0.5 * Noam(D=512, warmup=400). Flags given
// on the command line win.
static void apply_paper_preset(CopyTask& o, const common::ArgParser& p) {
    auto set = [&](const char* flag, auto& field, auto value) { if (!p.given(flag)) field = value; };
    set("--steps", o.steps, 400);
    set("--batch", o.batch, 80);
    set("--layers", o.train.model.layers, int64_t{2});
    set("--d-model", o.train.model.d_model, int64_t{512});
    set("--heads", o.train.model.heads, int64_t{8});
    set("--d-ff", o.train.model.d_ff, int64_t{2048});
    set("--dropout", o.train.model.dropout, 0.1f);
    set("--warmup", o.train.warmup, 400);
    set("--lr-factor", o.train.lr_factor, 0.5f);
    set("--schedule", o.schedule, std::string("noam"));
    set("--print-every", o.print_every, 20);
}

CopyTask parse_copy_task(int argc, char** argv) {
    CopyTask o;
    common::ArgParser p("copy_task", "Train an encoder-decoder Transformer to copy random symbol sequences, then report "
                                     "exact match on fresh sequences.");
    p.add("--steps", &o.steps, "training steps (batches)").min(0);
    p.add("--batch", &o.batch, "sequences per batch (B)").min(1);
    common::add_training_flags(p, o.train, "random seed (model init, dropout, data)");
    p.add("--schedule", &o.schedule, "learning-rate schedule: cosine (linear warmup to --lr, then half a cosine down to 0 "
                                     "at the last step) or noam (--lr-factor * Noam(D, --warmup), the paper's)", "NAME");
    p.add("--lr", &o.lr, "peak learning rate of the cosine schedule").range(0, 1);
    p.add("--vocab", &o.vocab, "number of symbols V, including 0 (never used) and the start symbol 1").range(3, 100000);
    p.add("--seq-len", &o.seq_len, "sequence length L, including the start symbol").range(2, 4096);
    p.add("--eval", &o.eval_count, "fresh sequences for the final exact-match test").min(1);
    p.add("--print-every", &o.print_every, "print the loss every this many steps").min(1);
    p.flag("--paper", &o.paper, "The Annotated Transformer's configuration (N=2, D=512, F=2048, h=8, 400 steps of 80)");
    p.add("--save", &o.save, "write the trained model to PATH (safetensors)", "PATH");
    p.add("--load", &o.load, "evaluate the model saved at PATH instead of training", "PATH");
    p.add("--decode", &o.decode, "with --load: greedy-decode the sequences in PATH (one per line, ids separated by "
                                 "spaces) and print only the outputs", "PATH");
    p.add("--beam", &o.beam, "evaluate with beam search of this width (0: greedy)").range(0, 64);
    p.flag("--no-kv-cache", &o.no_kv_cache, "decode by re-running the decoder over the whole prefix at every step "
                                            "(the simple O(T^2) reference) instead of with the key/value cache");
    p.add("--plot", &o.plot, "write the training-loss curve to PATH as SVG", "PATH");
    p.add("--resume", &o.resume, "continue the run whose state an interrupt (Ctrl-C) saved at PATH. Give the flags that run "
                                 "had: any other --seed, --batch, --vocab, --seq-len, --schedule, --lr, --lr-factor, --warmup, "
                                 "--shards, --bf16, --reference or model flag is refused. These may change: --steps (not "
                                 "below the steps already trained), --save, --plot, --threads, --print-every, --eval, --beam, "
                                 "--no-kv-cache, --overwrite", "PATH");
    common::add_overwrite_flag(p, &o.overwrite);
    p.parse(argc, argv);
    if (o.paper) apply_paper_preset(o, p);
    if (!o.decode.empty() && o.load.empty()) p.fail("--decode needs a model: give --load PATH");
    if (!o.load.empty())   // the model comes from the file: what would train it does nothing
        for (const char* f : {"--steps", "--batch", "--schedule", "--lr", "--warmup", "--lr-factor", "--print-every", "--paper",
                              "--save", "--plot", "--resume", "--dropout", "--shards", "--vocab", "--seq-len", "--overwrite"})
            if (p.given(f)) p.fail(std::string(f) + " does nothing with --load (the model and its --vocab and --seq-len come from "
                                                    "the file; nothing trains)");
    for (const auto& [flag, path] : {std::pair{"--save", o.save}, {"--plot", o.plot}}) common::check_output_path(p, flag, path);
    common::RunFiles files;   // no output may name an input or another output, nor replace a file unasked
    files.input("--load", o.load);
    files.input("--decode", o.decode);
    if (o.load.empty()) common::add_training_files(files, o.save, o.resume, "copy_task");
    files.output("--plot", o.plot);
    files.check(p, o.overwrite);
    if (o.schedule != "cosine" && o.schedule != "noam") p.fail("--schedule must be cosine or noam, not '" + o.schedule + "'");

    common::apply_training_flags(p, o.train);
    o.train.model.src_vocab = o.train.model.tgt_vocab = o.vocab;
    if (o.load.empty() && o.schedule == "cosine") common::warn_if_no_decay(p, o.steps, o.train.warmup, "--lr " + common::exact(o.lr));
    return o;
}

}  // namespace options
