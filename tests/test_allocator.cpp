// The caching allocator: blocks are reused, within the size slack and no further, stay aligned,
// survive concurrent use, and a steady-state training step asks the system for no memory at all.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "autograd/kernels/allocator.h"
#include "examples/data/copy_task_data.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"

using namespace autograd;
using namespace autograd::kernels;

TEST_CASE("allocator: a freed block is reused for the same size and for a little less") {
    empty_cache();
    void* a = cached_alloc(100000);
    CHECK(reinterpret_cast<std::uintptr_t>(a) % 64 == 0);
    cached_free(a);
    const MemoryStats before = memory_stats();
    CHECK(before.cached_bytes >= 100000);

    void* b = cached_alloc(100000);          // same size: the same block
    CHECK(b == a);
    cached_free(b);
    void* c = cached_alloc(95000);           // within 1/8 below: still that block
    CHECK(c == a);
    const MemoryStats after = memory_stats();
    CHECK(after.hits == before.hits + 2);
    CHECK(after.misses == before.misses);
    cached_free(c);

    void* d = cached_alloc(50000);           // half the size: too wasteful, a new block
    CHECK(d != a);
    CHECK(memory_stats().misses == before.misses + 1);
    void* e = cached_alloc(200000);          // bigger than anything cached: a new block
    CHECK(e != a);
    cached_free(d);
    cached_free(e);
    cached_free(nullptr);                    // allowed, like free(nullptr)
}

TEST_CASE("allocator: empty_cache and the cache limit return memory to the system") {
    cached_free(cached_alloc(1 << 20));
    CHECK(memory_stats().cached_bytes > 0);
    empty_cache();
    CHECK(memory_stats().cached_bytes == 0);

    set_cache_limit(0);                      // nothing may be kept
    cached_free(cached_alloc(1 << 20));
    CHECK(memory_stats().cached_bytes == 0);
    set_cache_limit(std::size_t(1) << 30);
}

TEST_CASE("allocator: a block nobody asks for goes back to the system after a while") {
    empty_cache();
    cached_free(cached_alloc(1 << 20));
    CHECK(memory_stats().cached_bytes >= (1 << 20));
    for (int i = 0; i < 8000; i++) cached_free(cached_alloc(64));   // a little while: still cached
    CHECK(memory_stats().cached_bytes >= (1 << 20));
    for (int i = 0; i < 40000; i++) cached_free(cached_alloc(64));  // a long while: released
    CHECK(memory_stats().cached_bytes < (1 << 20));
}

TEST_CASE("allocator: live bytes balance after concurrent allocations from many threads") {
    const std::size_t live0 = memory_stats().live_bytes;
    #pragma omp parallel for num_threads(4)
    for (int i = 0; i < 4000; i++) {
        FloatBuffer buf(static_cast<std::size_t>(1 + (i * 7919) % 5000));
        buf.assign(buf.size(), 1.0f);
        buf.front() += buf.back();
    }
    CHECK(memory_stats().live_bytes == live0);
    void* zero = cached_alloc(0);            // a zero-byte request still gets a unique block
    CHECK(zero != nullptr);
    cached_free(zero);
}

TEST_CASE("allocator: a steady-state training step takes all its tensor memory from the cache") {
    manual_seed(3);
    models::Transformer model({.src_vocab = 11, .tgt_vocab = 11, .layers = 2, .d_model = 32, .d_ff = 64,
                               .heads = 4, .dropout = 0.1f});
    optim::Adam opt(model.parameters(), {.lr = 1e-3f});
    Rng data(4);
    auto step = [&] {
        const data::CopyBatch b = data::make_copy_batch(data, 11, 16, 10);
        const Tensor loss = nn::cross_entropy(model.forward(b.src, b.tgt_in, b.src_mask, b.tgt_mask), b.tgt_out);
        opt.zero_grad();
        loss.backward();
        opt.step();
    };
    for (int i = 0; i < 4; i++) step();      // the first steps fill the cache (and Adam's state)
    const MemoryStats before = memory_stats();
    step();
    step();
    const MemoryStats after = memory_stats();
    CHECK(after.misses == before.misses);    // not one tensor buffer from the system
    CHECK(after.hits > before.hits + 100);   // ... though a step makes hundreds of them
}
