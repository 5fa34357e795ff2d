// A training step's loss and gradients, its batch cut into row slices that threads take side by
// side (autograd/data_parallel.h says why and how).
//
//   const float loss = models::backward_in_shards(b, 2, [&](const models::Batch& part) {
//       return nn::cross_entropy(model.logits(part.src, part.tgt_in, part.src_mask, part.tgt_mask), part.tgt_out,
//                                {.ignore_index = PAD});
//   });
//   opt.step();
//
// loss_of(part) must return the part's loss per target token (a mean over its ntokens). The
// batch's loss is then the parts' losses weighted by their share of the tokens,
//     loss = sum_p (ntokens_p / ntokens) * loss_p,
// so each part's backward starts from its weight instead of 1, and the parameters' grads end up
// holding the batch's gradient. The same value as loss_of(b) up to rounding; the same bits on
// any number of threads for a given `shards`. shards = 1 is loss_of(b).backward(), exactly.
// Parts without tokens (a batch of fewer rows than shards) are skipped. Returns the loss.
#pragma once
#include <functional>

#include "autograd/tensor.h"
#include "models/batch.h"

namespace models {

float backward_in_shards(const Batch& b, int shards, const std::function<autograd::Tensor(const Batch& part)>& loss_of);

}  // namespace models
