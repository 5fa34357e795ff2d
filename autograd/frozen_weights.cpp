#include "autograd/frozen_weights.h"

#include <atomic>
#include <vector>

#include "autograd/kernels/gemm_bf16.h"
#include "autograd/tensor.h"

namespace autograd {

// One weight seen inside the guard: which storage and shape, and the storage itself, held so that
// its address cannot be reused by another tensor while the guard lives. It is packed at its
// second use, not its first: a weight used once (the cross-attention's keys and values of the
// source, computed once per sentence) would only pay for the memory of a copy.
struct PackedWeight {
    std::shared_ptr<FloatBuffer> storage;
    int64_t out, in;
    std::unique_ptr<kernels::PackedBf16B> packed;   // W^T: op(B) of y = x W^T, K = in, N = out; null until the second use
};

struct FrozenWeightsGuard::Cache {
    std::vector<PackedWeight> weights;   // a model has tens: a linear search is enough
};

static thread_local FrozenWeightsGuard::Cache* tl_cache = nullptr;   // the outermost guard's, on this thread
static std::atomic<int64_t> g_packs{0};   // packed copies made, for the tests (tests/hooks.h)

FrozenWeightsGuard::FrozenWeightsGuard() {
    if (tl_cache) return;   // inside another guard: its copies serve
    cache_ = std::make_unique<Cache>();
    tl_cache = cache_.get();
}

FrozenWeightsGuard::~FrozenWeightsGuard() {
    if (cache_) tl_cache = nullptr;
}

bool weights_frozen() { return tl_cache != nullptr; }

namespace detail {
const kernels::PackedBf16B* frozen_bf16_weight_t(const Tensor& w) {
    if (!tl_cache) return nullptr;
    const std::shared_ptr<FloatBuffer>& storage = w.node_ptr()->data;
    const int64_t out = w.size(0), in = w.size(1);
    for (PackedWeight& p : tl_cache->weights) {
        if (p.storage != storage || p.out != out || p.in != in) continue;
        if (!p.packed) {   // the second use: from now on, read the packed copy
            g_packs.fetch_add(1, std::memory_order_relaxed);
            p.packed = std::make_unique<kernels::PackedBf16B>(/*trans_b=*/true, int(out), int(in), w.data(), int(in));
        }
        return p.packed.get();
    }
    tl_cache->weights.push_back({storage, out, in, nullptr});   // the first use: noted, packed by the call itself
    return nullptr;
}
}  // namespace detail

namespace test_hooks {
int64_t frozen_weight_packs() { return g_packs.load(std::memory_order_relaxed); }
}  // namespace test_hooks

}  // namespace autograd
