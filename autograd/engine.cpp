// The backward engine: record the graph as ops run, then walk it in reverse.
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "autograd/anomaly.h"
#include "autograd/fused_ops.h"
#include "autograd/tensor.h"

namespace autograd {

// ---------------------------------------------------------------- modes

// Three switches, each an RAII guard over a thread_local flag: grad mode (is the graph
// recorded?), the fused kernels (does each layer of nn/ run its kernel or its plain form?) and
// anomaly detection (is every value checked for NaN and Inf?).
static thread_local bool g_grad_enabled = true;
static thread_local bool g_fused_kernels = true;
static thread_local bool g_anomaly = false;

bool is_grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }

bool fused_kernels_enabled() { return g_fused_kernels; }
FusedKernelsGuard::FusedKernelsGuard(bool enabled) : prev_(g_fused_kernels) { g_fused_kernels = enabled; }
FusedKernelsGuard::~FusedKernelsGuard() { g_fused_kernels = prev_; }

bool anomaly_mode_enabled() { return g_anomaly; }
DetectAnomalyGuard::DetectAnomalyGuard() : prev_(g_anomaly) { g_anomaly = true; }
DetectAnomalyGuard::~DetectAnomalyGuard() { g_anomaly = prev_; }

// ---------------------------------------------------------------- recording

void record(Tensor& out, std::vector<Tensor> inputs, const char* op, std::function<void(Node&)> fn) {
    Node& n = out.node();
    n.op = op;
    if (anomaly_mode_enabled()) check_finite(n, op, "forward", inputs);
    if (!g_grad_enabled) return;
    bool any = false;
    for (const Tensor& t : inputs) any = any || t.requires_grad();
    if (!any) return;
    n.requires_grad = true;
    for (const Tensor& t : inputs) n.parents.push_back(t.node_ptr());
    n.backward = std::move(fn);
}

// ---------------------------------------------------------------- backward

// Post-order depth-first search with an explicit stack (a recursive one overflows on deep graphs,
// e.g. a chain of 100,000 ops). Returns nodes so that every node comes after all its inputs.
static std::vector<std::shared_ptr<Node>> topo_order(const std::shared_ptr<Node>& root) {
    std::vector<std::shared_ptr<Node>> order;
    std::unordered_set<Node*> visited;
    std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack;   // node, index of the next parent to visit
    stack.push_back({root, 0});
    visited.insert(root.get());
    while (!stack.empty()) {
        auto& [node, next] = stack.back();
        if (node->released)
            throw std::logic_error(
                std::string("backward: the graph through '") + node->op +
                "' was already freed by an earlier backward(); pass retain_graph = true to the "
                "first backward() to backpropagate through the same graph twice");
        if (next < node->parents.size()) {
            const std::shared_ptr<Node>& p = node->parents[next++];
            if (p->requires_grad && !visited.count(p.get())) {
                visited.insert(p.get());
                stack.push_back({p, 0});   // (node and next are not used after this)
            }
        } else {
            order.push_back(node);
            stack.pop_back();
        }
    }
    return order;
}

// Free a node's closure and parents (the graph above it), and remember that they are gone.
static void release_graph(Node& n) {
    n.backward = nullptr;
    n.parents.clear();
    n.released = true;
}

static void run_backward(Node& root, const float* seed, bool retain_graph) {
    if (!root.requires_grad)
        throw std::logic_error("backward: this tensor does not require grad (no input of the ops that made it "
                               "requires grad, or it was made under NoGradGuard)");
    std::shared_ptr<Node> root_ptr(std::shared_ptr<Node>{}, &root);   // non-owning alias for the walk
    std::vector<std::shared_ptr<Node>> order = topo_order(root_ptr);
    // Gradients flowing through non-leaf nodes belong to this call only. A grad kept from an
    // earlier call (retain_grad) is set aside and added back at the end, so it is not sent twice.
    std::vector<std::pair<std::shared_ptr<Node>, FloatBuffer>> kept;
    for (auto& n : order)
        if (n->backward && !n->grad.empty()) kept.emplace_back(n, std::move(n->grad)), n->grad.clear();
    float* g = root.grad_buffer();
    for (int64_t i = 0; i < root.numel(); i++) g[i] += seed[i];
    const bool anomaly = anomaly_mode_enabled();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        Node& n = **it;
        if (!n.backward) continue;                      // a leaf: its grad is the result
        if (!n.grad.empty()) {                          // else nothing flowed here
            n.backward(n);
            if (anomaly) check_parent_grads_finite(n);
        }
        if (!retain_graph) release_graph(n);               // free the graph as we go
        if (!n.retains_grad) FloatBuffer().swap(n.grad);   // non-leaf grads are temporary
        // Drop the walk's own reference too: a value that no op still to run needs is freed now
        // (its memory goes back to the heap and serves the gradients still to come),
        // rather than all at once when backward() returns.
        if (!retain_graph) it->reset();
    }
    for (auto& [n, old] : kept)
        if (n->retains_grad) {
            float* dst = n->grad_buffer();
            for (size_t i = 0; i < old.size(); i++) dst[i] += old[i];
        }
}

void Tensor::backward(bool retain_graph) const {
    if (numel() != 1)
        throw std::logic_error("backward: called without a gradient on a tensor of shape " + shape_str(shape()) +
                               "; backward() needs a one-element tensor (e.g. a loss), or pass the gradient "
                               "of the same shape: t.backward(grad)");
    const float one = 1.0f;
    run_backward(node(), &one, retain_graph);
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
    if (grad.shape() != shape())
        throw std::invalid_argument("backward: gradient of shape " + shape_str(grad.shape()) +
                                    " does not match the tensor's shape " + shape_str(shape()));
    run_backward(node(), grad.data(), retain_graph);
}

}  // namespace autograd
