// Optimizer state <-> safetensors records: see checkpoint.h for the records and their names.
#include "optim/checkpoint.h"

#include <cctype>
#include <set>
#include <stdexcept>

#include "autograd/io/problems.h"

namespace optim {

using autograd::shape_str;
using autograd::io::SafetensorsFile;
using autograd::io::TensorRecord;

// "adam", "sgd": the prefix of a rule's buffer records.
static std::string rule_prefix(const Optimizer& opt) {
    std::string s = opt.name();
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// "adam.m.3": buffer `slot` of parameter i.
static std::string buffer_record_name(const Optimizer& opt, size_t slot, size_t i) {
    return rule_prefix(opt) + "." + opt.buffer_names()[slot] + "." + std::to_string(i);
}

static bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

std::vector<TensorRecord> state_records(const Optimizer& opt) {
    const int64_t step_count = opt.step_count();
    const float lr = opt.lr();
    const size_t P = opt.params().size();
    std::vector<TensorRecord> recs;
    recs.push_back(autograd::io::i64_record("optim.step_count", {}, &step_count));
    recs.push_back(autograd::io::f32_record("optim.lr", {}, &lr));
    recs.push_back(autograd::io::i64_record("optim.param_steps", {static_cast<int64_t>(P)}, opt.param_steps().data()));
    std::vector<float> zeros;
    for (size_t s = 0; s < opt.buffer_names().size(); s++)
        for (size_t i = 0; i < P; i++) {
            const Tensor& p = opt.params()[i];
            const float* d = opt.state_buffer(s, i);
            if (!d) {                                    // before the first step: all zeros
                zeros.assign(static_cast<size_t>(p.numel()), 0.0f);
                d = zeros.data();
            }
            recs.push_back(autograd::io::f32_record(buffer_record_name(opt, s, i), p.shape(), d));
        }
    return recs;
}

std::map<std::string, std::string> state_metadata(const Optimizer& opt) {
    std::map<std::string, std::string> m = {{"optim.type", opt.name()}};
    for (const auto& [k, v] : opt.hyperparameters()) m["optim." + k] = v;
    return m;
}

void load_state_records(Optimizer& opt, const SafetensorsFile& f) {
    const std::string who = "load_state_records (" + opt.name() + "): ";
    const size_t P = opt.params().size();
    // 1) the file must hold state for this kind of optimizer
    auto type = f.metadata.find("optim.type");
    if (type == f.metadata.end())
        throw std::runtime_error(who + "no \"optim.type\" metadata: this is not an optimizer state");
    if (type->second != opt.name())
        throw std::runtime_error(who + "the state was saved by " + type->second + ", this optimizer is " + opt.name());

    // 2) every expected record, with its dtype and shape; collect all problems before throwing
    autograd::io::Problems problems(who + "the state does not fit this optimizer");
    std::set<std::string> expected;
    auto need = [&](const std::string& rec, const char* dtype, const autograd::Shape& shape) -> const TensorRecord* {
        expected.insert(rec);
        const TensorRecord* r = f.find(rec);
        if (!r) problems.add("missing '" + rec + "'");
        else if (r->dtype != dtype || r->shape != shape)
            problems.add("'" + rec + "' is " + r->dtype + " " + shape_str(r->shape) + ", expected " + dtype + " " + shape_str(shape));
        else return r;
        return nullptr;
    };
    const TensorRecord* r_step = need("optim.step_count", "I64", {});
    const TensorRecord* r_lr = need("optim.lr", "F32", {});
    const TensorRecord* r_ps = f.find("optim.param_steps");
    if (r_ps && r_ps->dtype == "I64" && r_ps->shape.size() == 1 && r_ps->shape[0] != static_cast<int64_t>(P))
        problems.add("the state is for " + std::to_string(r_ps->shape[0]) + " parameters, this optimizer has " + std::to_string(P));
    r_ps = need("optim.param_steps", "I64", {static_cast<int64_t>(P)});
    std::vector<std::vector<const TensorRecord*>> r_buf(opt.buffer_names().size());
    for (size_t s = 0; s < r_buf.size(); s++)
        for (size_t i = 0; i < P; i++) r_buf[s].push_back(need(buffer_record_name(opt, s, i), "F32", opt.params()[i].shape()));

    // 3) nothing unexpected under our prefixes (other records, e.g. model weights, are not ours)
    for (const TensorRecord& r : f.tensors)
        if ((starts_with(r.name, "optim.") || starts_with(r.name, rule_prefix(opt) + ".")) && !expected.count(r.name))
            problems.add("unexpected '" + r.name + "'");
    problems.throw_if_any();

    // 4) decode, and hand over: set_state checks the values (counts, lr) before it changes anything
    Optimizer::Buffers buffers(r_buf.size());
    for (size_t s = 0; s < r_buf.size(); s++)
        for (const TensorRecord* r : r_buf[s]) buffers[s].push_back(autograd::io::as_f32(*r));
    try {
        opt.set_state(autograd::io::as_i64(*r_step)[0], autograd::io::as_f32(*r_lr)[0], autograd::io::as_i64(*r_ps),
                      std::move(buffers));
    } catch (const std::invalid_argument& e) {
        throw std::runtime_error(who + e.what());
    }
}

void save_optimizer(const Optimizer& opt, const std::string& path, std::map<std::string, std::string> metadata) {
    for (const auto& [k, v] : metadata)
        if (starts_with(k, "optim."))
            throw std::invalid_argument("save_optimizer: metadata key '" + k + "' is reserved (\"optim.*\" keys describe the optimizer)");
    for (auto& [k, v] : state_metadata(opt)) metadata[k] = v;
    autograd::io::save_safetensors(path, state_records(opt), metadata);
}

void load_optimizer(Optimizer& opt, const std::string& path) {
    const SafetensorsFile f = autograd::io::load_safetensors(path);   // its errors already name the path
    try {
        load_state_records(opt, f);
    } catch (const std::runtime_error& e) {
        throw std::runtime_error("load_optimizer: '" + path + "': " + e.what());
    }
}

}  // namespace optim
