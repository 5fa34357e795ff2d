// GradOut: where a kernel's backward writes the gradient of one of its inputs.
//
// In the plain path every backward adds (+=) into its inputs' gradients: a tensor can feed
// several ops, and each adds its share. The fused kernels that write *every* element of a
// gradient (linear's dx and dW, layer_norm's dx, ...) may instead store (=) into a gradient that
// does not exist yet, and so skip the pass that would first fill a new buffer with zeros.
// Whether that is allowed is decided once per input, by detail::parent_grad_to_write
// (autograd/detail.h), and travels to the kernel in this struct.
#pragma once

namespace autograd::kernels {

struct GradOut {
    float* data = nullptr;   // nullptr: this input needs no gradient, skip the work
    bool add = true;         // true: data[i] += g;  false: data[i] = g (data holds garbage)
};

}  // namespace autograd::kernels
