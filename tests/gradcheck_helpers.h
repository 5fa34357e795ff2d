// Shared by the test files that gradcheck ops: a random leaf that requires grad, and a CHECK
// that prints gradcheck's report (the worst mismatches) when it fails.
#pragma once
#include <doctest/doctest.h>

#include "autograd/autograd.h"

inline autograd::Tensor param(const autograd::Shape& s, float lo = -1.0f, float hi = 1.0f) {
    return autograd::Tensor::uniform(s, lo, hi).requires_grad_();
}

#define CHECK_GRAD(fn, ...)                                                         \
    do {                                                                            \
        const autograd::GradcheckResult r_ = autograd::gradcheck(fn, {__VA_ARGS__}); \
        INFO(r_.report);                                                            \
        CHECK(r_.ok);                                                               \
    } while (0)
