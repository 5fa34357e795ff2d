// Collect every problem, then throw once: a loader checks the whole file before it changes
// anything, and a user fixing a checkpoint wants the full list, not one error per attempt.
//
//   io::Problems problems("load: 'model.safetensors' does not fit this model");
//   if (!r) problems.add("missing parameter 'w' (3, 4)");
//   ...
//   problems.throw_if_any();   // std::runtime_error:
//                              //   load: 'model.safetensors' does not fit this model (2 problems):
//                              //     missing parameter 'w' (3, 4)
//                              //     unexpected tensor 'v'
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace autograd::io {

class Problems {
public:
    // What did not work, e.g. "load: 'x.safetensors' does not fit this model": the message's first line.
    explicit Problems(std::string context) : context_(std::move(context)) {}

    void add(std::string problem) { problems_.push_back(std::move(problem)); }
    bool empty() const { return problems_.empty(); }
    size_t size() const { return problems_.size(); }

    // Throws one std::runtime_error listing the problems, one per line (the first kMaxListed,
    // then how many more), if there are any; otherwise does nothing.
    void throw_if_any() const {
        if (problems_.empty()) return;
        const size_t n = problems_.size();
        std::string msg = context_ + " (" + std::to_string(n) + (n == 1 ? " problem):" : " problems):");
        for (size_t i = 0; i < n && i < kMaxListed; i++) msg += "\n  " + problems_[i];
        if (n > kMaxListed) msg += "\n  ... and " + std::to_string(n - kMaxListed) + " more";
        throw std::runtime_error(msg);
    }

    static constexpr size_t kMaxListed = 10;   // a model with every shape wrong lists 10, not 200

private:
    std::string context_;
    std::vector<std::string> problems_;
};

}  // namespace autograd::io
