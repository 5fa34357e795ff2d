// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_ (the norm of all gradients
// together, not of each one), used to keep one bad batch from throwing the weights far away.
#pragma once
#include "optim/optimizer.h"

namespace optim {

// norm = sqrt(sum over every gradient element g^2), accumulated in double over `params` in list
// order (so the result does not depend on the thread count). Tensors without a gradient are
// skipped. If norm > max_norm, every gradient is multiplied by max_norm / (norm + 1e-6).
// Returns the norm before clipping. If the norm is not finite (an inf or NaN gradient), the
// gradients are left untouched and that inf/NaN is returned: check it and skip the step.
// Throws std::invalid_argument if max_norm is negative or NaN.
float clip_grad_norm(const std::vector<Tensor>& params, float max_norm);

}  // namespace optim
