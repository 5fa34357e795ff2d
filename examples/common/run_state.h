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

#include "autograd/io/safetensors.h"
#include "autograd/random.h"
#include "examples/common/kept_epochs.h"
#include "examples/common/output_files.h"
#include "examples/common/training_log.h"
#include "models/checkpoint.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace common {

// SIGINT (Ctrl-C) and SIGTERM while it lives: the first asks the training loop to stop after its
// current step (requested() turns true, and a line on stderr says so); the second exits at once,
// with status 128 + the signal, and a save in progress is abandoned: its temporary file removed,
// the file it would have replaced untouched, and a line says so. Signals that arrive within
// `same_interrupt_within` seconds of the first are that first interrupt again (`timeout -s INT`
// and a terminal signal a process and its group: a program run by a script gets two at once),
// not a second. The previous handlers come back when it goes.
class InterruptWatch {
public:
    explicit InterruptWatch(double same_interrupt_within = 1.0);
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
    // What makes the run what it is, flag -> value: the seed, batch, learning-rate settings, ...,
    // each data file's file_fingerprint. --resume refuses a state whose identity differs, naming each
    // difference (restore_run). What may change on resume (--threads, a longer --steps) is not in it.
    models::json::Object identity = {};
    std::string save = {};   // the run's --save, recorded so a resumed run knows that file as its own
};

// A learning rate or factor for RunState::identity: "0.003", the shortest text that reads back as x.
std::string exact(float x);

// {"bytes": 1234, "crc32c": "e3069283"}: a file's size and checksum, for RunState::identity.
// Throws std::runtime_error naming the file when it cannot be read.
models::json::Value file_fingerprint(const std::string& path);

// The --save (resolved, output_files.h) of the run whose state is at `state_path`: a resumed run
// may replace that file, its own. "" when there is none or the file is not a state.
std::string recorded_save(const std::string& state_path);

// Writes everything in `run` to `path` (atomically, as every save).
void save_run(const RunState& run, const std::string& path);

// Puts back what save_run wrote, after checking that the file is such a state, that it is the
// same run (its identity, every difference named as "--seed 1 -> 2"), that its model is the one
// the flags made (the same kind and config; std::runtime_error naming the file and both
// otherwise), its optimizer the same rule, and every counter and generator present. A state
// without checksums or identity (written by older code) is restored with a note on stderr.
void restore_run(const std::string& path, RunState& run);

// --load given a run's state instead of a saved model: the state holds the model too, so it
// loads, and a note on stderr says what the file is: "note: 'x' is the state of a run
// interrupted after step 700, not a --save'd model: using its model as it stood then (--resume x
// goes on training it)". Returns whether `f` is a state (its metadata has "resume").
bool note_if_run_state(const autograd::io::SafetensorsFile& f, const std::string& path);

// Where an interrupted run's state goes: beside --save's model (x.safetensors -> x.resume.safetensors),
// or PROGRAM.resume.safetensors in the current folder without --save.
std::string resume_path(const std::string& save, const std::string& program);

// The files of a training run besides its data, for RunFiles (output_files.h): --resume's state
// (read), --save (written; a resumed run's own --save may be replaced) and the state a Ctrl-C
// writes beside it (resume_path; the --resume file itself when they are one).
void add_training_files(RunFiles& files, const std::string& save, const std::string& resume, const std::string& program);

// After a resumed run has finished and written its outputs: the state it resumed from, when that
// is the run's own (resume_path(save, program), where its Ctrl-C saved it), is removed, and a line
// on stdout says so. Left there, the finished run's state would refuse the next run with the same
// --save ("exists, and this run would replace it"), and it holds nothing the run has not written.
// A state elsewhere (--resume of a copy) is the user's file, and stays.
void remove_finished_state(const std::string& resume, const std::string& save, const std::string& program);

// After a first interrupt: save_run to `path`, and say on stderr where the run stopped and the
// command that continues it (argv with --resume PATH). Returns the exit status to end with:
// 128 + the signal (130 for Ctrl-C, 143 for SIGTERM).
int save_interrupted(const RunState& run, const std::string& path, int argc, char** argv);

}  // namespace common
