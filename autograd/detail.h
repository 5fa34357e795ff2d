// The engine's bookkeeping that is not the lesson: kept out of tensor.h so that Node shows only
// what a learner needs. Ops and tests include this; a reader of the autograd lesson can skip it.
#pragma once
#include <cstdint>

#include "autograd/kernels/grad_out.h"
#include "autograd/random.h"
#include "autograd/tensor.h"

namespace autograd::detail {

// Access to Node's private bookkeeping, for the engine (engine.cpp) and graph_dot.cpp.
struct NodeInternals {
    // Did a backward() free this node's graph (its closure and parents)? Such a node is not a
    // leaf, and no second backward can run through it.
    static bool released(const Node& n) { return n.released_; }
    // Free the node's closure and parents (the graph above it), and remember that we did.
    static void release(Node& n) {
        n.backward = nullptr;
        n.parents.clear();
        n.released_ = true;
    }
};

// Nodes alive right now (tests count leaks with it).
int64_t live_node_count();

// The gradient buffer of parent i, for a fused kernel that writes *every* element of it; data is
// nullptr if that parent needs no gradient. If the parent has no gradient yet, its buffer is
// allocated but not zeroed, and `add` comes back false: the kernel must store (=), not add (+=).
// That saves a pass over memory to zero a buffer that is about to be overwritten (for the weight
// gradients of a big model, a pass over every parameter each step). The generic ops never use
// this: their backward adds, as the lesson says; only the fused kernels' wrappers do.
// If two parents are the same tensor (linear(w, w, b)), the first request allocates and says
// "store", the second sees that gradient and says "add". So the kernel must write the gradients
// one after the other, each completely, in the order they were asked for.
kernels::GradOut parent_grad_to_write(Node& self, size_t i);

// What record() stores as a parent for `input`: the input itself, or inside for_each_shard's
// shard s >= 1, the shard's stand-in for a leaf that requires a grad (data_parallel.h).
std::shared_ptr<Node> shard_input(const std::shared_ptr<Node>& input);

// Make r this thread's default_rng() (nullptr: the process-wide one again); returns the previous.
Rng* exchange_thread_rng(Rng* r);

}  // namespace autograd::detail
