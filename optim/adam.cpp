#include "optim/adam.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "autograd/fused_ops.h"

namespace optim {

Adam::Adam(std::vector<Tensor> params, AdamOptions opt) : Adam(std::move(params), opt, false) {}

Adam::Adam(std::vector<Tensor> params, AdamOptions opt, bool decoupled)
    : Optimizer(std::move(params), opt.lr), opt_(opt), decoupled_(decoupled) {
    const std::string who = decoupled ? "AdamW: " : "Adam: ";
    auto check_beta = [&](const char* what, float b) {
        if (!(b >= 0.0f && b < 1.0f))                  // also rejects NaN
            throw std::invalid_argument(who + what + " must be in [0, 1), got " + std::to_string(b));
    };
    auto check_nonneg = [&](const char* what, float v) {
        if (!std::isfinite(v) || v < 0.0f)
            throw std::invalid_argument(who + what + " must be finite and >= 0, got " + std::to_string(v));
    };
    check_beta("beta1", opt.beta1);
    check_beta("beta2", opt.beta2);
    check_nonneg("eps", opt.eps);
    check_nonneg("weight_decay", opt.weight_decay);
    m_state_ = add_state("m");
    v_state_ = add_state("v");
}

Adam::BiasCorrection Adam::next_step_of(size_t i) {
    const double t = static_cast<double>(++param_steps_[i]);
    return {static_cast<float>(1.0 - std::pow(static_cast<double>(opt_.beta1), t)),    // 1 - beta1^t
            static_cast<float>(1.0 - std::pow(static_cast<double>(opt_.beta2), t))};   // 1 - beta2^t
}

bool Adam::decays(size_t i) const { return !opt_.decay_matrices_only || params_[i].dim() >= 2; }

// For each parameter p with gradient g, on this parameter's t-th update (t = 1, 2, ...):
//   Adam:  g = g + lambda * p             L2 weight decay, goes through the adaptive scaling
//   AdamW: p = p * (1 - lr * lambda)      decoupled weight decay, applied to p directly
//   (either only for matrices when decay_matrices_only: a bias or a gain has no lambda)
//   m = beta1 * m + (1 - beta1) * g       first moment (running mean of g); m, v start at 0,
//   v = beta2 * v + (1 - beta2) * g^2     second moment (running mean of g^2)
//   m_hat = m / (1 - beta1^t)             bias correction: undo the pull towards the 0 start
//   v_hat = v / (1 - beta2^t)
//   p = p - lr * m_hat / (sqrt(v_hat) + eps)
void Adam::step() {
    begin_step();
    const float lr = lr_, b1 = opt_.beta1, b2 = opt_.beta2, eps = opt_.eps;
    const float l2 = decoupled_ ? 0.0f : opt_.weight_decay;                  // added to g
    const float decay = decoupled_ ? 1.0f - lr * opt_.weight_decay : 1.0f;   // multiplies p
    if (autograd::fused_kernels_enabled()) return fused_step(l2, decay);      // fused: this loop, every parameter in one pass; the same bits
    for (size_t i = 0; i < params_.size(); i++) {
        const float* g = params_[i].grad_data();
        if (!g) continue;                                 // unused in the forward pass
        const BiasCorrection bc = next_step_of(i);
        float *p = params_[i].data(), *m = state(m_state_, i), *v = state(v_state_, i);
        const float l2_i = decays(i) ? l2 : 0.0f, decay_i = decays(i) ? decay : 1.0f;
        for (int64_t j = 0; j < params_[i].numel(); j++) {
            const float gj = g[j] + l2_i * p[j];
            m[j] = b1 * m[j] + (1.0f - b1) * gj;
            v[j] = b2 * v[j] + (1.0f - b2) * gj * gj;
            const float m_hat = m[j] / bc.first, v_hat = v[j] / bc.second;
            p[j] = p[j] * decay_i - lr * m_hat / (std::sqrt(v_hat) + eps);
        }
    }
}

void Adam::fused_step(float l2, float decay) {
    std::vector<autograd::fused::AdamParam> decayed, kept;   // the arrays of every parameter with a gradient
    for (size_t i = 0; i < params_.size(); i++) {
        const float* g = params_[i].grad_data();
        if (!g) continue;
        const BiasCorrection bc = next_step_of(i);
        (decays(i) ? decayed : kept)
            .push_back({g, params_[i].data(), state(m_state_, i), state(v_state_, i), params_[i].numel(), bc.first, bc.second});
    }
    autograd::fused::adam_update(decayed, {lr_, opt_.beta1, opt_.beta2, opt_.eps, l2, decay});
    if (!kept.empty()) autograd::fused::adam_update(kept, {lr_, opt_.beta1, opt_.beta2, opt_.eps, 0.0f, 1.0f});
}

std::map<std::string, std::string> Adam::hyperparameters() const {
    return {{"beta1", float_text(opt_.beta1)},
            {"beta2", float_text(opt_.beta2)},
            {"eps", float_text(opt_.eps)},
            {"weight_decay", float_text(opt_.weight_decay)},
            {"decay_matrices_only", opt_.decay_matrices_only ? "true" : "false"}};
}

}  // namespace optim
