// What a training loop reports, in both examples: a live progress line (stderr), result lines
// (stdout), the time since the start, and the loss curves that --plot draws.
//
//   common::TrainingLog log(steps);
//   for (int step = 1; step <= steps; step++) {
//       ...                                                        // one training step
//       log.step(loss, 1, {{"loss", common::format_value(loss)}});   // the curve and the live line
//       if (step % 100 == 0) {
//           const common::LossWindow w = log.take_window();          // the mean since the last one
//           log.result("step " + std::to_string(step) + "  mean loss " + std::to_string(w.mean));
//       }
//   }
//   log.finish();
//   log.plot("loss.svg", "Copy task: training loss", "train", /*log_y=*/true);
#pragma once
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "examples/common/progress.h"

namespace common {

struct LossWindow {
    double mean = 0.0;   // the weighted mean of the losses in the window
    int steps = 0;       // how many steps it covers
};

class TrainingLog {
public:
    // total_steps: the progress bar's length (at least 1); the progress line goes to progress_out
    explicit TrainingLog(int total_steps, std::ostream& progress_out = std::cerr);

    // One optimizer step: its loss joins the train curve and the current window, where it counts
    // `weight` times (the number of tokens the loss is a mean over; 1 when every step has the same
    // number), and `live` is drawn on the progress line.
    void step(float loss, double weight, const Fields& live);

    // The weighted mean of the losses since the last call (or the start); starts a new window.
    LossWindow take_window();

    // A validation loss after the current step: a point on the second curve.
    void add_valid(double loss);

    void result(const std::string& line) { progress_.result(line); }   // a line that stays, on stdout
    void finish() { progress_.finish(); }                               // ends the live line

    int steps() const { return static_cast<int>(losses_.size()); }
    float last_loss() const;   // NaN before the first step
    double seconds() const;    // since construction
    double lap();              // since the last lap() (or construction): one epoch's time, say

    // The training losses (one point per step), and the validation losses if any, to an SVG file;
    // says "wrote PATH" on stdout.
    void plot(const std::string& path, const std::string& title, const std::string& train_label, bool log_y = false) const;

    // Everything the log has recorded, for a run that resumes where another stopped (run_state.h):
    // the curves and the current window.
    struct State {
        std::vector<double> steps, losses, valid_steps, valid_losses;
        double window_sum = 0.0, window_weight = 0.0;
        int window_steps = 0;
    };
    State state() const { return {steps_, losses_, valid_steps_, valid_losses_, window_sum_, window_weight_, window_steps_}; }
    void restore(const State& s);

private:
    Progress progress_;
    const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point lap_ = t0_;
    std::vector<double> steps_, losses_, valid_steps_, valid_losses_;   // the curves for --plot
    double window_sum_ = 0.0, window_weight_ = 0.0;                     // sum of weight * loss, and of weight
    int window_steps_ = 0;
};

}  // namespace common
