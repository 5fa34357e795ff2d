// Adam (Kingma & Ba, 2015) with the semantics of torch.optim.Adam, and AdamW (Loshchilov & Hutter,
// 2019) with the semantics of torch.optim.AdamW. They differ only in weight decay: Adam adds the
// L2 term lambda * p to the gradient (so it is rescaled by the adaptive denominator), AdamW decays
// the weights directly, p *= 1 - lr * lambda, before the Adam update.
//
//   optim::Adam opt(model->parameters(), {.lr = 1.0f, .beta2 = 0.98f, .eps = 1e-9f});   // the paper's
//   optim::AdamW optw(model->parameters(), {.lr = 3e-4f, .weight_decay = 0.1f});
#pragma once
#include "optim/optimizer.h"

namespace optim {

struct AdamOptions {
    float lr = 1e-3f;            // step size
    float beta1 = 0.9f;          // decay of the first-moment (mean) estimate m, in [0, 1)
    float beta2 = 0.999f;        // decay of the second-moment estimate v, in [0, 1)
    float eps = 1e-8f;           // added to sqrt(v_hat) so the step stays bounded where v ~ 0
    float weight_decay = 0.0f;   // lambda: L2 in Adam, decoupled in AdamW
    bool decay_matrices_only = false;   // true: weight decay on the parameters of 2 dims or more only
                                        // (weights, embeddings), not on biases or LayerNorm's gain (GPT-2's rule)
};

class Adam : public Optimizer {
public:
    // Throws std::invalid_argument on a bad option (betas outside [0, 1), negative or non-finite
    // eps / weight_decay) as well as on the cases Optimizer rejects.
    Adam(std::vector<Tensor> params, AdamOptions opt = {});
    void step() override;
    std::string name() const override { return decoupled_ ? "AdamW" : "Adam"; }
    std::map<std::string, std::string> hyperparameters() const override;
    const AdamOptions& options() const { return opt_; }

protected:
    Adam(std::vector<Tensor> params, AdamOptions opt, bool decoupled);

private:
    // 1 - beta1^t and 1 - beta2^t for parameter i's next update, t = its updates so far + 1
    using BiasCorrection = std::pair<float, float>;
    BiasCorrection next_step_of(size_t i);
    bool decays(size_t i) const;              // does parameter i take weight decay?
    void fused_step(float l2, float decay);   // the same update, every parameter in one fused pass
    AdamOptions opt_;
    bool decoupled_;             // AdamW: weight decay applied to p, not added to the gradient
    int m_state_, v_state_;      // state buffers "m" and "v", shaped like each parameter
};

// The same fields with torch.optim.AdamW's default weight decay. A separate struct, so that
// AdamW(params, {.lr = 3e-4f}) keeps weight_decay = 0.01 (with AdamOptions it would silently be 0).
struct AdamWOptions {
    float lr = 1e-3f;
    float beta1 = 0.9f;
    float beta2 = 0.999f;
    float eps = 1e-8f;
    float weight_decay = 0.01f;  // lambda: p *= 1 - lr * lambda each step
    bool decay_matrices_only = false;   // true: only parameters of 2 dims or more decay
};

class AdamW : public Adam {
public:
    AdamW(std::vector<Tensor> params, AdamWOptions opt = {})
        : Adam(std::move(params), {opt.lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay, opt.decay_matrices_only},
               /*decoupled=*/true) {}
};

}  // namespace optim
