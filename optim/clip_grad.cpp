#include "optim/clip_grad.h"

#include <cmath>
#include <stdexcept>

namespace optim {

float clip_grad_norm(const std::vector<Tensor>& params, float max_norm) {
    if (!(max_norm >= 0.0f))
        throw std::invalid_argument("clip_grad_norm: max_norm must be >= 0, got " + std::to_string(max_norm));
    // 1) the global L2 norm, in double and in a fixed order
    double sum_sq = 0.0;
    for (const Tensor& t : params) {
        if (!t.has_grad()) continue;
        const autograd::FloatBuffer& g = t.node().grad;
        for (float x : g) sum_sq += static_cast<double>(x) * x;
    }
    const double norm = std::sqrt(sum_sq);
    // 2) scale every gradient by the same factor, only if it is too long (and finite)
    if (std::isfinite(norm) && norm > max_norm) {
        const float scale = static_cast<float>(max_norm / (norm + 1e-6));
        for (const Tensor& t : params) {
            if (!t.has_grad()) continue;
            for (float& x : t.node().grad) x *= scale;
        }
    }
    return static_cast<float>(norm);
}

}  // namespace optim
