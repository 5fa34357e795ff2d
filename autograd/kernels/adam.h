// Adam's update of a whole model at once: optim/adam.cpp's loop over every parameter's elements,
// in one pass split between the threads, with the arrays' memory asked for ahead of the loop.
//
// The pass is bound by memory, not by its arithmetic: per element it reads g, p, m, v and writes
// p, m, v, and m and v have left the cache since the last step. So each thread takes its block of
// every parameter in turn (one parallel region for them all: most parameters of a small model are
// too small for a team of their own), in chunks, asking for the memory ahead of each chunk
// (prefetch.h). The arithmetic of each element is optim/adam.cpp's plain loop, line for line;
// tests/test_optim.cpp holds the two equal, bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>

namespace autograd::kernels {

// One parameter's arrays, n floats each, and its bias corrections 1 - beta^t for its step t.
struct AdamArrays {
    const float* g;
    float *p, *m, *v;
    int64_t n;
    float bias_correction1, bias_correction2;
};

// The update's constants: lr, betas, eps; l2 is added to g as l2 * p (Adam's weight decay),
// decay multiplies p (AdamW's: 1 - lr * weight_decay); 0 and 1 when unused.
struct AdamConstants {
    float lr, beta1, beta2, eps, l2, decay;
};

void adam_update(const AdamArrays* params, size_t count, const AdamConstants& c);

}  // namespace autograd::kernels
