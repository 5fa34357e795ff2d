// Optimizer: the base of every update rule. It holds the parameters, the learning rate, the step
// count and any per-parameter state buffers a rule keeps (Adam's m and v, SGD's momentum), and it
// saves and restores all of that as a safetensors file so training can resume bit for bit.
//
//   optim::Adam opt(model->parameters(), {.lr = 1e-3f});
//   opt.zero_grad(); loss.backward(); opt.step();
//   optim::save_optimizer(opt, "opt.safetensors");   ...   optim::load_optimizer(opt2, "opt.safetensors");
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "autograd/io/safetensors.h"

namespace optim {

using autograd::Tensor;

class Optimizer {
public:
    // Throws std::invalid_argument on an empty list, an undefined tensor, a tensor listed twice,
    // a tensor that does not require grad or is not a leaf, or an lr that is negative or not finite.
    Optimizer(std::vector<Tensor> params, float lr);
    virtual ~Optimizer() = default;
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

    // ---- checkpointing ----
    // The full state, as records:
    //   "optim.step_count"  I64 ()   step() calls so far
    //   "optim.lr"          F32 ()   the current learning rate (a schedule may have changed it)
    //   "optim.param_steps" I64 (P)  updates each parameter has received (Adam's bias correction)
    //   "<rule>.<buffer>.<i>" F32, shaped like parameter i, e.g. "adam.m.3", "sgd.momentum_buffer.0"
    // Before the first step() the buffers are written as zeros, which is exactly their initial value.
    virtual std::vector<autograd::io::TensorRecord> state_records() const;
    // Strings for a reader of the file: "optim.type" (checked on load) and the hyperparameters
    // (informative only: a loaded state keeps the hyperparameters this optimizer was built with).
    virtual std::map<std::string, std::string> state_metadata() const;
    // Restores what state_records() wrote. Checks everything first — the "optim.type" metadata,
    // every expected record present with its dtype and shape, no unexpected "optim.*" or "<rule>.*"
    // records — and throws std::runtime_error listing the problems, leaving this optimizer untouched.
    // Records outside those two prefixes are ignored (e.g. model weights saved in the same file).
    virtual void load_state_records(const autograd::io::SafetensorsFile& f);

protected:
    // Declare a per-parameter state buffer, from the subclass constructor; returns its slot. Each
    // declared buffer is allocated zero-filled, one per parameter, at the first step() and reused.
    int add_state(const std::string& buffer_name);
    float* state(int slot, size_t param) { return buffers_[slot][param].data(); }
    // Call first in every step(): allocates the state once and counts the step.
    void begin_step();
    std::string prefix() const;                         // lower-case name(): "adam"
    static std::string float_text(float v);             // 9 significant digits: reads back as the same float

    std::vector<Tensor> params_;
    std::vector<int64_t> param_steps_;                  // (P) updates each parameter has received
    float lr_;
    int64_t step_count_ = 0;

private:
    std::vector<std::string> buffer_names_;             // one per slot
    std::vector<std::vector<std::vector<float>>> buffers_;   // [slot][param] -> numel floats
    bool state_ready_ = false;                          // buffers_ allocated (first step() or a load)
};

// Write opt.state_records() and opt.state_metadata() (plus `metadata`, whose keys must not start
// with "optim.") to `path` as safetensors. Atomic, as autograd::io::save_safetensors.
void save_optimizer(const Optimizer& opt, const std::string& path,
                    std::map<std::string, std::string> metadata = {});
// Read `path` and opt.load_state_records() it; errors are std::runtime_error naming the path.
void load_optimizer(Optimizer& opt, const std::string& path);

}  // namespace optim
