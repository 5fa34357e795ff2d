#include "nn/serialization.h"

#include <cmath>
#include <cstring>
#include <set>

#include "autograd/io/problems.h"

namespace nn {

using autograd::io::as_f32;
using autograd::io::f32_record;
using autograd::io::load_safetensors;
using autograd::io::save_safetensors;
using autograd::io::SafetensorsFile;
using autograd::io::TensorRecord;

std::vector<TensorRecord> parameter_records(const Module& module) {
    std::vector<TensorRecord> recs;
    for (const auto& [name, t] : module.named_parameters()) recs.push_back(f32_record(name, t.shape(), t.data()));
    return recs;
}

void save(const Module& module, const std::string& path, const Metadata& metadata) {
    save_safetensors(path, parameter_records(module), metadata);
}

// "NaN at element 17" for an F32 record's first value that is not finite (a checkpoint saved after
// training diverged, or a corrupted file); "" when every value is finite.
static std::string first_non_finite(const TensorRecord& r) {
    for (size_t i = 0; i < r.bytes.size() / sizeof(float); i++) {
        float x;
        std::memcpy(&x, r.bytes.data() + i * sizeof(float), sizeof(float));
        if (!std::isfinite(x))
            return std::string(std::isnan(x) ? "NaN" : x > 0 ? "Inf" : "-Inf") + " at element " + std::to_string(i);
    }
    return "";
}

void load_parameters(Module& module, const SafetensorsFile& file, const std::string& path, bool allow_unexpected) {
    // 1) check every name, dtype, shape and value, collecting all problems
    autograd::io::Problems problems("load: '" + path + "' does not fit this model");
    std::set<std::string> expected;
    auto params = module.named_parameters();
    for (const auto& [name, t] : params) {
        expected.insert(name);
        const TensorRecord* r = file.find(name);
        if (!r) problems.add("missing parameter '" + name + "' " + autograd::shape_str(t.shape()));
        else if (r->dtype != "F32") problems.add("'" + name + "' has dtype " + r->dtype + ", expected F32");
        else if (r->shape != t.shape())
            problems.add("'" + name + "' has shape " + autograd::shape_str(r->shape) + " in the file but " +
                         autograd::shape_str(t.shape()) + " in the model");
        else if (const std::string bad = first_non_finite(*r); !bad.empty())
            problems.add("'" + name + "' holds " + bad);   // a model loaded with it would only ever output NaN
    }
    if (!allow_unexpected)
        for (const TensorRecord& r : file.tensors)
            if (!expected.count(r.name)) problems.add("unexpected tensor '" + r.name + "' (not a parameter of this model)");
    problems.throw_if_any();
    // 2) only now copy: a failed load never leaves half a model
    for (auto& [name, t] : params) {
        const std::vector<float> v = as_f32(*file.find(name));
        std::copy(v.begin(), v.end(), t.data());
    }
}

Metadata load(Module& module, const std::string& path, bool allow_unexpected) {
    const SafetensorsFile file = load_safetensors(path);
    load_parameters(module, file, path, allow_unexpected);
    return file.metadata;
}

}  // namespace nn
