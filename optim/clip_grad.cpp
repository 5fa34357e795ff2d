#include "optim/clip_grad.h"

#include <cmath>
#include <stdexcept>

namespace optim {

float clip_grad_norm(const std::vector<Tensor>& params, float max_norm) {
    if (!(max_norm >= 0.0f))
        throw std::invalid_argument("clip_grad_norm: max_norm must be >= 0, got " + std::to_string(max_norm));
    // 1) the global L2 norm, in double and in a fixed order
    double sum_sq = 0.0;
    for (Tensor t : params) {   // a handle: its copy shares the tensor
        const float* g = t.grad_data();   // nullptr: no gradient
        for (int64_t i = 0; g && i < t.numel(); i++) sum_sq += static_cast<double>(g[i]) * g[i];
    }
    const double norm = std::sqrt(sum_sq);
    // 2) scale every gradient by the same factor, only if it is too long (and finite)
    if (std::isfinite(norm) && norm > max_norm) {
        const float scale = static_cast<float>(max_norm / (norm + 1e-6));
        for (Tensor t : params) {
            float* g = t.grad_data();
            for (int64_t i = 0; g && i < t.numel(); i++) g[i] *= scale;
        }
    }
    return static_cast<float>(norm);
}

}  // namespace optim
