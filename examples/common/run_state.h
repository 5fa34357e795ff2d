// Ctrl-C loses nothing: the whole state of a training run in one file, and the watch for the
// signal that asks for it.
//
//   common::InterruptWatch interrupt;   // from here on, SIGINT and SIGTERM ask the loop to stop
//   int64_t step = 0;
//   common::RunState run{.model = &model, .model_metadata = models::model_to_metadata(model), .opt = &opt, .sched = sched.get(), .log = &log,
//                        .rngs = {{"data", &data_rng}}, .counters = {{"step", &step}}};
//   if (!o.resume.empty()) common::restore_run(o.resume, run);   // as it was after its last step
//   for (step++; step <= steps; step++) {
//       ...                                                          // one training step
//       if (interrupt.requested()) return common::save_interrupted(run, "copy_task.resume.safetensors", argc, argv);
//   }
//
// The file holds the model's parameters (and, in its metadata, its kind and config, so it also
// loads as a saved model), the optimizer's state (optim/checkpoint.h), the schedule's step, the
// default generator and every generator named in `rngs`, the counters, the loss curves and, for
// the translation example, the epochs kept (kept_epochs.h). A run resumed from it continues with
// the numbers the uninterrupted run would have had, bit for bit (tests/test_example_flags_*.cpp).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autograd/random.h"
#include "examples/common/kept_epochs.h"
#include "examples/common/training_log.h"
#include "models/checkpoint.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace common {

// SIGINT (Ctrl-C) and SIGTERM while it lives: the first asks the training loop to stop after its
// current step (requested() turns true, and a line on stderr says so); the second exits at once,
// with status 128 + the signal. The previous handlers come back when it goes.
class InterruptWatch {
public:
    InterruptWatch();
    ~InterruptWatch();
    InterruptWatch(const InterruptWatch&) = delete;
    InterruptWatch& operator=(const InterruptWatch&) = delete;
    bool requested() const;
    int signal_number() const;   // the first signal's number, 0 before one
};

struct RunState {
    nn::Module* model = nullptr;
    models::json::Object model_metadata;                         // its kind and config (models::model_to_metadata)
    optim::Optimizer* opt = nullptr;
    optim::LRSchedule* sched = nullptr;
    TrainingLog* log = nullptr;
    KeptEpochs* kept = nullptr;                                  // the translation example's, or none
    std::vector<std::pair<std::string, autograd::Rng*>> rngs;    // besides the default generator, always kept
    std::vector<std::pair<std::string, int64_t*>> counters;      // step, epoch, ...
    models::json::Object settings;                               // what a saved model of the example holds besides
};

// Writes everything in `run` to `path` (atomically, as every save).
void save_run(const RunState& run, const std::string& path);

// Puts back what save_run wrote, after checking that the file is such a state and that its model
// is the one the flags made (the same kind and config; std::runtime_error naming the file and
// both otherwise), its optimizer the same rule, and every counter and generator present.
void restore_run(const std::string& path, RunState& run);

// Where an interrupted run's state goes: beside --save's model (x.safetensors -> x.resume.safetensors),
// or PROGRAM.resume.safetensors in the current folder without --save.
std::string resume_path(const std::string& save, const std::string& program);

// After a first interrupt: save_run to `path`, and say on stderr where the run stopped and the
// command that continues it (argv with --resume PATH). Returns the exit status to end with: 130.
int save_interrupted(const RunState& run, const std::string& path, int argc, char** argv);

}  // namespace common
