// Learning-rate schedules: small objects that set an optimizer's lr once per training step.
// Call step() once per training step, BEFORE optimizer.step(); it returns the lr it set.
// Steps are numbered from 1, so the first update uses lr_at(1).
//
//   optim::NoamSchedule sched(opt, /*d_model=*/512, /*warmup=*/4000);
//   for (...) { opt.zero_grad(); loss.backward(); sched.step(); opt.step(); }
//
// Resuming: the schedule's position is not in the optimizer's state; after load_optimizer, call
// sched.set_step(opt.step_count()).
#pragma once
#include "optim/optimizer.h"

namespace optim {

class LRSchedule {
public:
    explicit LRSchedule(Optimizer& opt);
    virtual ~LRSchedule();
    float step();                                 // advance to the next step and set its lr
    virtual float lr_at(int64_t step) const = 0;  // the lr of step `step` >= 1 (throws below 1)
    int64_t current_step() const { return step_; }   // steps taken; 0 before the first
    void set_step(int64_t step);                  // the next step() sets lr_at(step + 1)

protected:
    Optimizer& opt_;
    int64_t step_ = 0;
};

// Vaswani et al. (2017), eq. 3:  lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
// Linear warmup for `warmup` steps, peak at step == warmup, then decay as 1/sqrt(step).
// Use it with Adam lr = 1 (the schedule overwrites it) and the paper's betas (0.9, 0.98), eps 1e-9.
class NoamSchedule : public LRSchedule {
public:
    NoamSchedule(Optimizer& opt, int64_t d_model, int64_t warmup, float factor = 1.0f);
    float lr_at(int64_t step) const override;

private:
    int64_t d_model_, warmup_;
    float factor_;
};

// Linear warmup from 0 to peak_lr over `warmup` steps (lr_at(warmup) == peak_lr), then a half
// cosine from peak_lr down to min_lr at total_steps, and min_lr after that:
//   step <= warmup:          peak_lr * step / warmup
//   warmup < step <= total:  min_lr + (peak_lr - min_lr) * (1 + cos(pi * (step - warmup) / (total - warmup))) / 2
//   step > total:            min_lr
class WarmupCosineSchedule : public LRSchedule {
public:
    WarmupCosineSchedule(Optimizer& opt, float peak_lr, int64_t warmup, int64_t total_steps, float min_lr = 0.0f);
    float lr_at(int64_t step) const override;

private:
    float peak_lr_;
    int64_t warmup_, total_;
    float min_lr_;
};

}  // namespace optim
