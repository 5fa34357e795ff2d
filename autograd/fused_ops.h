// The fused ops, and the one switch between the lesson and the machinery.
//
// Each layer of nn/ is written twice, in one function: the plain form, composed from the autograd
// ops of ops.h (matmul, softmax, mean, ...) as the chapters derive it, and one marked line that
// calls the fused op below instead. A fused op computes the same values as the plain form with
// one kernel of autograd/kernels/ (plain arithmetic on arrays: x_forward, and x_backward with its
// derivation above its loop), and records one node whose backward calls x_backward: fewer
// passes over memory, and no intermediate tensors kept for the backward.
//
// The fused ops are on by default; turn them off to train through the plain forms:
//
//   autograd::FusedKernelsGuard plain(false);   // while alive: every layer runs its plain form
//   Tensor loss = ...forward...;                //   (what --reference does in both examples)
//   loss.backward();                            // each op's backward is the one it recorded
//   opt.step();                                 // Adam's plain loop, too
//
// Both forms draw the same dropout masks from the same seed, so a model trains to the same
// numbers either way, up to float rounding (tests/test_fused_kernels.cpp holds them equal).
// An RAII guard over a thread_local flag, like NoGradGuard and MixedPrecisionGuard.
#pragma once
#include <cstdint>
#include <vector>

#include "autograd/tensor.h"

namespace autograd {

// true (the default): nn's layers and Adam call the fused ops; false: their plain forms
bool fused_kernels_enabled();

class FusedKernelsGuard {
public:
    explicit FusedKernelsGuard(bool enabled);
    ~FusedKernelsGuard();
    FusedKernelsGuard(const FusedKernelsGuard&) = delete;
    FusedKernelsGuard& operator=(const FusedKernelsGuard&) = delete;
private:
    bool prev_;
};

// Each op checks nothing: the layer of nn/ that calls it has checked the shapes, ids and
// probabilities, with error messages a user can act on. Each reads matmul_precision() where it
// is recorded and keeps it for its backward, as autograd::matmul does.
namespace fused {

// y = dropout(act(x W^T + b)), act = ReLU or the identity: nn::linear's plain form (nn/linear.cpp).
// x (..., in), w (out, in), b (out,) or undefined -> y (..., out).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, bool relu, float dropout_p);

// y = (x - mean) / sqrt(var + eps) * gain + bias over the last dim: nn::layer_norm's plain form.
// x (..., C), gain and bias (C,) -> y (..., C).
Tensor layer_norm(const Tensor& x, const Tensor& gain, const Tensor& bias, float eps);

// The GRU cell after its hidden product: r = σ(gi_r + gh_r), z = σ(gi_z + gh_z),
// n = tanh(gi_n + r ⊙ gh_n), h' = (1 − z) ⊙ n + z ⊙ h: nn::gru_step's plain form (nn/recurrent.cpp),
// given gh = h W_hh^T + b_hh. gi and gh (B, 3Hd), gates r, z, n side by side; h (B, Hd) -> h' (B, Hd).
Tensor gru_cell(const Tensor& gi, const Tensor& gh, const Tensor& h);

// y = x * keep (inverted dropout, the draws of dropout_keep in ops.h): nn::dropout's plain form.
Tensor dropout(const Tensor& x, float p);
// x + dropout(y), in one pass that never stores dropout(y): nn::add_dropout's plain form.
Tensor add_dropout(const Tensor& x, const Tensor& y, float p);

// The mean over the counted rows of -sum_j q_j log softmax(logits)_j, q the target distribution
// smoothed by label_smoothing: nn::cross_entropy's plain form (nn/loss.cpp).
// logits (..., V), targets (...) -> loss ().
Tensor cross_entropy(const Tensor& logits, const Tokens& targets, int32_t ignore_index, float label_smoothing);

// cross_entropy(linear(x, w, b), ...) with the logits made chunk_rows rows at a time, never whole
// (kernels/linear_cross_entropy.h): nn::linear_cross_entropy's plain form (nn/loss.cpp).
// x (..., D), w (V, D), b (V,) or undefined, targets (...) -> loss (). chunk_rows 0: about 8 MB of
// logits at once. When every row fits in one chunk, this is the two ops above, bit for bit.
Tensor linear_cross_entropy(const Tensor& x, const Tensor& w, const Tensor& b, const Tokens& targets, int32_t ignore_index,
                            float label_smoothing, int64_t chunk_rows = 0);

// Scaled dot-product attention over `heads` heads: nn::scaled_dot_product_attention's plain form
// (nn/attention.cpp), whose comment says what each argument is. q (B, T, D), k and v
// (B or slots, rows, D) of which the first `keys` rows are attended to (-1: all); mask broadcasts
// to (B, T, keys), or is empty. kv_slot, for decoding (models/decoder_cache.h): query row b reads
// k[kv_slot[b]] and v[kv_slot[b]] in place; then no graph is recorded.
struct Attention {
    Tensor out;       // (B, T, D)
    Tensor weights;   // (B, H, T, keys), before dropout; no gradient
};
Attention attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const Mask& mask,
                    float dropout_p, int64_t keys = -1, const std::vector<int64_t>& kv_slot = {});

// e[b, s] = v . tanh(keys[b, s] + q[b]): the additive attention's score, nn::SoftAttention's plain
// form (nn/soft_attention.cpp). keys (B, S, A), q (B, A), v (A,) -> e (B, S).
Tensor additive_score(const Tensor& keys, const Tensor& q, const Tensor& v);

// Adam's update of every parameter at once: optim/adam.cpp's plain loop, split between the
// threads, with memory asked for ahead of it (autograd/kernels/adam.h). Not an autograd op: it
// writes the parameters in place, as the plain loop does.
struct AdamParam {
    const float* g;                              // the gradient
    float *p, *m, *v;                            // the values, the first and second moments
    int64_t n;                                   // elements
    float bias_correction1, bias_correction2;    // 1 - beta1^t, 1 - beta2^t for this parameter's step t
};
struct AdamConstants {
    float lr, beta1, beta2, eps;
    float l2;      // Adam's weight decay, added to g as l2 * p (0: none)
    float decay;   // AdamW's, p *= decay = 1 - lr * weight_decay (1: none)
};
void adam_update(const std::vector<AdamParam>& params, const AdamConstants& c);

}  // namespace fused

}  // namespace autograd
