#include "examples/common/saved_model.h"

#include "autograd/io/safetensors.h"

namespace common {

void save_model(const models::Transformer& model, const std::string& path, const std::string& task, models::json::Object settings) {
    settings.push_back({"config", models::config_to_json(model.cfg)});
    settings.push_back({"task", task});
    nn::save(model, path, models::to_metadata(settings));
}

SavedModel load_saved_model(const std::string& path) {
    const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(path);
    auto model = std::make_unique<models::Transformer>(models::read_metadata(f.metadata, "config", path, models::config_from_json));
    nn::load_parameters(*model, f, path);
    return {std::move(model), f.metadata};
}

}  // namespace common
