#include "autograd/tensor.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "autograd/random.h"

namespace autograd {

// ---------------------------------------------------------------- shapes

std::string shape_str(const Shape& s) {
    std::string out = "(";
    for (size_t i = 0; i < s.size(); i++) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + (s.size() == 1 ? ",)" : ")");
}

int64_t shape_numel(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) {
        if (d < 0) throw std::invalid_argument("negative dimension in shape " + shape_str(s));
        if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
            throw std::invalid_argument("shape " + shape_str(s) + " has too many elements");
        n *= d;
    }
    return n;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
    // Align from the right; each pair of dims must be equal or one of them 1.
    const size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (size_t i = 0; i < n; i++) {
        const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
        const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
        if (da != db && da != 1 && db != 1)
            throw std::invalid_argument(std::string(op) + ": shapes " + shape_str(a) + " and " +
                                        shape_str(b) + " cannot be broadcast together (dim " +
                                        std::to_string(i) + ": " + std::to_string(da) + " vs " +
                                        std::to_string(db) + ")");
        out[i] = da == 1 ? db : da;
    }
    return out;
}

int normalize_dim(int64_t dim, int ndim, const char* op) {
    const int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
    if (dim < lo || dim > hi)
        throw std::out_of_range(std::string(op) + ": dim " + std::to_string(dim) +
                                " is out of range for a tensor with " + std::to_string(ndim) +
                                " dims (expected " + std::to_string(lo) + " to " + std::to_string(hi) + ")");
    return static_cast<int>(dim < 0 ? dim + std::max(ndim, 1) : dim);
}

// ---------------------------------------------------------------- nodes

static std::atomic<int64_t> g_live_nodes{0};

Node::Node() { g_live_nodes++; }
Node::~Node() {
    g_live_nodes--;
    // Free a long chain iteratively: the default destructor would free parents recursively and
    // overflow the stack on a graph 100,000 ops deep. Parents that only we own are unlinked here.
    std::vector<std::shared_ptr<Node>> stack = std::move(parents);
    while (!stack.empty()) {
        std::shared_ptr<Node> p = std::move(stack.back());
        stack.pop_back();
        if (p.use_count() == 1) {
            for (auto& q : p->parents) stack.push_back(std::move(q));
            p->parents.clear();
        }
    }
}
float* Node::grad_buffer() {
    if (grad.empty()) grad.assign(data->size(), 0.0f);
    return grad.data();
}

float* Node::parent_grad(size_t i) {
    Node& p = *parents[i];
    return p.requires_grad ? p.grad_buffer() : nullptr;
}

namespace test_hooks {
int64_t live_node_count() { return g_live_nodes.load(); }   // tests count leaks with it (tests/hooks.h)
}  // namespace test_hooks

static std::shared_ptr<Node> make_node(const Shape& shape) {
    auto n = std::make_shared<Node>();
    n->shape = shape;
    n->data = std::make_shared<FloatBuffer>(static_cast<size_t>(shape_numel(shape)));   // uninitialized
    return n;
}

Node& Tensor::node() const {
    if (!node_) throw std::logic_error("use of an undefined Tensor (default-constructed, holds no values)");
    return *node_;
}

// ---------------------------------------------------------------- creation

Tensor Tensor::empty(const Shape& shape) { return Tensor(make_node(shape)); }
Tensor Tensor::zeros(const Shape& shape) { return full(shape, 0.0f); }
Tensor Tensor::ones(const Shape& shape) { return full(shape, 1.0f); }

Tensor Tensor::full(const Shape& shape, float value) {
    Tensor t = empty(shape);
    std::fill(t.node_->data->begin(), t.node_->data->end(), value);
    return t;
}

Tensor Tensor::from_vector(std::vector<float> values, const Shape& shape) {
    const int64_t n = shape_numel(shape);
    if (static_cast<int64_t>(values.size()) != n)
        throw std::invalid_argument("from_vector: " + std::to_string(values.size()) +
                                    " values cannot fill shape " + shape_str(shape) + " (" +
                                    std::to_string(n) + " elements)");
    auto node = std::make_shared<Node>();
    node->shape = shape;
    node->data = std::make_shared<FloatBuffer>(values.begin(), values.end());
    return Tensor(node);
}

Tensor Tensor::scalar(float value) { return full({}, value); }

Tensor Tensor::arange(float end) { return arange(0.0f, end, 1.0f); }

Tensor Tensor::arange(float start, float end, float step) {
    if (step == 0.0f || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
        throw std::invalid_argument("arange: needs finite start/end and a nonzero step");
    const double n = std::ceil((static_cast<double>(end) - start) / step);
    Tensor t = empty({n > 0 ? static_cast<int64_t>(n) : 0});
    for (int64_t i = 0; i < t.numel(); i++) t.data()[i] = static_cast<float>(start + i * static_cast<double>(step));
    return t;
}

Tensor Tensor::rand(const Shape& shape) { return uniform(shape, 0.0f, 1.0f); }

Tensor Tensor::uniform(const Shape& shape, float lo, float hi) {
    Tensor t = empty(shape);
    Rng& g = default_rng();
    for (float& v : *t.node_->data) v = g.uniform(lo, hi);   // serial: the stream order is fixed
    return t;
}

Tensor Tensor::randn(const Shape& shape) {
    Tensor t = empty(shape);
    Rng& g = default_rng();
    for (float& v : *t.node_->data) v = g.normal();
    return t;
}

// ---------------------------------------------------------------- inspection

int64_t Tensor::size(int64_t d) const { return shape()[normalize_dim(d, dim(), "size")]; }

float Tensor::item() const {
    if (numel() != 1)
        throw std::invalid_argument("item: needs a tensor with one element, got shape " + shape_str(shape()));
    return data()[0];
}

static int64_t flat_index(const Shape& shape, const std::vector<int64_t>& index) {
    if (index.size() != shape.size())
        throw std::out_of_range("at: index has " + std::to_string(index.size()) +
                                " coordinates for a tensor of shape " + shape_str(shape));
    int64_t flat = 0;
    for (size_t i = 0; i < shape.size(); i++) {
        if (index[i] < 0 || index[i] >= shape[i])
            throw std::out_of_range("at: index " + std::to_string(index[i]) + " is out of range for dim " +
                                    std::to_string(i) + " of size " + std::to_string(shape[i]) +
                                    " (shape " + shape_str(shape) + ")");
        flat = flat * shape[i] + index[i];
    }
    return flat;
}

float& Tensor::at(const std::vector<int64_t>& index) { return data()[flat_index(shape(), index)]; }
float Tensor::at(const std::vector<int64_t>& index) const { return data()[flat_index(shape(), index)]; }

// ---------------------------------------------------------------- autograd handles

Tensor& Tensor::requires_grad_(bool on) {
    if (!is_leaf())
        throw std::logic_error(std::string("requires_grad_: only leaf tensors can change requires_grad; this one was made by '") +
                               op() + "' (use detach() first)");
    node().requires_grad = on;
    return *this;
}

Tensor& Tensor::retain_grad() { node().retains_grad = true; return *this; }

Tensor Tensor::grad() const {
    if (!has_grad()) return Tensor();
    auto n = std::make_shared<Node>();
    n->shape = shape();
    n->data = std::make_shared<FloatBuffer>(node().grad);   // a copy
    return Tensor(n);
}

void Tensor::zero_grad() { FloatBuffer().swap(node().grad); }

Tensor Tensor::detach() const {
    auto n = std::make_shared<Node>();
    n->shape = shape();
    n->data = node().data;          // shares the values; no parents, no closure
    return Tensor(n);
}

// ---------------------------------------------------------------- printing

// PyTorch-style repr: nested brackets, at most 3 leading and 3 trailing entries per dim when
// the tensor has more than 1000 elements.
static void print_rec(std::ostream& os, const Tensor& t, int d, int64_t offset, bool summarize, int indent) {
    const Shape& s = t.shape();
    const int64_t n = s[d];
    int64_t stride = 1;
    for (size_t i = d + 1; i < s.size(); i++) stride *= s[i];
    os << '[';
    for (int64_t i = 0; i < n; i++) {
        if (summarize && n > 6 && i == 3) {
            os << (d + 1 == t.dim() ? "..., " : "...,\n" + std::string(indent + 1, ' '));
            i = n - 3;
        }
        if (d + 1 == t.dim()) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.4f", t.data()[offset + i]);
            os << buf;
        } else {
            print_rec(os, t, d + 1, offset + i * stride, summarize, indent + 1);
        }
        if (i + 1 < n) os << (d + 1 == t.dim() ? ", " : ",\n" + std::string(indent + 1, ' '));
    }
    os << ']';
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
    if (!t.defined()) return os << "tensor(undefined)";
    os << "tensor(";
    if (t.dim() == 0) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.4f", t.data()[0]);
        os << buf;
    } else {
        print_rec(os, t, 0, 0, t.numel() > 1000, 7);
    }
    os << ", shape=" << shape_str(t.shape());
    if (t.requires_grad()) os << (t.is_leaf() ? ", requires_grad=true" : std::string(", grad_fn=") + t.op());
    return os << ')';
}

std::ostream& operator<<(std::ostream& os, const Tokens& t) {
    os << "tokens([";
    for (int64_t i = 0; i < t.numel(); i++) {
        if (t.numel() > 1000 && i == 3) { os << "..., "; i = t.numel() - 3; }
        os << t.data[i] << (i + 1 < t.numel() ? ", " : "");
    }
    return os << "], shape=" << shape_str(t.shape) << ')';
}

}  // namespace autograd
