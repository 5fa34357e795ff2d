// Tensor: a float32, row-major, contiguous n-dimensional array that remembers how it was made.
//
// A Tensor is a cheap handle to a Node. The Node holds the values, the gradient, and, if the
// tensor came out of an op while gradients were being recorded, the op's inputs (parents) and
// the closure that pushes the gradient back into them. Children own their parents, never the
// reverse, so a graph frees itself when the last handle to its output goes away.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/kernels/float_buffer.h"

namespace autograd {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);              // "(2, 3, 4)"
int64_t shape_numel(const Shape& s);                 // product of dims, checked for overflow
// Shape of a ⊙ b under NumPy broadcasting; throws naming `op` and both shapes if they don't fit.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Map a possibly negative dim (-1 = last) into [0, ndim); throws naming `op` if out of range.
int normalize_dim(int64_t dim, int ndim, const char* op);

// Tensor storage: a std::vector<float> whose new elements are left uninitialized
// (autograd/kernels/float_buffer.h).
using FloatBuffer = kernels::FloatBuffer;

// One value in the graph.
struct Node {
    Shape shape;
    std::shared_ptr<FloatBuffer> data;           // shared, so reshape/detach need no copy
    FloatBuffer grad;                            // empty until the first gradient arrives
    bool requires_grad = false;
    bool retains_grad = false;                   // keep grad of a non-leaf after backward
    std::vector<std::shared_ptr<Node>> parents;  // inputs of the op that made this value
    std::function<void(Node& self)> backward;    // reads self.grad, adds into parents' grads
    const char* op = "leaf";                     // for errors, printing and graph dumps
    bool released = false;                       // a backward() freed the graph above this node

    Node();
    ~Node();                                     // frees a long chain of parents without recursion
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;

    int64_t numel() const { return static_cast<int64_t>(data->size()); }
    bool is_leaf() const { return !backward && !released; }
    // Zero-filled gradient buffer, allocated on first use (grads always accumulate with +=).
    float* grad_buffer();
    // Parent i's gradient buffer, or nullptr if that parent needs no gradient (skip the work).
    float* parent_grad(size_t i);
    const float* parent_data(size_t i) const { return parents[i]->data->data(); }
};

class Tensor {
public:
    Tensor() = default;                                 // undefined: holds no node
    explicit Tensor(std::shared_ptr<Node> node) : node_(std::move(node)) {}

    // ---- creation ----
    static Tensor empty(const Shape& shape);            // uninitialized values
    static Tensor zeros(const Shape& shape);
    static Tensor ones(const Shape& shape);
    static Tensor full(const Shape& shape, float value);
    static Tensor from_vector(std::vector<float> values, const Shape& shape);
    static Tensor scalar(float value);                  // shape ()
    static Tensor arange(float end);                    // 0, 1, ..., ceil(end)-1
    static Tensor arange(float start, float end, float step = 1.0f);
    static Tensor rand(const Shape& shape);             // uniform [0, 1), default generator
    static Tensor randn(const Shape& shape);            // standard normal
    static Tensor uniform(const Shape& shape, float lo, float hi);

    // ---- inspection ----
    bool defined() const { return node_ != nullptr; }
    const Shape& shape() const { return node().shape; }
    int dim() const { return static_cast<int>(node().shape.size()); }
    int64_t size(int64_t dim) const;                    // negative dims count from the end
    int64_t numel() const { return node().numel(); }
    float* data() { return node().data->data(); }
    const float* data() const { return node().data->data(); }
    std::vector<float> to_vector() const { return {node().data->begin(), node().data->end()}; }
    float item() const;                                 // the value of a one-element tensor
    float& at(const std::vector<int64_t>& index);      // bounds-checked element access
    float at(const std::vector<int64_t>& index) const;
    const char* op() const { return node().op; }

    // ---- autograd ----
    bool requires_grad() const { return node().requires_grad; }
    Tensor& requires_grad_(bool on = true);             // leaves only
    bool is_leaf() const { return node().is_leaf(); }
    Tensor& retain_grad();                              // keep this non-leaf's grad
    bool has_grad() const { return !node().grad.empty(); }
    Tensor grad() const;                                // a copy; undefined if no grad yet
    float* grad_data() { return has_grad() ? node().grad.data() : nullptr; }
    void zero_grad();                                   // drop the accumulated gradient
    // backward() on a scalar seeds d(self)/d(self) = 1; otherwise pass the gradient of some
    // scalar w.r.t. this tensor. retain_graph keeps the graph for another backward.
    void backward(bool retain_graph = false) const;
    void backward(const Tensor& grad, bool retain_graph = false) const;
    Tensor detach() const;                              // same values, no history

    // ---- shape (see ops.h for the full list) ----
    Tensor reshape(const Shape& shape) const;
    Tensor transpose(int64_t d0, int64_t d1) const;

    Node& node() const;
    const std::shared_ptr<Node>& node_ptr() const { return node_; }

private:
    std::shared_ptr<Node> node_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// ---- grad mode ----
bool is_grad_enabled();
// While alive, ops record no graph (evaluation, optimizer updates). RAII over a thread_local flag.
class NoGradGuard {
public:
    NoGradGuard();
    ~NoGradGuard();
    NoGradGuard(const NoGradGuard&) = delete;
    NoGradGuard& operator=(const NoGradGuard&) = delete;
private:
    bool prev_;
};

// Attach the backward closure `fn` to `out`, made by `op` from `inputs` — but only when grad
// mode is on and some input requires a grad; otherwise `out` stays a plain value.
void record(Tensor& out, std::vector<Tensor> inputs, const char* op, std::function<void(Node&)> fn);

// ---- integer tensors: token ids and masks carry no gradient ----
template <typename T>
struct IntArray {
    Shape shape;
    std::vector<T> data;
    IntArray() = default;
    // Filled with one value; a named function, so IntArray({5}, {1}) cannot mean "shape (5,), fill 1"
    static IntArray full(const Shape& s, T fill) {
        IntArray a;
        a.shape = s;
        a.data.assign(static_cast<size_t>(shape_numel(s)), fill);
        return a;
    }
    IntArray(std::vector<T> values, const Shape& s) : shape(s), data(std::move(values)) {
        if (static_cast<int64_t>(data.size()) != shape_numel(shape))
            throw std::invalid_argument("IntArray: " + std::to_string(data.size()) +
                                        " values do not fill shape " + shape_str(shape));
    }
    int64_t numel() const { return static_cast<int64_t>(data.size()); }
    int dim() const { return static_cast<int>(shape.size()); }
    int64_t size(int64_t d) const { return shape[normalize_dim(d, dim(), "size")]; }
    T& operator[](int64_t i) { return data[static_cast<size_t>(i)]; }
    T operator[](int64_t i) const { return data[static_cast<size_t>(i)]; }
};
using Tokens = IntArray<int32_t>;   // token ids: embedding inputs, targets
using Mask = IntArray<uint8_t>;     // 1 = true; attention masks use 1 = "may attend"

std::ostream& operator<<(std::ostream& os, const Tokens& t);

}  // namespace autograd
