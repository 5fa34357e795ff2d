// Draw a computation graph: the Graphviz DOT text of everything a tensor was computed from.
//
//   Tensor y = model.forward(x);                         // record the graph...
//   autograd::write_dot(y, "graph.dot");                 // ...draw it BEFORE backward()
//   y.sum().backward();                                  // backward() frees the graph
//   $ dot -Tsvg graph.dot -o graph.svg                   # Graphviz renders it
//
// One DOT node per graph Node, labelled with its op and shape; one edge per (input -> output)
// pair, so a tensor used twice by one op gets two edges; an op with several inputs numbers its
// incoming edges 0, 1, ... in argument order (matmul(a, b): a is 0). Three kinds of node:
//   ellipse             an op's output ("matmul (2, 4)")
//   green box           a leaf that requires grad: a parameter, or an input you asked grads for
//   grey dashed box     a leaf without grad: a constant or data (e.g. token embeddings' input)
// The root has a double outline. Nodes are numbered n0, n1, ... in computation order (every
// input before the op that used it; the root is last), from an iterative walk over
// Node::parents, so the text is the same on every run — never ordered by pointer.
//
// Only ops that recorded a graph appear: under NoGradGuard, or when no input requires a grad,
// a result is a plain value with no parents (a one-node picture).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace autograd {

// Optional names for leaves, e.g. module.named_parameters() plus {"x", x}: a leaf whose node is
// one of these tensors' nodes is labelled with the name instead of "parameter" or "constant".
using DotNames = std::vector<std::pair<std::string, Tensor>>;

// The DOT text of root's graph. Throws std::invalid_argument if root is undefined, and
// std::logic_error if the walk meets a node whose graph a backward() already freed.
std::string to_dot(const Tensor& root, const DotNames& names = {});

// to_dot written to `path`, whole or not at all (autograd/io/atomic_file.h). Throws
// std::runtime_error naming the path if it cannot be written.
void write_dot(const Tensor& root, const std::string& path, const DotNames& names = {});

}  // namespace autograd
