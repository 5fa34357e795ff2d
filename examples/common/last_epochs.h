// Checkpoint averaging (--average-last K of the translation example): the parameters of the last
// K epochs, and their average (paper, section 6.1: "for the base models, we used a single model
// obtained by averaging the last 5 checkpoints, which were written at 10-minute intervals").
//
//   common::LastEpochs last(k);          // k = 0: keeps nothing
//   for (int epoch = 1; epoch <= epochs; epoch++) {
//       ...                              // train one epoch
//       last.add(model);                 // a copy of every parameter; the oldest beyond k go
//   }
//   if (!last.empty()) last.average_into(model);   // each parameter: the mean over the kept epochs
//
// Kept in memory: K copies of the parameters.
#pragma once
#include <cstddef>
#include <vector>

#include "nn/module.h"

namespace common {

class LastEpochs {
public:
    explicit LastEpochs(int k) : k_(k) {}

    // Keeps a copy of the module's parameters; only the last k are kept.
    void add(const nn::Module& model);

    // Puts the element-wise mean of the kept epochs' parameters into the module (the same
    // architecture as the one added): the mean of the last k epochs, or of all of them if fewer ran.
    void average_into(nn::Module& model) const;

    size_t size() const { return kept_.size(); }   // epochs kept: min(k, epochs added)
    bool empty() const { return kept_.empty(); }

private:
    int k_;
    std::vector<std::vector<std::vector<float>>> kept_;   // [epoch][parameter][element], oldest first
};

}  // namespace common
