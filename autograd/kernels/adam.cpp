#include "autograd/kernels/adam.h"

#include <cmath>

#include "autograd/kernels/parallel.h"
#include "autograd/kernels/prefetch.h"

namespace autograd::kernels {

void adam_update(const AdamArrays* params, size_t count, const AdamConstants& c) {
    int64_t total = 0;
    for (size_t i = 0; i < count; i++) total += params[i].n;
    const float lr = c.lr, b1 = c.beta1, b2 = c.beta2, eps = c.eps, l2 = c.l2, decay = c.decay;
    parallel_region(worth_threads(total, kOptimizerParallelMin), [=](int team, int thread) {
        for (const AdamArrays* u = params; u != params + count; u++) {
            const float* g = u->g;
            float *p = u->p, *m = u->m, *v = u->v;
            const float bc1 = u->bias_correction1, bc2 = u->bias_correction2;
            const auto [begin, end] = block_of(u->n, team, thread);
            in_chunks_fetching_ahead(begin, end, {g}, {p, m, v}, [&](int64_t chunk, int64_t chunk_end) {
                for (int64_t j = chunk; j < chunk_end; j++) {   // optim/adam.cpp's loop
                    const float gj = g[j] + l2 * p[j];
                    m[j] = b1 * m[j] + (1.0f - b1) * gj;
                    v[j] = b2 * v[j] + (1.0f - b2) * gj * gj;
                    const float m_hat = m[j] / bc1, v_hat = v[j] / bc2;
                    p[j] = p[j] * decay - lr * m_hat / (std::sqrt(v_hat) + eps);
                }
            });
        }
    });
}

}  // namespace autograd::kernels
