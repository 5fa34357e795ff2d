#include "autograd/data_parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "autograd/anomaly.h"
#include "autograd/fused_ops.h"
#include "autograd/kernels/busy_cores.h"
#include "autograd/kernels/parallel.h"
#include "autograd/kernels/threads.h"
#include "autograd/mixed_precision.h"
#include "autograd/random.h"

namespace autograd {

namespace {

// Shard s >= 1's stand-ins: for each leaf it used, in the order it first used them.
struct StandIns {
    std::unordered_map<const Node*, size_t> index;
    std::vector<std::pair<std::shared_ptr<Node>, std::shared_ptr<Node>>> leaves;   // (leaf, stand-in)
};

thread_local bool tl_in_shard = false;   // this thread runs a shard now

// Shard s >= 1's graph, from its loss up, before its backward: every parent that is a leaf
// requiring a grad (a parameter) is replaced by its stand-in, a node that shares the leaf's
// values and keeps its own grad. The graph's other nodes are the shard's own; the leaves are
// shared with the other shards, and are not touched.
void use_stand_ins(const Tensor& loss, StandIns& s) {
    std::unordered_set<Node*> visited{&loss.node()};
    std::vector<Node*> stack{&loss.node()};
    while (!stack.empty()) {
        Node* n = stack.back();
        stack.pop_back();
        for (std::shared_ptr<Node>& p : n->parents) {
            if (!p->requires_grad) continue;
            if (!p->is_leaf()) {
                if (visited.insert(p.get()).second) stack.push_back(p.get());
                continue;
            }
            auto [it, fresh] = s.index.try_emplace(p.get(), s.leaves.size());
            if (fresh) {
                auto stand_in = std::make_shared<Node>();
                stand_in->shape = p->shape;
                stand_in->data = p->data;   // the same values, no copy
                stand_in->requires_grad = true;
                stand_in->op = p->op;
                s.leaves.emplace_back(p, std::move(stand_in));
            }
            p = s.leaves[it->second].second;
        }
    }
}

// The caller's thread-local modes, set again on each thread that runs a shard.
struct Modes {
    bool grad = is_grad_enabled(), fused = fused_kernels_enabled(), anomaly = anomaly_mode_enabled();
    bool bf16 = matmul_precision() == Precision::bf16;
};

// Add the stand-ins' grads into their leaves: for each leaf, grad = ((grad + g_1) + g_2) + ...,
// in shard order. A leaf without a grad yet takes its first stand-in's buffer (0 + g = g, the same
// bits). The sums run over chunks of a leaf at a time, split between threads: each element is
// still added in shard order, so the bits do not depend on the thread count.
void merge_grads(std::vector<StandIns>& stand_ins) {
    std::unordered_map<Node*, size_t> slot;
    std::vector<std::pair<Node*, std::vector<const FloatBuffer*>>> leaves;   // leaf, its stand-ins' grads in shard order
    for (size_t s = 1; s < stand_ins.size(); s++)
        for (auto& [leaf, stand_in] : stand_ins[s].leaves) {
            if (stand_in->grad.empty()) continue;   // nothing flowed there
            auto [it, fresh] = slot.try_emplace(leaf.get(), leaves.size());
            if (fresh) leaves.push_back({leaf.get(), {}});
            auto& [node, grads] = leaves[it->second];
            if (node->grad.empty() && grads.empty()) node->grad.swap(stand_in->grad);
            else grads.push_back(&stand_in->grad);
        }
    constexpr int64_t kChunk = int64_t{1} << 14;
    struct Chunk { Node* leaf; const std::vector<const FloatBuffer*>* grads; int64_t begin, end; };
    std::vector<Chunk> chunks;
    int64_t total = 0;
    for (auto& [leaf, grads] : leaves) {
        if (grads.empty()) continue;
        const int64_t n = static_cast<int64_t>(leaf->grad.size());
        for (int64_t i = 0; i < n; i += kChunk) chunks.push_back({leaf, &grads, i, std::min(n, i + kChunk)});
        total += n * static_cast<int64_t>(grads.size());
    }
    const Chunk* const chunk = chunks.data();
    kernels::parallel_for(static_cast<int64_t>(chunks.size()), kernels::worth_threads(total, kernels::kElementwiseParallelMin), [=](int64_t c) {
        float* dst = chunk[c].leaf->grad.data();
        for (const FloatBuffer* g : *chunk[c].grads) {
            const float* src = g->data();
            for (int64_t i = chunk[c].begin; i < chunk[c].end; i++) dst[i] += src[i];
        }
    });
}

}  // namespace



void for_each_shard(int shards, const std::function<Tensor(int shard)>& loss_of) {
    if (shards < 1) throw std::invalid_argument("for_each_shard: needs at least 1 shard, got " + std::to_string(shards));
    if (tl_in_shard) throw std::logic_error("for_each_shard: called inside a shard (shards do not nest)");
    const Modes modes;
    std::vector<Rng> rngs;
    for (int s = 0; s < shards; s++) rngs.emplace_back(default_rng().next_u64());   // in shard order, before any runs
    std::vector<StandIns> stand_ins(shards);
    std::vector<std::exception_ptr> errors(shards);
    // Up to one thread per shard; the threads left over (a machine with more cores than shards)
    // go to the kernels inside each shard, as nested teams.
    const int all_threads = kernels::max_threads(), threads = std::min(shards, all_threads);
    const int inner = std::max(1, all_threads / threads);
    const bool side_by_side = threads > 1 && kernels::active_level() < kernels::max_active_levels() && !kernels::cores_busy();
    const int saved_levels = kernels::max_active_levels();
    if (side_by_side && inner > 1 && saved_levels < kernels::active_level() + 2) kernels::set_max_active_levels(kernels::active_level() + 2);
    // Shards are claimed one at a time, in order, by whichever thread is free: a thread that the
    // system runs late (another program has its core) leaves its shard to the other.
    std::atomic<int> next{0};
    // The team is timed like a GEMM team (kernels/busy_cores.h): on cores another program keeps
    // busy, one thread waits at the end for the other's shard, and the shards of the next steps
    // then run one after the other on this thread, which is faster there and gives the same bits.
    constexpr int kTimed = 64;
    int64_t arrive[kTimed], at_barriers[kTimed] = {}, finish[kTimed];
    int timed = 1;
    const int64_t start = kernels::now_ns();
    #pragma omp parallel num_threads(threads) if (side_by_side)
    {
        const int team = kernels::team_size(), tid = kernels::team_index();
        if (tid < kTimed) arrive[tid] = kernels::now_ns();
        if (tid == 0) timed = std::min(team, kTimed);
        if (team > 1) kernels::set_max_threads(inner);   // this thread's kernels' teams (1: none)
        std::optional<NoGradGuard> no_grad;
        if (!modes.grad) no_grad.emplace();
        std::optional<DetectAnomalyGuard> anomaly;
        if (modes.anomaly && !anomaly_mode_enabled()) anomaly.emplace();
        FusedKernelsGuard fused(modes.fused);
        MixedPrecisionGuard bf16(modes.bf16);
        for (int s; (s = next.fetch_add(1)) < shards;) {
            tl_in_shard = true;
            Rng* const prev_rng = detail::exchange_thread_rng(&rngs[s]);
            try {
                const Tensor loss = loss_of(s);
                if (loss.defined() && loss.requires_grad()) {
                    if (s > 0) use_stand_ins(loss, stand_ins[s]);   // shard 0's grads go to the leaves themselves
                    loss.backward();
                }
            } catch (...) {
                errors[s] = std::current_exception();
            }
            detail::exchange_thread_rng(prev_rng);
            tl_in_shard = false;
        }
        if (tid < kTimed) finish[tid] = kernels::now_ns();
    }
    if (side_by_side) kernels::report_team(start, arrive, at_barriers, finish, timed);
    if (kernels::max_active_levels() != saved_levels) kernels::set_max_active_levels(saved_levels);
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
    merge_grads(stand_ins);
}

}  // namespace autograd
