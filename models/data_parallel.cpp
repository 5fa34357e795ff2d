#include "models/data_parallel.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/data_parallel.h"

namespace models {

float sum_over_shards(const Batch& b, int shards, const std::function<float(const Batch& part)>& fn) {
    if (shards < 1) throw std::invalid_argument("sum_over_shards: shards must be at least 1, got " + std::to_string(shards));
    if (shards == 1) return fn(b);
    const std::vector<Batch> parts = split_batch(b, shards);
    std::vector<float> results(parts.size(), 0.0f);
    autograd::for_each_shard(shards, [&](int s) {
        const Batch& part = parts[static_cast<size_t>(s)];
        if (part.ntokens > 0) results[static_cast<size_t>(s)] = fn(part);   // no token: no loss, no gradient
    });
    float sum = 0.0f;
    for (float r : results) sum += r;   // in part order: the same sum on any number of threads
    return sum;
}

}  // namespace models
