// Data parallelism: a batch's gradient is the sum of its parts' gradients.
//
// A loss that is a sum over examples, L = L_0 + L_1 (each part's examples weighted as in the whole
// batch), has dL/dw = dL_0/dw + dL_1/dw: backpropagate each part on its own and add. So two threads
// can each take half of a batch through the whole forward and backward pass, with no team to
// start or wait for inside, and meet once, at the end, to add their gradients. On a small model
// this pays where splitting each op between threads does not: a step of a few hundred small ops
// would wait at the end of each (docs/15).
//
//   std::vector<models::Batch> parts = models::split_batch(b, 2);
//   autograd::for_each_shard(2, [&](int s) { return loss_of(parts[s]); });   // each part's forward; backward follows
//
// for_each_shard(S, loss_of) runs loss_of(0), loss_of(1), ..., loss_of(S - 1), each followed by
// the backward of the loss it returns (none when it returns an undefined Tensor, or one that
// needs no grad): on up to S threads at once (each claims the next shard nobody has taken, in
// order), or one after the other on the calling thread (one thread, or busy cores). Whatever ran
// where, the results are the same bits, because each shard has its own:
//   - gradients: shard 0's go into the leaves' own grads. Before shard s >= 1's backward, its
//     graph is walked once from its loss, and each leaf that requires a grad (a parameter) is
//     replaced there by a stand-in node that shares the leaf's values and keeps its own grad. The
//     engine and the ops know nothing of shards: they record and backpropagate as always. After
//     all shards, the stand-ins' grads are added into the leaves' in shard order:
//     grad = (grad + g_1) + g_2 ...;
//   - random numbers: default_rng() inside fn(s) is shard s's generator, seeded by the s-th of S
//     draws made from the default generator before any shard runs (dropout masks do not depend
//     on which thread draws them or when);
//   - modes: grad mode, fused kernels, mixed precision and anomaly detection are the caller's.
// Kernels inside a shard run on the shard's thread alone while shards run side by side (on a
// machine with more cores than shards, each shard's kernels get a team of the cores left over).
// What it costs: shard s >= 1's gradients are a second copy of the parameters' size until they
// are added in; the activations are each shard's, together about the whole batch's.
//
// loss_of must only read what shards share (the parameters' values, the parts of the batch),
// write its own results (shard s's slot of a vector), and build its graph from its own ops (no
// tensor with a grad made outside it, but the leaves). An exception from any shard is rethrown,
// the lowest shard's first, after all shards have run; the gradients are then not merged (the
// leaves keep only shard 0's). Not for optimizer steps or anything that writes a parameter.
#pragma once
#include <functional>

#include "autograd/tensor.h"

namespace autograd {

void for_each_shard(int shards, const std::function<Tensor(int shard)>& loss_of);

}  // namespace autograd
