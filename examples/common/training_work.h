// The work of a training step, from the model's sizes and a batch's shape, without running it:
// the multiply-adds of the matrix products of its forward pass (the backward pass does twice as
// many), and the steps that must run one after another. The translation example's --data default
// for --epochs gives each model family the same estimated time with it, whatever the corpus's
// sentence lengths (examples/options/translation_options.h).
//
//   const common::StepWork w = common::forward_work(model, /*B=*/32, /*S=*/20, /*T=*/22);
//   // w.multiply_adds: every product's output elements times the length of its sums
//   // w.sequential_steps: a recurrent model's positions, read one at a time; 0 for the Transformer
//
// The counts are those of the plain path (FusedKernelsGuard(false)), read off the recorded graph
// the way docs/07 counts Vaswani et al.'s Table 1: tests/test_common.cpp holds them equal, for
// every model family and option that changes a product. Products only: the elementwise work
// (softmax, LayerNorm, the cells' gates) grows with the same shapes and is left to the time
// model's constants.
#pragma once
#include <cstdint>
#include <vector>

#include "models/seq2seq.h"

namespace common {

struct StepWork {
    double multiply_adds = 0;          // of the forward pass's matrix products
    double output_multiply_adds = 0;   // of those, the output layer's: B T X V (X its input's width), a softmax over V behind it
    double attention_scores = 0;       // scores the attention computes, each an elementwise chain (softmax; tanh for an additive one)
    double sequential_steps = 0;       // positions a recurrent model reads one after another (encoder layers and decoder)
};

// One forward pass of `model` (a models::Transformer or models::RNNSeq2Seq) over a padded batch
// of B rows, sources of S tokens and targets of T (teacher forcing, the loss's output layer
// included). Throws std::invalid_argument for another kind of model.
StepWork forward_work(const models::Seq2Seq& model, int64_t B, int64_t S, int64_t T);

// A padded batch's shape: rows, source length and target length (the decoder's input, <bos> and
// the tokens), each the longest row's.
struct BatchShape {
    int64_t rows = 0, src_len = 0, tgt_len = 0;
};

// The estimated seconds of one training step (forward, backward and Adam) of `model` on a batch
// of that shape, on the machine the constants were measured on (bench/RESULTS.md, "The fair
// fight on text not tuned on": 2 cores of a Zen 4, bench/bench_translation_cost): each family's
// products at the rate they reach there (a recurrent model's are many small ones, a position at a
// time), plus a fixed time for each sequential step and each batch. Another machine's seconds
// differ, but hardly the families' ratio, which is what the estimate is for.
double estimated_step_seconds(const models::Seq2Seq& model, const BatchShape& b);

// The sum over an epoch's batches.
double estimated_epoch_seconds(const models::Seq2Seq& model, const std::vector<BatchShape>& batches);

}  // namespace common
