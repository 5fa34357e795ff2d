// Inverted dropout with counter-based draws: the keep decisions that the dropout kernels below,
// the linear kernel's epilogue and the attention kernel share with the plain path.
//
// One dropout draws one 64-bit seed from the default generator; element i (its flat index in the
// tensor being dropped) is then kept iff counter_uniform(seed, i) >= p (a hash of seed and i,
// autograd/random.h), and a kept element is scaled by 1/(1-p). The decision for element i does
// not depend on which thread computes it, and the backward recomputes it instead of storing a
// mask. The plain path's autograd::dropout_keep (ops.h) makes the same factors as a tensor, and
// autograd/fused_ops.cpp records the kernels below as autograd ops.
//
// Every path multiplies by the factor, y = x * keep(i), as PyTorch does: a dropped element is
// x * 0 (a zero with x's sign, NaN if x is inf or NaN). Written as a multiply by a selected
// constant the kernels' loops vectorize; a select between x * scale and 0 stays scalar on AVX2
// with g++ 12 (docs/15).
#pragma once
#include <cstdint>

#include "autograd/kernels/grad_out.h"
#include "autograd/random.h"   // counter_uniform, default_rng

namespace autograd::kernels {

struct DropoutDraws {
    float p = 0.0f;       // probability of dropping; 0 = no dropout
    uint64_t seed = 0;
    float scale = 1.0f;   // a kept element's factor, 1/(1-p)

    DropoutDraws() = default;                  // no dropout
    DropoutDraws(float p_, uint64_t seed_) : p(p_), seed(seed_), scale(1.0f / (1.0f - p_)) {}

    bool active() const { return p > 0.0f; }
    // the factor element i is multiplied by: 0 if dropped, 1/(1-p) if kept, 1 without dropout
    float keep(uint64_t i) const { return !active() ? 1.0f : kept_factor(i); }
    // keep(i) when active(): the form the kernels' loops use
    float kept_factor(uint64_t i) const { return counter_uniform(seed, i) < p ? 0.0f : scale; }
};

// The draws of one dropout: none if p = 0 (and no seed drawn), else p and a fresh seed from the
// default generator. p must be in [0, 1) (the caller checks it).
DropoutDraws draw_dropout(float p);

// y[i] = x[i] * keep(i), for i < n
void dropout_forward(float* y, const float* x, int64_t n, const DropoutDraws& drop);
// dx[i] (+)= dy[i] * keep(i): the same decisions, recomputed
void dropout_backward(GradOut dx, const float* dy, int64_t n, const DropoutDraws& drop);

// A residual connection around a dropped-out sublayer, out = x + dropout(y), in one pass:
//   out[i] = x[i] + y[i] * keep(i)                                    (add_dropout_forward)
// and back: dx = dout, dy = dout * keep (dropout_backward). The same values, bit for bit, as
// x + dropout(y) with the two kernels above: y * keep is rounded to a float before the add, as
// when it is stored between them. What it saves is that stored tensor: a pass that writes it, one
// that reads it back, and in the backward a copy of dout for it.
void add_dropout_forward(float* out, const float* x, const float* y, int64_t n, const DropoutDraws& drop);
// dx (+)= dout, dy (+)= dout * keep(i); dx is written whole before dy (the two may be one buffer,
// GradOut says how).
void add_dropout_backward(GradOut dx, GradOut dy, const float* dout, int64_t n, const DropoutDraws& drop);

}  // namespace autograd::kernels
