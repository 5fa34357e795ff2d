// The GPT example's command line (examples/gpt.cpp): every flag, its default and its checks.
// The defaults are nanoGPT's CPU "baby GPT" on Tiny Shakespeare (config/train_shakespeare_char.py
// with its README's CPU overrides).
#pragma once
#include <cstdint>
#include <string>

#include "models/gpt.h"

namespace options {

struct Gpt {
    std::string data;            // the text; parse_gpt puts Tiny Shakespeare's path here when --data is not given
    int bpe = 0;                 // 0: characters; N: subwords of N merges
    models::GPTConfig model{.vocab = 0, .block_size = 64, .layers = 4, .heads = 4, .d_model = 128, .dropout = 0.0f};
    int steps = 2000, batch = 12, warmup = 100;
    float lr = 1e-3f, min_lr = 1e-4f, weight_decay = 0.1f, beta2 = 0.99f, clip = 1.0f;
    int eval_every = 250, eval_batches = 20, sample_every = 0;
    uint64_t seed = 1337;
    int threads = 0;
    bool reference = false, no_kv_cache = false, overwrite = false;
    std::string prompt = "\n";
    int64_t tokens = 500;
    float temperature = 0.8f, top_p = 1.0f;
    int top_k = 0;
    std::string save, load, resume, plot;
};

// Parses argv: on a bad flag, one line on stderr and exit 2 (--help: the usage, exit 0). Checks
// before anything runs: a --save or --plot path that cannot be written, flags that would do
// nothing with --load, an output that names an input or another output, or that exists without
// --overwrite (output_files.h).
Gpt parse_gpt(int argc, char** argv);

}  // namespace options
