#include "optim/sgd.h"

#include <cmath>
#include <stdexcept>


namespace optim {

static void check_option(const char* what, float v) {
    if (!std::isfinite(v) || v < 0.0f)
        throw std::invalid_argument(std::string("SGD: ") + what + " must be finite and >= 0, got " + std::to_string(v));
}

SGD::SGD(std::vector<Tensor> params, SGDOptions opt) : Optimizer(std::move(params), opt.lr), opt_(opt) {
    check_option("momentum", opt.momentum);
    check_option("weight_decay", opt.weight_decay);
    if (opt.nesterov && opt.momentum == 0.0f)
        throw std::invalid_argument("SGD: nesterov = true needs momentum > 0");
    if (opt.momentum != 0.0f) momentum_slot_ = add_state("momentum_buffer");
}

// For each parameter p with gradient g (torch.optim.SGD, dampening 0):
//   g = g + lambda * p                   weight decay (L2 penalty lambda/2 |p|^2)
//   b = mu * b + g                       momentum buffer; b starts at 0, so the first b is g
//   g = nesterov ? g + mu * b : b
//   p = p - lr * g
void SGD::step() {
    begin_step();
    const float lr = lr_, mu = opt_.momentum, wd = opt_.weight_decay;
    const bool nesterov = opt_.nesterov;
    for (size_t i = 0; i < params_.size(); i++) {
        const float* g = params_[i].grad_data();
        if (!g) continue;                                // unused in the forward pass
        param_steps_[i]++;
        float* p = params_[i].data();
        float* b = momentum_slot_ >= 0 ? state(momentum_slot_, i) : nullptr;
        for (int64_t j = 0; j < params_[i].numel(); j++) {
            float d = g[j] + wd * p[j];
            if (b) {
                b[j] = mu * b[j] + d;
                d = nesterov ? d + mu * b[j] : b[j];
            }
            p[j] -= lr * d;
        }
    }
}

std::map<std::string, std::string> SGD::hyperparameters() const {
    return {{"momentum", float_text(opt_.momentum)},
            {"weight_decay", float_text(opt_.weight_decay)},
            {"nesterov", opt_.nesterov ? "true" : "false"}};
}

}  // namespace optim
