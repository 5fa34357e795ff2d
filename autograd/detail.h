// The engine's bookkeeping that is not the lesson: kept out of tensor.h so that Node shows only
// what a learner needs. The engine, graph drawing and data parallelism include this; a reader of
// the autograd lesson can skip it.
#pragma once
#include <cstdint>

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

// What record() stores as a parent for `input`: the input itself, or inside for_each_shard's
// shard s >= 1, the shard's stand-in for a leaf that requires a grad (data_parallel.h).
std::shared_ptr<Node> shard_input(const std::shared_ptr<Node>& input);

}  // namespace autograd::detail
