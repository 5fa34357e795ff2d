#include "nn/module.h"

#include <stdexcept>
#include <unordered_set>

namespace nn {

void Module::check_name(const std::string& name) const {
    if (name.empty() || name.find('.') != std::string::npos)
        throw std::invalid_argument("Module: name '" + name + "' must be non-empty and contain no '.'");
    for (const auto& [n, _] : params_)
        if (n == name) throw std::invalid_argument("Module: name '" + name + "' is already registered");
    for (const auto& [n, _] : children_)
        if (n == name) throw std::invalid_argument("Module: name '" + name + "' is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
    check_name(name);
    if (!t.is_leaf()) t = t.detach();       // a parameter is a leaf of every graph it enters
    t.requires_grad_(true);
    params_.emplace_back(name, t);
    return t;
}

Tensor Module::share_parameter(const std::string& name, const Tensor& shared) {
    for (auto& [n, t] : params_) {
        if (n != name) continue;
        if (t.shape() != shared.shape())
            throw std::invalid_argument("Module::share_parameter: '" + name + "' is " + autograd::shape_str(t.shape()) +
                                        ", the shared tensor " + autograd::shape_str(shared.shape()));
        t = shared;
        return t;
    }
    throw std::invalid_argument("Module::share_parameter: no parameter named '" + name + "'");
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
    for (const auto& [n, t] : params_) out.emplace_back(prefix + n, t);
    for (const auto& [n, m] : children_) m->collect(prefix + n + ".", out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
    std::vector<std::pair<std::string, Tensor>> all, out;
    collect("", all);
    std::unordered_set<const autograd::Node*> seen;   // a shared tensor is listed once
    for (auto& [name, t] : all)
        if (seen.insert(&t.node()).second) out.emplace_back(std::move(name), std::move(t));
    return out;
}

std::vector<Tensor> Module::parameters() const {
    std::vector<Tensor> out;
    for (auto& [_, t] : named_parameters()) out.push_back(t);
    return out;
}

int64_t Module::num_parameters() const {
    int64_t n = 0;
    for (const Tensor& t : parameters()) n += t.numel();
    return n;
}

void Module::zero_grad() {
    for (Tensor& t : parameters()) t.zero_grad();
}

void Module::train(bool on) {
    training_ = on;
    for (auto& [_, m] : children_) m->train(on);
}

}  // namespace nn
