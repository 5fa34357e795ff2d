#include "examples/common/saved_model.h"

#include <cstdio>

#include "autograd/io/safetensors.h"
#include "examples/common/run_state.h"

namespace common {

void save_model(const models::Seq2Seq& model, const std::string& path, const std::string& task, models::json::Object settings) {
    for (auto& entry : models::model_to_metadata(model)) settings.push_back(std::move(entry));
    settings.push_back({"task", task});
    nn::save(model, path, models::to_metadata(settings));
}

SavedModel load_saved_model(const std::string& path) {
    const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(path);   // checks the checksums the file has
    if (!f.checksummed) std::fprintf(stderr, "note: '%s' carries no checksums (written before they were recorded): damage to it cannot be detected\n", path.c_str());
    std::unique_ptr<models::Seq2Seq> model = models::model_from_metadata(f, path);   // checks the config against the weights first
    // an interrupted run's state (run_state.h) holds the optimizer's tensors too: its parameters are the model
    nn::load_parameters(*model, f, path, /*allow_unexpected=*/note_if_run_state(f, path));
    return {std::move(model), f.metadata};
}

}  // namespace common
