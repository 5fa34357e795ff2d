#include "examples/common/training_log.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "examples/common/svg.h"

namespace common {

TrainingLog::TrainingLog(int total_steps, std::ostream& progress_out) : progress_(std::max(total_steps, 1), progress_out) {}

void TrainingLog::step(float loss, double weight, const Fields& live) {
    steps_.push_back(static_cast<double>(steps_.size() + 1));
    losses_.push_back(loss);
    window_sum_ += static_cast<double>(loss) * weight;
    window_weight_ += weight;
    window_steps_++;
    progress_.update(steps(), live);
}

LossWindow TrainingLog::take_window() {
    const LossWindow w{.mean = window_sum_ / std::max(window_weight_, 1.0), .steps = window_steps_};
    window_sum_ = window_weight_ = 0.0;
    window_steps_ = 0;
    return w;
}

void TrainingLog::add_valid(double loss) {
    valid_steps_.push_back(static_cast<double>(steps_.size()));
    valid_losses_.push_back(loss);
}

void TrainingLog::restore(const State& s) {
    steps_ = s.steps, losses_ = s.losses, valid_steps_ = s.valid_steps, valid_losses_ = s.valid_losses;
    window_sum_ = s.window_sum, window_weight_ = s.window_weight, window_steps_ = s.window_steps;
}

float TrainingLog::last_loss() const { return losses_.empty() ? NAN : static_cast<float>(losses_.back()); }

double TrainingLog::seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

double TrainingLog::lap() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - lap_).count();
    lap_ = now;
    return s;
}

void TrainingLog::plot(const std::string& path, const std::string& title, const std::string& train_label, bool log_y) const {
    std::vector<Series> curves = {{train_label, steps_, losses_}};
    if (!valid_losses_.empty()) curves.push_back({"validation", valid_steps_, valid_losses_});
    write_line_plot(path, title, "step", "cross-entropy", curves, {.log_y = log_y});
    std::printf("wrote %s\n", path.c_str());
}

}  // namespace common
