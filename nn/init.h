// Parameter initialization, drawing from the project's seeded generator (autograd::manual_seed).
#pragma once
#include "autograd/tensor.h"

namespace nn::init {

// Glorot & Bengio (2010): U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)), which keeps the
// variance of activations and gradients about equal across layers. For a (out, in) weight,
// fan_in = in and fan_out = out; extra leading dims multiply both (as in PyTorch).
void xavier_uniform_(autograd::Tensor& t, float gain = 1.0f);
void normal_(autograd::Tensor& t, float mean = 0.0f, float std = 1.0f);
void uniform_(autograd::Tensor& t, float lo, float hi);
void zeros_(autograd::Tensor& t);
void ones_(autograd::Tensor& t);

}  // namespace nn::init
