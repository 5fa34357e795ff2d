#include "autograd/kernels/gru_cell.h"

#include <cmath>

#include "autograd/kernels/fast_math.h"
#include "autograd/kernels/parallel.h"

namespace autograd::kernels {

// σ and tanh are kernels/fast_math.h's, which vectorize (std::tanh and std::exp, one call per
// element, were most of the cell's time); they agree with the plain form's std:: versions within
// 4e-7 relative.

// What the backward keeps: r, z and n (gates), as large as gi, so that it computes no exp or
// tanh again: σ' = σ (1 − σ) and tanh' = 1 − tanh² come from the outputs. gh and h it reads from
// the op's inputs, which the graph keeps alive anyway. Recomputing r, z, n from gi and gh instead
// would save those 3 * B * Hd floats a step and cost the forward's three exp/tanh per element
// again; the plain form's graph keeps the output of each of its ops, seventeen (B, Hd) a step.
void gru_cell_forward(float* h_next, float* gates, const float* gi, const float* gh, const float* h, const GruCellDims& d) {
    const int64_t Hd = d.Hd, G = 3 * Hd;   // G: the width of a row of gi, gh and gates
    parallel_for(d.B, worth_threads(d.B * Hd, kGruCellParallelMin), [=](int64_t b) {   // rows are independent
        const float *gir = gi + b * G, *ghr = gh + b * G, *hr = h + b * Hd;
        float *kept = gates + b * G, *out = h_next + b * Hd;
        #pragma omp simd
        for (int64_t j = 0; j < Hd; j++) {
            const float r = sigmoid_fast(gir[j] + ghr[j]);                  // reset gate
            const float z = sigmoid_fast(gir[Hd + j] + ghr[Hd + j]);        // update gate
            const float n = tanh_fast(gir[2 * Hd + j] + r * ghr[2 * Hd + j]);   // candidate: r scales the hidden product
            out[j] = (1.0f - z) * n + z * hr[j];                            // h' = (1 − z) n + z h
            kept[j] = r;
            kept[Hd + j] = z;
            kept[2 * Hd + j] = n;
        }
    });
}

void gru_cell_backward(GradOut dgi, GradOut dgh, GradOut dh, const float* dh_next, const float* gates, const float* gh,
                       const float* h, const GruCellDims& d) {
    const int64_t Hd = d.Hd, G = 3 * Hd;
    // In the forward pass this was, per element (a_r, a_z, a_n the gates' arguments):
    //     r = σ(a_r),  a_r = gi_r + gh_r          z = σ(a_z),  a_z = gi_z + gh_z
    //     n = tanh(a_n),  a_n = gi_n + r gh_n     h' = (1 − z) n + z h
    // With g = dL/dh', back through each line, σ' = σ (1 − σ) and tanh' = 1 − tanh²:
    //     dn = g (1 − z)          dz = g (h − n)          dh = g z   (h's direct part)
    //     da_n = dn (1 − n²)      da_z = dz z (1 − z)
    //     dr = da_n gh_n          da_r = dr r (1 − r)     (r reaches L only through a_n)
    // A sum passes its gradient to both terms unchanged, and the product r gh_n scales it by the
    // other factor, so
    //     dgi = (da_r, da_z, da_n)      dgh = (da_r, da_z, r da_n)
    float *gi_out = dgi.data, *gh_out = dgh.data, *h_out = dh.data;
    const bool gi_add = dgi.add, gh_add = dgh.add, h_add = dh.add;
    parallel_for(d.B, worth_threads(d.B * Hd, kGruCellParallelMin), [=](int64_t b) {   // each row's gradients are its own
        const float *g = dh_next + b * Hd, *kept = gates + b * G, *ghr = gh + b * G, *hr = h + b * Hd;
        for (int64_t j = 0; j < Hd; j++) {
            const float r = kept[j], z = kept[Hd + j], n = kept[2 * Hd + j];
            const float dn = g[j] * (1.0f - z);
            const float dz = g[j] * (hr[j] - n);
            const float da_n = dn * (1.0f - n * n);
            const float da_z = dz * z * (1.0f - z);
            const float dr = da_n * ghr[2 * Hd + j];
            const float da_r = dr * r * (1.0f - r);
            // row b of dgi, then of dgh, then of dh (the header's order)
            if (gi_out) {
                float* o = gi_out + b * G;
                o[j] = (gi_add ? o[j] : 0.0f) + da_r;
                o[Hd + j] = (gi_add ? o[Hd + j] : 0.0f) + da_z;
                o[2 * Hd + j] = (gi_add ? o[2 * Hd + j] : 0.0f) + da_n;
            }
            if (gh_out) {
                float* o = gh_out + b * G;
                o[j] = (gh_add ? o[j] : 0.0f) + da_r;
                o[Hd + j] = (gh_add ? o[Hd + j] : 0.0f) + da_z;
                o[2 * Hd + j] = (gh_add ? o[2 * Hd + j] : 0.0f) + r * da_n;
            }
            if (h_out) h_out[b * Hd + j] = (h_add ? h_out[b * Hd + j] : 0.0f) + g[j] * z;
        }
    });
}

}  // namespace autograd::kernels
