// Stochastic gradient descent with optional momentum, Nesterov momentum and L2 weight decay,
// with the semantics of torch.optim.SGD (dampening 0).
//
//   optim::SGD opt(model->parameters(), {.lr = 0.1f, .momentum = 0.9f});
#pragma once
#include "optim/optimizer.h"

namespace optim {

struct SGDOptions {
    float lr = 0.01f;            // step size
    float momentum = 0.0f;       // mu: 0 = plain SGD; the buffer b = mu*b + g
    float weight_decay = 0.0f;   // lambda: L2 penalty, lambda * p is added to the gradient
    bool nesterov = false;       // step along g + mu*b instead of b (needs momentum > 0)
};

class SGD : public Optimizer {
public:
    // Throws std::invalid_argument on a bad option (negative or non-finite values, nesterov
    // without momentum) as well as on the cases Optimizer rejects.
    SGD(std::vector<Tensor> params, SGDOptions opt = {});
    void step() override;
    std::string name() const override { return "SGD"; }
    std::map<std::string, std::string> hyperparameters() const override;
    const SGDOptions& options() const { return opt_; }

private:
    SGDOptions opt_;
    int momentum_slot_ = -1;     // the "momentum_buffer" state, only when momentum != 0
};

}  // namespace optim
