#include "examples/common/last_epochs.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace common {

void LastEpochs::add(const nn::Module& model) {
    if (k_ <= 0) return;
    std::vector<std::vector<float>> params;
    for (const autograd::Tensor& t : model.parameters()) params.push_back(t.to_vector());
    kept_.push_back(std::move(params));
    if (static_cast<int>(kept_.size()) > k_) kept_.erase(kept_.begin());
}

void LastEpochs::average_into(nn::Module& model) const {
    auto params = model.parameters();
    for (const auto& epoch : kept_) {
        bool same = epoch.size() == params.size();
        for (size_t i = 0; same && i < params.size(); i++) same = static_cast<int64_t>(epoch[i].size()) == params[i].numel();
        if (!same) throw std::invalid_argument("LastEpochs::average_into: the module's parameters are not those of the epochs kept");
    }
    for (size_t i = 0; i < params.size(); i++) {
        float* p = params[i].data();
        std::fill(p, p + params[i].numel(), 0.0f);
        for (const auto& epoch : kept_)
            for (int64_t j = 0; j < params[i].numel(); j++) p[j] += epoch[i][j] / static_cast<float>(kept_.size());
    }
}

}  // namespace common
