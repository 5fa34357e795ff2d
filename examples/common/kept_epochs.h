// The parameters the translation example keeps across epochs: those of the epoch with the lowest
// validation loss (what the test scores and --save writes), and those of the last K epochs for
// checkpoint averaging (--average-last K; paper, section 6.1: "for the base models, we used a
// single model obtained by averaging the last 5 checkpoints, which were written at 10-minute
// intervals").
//
//   common::KeptEpochs kept(k);                       // k = 0: no averaging
//   for (int epoch = 1; epoch <= epochs; epoch++) {
//       ...                                           // train one epoch, then validate
//       const bool best = kept.add(model, epoch, valid_loss);   // a copy of every parameter
//   }
//   kept.restore_best(model);                         // the best epoch's parameters
//   if (kept.averaging()) kept.average_last_into(model);   // each parameter: the mean over the last k
//
// Kept in memory: K + 1 copies of the parameters.
#pragma once
#include <cmath>
#include <cstddef>
#include <vector>

#include "nn/module.h"

namespace common {

// Every parameter's values, in the order of Module::parameters().
using ParameterValues = std::vector<std::vector<float>>;

class KeptEpochs {
public:
    explicit KeptEpochs(int average_last) : k_(average_last) {}

    // After an epoch: keeps a copy of the module's parameters if valid_loss is the lowest so far
    // (and returns whether it is), and among the last k epochs' (the oldest beyond k go).
    bool add(const nn::Module& model, int epoch, double valid_loss);

    // Puts the best epoch's parameters back into the module (no-op before the first add).
    void restore_best(nn::Module& model) const;
    int best_epoch() const { return best_epoch_; }         // 0 before the first add
    double best_valid_loss() const { return best_loss_; }  // +inf before the first add

    // Puts the element-wise mean of the last k epochs' parameters into the module (the same
    // architecture as the one added): the mean of the last k epochs, or of all of them if fewer ran.
    void average_last_into(nn::Module& model) const;
    bool averaging() const { return !last_.empty(); }   // whether k > 0 and an epoch was added
    size_t last_size() const { return last_.size(); }   // epochs averaged: min(k, epochs added)

    // Everything kept, for a run that resumes where another stopped (run_state.h).
    struct State {
        ParameterValues best;
        int best_epoch = 0;
        double best_loss = INFINITY;
        std::vector<ParameterValues> last;
    };
    State state() const { return {best_, best_epoch_, best_loss_, last_}; }
    void restore(State s) { best_ = std::move(s.best), best_epoch_ = s.best_epoch, best_loss_ = s.best_loss, last_ = std::move(s.last); }

private:
    int k_;
    ParameterValues best_;
    int best_epoch_ = 0;
    double best_loss_ = INFINITY;
    std::vector<ParameterValues> last_;   // [epoch][parameter][element], oldest first
};

}  // namespace common
