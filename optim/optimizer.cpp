#include "optim/optimizer.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <unordered_set>

#include "autograd/frozen_weights.h"
#include "autograd/fused_ops.h"

namespace optim {

using autograd::shape_str;

Optimizer::Optimizer(std::vector<Tensor> params, float lr) : params_(std::move(params)), lr_(lr) {
    if (params_.empty())
        throw std::invalid_argument("Optimizer: empty parameter list (did the model register its parameters?)");
    std::unordered_set<const autograd::Node*> seen;
    for (size_t i = 0; i < params_.size(); i++) {
        const std::string which = "Optimizer: parameter " + std::to_string(i);
        if (!params_[i].defined()) throw std::invalid_argument(which + " is an undefined tensor");
        if (!params_[i].requires_grad())
            throw std::invalid_argument(which + " " + shape_str(params_[i].shape()) +
                                        " does not require grad (call requires_grad_() or leave it out)");
        if (!params_[i].is_leaf())
            throw std::invalid_argument(which + " was made by '" + params_[i].op() +
                                        "'; only leaf tensors can be optimized");
        if (!seen.insert(params_[i].node_ptr().get()).second)
            throw std::invalid_argument(which + " appears twice in the list (it would be updated twice per step)");
    }
    set_lr(lr);
    param_steps_.assign(params_.size(), 0);
}

Optimizer::~Optimizer() = default;

float* Optimizer::state(int buffer, size_t param) { return buffers_[buffer][param].data(); }

static bool valid_lr(float lr) { return std::isfinite(lr) && lr >= 0.0f; }   // false for NaN too

void Optimizer::set_lr(float lr) {
    if (!valid_lr(lr))
        throw std::invalid_argument("Optimizer: learning rate must be finite and >= 0, got " + std::to_string(lr));
    lr_ = lr;
}

void Optimizer::zero_grad() {
    for (Tensor& p : params_) p.zero_grad();
}

int Optimizer::add_state(const std::string& buffer_name) {
    buffer_names_.push_back(buffer_name);
    buffers_.emplace_back();
    return static_cast<int>(buffers_.size()) - 1;
}

void Optimizer::begin_step() {
    // Inside a FrozenWeightsGuard (decoding) the fused products may read packed copies of the
    // weights made before: moving the weights under them would leave those stale. (The plain
    // path's products read the weights in place, and keep no copy.)
    if (autograd::fused_kernels_enabled() && autograd::weights_frozen())
        throw std::logic_error("optimizer step() inside a FrozenWeightsGuard: the guard promises that no weight changes "
                               "(autograd/frozen_weights.h); end it before stepping");
    if (!state_ready_) {                 // the only allocation a step() ever makes
        for (auto& slot : buffers_) {
            slot.resize(params_.size());
            for (size_t i = 0; i < params_.size(); i++) slot[i].assign(static_cast<size_t>(params_[i].numel()), 0.0f);
        }
        state_ready_ = true;
    }
    step_count_++;
}

std::string Optimizer::float_text(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));   // 9 digits round-trip a float
    return buf;
}

const float* Optimizer::state_buffer(size_t slot, size_t param) const {
    if (slot >= buffers_.size() || param >= params_.size())
        throw std::out_of_range("Optimizer::state_buffer: no buffer " + std::to_string(slot) + " for parameter " +
                                std::to_string(param) + " (" + std::to_string(buffers_.size()) + " buffers, " +
                                std::to_string(params_.size()) + " parameters)");
    return state_ready_ ? buffers_[slot][param].data() : nullptr;
}

void Optimizer::set_state(int64_t step_count, float lr, std::vector<int64_t> param_steps, Buffers buffers) {
    // 1) check everything: a bad state must not half-replace a good one
    const std::string who = "Optimizer::set_state: ";
    const size_t P = params_.size();
    if (step_count < 0) throw std::invalid_argument(who + "negative step_count " + std::to_string(step_count));
    if (!valid_lr(lr)) throw std::invalid_argument(who + "lr " + float_text(lr) + " is not a valid learning rate");
    if (param_steps.size() != P)
        throw std::invalid_argument(who + std::to_string(param_steps.size()) + " param_steps for " +
                                    std::to_string(P) + " parameters");
    for (size_t i = 0; i < P; i++)
        if (param_steps[i] < 0 || param_steps[i] > step_count)
            throw std::invalid_argument(who + "param_steps[" + std::to_string(i) + "] = " + std::to_string(param_steps[i]) +
                                        " is outside [0, step_count = " + std::to_string(step_count) + "]");
    if (buffers.size() != buffers_.size())
        throw std::invalid_argument(who + std::to_string(buffers.size()) + " state buffers per parameter, expected " +
                                    std::to_string(buffers_.size()));
    for (size_t s = 0; s < buffers.size(); s++) {
        if (buffers[s].size() != P)
            throw std::invalid_argument(who + "buffer '" + buffer_names_[s] + "' has " + std::to_string(buffers[s].size()) +
                                        " entries for " + std::to_string(P) + " parameters");
        for (size_t i = 0; i < P; i++)
            if (buffers[s][i].size() != static_cast<size_t>(params_[i].numel()))
                throw std::invalid_argument(who + "buffer '" + buffer_names_[s] + "' of parameter " + std::to_string(i) +
                                            " has " + std::to_string(buffers[s][i].size()) + " floats, expected " +
                                            std::to_string(params_[i].numel()));
    }
    // 2) commit: nothing below can fail
    step_count_ = step_count;
    lr_ = lr;
    param_steps_ = std::move(param_steps);
    buffers_ = std::move(buffers);
    state_ready_ = true;
}

}  // namespace optim
