// A training step's forward and backward with its batch cut into row slices that threads take
// side by side: together the same gradient as one pass over the whole batch
// (autograd/data_parallel.h says why and how).
//
//   const float loss = models::sum_over_shards(b, 2, [&](const models::Batch& part) {
//       const Tensor logits = model.logits(part.src, part.tgt_in, part.src_mask, part.tgt_mask);
//       return nn::cross_entropy(logits, part.tgt_out, {.ignore_index = PAD})   // mean over the part's tokens,
//              * part.share;                                                    // x its share of b's (split_batch)
//   });   // the forward of each part, then its backward
//   opt.step();
//
// loss_of(part) runs for each of the `shards` parts (split_batch) that has a token, on up to
// `shards` threads at once, and each loss it returns is backpropagated on the same thread;
// returns the sum of the losses' values, in part order. With each part's mean loss weighted by
// its share of the batch's tokens,
//     loss = sum_p (ntokens_p / ntokens) * loss_p,
// the parts' backward passes add up in the parameters' grads to the gradient of the batch's mean
// loss: the same value as one pass, up to rounding, and the same bits on any number of threads
// for a given `shards`. shards = 1 is loss_of(b) and its backward on the calling thread, exactly
// the plain step (which the examples write out as such when --shards is 1).
#pragma once
#include <functional>

#include "autograd/tensor.h"
#include "models/batch.h"

namespace models {

float sum_over_shards(const Batch& b, int shards, const std::function<autograd::Tensor(const Batch& part)>& loss_of);

}  // namespace models
