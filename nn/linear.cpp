#include "nn/linear.h"

#include <stdexcept>

#include "nn/init.h"

namespace nn {

using autograd::gemm;
using autograd::Node;
using autograd::shape_str;

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act) {
    if (weight.dim() != 2 || x.dim() < 1 || x.size(-1) != weight.size(1))
        throw std::invalid_argument("linear: input " + shape_str(x.shape()) + " does not match weight " +
                                    shape_str(weight.shape()) + " (expected input (..., " +
                                    (weight.dim() == 2 ? std::to_string(weight.size(1)) : "?") + "))");
    const int64_t in = weight.size(1), out = weight.size(0), rows = x.numel() / std::max<int64_t>(in, 1);
    if (bias.defined() && bias.shape() != Shape{out})
        throw std::invalid_argument("linear: bias " + shape_str(bias.shape()) + " does not match weight " + shape_str(weight.shape()));
    Shape ys = x.shape();
    ys.back() = out;
    Tensor y = Tensor::empty(ys);                                                   // (..., out)
    float* py = y.data();
    gemm(false, true, rows, out, in, x.data(), in, weight.data(), in, py, out, false);   // x W^T
    const float* pb = bias.defined() ? bias.data() : nullptr;
    #pragma omp parallel for if (rows * out > (1 << 16))
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < out; j++) {
            float v = py[r * out + j] + (pb ? pb[j] : 0.0f);
            py[r * out + j] = act == Activation::relu && v < 0.0f ? 0.0f : v;
        }

    // backward: with g = dy masked by the ReLU (where y == 0 the unit was off),
    //   dx = g W  (rows, in),   dW += g^T x  (out, in),   db += sum over rows of g
    std::vector<Tensor> inputs = {x, weight};
    if (bias.defined()) inputs.push_back(bias);
    autograd::record(y, inputs, act == Activation::relu ? "linear_relu" : "linear", [rows, in, out, act](Node& self) {
        const float *px = self.parent_data(0), *pw = self.parent_data(1), *py = self.data->data();
        std::vector<float> masked;
        const float* g = self.grad.data();
        if (act == Activation::relu) {
            masked.resize(rows * out);
            #pragma omp parallel for if (rows * out > (1 << 16))
            for (int64_t i = 0; i < rows * out; i++) masked[i] = py[i] == 0.0f ? 0.0f : g[i];
            g = masked.data();
        }
        if (float* dx = self.parent_grad(0)) gemm(false, false, rows, in, out, g, out, pw, in, dx, in, true);
        if (float* dw = self.parent_grad(1)) gemm(true, false, out, in, rows, g, out, px, in, dw, in, true);
        if (self.parents.size() > 2)
            if (float* db = self.parent_grad(2)) {
                #pragma omp parallel for if (rows * out > (1 << 16))
                for (int64_t j = 0; j < out; j++) {   // each thread owns whole columns: fixed order
                    float s = 0.0f;
                    for (int64_t r = 0; r < rows; r++) s += g[r * out + j];
                    db[j] += s;
                }
            }
    });
    return y;
}

Linear::Linear(int64_t in_features, int64_t out_features, LinearOptions opt) {
    if (in_features <= 0 || out_features <= 0)
        throw std::invalid_argument("Linear: features must be positive, got in=" + std::to_string(in_features) +
                                    " out=" + std::to_string(out_features));
    weight = register_parameter("weight", Tensor::empty({out_features, in_features}));
    init::xavier_uniform_(weight);
    if (opt.bias) bias = register_parameter("bias", Tensor::zeros({out_features}));
}

}  // namespace nn
