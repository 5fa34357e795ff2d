// Anomaly detection: find the first op whose output or gradient is NaN or Inf.
// Off by default (it scans every value); turn it on around a suspicious step:
//     { autograd::DetectAnomalyGuard guard; loss = model.forward(...); loss.backward(); }
#pragma once
#include <vector>

namespace autograd {

struct Node;
class Tensor;

bool anomaly_mode_enabled();

class DetectAnomalyGuard {
public:
    DetectAnomalyGuard();
    ~DetectAnomalyGuard();
    DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
    DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;
private:
    bool prev_;
};

// Throw std::runtime_error naming the op, its input shapes and the phase if `out` holds NaN/Inf.
// Inputs that already held NaN/Inf are not this op's fault and are reported as such.
void check_finite(const Node& out, const char* op, const char* phase, const std::vector<Tensor>& inputs);
// After node.backward ran: throw if it wrote NaN/Inf into a parent's gradient.
void check_parent_grads_finite(const Node& node);

}  // namespace autograd
