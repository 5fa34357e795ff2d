#include "models/data_parallel.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/data_parallel.h"

namespace models {

float sum_over_shards(const Batch& b, int shards, const std::function<autograd::Tensor(const Batch& part)>& loss_of) {
    if (shards < 1) throw std::invalid_argument("sum_over_shards: shards must be at least 1, got " + std::to_string(shards));
    if (shards == 1) {
        const autograd::Tensor loss = loss_of(b);
        if (loss.requires_grad()) loss.backward();
        return loss.item();
    }
    const std::vector<Batch> parts = split_batch(b, shards);
    std::vector<float> results(parts.size(), 0.0f);
    autograd::for_each_shard(shards, [&](int s) {
        const Batch& part = parts[static_cast<size_t>(s)];
        if (part.ntokens == 0) return autograd::Tensor();   // no token: no loss, no gradient
        const autograd::Tensor loss = loss_of(part);
        results[static_cast<size_t>(s)] = loss.item();
        return loss;
    });
    float sum = 0.0f;
    for (float r : results) sum += r;   // in part order: the same sum on any number of threads
    return sum;
}

}  // namespace models
