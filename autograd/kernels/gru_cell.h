// The GRU cell's kernel: everything after the hidden product. From the input's part of the gates
// gi = x W_ih^T + b_ih and the state's part gh = h W_hh^T + b_hh (gates r, z, n side by side in
// each row, PyTorch's order), and the state h:
//     r  = σ(gi_r + gh_r)
//     z  = σ(gi_z + gh_z)
//     n  = tanh(gi_n + r ⊙ gh_n)
//     h' = (1 − z) ⊙ n + z ⊙ h
// One pass over the rows forward and one backward, instead of the eighteen ops the plain form
// records (six gate slices, two sigmoids, a tanh, and the sums and products around them). The product gh stays a
// linear op of its own (kernels/linear.h): a gemm is not an elementwise pass, and its backward
// already writes dh and dW_hh from d(gh). autograd::fused::gru_cell (autograd/fused_ops.cpp)
// records these two as an autograd op; nn::gru_step (nn/recurrent.cpp) calls it when fused
// kernels are on.
#pragma once
#include <cstdint>

#include "autograd/kernels/grad_out.h"

namespace autograd::kernels {

struct GruCellDims {
    int64_t B, Hd;   // rows, and the width of the state (each row of gi and gh holds 3 * Hd)
};

// h_next (B, Hd) from gi and gh (B, 3Hd) and h (B, Hd). Also writes gates (B, 3Hd): each row's
// r, z and n side by side, as gi holds its gates, for the backward.
void gru_cell_forward(float* h_next, float* gates, const float* gi, const float* gh, const float* h, const GruCellDims& d);

// dgi and dgh (B, 3Hd) and dh (B, Hd) from dh_next (B, Hd) and the forward's gates, gh and h; a
// GradOut with no data is skipped. dh is only h's direct part, z ⊙ dh_next: h's part through gh
// is the linear op's backward. Writes row by row: row b of dgi, then of dgh, then of dh. Each
// element of each is written once, so when gi and gh are one buffer the later adds to the
// earlier, as if each were written completely in turn (grad_out.h).
void gru_cell_backward(GradOut dgi, GradOut dgh, GradOut dh, const float* dh_next, const float* gates, const float* gh,
                       const float* h, const GruCellDims& d);

}  // namespace autograd::kernels
