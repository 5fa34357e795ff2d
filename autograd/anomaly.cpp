#include "autograd/anomaly.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/tensor.h"

namespace autograd {

// The switch itself, anomaly_mode_enabled() and DetectAnomalyGuard, is beside grad mode in engine.cpp.

// index of the first NaN/Inf, or -1
static int64_t first_non_finite(const float* x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!std::isfinite(x[i])) return i;
    return -1;
}

static std::string describe(float v) { return std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf"); }

// In the forward pass NaN is always an anomaly. An infinity is reported only where this op made it
// from finite inputs: -inf from masked_fill (masking scores) and the -inf log_softmax passes on from
// such a fully masked row are deliberate, not overflow.
void check_finite(const Node& out, const char* op, const char* phase, const std::vector<Tensor>& inputs) {
    const float* y = out.data->data();
    int64_t bad = -1;
    for (int64_t i = 0; i < out.numel() && bad < 0; i++)
        if (std::isnan(y[i])) bad = i;
    bool inputs_bad = false;
    std::string shapes;
    for (const Tensor& t : inputs) {
        shapes += (shapes.empty() ? "" : ", ") + shape_str(t.shape());
        inputs_bad = inputs_bad || first_non_finite(t.data(), t.numel()) >= 0;
    }
    if (bad < 0 && !inputs_bad && std::string(op) != "masked_fill") bad = first_non_finite(y, out.numel());
    if (bad < 0) return;
    throw std::runtime_error(std::string("anomaly: ") + phase + " of '" + op + "' produced " + describe(y[bad]) +
                             " at flat index " + std::to_string(bad) + " of its output " + shape_str(out.shape) +
                             " (inputs: " + shapes + ")" + (inputs_bad ? "; an input already held NaN/Inf" : ""));
}

void check_parent_grads_finite(const Node& node) {
    for (size_t i = 0; i < node.parents.size(); i++) {
        const Node& p = *node.parents[i];
        if (p.grad.empty()) continue;
        const int64_t bad = first_non_finite(p.grad.data(), static_cast<int64_t>(p.grad.size()));
        if (bad < 0) continue;
        throw std::runtime_error(std::string("anomaly: backward of '") + node.op + "' (output " +
                                 shape_str(node.shape) + ") produced " + describe(p.grad[bad]) +
                                 " in the gradient of its input " + std::to_string(i) + " " +
                                 shape_str(p.shape) + " at flat index " + std::to_string(bad));
    }
}

}  // namespace autograd
