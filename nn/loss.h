// Losses over the last dim of logits (..., V) with integer targets (...).
#pragma once
#include "nn/module.h"

namespace nn {

struct CrossEntropyOptions {
    int32_t ignore_index = -100;   // targets equal to this (e.g. padding) contribute nothing
    float label_smoothing = 0.0f;  // eps: the target distribution is (1 - eps) one-hot + eps / V uniform
                                   // over all V classes, padding included (PyTorch's convention; see docs/11)
};

// Mean over the non-ignored targets of -sum_j q_j log softmax(logits)_j, where q is the (smoothed)
// target distribution — the definition of torch.nn.functional.cross_entropy. Label smoothing is
// the regularizer of Vaswani et al. (2017), section 5.4, after Szegedy et al. (2016).
// Written as log_softmax, then nll_loss (the target's -log p), plus the label smoothing's uniform
// part; with fused kernels on, one op computes the same (autograd::fused::cross_entropy), with
// the backward simply (softmax - q) / n per row. If every target is ignored the loss is 0 (PyTorch
// gives NaN), with zero gradient.
Tensor cross_entropy(const Tensor& logits, const Tokens& targets, const CrossEntropyOptions& opt = {});

// cross_entropy(linear(x, weight, bias), targets, opt): a model's last layer, the projection to
// its V classes (a translation model's generator), and the loss, in one op. x (..., D), weight
// (V, D), bias (V,) or undefined, targets (...) -> loss (). The value and the gradients are those
// of the two ops. What differs is the memory: with fused kernels on, the (rows, V) logits are made
// a chunk of about 8 MB at a time and turned into their gradient at once, so they are never held
// whole (autograd/kernels/linear_cross_entropy.h). For a translation batch of 1,000 target tokens
// over 12,000 subwords, that is 8 MB instead of 96 MB (48 MB of logits, and their gradient). The
// gradient is then computed in the forward pass, whether or not a backward comes, whenever
// gradients are being recorded. A model's loss(batch) uses it (models/seq2seq.h).
Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tokens& targets,
                            const CrossEntropyOptions& opt = {});

struct NllLossOptions {
    int32_t ignore_index = -100;   // targets equal to this (e.g. padding) contribute nothing
};

// Mean of -log_probs[target] over the non-ignored targets; log_probs (..., V) from log_softmax.
Tensor nll_loss(const Tensor& log_probs, const Tokens& targets, const NllLossOptions& opt = {});

}  // namespace nn
