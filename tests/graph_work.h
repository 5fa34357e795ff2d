// The work a forward pass asks for, read off the graph it recorded (chapter 2), for docs/07's
// comparison of self-attention and recurrence (Vaswani et al. 2017, Table 1). Counts are exact
// and the same on every machine, unlike a time.
//
//   autograd::FusedKernelsGuard plain(false);         // every product a "matmul" node
//   const Work w = count_work(lstm.forward(x).output);
//   // w.multiply_adds: 8 n d^2 for an LSTM layer; w.sequential_products: n
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/autograd.h"

// Over the matrix products of the graph that made `out` (the "matmul" nodes; run the plain path,
// FusedKernelsGuard(false), so that every product is one):
//   multiply_adds        each product's output elements times the length K of the sums that
//                        make them: A is (..., M, K), or its transpose, so K = A's last two dims
//                        over M
//   sequential_products  the longest chain of products each of which needs the one before it:
//                        products that no number of cores can run side by side
struct Work {
    int64_t multiply_adds = 0;
    int64_t sequential_products = 0;
};

inline Work count_work(const autograd::Tensor& out) {
    using autograd::Node;
    // parents before children, without recursion (a recurrent graph is a chain thousands deep)
    std::vector<Node*> order;
    std::unordered_map<Node*, int64_t> chain;   // node -> the longest chain of products ending at it
    std::vector<std::pair<Node*, bool>> todo = {{&out.node(), false}};
    while (!todo.empty()) {
        const auto [n, parents_done] = todo.back();
        todo.pop_back();
        if (parents_done) {
            order.push_back(n);
            continue;
        }
        if (chain.count(n)) continue;
        chain[n] = 0;
        todo.push_back({n, true});
        for (const auto& p : n->parents)
            if (!chain.count(p.get())) todo.push_back({p.get(), false});
    }
    Work w;
    for (Node* n : order) {
        const bool product = std::strcmp(n->op, "matmul") == 0;
        int64_t longest = 0;
        for (const auto& p : n->parents) longest = std::max(longest, chain[p.get()]);
        chain[n] = longest + (product ? 1 : 0);
        w.sequential_products = std::max(w.sequential_products, chain[n]);
        if (!product) continue;
        const autograd::Shape& a = n->parents[0]->shape;
        const int64_t M = n->shape[n->shape.size() - 2], K = a[a.size() - 1] * a[a.size() - 2] / M;
        w.multiply_adds += n->numel() * K;
    }
    return w;
}
