// The answer key of the exercises at the end of the chapters of docs/ (Part I). Each TEST_CASE
// is named after the exercise it answers, "docs/NN exercise K: ...", and checks the answer the
// chapter gives: a number the learner computes, or, for an exercise that breaks something on
// purpose, that the check the chapter names does catch the broken version (the broken code is
// written here, beside the right one, so the suite runs both). Exercises that break a line of the
// library itself are answered by a planted mistake in tests/mutations.txt named "exercise-NN-..."
// (`make mutate` plants it and runs the test the chapter names).
#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/autograd.h"
#include <doctest/doctest.h>
#include "nn/nn.h"

using namespace autograd;

// ---------------------------------------------------------------- docs/01: tensors and broadcasting

// ---------------------------------------------------------------- docs/02: the graph and backward()

// ---------------------------------------------------------------- docs/03: gradcheck

// ---------------------------------------------------------------- docs/04: softmax

// ---------------------------------------------------------------- docs/05: LayerNorm

// ---------------------------------------------------------------- docs/06: building blocks

// ---------------------------------------------------------------- docs/07: attention

// ---------------------------------------------------------------- docs/08: masks

// ---------------------------------------------------------------- docs/09: positional encoding

// ---------------------------------------------------------------- docs/10: the encoder-decoder

// ---------------------------------------------------------------- docs/11: cross-entropy and label smoothing

// ---------------------------------------------------------------- docs/12: Adam and the warmup schedule

// ---------------------------------------------------------------- docs/13: tokenization

// ---------------------------------------------------------------- docs/14: decoding
