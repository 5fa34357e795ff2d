// Optimizer: the base of every update rule. It holds the parameters, the learning rate, the step
// count and any per-parameter state buffers a rule keeps (Adam's m and v, SGD's momentum).
// optim/checkpoint.h saves and restores that state, so training can resume bit for bit.
//
//   optim::Adam opt(model->parameters(), {.lr = 1e-3f});
//   opt.zero_grad(); loss.backward(); opt.step();
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace optim {

using autograd::Tensor;

class Optimizer {
public:
    // Throws std::invalid_argument on an empty list, an undefined tensor, a tensor listed twice,
    // a tensor that does not require grad or is not a leaf, or an lr that is negative or not finite.
    Optimizer(std::vector<Tensor> params, float lr);
    virtual ~Optimizer();
    Optimizer(const Optimizer&) = delete;               // the state belongs to these parameters
    Optimizer& operator=(const Optimizer&) = delete;

    void zero_grad();                                   // drops every parameter's gradient
    // One update. Parameters with no gradient (grad_data() == nullptr: unused in the forward pass)
    // are left alone, and their state does not advance.
    virtual void step() = 0;

    float lr() const { return lr_; }
    void set_lr(float lr);                              // throws if negative or not finite
    int64_t step_count() const { return step_count_; }  // step() calls so far
    const std::vector<Tensor>& params() const { return params_; }
    virtual std::string name() const = 0;               // "SGD", "Adam", "AdamW"

    // The options step() uses, as text for a reader ("beta1" -> "0.9"). A checkpoint stores them,
    // informatively: a loaded state keeps the options this optimizer was built with.
    virtual std::map<std::string, std::string> hyperparameters() const { return {}; }

    // ---- the state step() accumulates (optim/checkpoint.h saves and restores it) ----
    // [slot][param] -> that parameter's numel floats, e.g. slot 0 = Adam's m, slot 1 = its v.
    using Buffers = std::vector<std::vector<std::vector<float>>>;
    const std::vector<std::string>& buffer_names() const { return buffer_names_; }   // per slot: "m", "v"
    const std::vector<int64_t>& param_steps() const { return param_steps_; }          // (P) updates per parameter
    // Buffer `slot` of parameter i (numel floats); nullptr before the first step(), when every
    // buffer is still 0. Throws std::out_of_range on a slot or parameter index that does not exist.
    const float* state_buffer(size_t slot, size_t param) const;
    // Replaces the whole state at once. Checks first, and throws std::invalid_argument (leaving
    // this optimizer untouched) unless: step_count >= 0, lr is a valid learning rate, one
    // param_steps entry per parameter in [0, step_count], and `buffers` holds one buffer per slot
    // and parameter with the parameter's numel floats.
    void set_state(int64_t step_count, float lr, std::vector<int64_t> param_steps, Buffers buffers);

protected:
    // Declare a per-parameter state buffer, from the subclass constructor; returns its index. Each
    // declared buffer is allocated zero-filled, one per parameter, at the first step() and reused.
    int add_state(const std::string& buffer_name);
    float* state(int buffer, size_t param);
    // Call first in every step(): allocates the state once and counts the step.
    void begin_step();
    static std::string float_text(float v);             // 9 significant digits: reads back as the same float

    std::vector<Tensor> params_;
    std::vector<int64_t> param_steps_;                  // (P) updates each parameter has received
    float lr_;
    int64_t step_count_ = 0;

private:
    std::vector<std::string> buffer_names_;             // one per slot
    Buffers buffers_;                                   // one (still empty) entry per slot until:
    bool state_ready_ = false;                          // buffers allocated (first step() or set_state())
};

}  // namespace optim
