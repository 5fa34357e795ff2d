// GradOut: where a kernel's backward writes the gradient of one of its inputs.
//
// In the plain path every backward adds (+=) into its inputs' gradients: a tensor can feed
// several ops, and each adds its share. A fused kernel that writes *every* element of a gradient
// (linear's dx and dW, layer_norm's dx, ...) may instead store (=) into a gradient that does not
// exist yet, and so skip the pass that would first fill a new buffer with zeros. The autograd op
// around the kernel (autograd/fused_ops.cpp) decides that once per input and hands it down here.
// When two inputs are one tensor (linear(w, w, b)), the first is stored and the second added to
// it: a kernel writes such gradients one after the other, each completely, in the order its
// header gives.
#pragma once

namespace autograd::kernels {

struct GradOut {
    float* data = nullptr;   // nullptr: this input needs no gradient, skip the work
    bool add = true;         // true: data[i] += g;  false: data[i] = g (data holds garbage)
};

}  // namespace autograd::kernels
