#include "models/data_parallel.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/data_parallel.h"

namespace models {

using autograd::Tensor;

static float backward_per_token(const Tensor& loss, float weight, const char* what) {
    if (loss.numel() != 1)
        throw std::invalid_argument(std::string("backward_in_shards: the loss of ") + what + " has shape " +
                                    autograd::shape_str(loss.shape()) + "; it must be one value (a mean per token)");
    loss.backward(Tensor::full(loss.shape(), weight));   // d(weight * loss) / d(loss) = weight
    return weight * loss.item();
}

float backward_in_shards(const Batch& b, int shards, const std::function<Tensor(const Batch& part)>& loss_of) {
    if (shards < 1) throw std::invalid_argument("backward_in_shards: shards must be at least 1, got " + std::to_string(shards));
    if (shards == 1) return backward_per_token(loss_of(b), 1.0f, "the batch");
    const std::vector<Batch> parts = split_batch(b, shards);
    std::vector<float> losses(parts.size(), 0.0f);
    autograd::for_each_shard(shards, [&](int s) {
        const Batch& part = parts[static_cast<size_t>(s)];
        if (part.ntokens == 0) return;   // no token: no loss, no gradient
        const float weight = static_cast<float>(part.ntokens) / static_cast<float>(b.ntokens);
        losses[static_cast<size_t>(s)] = backward_per_token(loss_of(part), weight, "a part");
    });
    float loss = 0.0f;
    for (float l : losses) loss += l;   // in shard order: the same sum on any number of threads
    return loss;
}

}  // namespace models
