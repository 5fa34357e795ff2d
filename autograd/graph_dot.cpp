#include "autograd/graph_dot.h"

#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "autograd/io/atomic_file.h"

namespace autograd {

// Inside a DOT "quoted string": escape the quote and the backslash.
static std::string dot_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

// Every node reachable from root through parents, in post-order: each node after all its inputs.
// An explicit stack, like the engine's topo_order (a recursive walk overflows on deep graphs).
// Unlike backward, it follows every parent, also those that need no grad (they are drawn too).
static std::vector<const Node*> walk(const Node& root) {
    std::vector<const Node*> order;
    std::unordered_map<const Node*, bool> seen;
    std::vector<std::pair<const Node*, size_t>> stack = {{&root, 0}};   // node, next parent to visit
    seen[&root] = true;
    while (!stack.empty()) {
        auto& [node, next] = stack.back();
        if (node->released)
            throw std::logic_error(std::string("to_dot: the graph through '") + node->op +
                                   "' was freed by backward(); draw the graph before calling backward() "
                                   "(or pass retain_graph = true to it)");
        if (next < node->parents.size()) {
            const Node* p = node->parents[next++].get();
            if (!seen[p]) {
                seen[p] = true;
                stack.push_back({p, 0});   // invalidates node/next; they are not used again here
            }
        } else {
            order.push_back(node);
            stack.pop_back();
        }
    }
    return order;
}

std::string to_dot(const Tensor& root, const DotNames& names) {
    if (!root.defined()) throw std::invalid_argument("to_dot: the tensor is undefined (holds no node)");
    const std::vector<const Node*> order = walk(root.node());
    std::unordered_map<const Node*, size_t> id;
    for (size_t i = 0; i < order.size(); i++) id[order[i]] = i;
    std::unordered_map<const Node*, std::string> name;
    for (const auto& [n, t] : names)
        if (t.defined()) name.emplace(t.node_ptr().get(), n);   // the first name given wins

    size_t edges = 0;
    for (const Node* n : order) edges += n->parents.size();
    std::ostringstream os;
    os << "digraph autograd {\n"
       << "  // " << order.size() << " nodes, " << edges << " edges; inputs point to the ops that use them; root n"
       << order.size() - 1 << "\n"
       << "  node [fontname=\"Helvetica\", fontsize=11];\n"
       << "  edge [arrowsize=0.7, fontname=\"Helvetica\", fontsize=9, fontcolor=\"#666666\"];\n";
    for (size_t i = 0; i < order.size(); i++) {
        const Node& n = *order[i];
        const auto it = name.find(&n);
        std::string label, style;
        if (!n.parents.empty()) {                          // an op's output
            label = it != name.end() ? it->second + " = " + n.op : std::string(n.op);
            style = "shape=ellipse";
        } else if (n.requires_grad) {                      // a parameter or an input needing grad
            label = it != name.end() ? it->second : "parameter";
            style = "shape=box, style=filled, fillcolor=\"#c8e6c9\"";
        } else {                                           // a constant, or a value made without a graph
            label = it != name.end() ? it->second : std::string(n.op) == "leaf" ? "constant" : n.op + std::string(" (no graph)");
            style = "shape=box, style=dashed, color=\"#888888\", fontcolor=\"#555555\"";
        }
        os << "  n" << i << " [label=\"" << dot_escape(label) << "\\n" << shape_str(n.shape) << "\", " << style
           << (i + 1 == order.size() ? ", peripheries=2" : "") << "];\n";
    }
    // An op with several inputs labels each edge with the input's position: matmul(a, b) draws
    // a's edge "0" and b's edge "1", attention(q, k, v) "0", "1", "2".
    for (size_t i = 0; i < order.size(); i++) {
        const auto& ps = order[i]->parents;
        for (size_t j = 0; j < ps.size(); j++) {
            os << "  n" << id.at(ps[j].get()) << " -> n" << i;
            if (ps.size() > 1) os << " [label=\"" << j << "\"]";
            os << ";\n";
        }
    }
    os << "}\n";
    return os.str();
}

void write_dot(const Tensor& root, const std::string& path, const DotNames& names) {
    io::write_file_atomically(path, {to_dot(root, names)}, "write_dot");   // whole, or the old file as it was
}

}  // namespace autograd
