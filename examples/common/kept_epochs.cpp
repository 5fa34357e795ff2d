#include "examples/common/kept_epochs.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace common {

namespace {

ParameterValues copy_parameters(const nn::Module& model) {
    ParameterValues values;
    for (const autograd::Tensor& t : model.parameters()) values.push_back(t.to_vector());
    return values;
}

// Throws unless `values` has the module's parameter shapes (another architecture, not read out of bounds).
void check_same_parameters(const ParameterValues& values, const std::vector<autograd::Tensor>& params) {
    bool same = values.size() == params.size();
    for (size_t i = 0; same && i < params.size(); i++) same = static_cast<int64_t>(values[i].size()) == params[i].numel();
    if (!same) throw std::invalid_argument("KeptEpochs: the module's parameters are not those of the epochs kept");
}

}  // namespace

bool KeptEpochs::add(const nn::Module& model, int epoch, double valid_loss) {
    const bool best = valid_loss < best_loss_;
    if (best) {
        best_ = copy_parameters(model);
        best_epoch_ = epoch;
        best_loss_ = valid_loss;
    }
    if (k_ > 0) {
        last_.push_back(best ? best_ : copy_parameters(model));
        if (static_cast<int>(last_.size()) > k_) last_.erase(last_.begin());
    }
    return best;
}

void KeptEpochs::restore_best(nn::Module& model) const {
    if (best_.empty()) return;
    auto params = model.parameters();
    check_same_parameters(best_, params);
    for (size_t i = 0; i < params.size(); i++) std::copy(best_[i].begin(), best_[i].end(), params[i].data());
}

void KeptEpochs::average_last_into(nn::Module& model) const {
    auto params = model.parameters();
    for (const ParameterValues& epoch : last_) check_same_parameters(epoch, params);
    for (size_t i = 0; i < params.size(); i++) {
        float* p = params[i].data();
        std::fill(p, p + params[i].numel(), 0.0f);
        for (const ParameterValues& epoch : last_)
            for (int64_t j = 0; j < params[i].numel(); j++) p[j] += epoch[i][j] / static_cast<float>(last_.size());
    }
}

}  // namespace common
