#include "autograd/kernels/softmax_rows.h"

#include "autograd/ops.h"

namespace autograd::kernels {

// softmax(x)_i = e^(x_i - m) / sum_j e^(x_j - m). m is a constant shift (detached): it changes no
// value and no gradient, it only keeps exp() from overflowing.
Tensor softmax_reference(const Tensor& x) {
    const Tensor e = exp(x - max(x, -1, true).detach());
    return e / sum(e, -1, true);
}

// log_softmax(x)_i = (x_i - m) - log sum_j e^(x_j - m)
Tensor log_softmax_reference(const Tensor& x) {
    const Tensor z = x - max(x, -1, true).detach();
    return z - log(sum(exp(z), -1, true));
}

}  // namespace autograd::kernels
