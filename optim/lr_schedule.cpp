#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace optim {

LRSchedule::LRSchedule(Optimizer& opt) : opt_(opt) {}
LRSchedule::~LRSchedule() = default;

float LRSchedule::step() {
    const float lr = lr_at(step_ + 1);
    opt_.set_lr(lr);
    step_++;
    return lr;
}

void LRSchedule::set_step(int64_t step) {
    if (step < 0) throw std::invalid_argument("LRSchedule::set_step: step must be >= 0, got " + std::to_string(step));
    step_ = step;
}

static void check_step(const char* who, int64_t step) {
    if (step < 1) throw std::invalid_argument(std::string(who) + "::lr_at: steps are numbered from 1, got " + std::to_string(step));
}

NoamSchedule::NoamSchedule(Optimizer& opt, int64_t d_model, int64_t warmup, float factor)
    : LRSchedule(opt), d_model_(d_model), warmup_(warmup), factor_(factor) {
    if (d_model <= 0) throw std::invalid_argument("NoamSchedule: d_model must be > 0, got " + std::to_string(d_model));
    if (warmup <= 0) throw std::invalid_argument("NoamSchedule: warmup must be > 0, got " + std::to_string(warmup));
    if (!std::isfinite(factor) || factor < 0.0f)
        throw std::invalid_argument("NoamSchedule: factor must be finite and >= 0, got " + std::to_string(factor));
}

float NoamSchedule::lr_at(int64_t step) const {
    check_step("NoamSchedule", step);
    const double s = static_cast<double>(step), w = static_cast<double>(warmup_);
    return static_cast<float>(factor_ / std::sqrt(static_cast<double>(d_model_)) *
                              std::min(1.0 / std::sqrt(s), s / (w * std::sqrt(w))));
}

WarmupCosineSchedule::WarmupCosineSchedule(Optimizer& opt, float peak_lr, int64_t warmup, int64_t total_steps, float min_lr)
    : LRSchedule(opt), peak_lr_(peak_lr), warmup_(warmup), total_(total_steps), min_lr_(min_lr) {
    if (!std::isfinite(peak_lr) || peak_lr < 0.0f)
        throw std::invalid_argument("WarmupCosineSchedule: peak_lr must be finite and >= 0, got " + std::to_string(peak_lr));
    if (!std::isfinite(min_lr) || min_lr < 0.0f || min_lr > peak_lr)
        throw std::invalid_argument("WarmupCosineSchedule: min_lr must be in [0, peak_lr], got " + std::to_string(min_lr));
    if (warmup < 0 || total_steps < 1 || warmup > total_steps)
        throw std::invalid_argument("WarmupCosineSchedule: need 0 <= warmup <= total_steps and total_steps >= 1, got warmup " +
                                    std::to_string(warmup) + ", total_steps " + std::to_string(total_steps));
}

float WarmupCosineSchedule::lr_at(int64_t step) const {
    check_step("WarmupCosineSchedule", step);
    if (step <= warmup_) return static_cast<float>(static_cast<double>(peak_lr_) * step / warmup_);
    if (step > total_) return min_lr_;
    const double progress = static_cast<double>(step - warmup_) / static_cast<double>(total_ - warmup_);   // (0, 1]
    return static_cast<float>(min_lr_ + (peak_lr_ - min_lr_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
}

}  // namespace optim
