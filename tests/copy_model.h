// A tiny Transformer trained on the copy task inside a test (a few seconds): a model whose outputs
// are confident, unlike a random one's. Shared by test_models.cpp and test_decoding.cpp.
#pragma once
#include "examples/data/copy_task_data.h"
#include "models/batch.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"

// `steps` Adam steps (Noam schedule, warmup 100) on batches of 32 copy sequences of length L over
// symbols 1..V-1; leaves the model in eval mode.
inline void train_copy(models::Transformer& model, int steps, int64_t V, int64_t L, uint64_t seed) {
    autograd::Rng rng(seed);
    optim::Adam opt(model.parameters(), {.lr = 0.0f, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f});
    optim::NoamSchedule sched(opt, model.cfg.d_model, 100, 1.0f);
    model.train();
    for (int step = 0; step < steps; step++) {
        const models::Batch b = data::make_copy_batch(rng, V, /*B=*/32, L);
        const autograd::Tensor loss = nn::cross_entropy(model.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask), b.tgt_out);
        opt.zero_grad();
        loss.backward();
        sched.step();
        opt.step();
    }
    model.eval();
}
