#include "optim/optimizer.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <unordered_set>

namespace optim {

using autograd::shape_str;
using autograd::io::TensorRecord;

Optimizer::Optimizer(std::vector<Tensor> params, float lr) : params_(std::move(params)), lr_(lr) {
    if (params_.empty())
        throw std::invalid_argument("Optimizer: empty parameter list (did the model register its parameters?)");
    std::unordered_set<const autograd::Node*> seen;
    for (size_t i = 0; i < params_.size(); i++) {
        const std::string which = "Optimizer: parameter " + std::to_string(i);
        if (!params_[i].defined()) throw std::invalid_argument(which + " is an undefined tensor");
        if (!params_[i].requires_grad())
            throw std::invalid_argument(which + " " + shape_str(params_[i].shape()) +
                                        " does not require grad (call requires_grad_() or leave it out)");
        if (!params_[i].is_leaf())
            throw std::invalid_argument(which + " was made by '" + params_[i].op() +
                                        "'; only leaf tensors can be optimized");
        if (!seen.insert(params_[i].node_ptr().get()).second)
            throw std::invalid_argument(which + " appears twice in the list (it would be updated twice per step)");
    }
    set_lr(lr);
    param_steps_.assign(params_.size(), 0);
}

void Optimizer::set_lr(float lr) {
    if (!std::isfinite(lr) || lr < 0.0f)
        throw std::invalid_argument("Optimizer: learning rate must be finite and >= 0, got " + std::to_string(lr));
    lr_ = lr;
}

void Optimizer::zero_grad() {
    for (Tensor& p : params_) p.zero_grad();
}

int Optimizer::add_state(const std::string& buffer_name) {
    buffer_names_.push_back(buffer_name);
    buffers_.emplace_back();
    return static_cast<int>(buffers_.size()) - 1;
}

void Optimizer::begin_step() {
    if (!state_ready_) {                 // the only allocation a step() ever makes
        for (auto& slot : buffers_) {
            slot.resize(params_.size());
            for (size_t i = 0; i < params_.size(); i++) slot[i].assign(static_cast<size_t>(params_[i].numel()), 0.0f);
        }
        state_ready_ = true;
    }
    step_count_++;
}

std::string Optimizer::prefix() const {
    std::string s = name();
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string Optimizer::float_text(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));   // 9 digits round-trip a float
    return buf;
}

// ---- checkpointing ----

// I64 records, written byte by byte so the file is little-endian on any host.
static TensorRecord i64_record(const std::string& name, const autograd::Shape& shape, const int64_t* data) {
    const int64_t n = autograd::shape_numel(shape);
    TensorRecord r{name, "I64", shape, std::vector<uint8_t>(static_cast<size_t>(n) * 8)};
    for (int64_t i = 0; i < n; i++)
        for (int b = 0; b < 8; b++) r.bytes[i * 8 + b] = static_cast<uint8_t>(static_cast<uint64_t>(data[i]) >> (8 * b));
    return r;
}
static std::vector<int64_t> as_i64(const TensorRecord& r) {   // caller has checked dtype and shape
    std::vector<int64_t> out(r.bytes.size() / 8);
    for (size_t i = 0; i < out.size(); i++) {
        uint64_t u = 0;
        for (int b = 0; b < 8; b++) u |= static_cast<uint64_t>(r.bytes[i * 8 + b]) << (8 * b);
        out[i] = static_cast<int64_t>(u);
    }
    return out;
}

std::vector<TensorRecord> Optimizer::state_records() const {
    std::vector<TensorRecord> recs;
    recs.push_back(i64_record("optim.step_count", {}, &step_count_));
    recs.push_back(autograd::io::f32_record("optim.lr", {}, &lr_));
    recs.push_back(i64_record("optim.param_steps", {static_cast<int64_t>(params_.size())}, param_steps_.data()));
    std::vector<float> zeros;
    for (size_t s = 0; s < buffers_.size(); s++)
        for (size_t i = 0; i < params_.size(); i++) {
            const float* d = nullptr;
            if (state_ready_) d = buffers_[s][i].data();
            else { zeros.assign(static_cast<size_t>(params_[i].numel()), 0.0f); d = zeros.data(); }
            recs.push_back(autograd::io::f32_record(prefix() + "." + buffer_names_[s] + "." + std::to_string(i), params_[i].shape(), d));
        }
    return recs;
}

std::map<std::string, std::string> Optimizer::state_metadata() const {
    return {{"optim.type", name()}};
}

static bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

void Optimizer::load_state_records(const autograd::io::SafetensorsFile& f) {
    const std::string who = "load_state_records (" + name() + "): ";
    const size_t P = params_.size();
    // 1) the file must hold state for this kind of optimizer
    auto type = f.metadata.find("optim.type");
    if (type == f.metadata.end())
        throw std::runtime_error(who + "no \"optim.type\" metadata: this is not an optimizer state");
    if (type->second != name())
        throw std::runtime_error(who + "the state was saved by " + type->second + ", this optimizer is " + name());

    // 2) every expected record, with its dtype and shape; collect all problems before throwing
    std::vector<std::string> problems;
    std::set<std::string> expected;
    auto need = [&](const std::string& rec, const char* dtype, const autograd::Shape& shape) -> const TensorRecord* {
        expected.insert(rec);
        const TensorRecord* r = f.find(rec);
        if (!r) problems.push_back("missing '" + rec + "'");
        else if (r->dtype != dtype || r->shape != shape)
            problems.push_back("'" + rec + "' is " + r->dtype + " " + shape_str(r->shape) + ", expected " + dtype + " " + shape_str(shape));
        else return r;
        return nullptr;
    };
    const TensorRecord* r_step = need("optim.step_count", "I64", {});
    const TensorRecord* r_lr = need("optim.lr", "F32", {});
    const TensorRecord* r_ps = f.find("optim.param_steps");
    if (r_ps && r_ps->dtype == "I64" && r_ps->shape.size() == 1 && r_ps->shape[0] != static_cast<int64_t>(P))
        problems.push_back("the state is for " + std::to_string(r_ps->shape[0]) + " parameters, this optimizer has " + std::to_string(P));
    r_ps = need("optim.param_steps", "I64", {static_cast<int64_t>(P)});

    const int64_t step_count = r_step ? as_i64(*r_step)[0] : 0;
    const float lr = r_lr ? autograd::io::as_f32(*r_lr)[0] : 0.0f;
    std::vector<int64_t> param_steps = r_ps ? as_i64(*r_ps) : std::vector<int64_t>(P, 0);
    if (step_count < 0) problems.push_back("negative optim.step_count " + std::to_string(step_count));
    if (!std::isfinite(lr) || lr < 0.0f) problems.push_back("optim.lr " + float_text(lr) + " is not a valid learning rate");
    for (size_t i = 0; i < param_steps.size(); i++)
        if (param_steps[i] < 0 || param_steps[i] > step_count) {
            problems.push_back("optim.param_steps[" + std::to_string(i) + "] = " + std::to_string(param_steps[i]) +
                               " is outside [0, step_count]");
            break;
        }

    std::vector<std::vector<std::vector<float>>> buffers(buffers_.size(), std::vector<std::vector<float>>(P));
    for (size_t s = 0; s < buffers_.size(); s++)
        for (size_t i = 0; i < P; i++)
            if (const TensorRecord* r = need(prefix() + "." + buffer_names_[s] + "." + std::to_string(i), "F32", params_[i].shape()))
                buffers[s][i] = autograd::io::as_f32(*r);

    // 3) nothing unexpected under our prefixes (other records, e.g. model weights, are not ours)
    for (const TensorRecord& r : f.tensors)
        if ((starts_with(r.name, "optim.") || starts_with(r.name, prefix() + ".")) && !expected.count(r.name))
            problems.push_back("unexpected '" + r.name + "'");

    if (!problems.empty()) {
        std::string msg = who + std::to_string(problems.size()) + " problem(s): ";
        for (size_t i = 0; i < problems.size() && i < 8; i++) msg += (i ? "; " : "") + problems[i];
        if (problems.size() > 8) msg += "; ... and " + std::to_string(problems.size() - 8) + " more";
        throw std::runtime_error(msg);
    }
    // 4) commit: nothing below can fail
    step_count_ = step_count;
    lr_ = lr;
    param_steps_ = std::move(param_steps);
    buffers_ = std::move(buffers);
    state_ready_ = true;
}

void save_optimizer(const Optimizer& opt, const std::string& path, std::map<std::string, std::string> metadata) {
    for (const auto& [k, v] : metadata)
        if (starts_with(k, "optim."))
            throw std::invalid_argument("save_optimizer: metadata key '" + k + "' is reserved (\"optim.*\" keys describe the optimizer)");
    for (auto& [k, v] : opt.state_metadata()) metadata[k] = v;
    autograd::io::save_safetensors(path, opt.state_records(), metadata);
}

void load_optimizer(Optimizer& opt, const std::string& path) {
    const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(path);   // its errors already name the path
    try {
        opt.load_state_records(f);
    } catch (const std::runtime_error& e) {
        throw std::runtime_error("load_optimizer: '" + path + "': " + e.what());
    }
}

}  // namespace optim
