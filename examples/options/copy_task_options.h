// The copy task's command line (examples/copy_task.cpp): every flag, its default and its checks.
#pragma once
#include <cstdint>
#include <string>

#include "examples/common/training_flags.h"

namespace options {

struct CopyTask {
    common::TrainingFlags train{.model = {.layers = 2, .d_model = 128, .d_ff = 256, .heads = 4, .dropout = 0.0f}, .warmup = 100};
    int64_t vocab = 11, seq_len = 10;
    int steps = 600, batch = 128, eval_count = 1000, beam = 0, print_every = 100;
    std::string schedule = "cosine";   // "cosine": warmup to --lr, then down to 0 at the last step; "noam"
    float lr = 3e-3f;                  // the cosine schedule's peak
    bool paper = false, no_kv_cache = false, overwrite = false;
    std::string save, load, plot, decode, resume;
};

// Parses argv: on a bad flag, one line on stderr and exit 2 (--help: the usage, exit 0). Checks
// before anything runs: a --save or --plot path that cannot be written, an output that names an
// input or another output, an output that exists without --overwrite (output_files.h), flags
// that would do nothing with --load, --decode without --load.
CopyTask parse_copy_task(int argc, char** argv);

}  // namespace options
