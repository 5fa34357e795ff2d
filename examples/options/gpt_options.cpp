#include "examples/options/gpt_options.h"

#include <filesystem>

#include "autograd/io/utf8.h"
#include "examples/common/args.h"
#include "examples/common/output_files.h"
#include "examples/common/run_state.h"
#include "examples/common/training_flags.h"

namespace options {

namespace {

// Tiny Shakespeare beside the program (examples/text/), or from the current folder.
std::string default_text(const char* argv0) {
    const std::filesystem::path beside = std::filesystem::path(argv0).parent_path() / "text" / "tinyshakespeare.txt";
    return std::filesystem::exists(beside) ? beside.string() : "examples/text/tinyshakespeare.txt";
}

}  // namespace

Gpt parse_gpt(int argc, char** argv) {
    Gpt o;
    common::ArgParser p("gpt", "Train a character-level GPT (the Transformer's decoder alone) on a text, "
                               "by default Tiny Shakespeare, then write from a prompt.");
    p.add("--data", &o.data, "the text to learn, any UTF-8 file (characters are code points; a regular file of at most 2^30 "
                             "bytes); first 90% train, last 10% validation (default: examples/text/tinyshakespeare.txt)", "PATH");
    p.add("--bpe", &o.bpe, "learn N byte-pair merges and train on subwords instead of characters (0: characters)").range(0, 100000);
    p.add("--layers", &o.model.layers, "blocks N").range(1, 64);
    p.add("--heads", &o.model.heads, "attention heads H (must divide --d-model)").range(1, 256);
    p.add("--d-model", &o.model.d_model, "width D (the feed-forward is 4D)").range(1, 8192);
    p.add("--block-size", &o.model.block_size, "context: the longest window of tokens the model reads").range(1, 8192);
    p.add("--dropout", &o.model.dropout, "dropout on embeddings, attention weights and block outputs").range(0, 0.99);
    p.add("--steps", &o.steps, "training steps (batches)").min(0);
    p.add("--batch", &o.batch, "windows per batch (B)").min(1);
    p.add("--lr", &o.lr, "peak learning rate, after the warmup").range(0, 1);
    p.add("--min-lr", &o.min_lr, "learning rate at the last step, where the cosine ends").range(0, 1);
    p.add("--warmup", &o.warmup, "steps of linear warmup from 0 to --lr (with --steps at or below it, the warmup is cut to "
                                 "--steps and the rate ends at its peak: a warning says so)").min(0);
    p.add("--weight-decay", &o.weight_decay, "AdamW's decoupled weight decay, on the matrices only").range(0, 10);
    p.add("--beta2", &o.beta2, "AdamW's beta2").range(0, 0.999999);
    p.add("--clip", &o.clip, "clip the gradients' global norm to this (0: no clipping)").range(0, 1e6);
    p.add("--eval-every", &o.eval_every, "every this many steps print train and validation loss").min(1);
    p.add("--eval-batches", &o.eval_batches, "batches the losses are the mean over (the same ones each time)").range(1, 100000);
    p.add("--sample-every", &o.sample_every, "every this many steps (and at step 0) also print a sample of --tokens tokens "
                                             "(0: only at the end)").min(0);
    p.add("--seed", &o.seed, "random seed (init, batches, dropout, sampling)");
    p.add("--threads", &o.threads, "OpenMP threads (0: all cores)").range(0, 1024);
    p.flag("--reference", &o.reference, "every layer runs its plain form (autograd ops), and sampling recomputes the window");
    p.add("--prompt", &o.prompt, "the text the sample continues (characters the model knows)", "TEXT");
    p.add("--tokens", &o.tokens, "tokens (characters) to sample at the end").range(0, 1000000);
    p.add("--temperature", &o.temperature, "sampling temperature: < 1 sharper, > 1 flatter").range(1e-6, 100);
    p.add("--top-k", &o.top_k, "sample among the k most likely tokens only (0: all)").range(0, 1000000);
    p.add("--top-p", &o.top_p, "sample among the fewest most likely tokens whose probability reaches p (1: all)").range(1e-6, 1);
    p.flag("--no-kv-cache", &o.no_kv_cache, "sample by running the whole window through the model at every step (the "
                                            "plain reference) instead of with the key/value cache");
    p.add("--save", &o.save, "write the trained model (and its characters or subwords) to PATH", "PATH");
    p.add("--load", &o.load, "sample from the model saved at PATH instead of training", "PATH");
    p.add("--resume", &o.resume, "continue the run whose state an interrupt (Ctrl-C) saved at PATH. Give the flags that run "
                                 "had: another --data (or a changed file), --bpe, --seed, --batch, --lr, --min-lr, --warmup, "
                                 "--weight-decay, --beta2, --clip, --eval-batches, --reference or model flag is refused. These may "
                                 "change: --steps (not below the steps already trained; the cosine then ends at the new last step), "
                                 "--save, --plot, --threads, --eval-every, --sample-every, the sampling flags, --overwrite", "PATH");
    p.add("--plot", &o.plot, "write the train and validation loss curves to PATH as SVG", "PATH");
    common::add_overwrite_flag(p, &o.overwrite);
    p.parse(argc, argv);
    if (!o.load.empty())   // the model comes from the file: what would shape or train it does nothing
        for (const char* f : {"--data", "--bpe", "--layers", "--heads", "--d-model", "--block-size", "--dropout", "--steps", "--batch",
                              "--lr", "--min-lr", "--warmup", "--weight-decay", "--beta2", "--clip", "--eval-every", "--eval-batches",
                              "--sample-every", "--save", "--resume", "--plot", "--overwrite"})
            if (p.given(f)) p.fail(std::string(f) + " does nothing with --load (the model comes from the file; nothing trains)");
    for (const auto& [flag, path] : {std::pair{"--save", o.save}, {"--plot", o.plot}}) common::check_output_path(p, flag, path);
    if (const size_t bad = autograd::io::first_invalid_utf8(o.prompt); bad != std::string::npos)   // (decoded, it would be U+FFFD)
        p.fail("--prompt is not valid UTF-8: a bad byte sequence at byte offset " + std::to_string(bad));
    if (o.data.empty()) o.data = default_text(argv[0]);
    common::RunFiles files;   // no output may name an input or another output, nor replace a file unasked
    files.input("--load", o.load);
    if (o.load.empty()) {
        files.input("--data", o.data);
        common::add_training_files(files, o.save, o.resume, "gpt");
    }
    files.output("--plot", o.plot);
    files.check(p, o.overwrite);
    if (o.model.d_model % o.model.heads != 0)
        p.fail("--heads " + std::to_string(o.model.heads) + " must divide --d-model " + std::to_string(o.model.d_model));
    if (o.min_lr > o.lr) p.fail("--min-lr must be at most --lr");
    if (o.reference && p.given("--no-kv-cache")) p.fail("--no-kv-cache is what --reference already does");
    if (o.reference) o.no_kv_cache = true;
    common::apply_threads_flag(p, o.threads);
    if (o.load.empty()) common::warn_if_no_decay(p, o.steps, o.warmup, "--lr " + common::exact(o.lr));
    return o;
}

}  // namespace options
