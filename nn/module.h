// Module: the base of every layer. It owns named parameters and named child modules, so a whole
// model can list its parameters with dotted names ("decoder.layers.1.self_attn.w_q.weight"),
// switch between training and evaluation, and zero its gradients. The vocabulary follows the
// libtorch C++ API (register_parameter, register_module, parameters, train/eval) without its
// macro machinery: a layer is a plain class deriving from Module, held by std::shared_ptr.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autograd.h"

namespace nn {

using autograd::Mask;
using autograd::Shape;
using autograd::Tensor;
using autograd::Tokens;

class Module {
public:
    virtual ~Module() = default;
    Module(const Module&) = delete;              // parameters are owned once; share via shared_ptr
    Module& operator=(const Module&) = delete;

    // All parameters of this module and its children, depth first, in registration order. A
    // tensor shared by several modules (share_parameter) is listed once, under its first name.
    std::vector<Tensor> parameters() const;
    std::vector<std::pair<std::string, Tensor>> named_parameters() const;
    int64_t num_parameters() const;
    void zero_grad();

    // Training mode (dropout active) or evaluation mode; reaches every child.
    void train(bool on = true);
    void eval() { train(false); }
    bool is_training() const { return training_; }

    const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

    // Makes the parameter registered as `name` the tensor `shared` (same shape) and returns it,
    // for weight tying: m.weight = m.share_parameter("weight", other.weight). Gradients of every
    // use then add up in the one tensor, and the optimizer and checkpoints see it once.
    Tensor share_parameter(const std::string& name, const Tensor& shared);

protected:
    Module() = default;
    // Marks `t` as a trainable leaf and returns the handle (it shares t's node).
    Tensor register_parameter(const std::string& name, Tensor t);
    template <class M>
    std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
        check_name(name);
        children_.emplace_back(name, m);
        return m;
    }

private:
    void check_name(const std::string& name) const;
    void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;

    std::vector<std::pair<std::string, Tensor>> params_;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
    bool training_ = true;
};

// A list of layers of one type, registered as children "0", "1", ... (like torch.nn.ModuleList).
template <class M>
class ModuleList : public Module {
public:
    ModuleList() = default;
    void push_back(std::shared_ptr<M> m) { items_.push_back(register_module(std::to_string(items_.size()), std::move(m))); }
    M& operator[](size_t i) const { return *items_.at(i); }
    size_t size() const { return items_.size(); }
    auto begin() const { return items_.begin(); }
    auto end() const { return items_.end(); }
private:
    std::vector<std::shared_ptr<M>> items_;
};

}  // namespace nn
