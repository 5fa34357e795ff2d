// A model that an example saves (--save) and reads back (--load): its kind and config are in the
// file's metadata, so the model is built from them before the weights are read in.
//
//   common::save_model(model, "copy.safetensors", "copy", {{"seq_len", 10}});
//   const common::SavedModel saved = common::load_saved_model("copy.safetensors");
//   models::Seq2Seq& model = *saved.model;   // a Transformer or a recurrent encoder-decoder
//   int64_t L = models::read_metadata(saved.metadata, "seq_len", path, models::integer_from_json);
#pragma once
#include <memory>
#include <string>

#include "models/checkpoint.h"
#include "models/seq2seq.h"
#include "nn/serialization.h"

namespace common {

// The weights, and in the metadata (each value as JSON) the model's kind and config
// (models::model_to_metadata), {"task": task} and `settings` (anything else --load needs).
void save_model(const models::Seq2Seq& model, const std::string& path, const std::string& task, models::json::Object settings);

struct SavedModel {
    std::unique_ptr<models::Seq2Seq> model;
    nn::Metadata metadata;   // everything else the example wrote: its settings, vocabularies, ...
};

// Throws std::runtime_error naming the file: unreadable, a tensor whose bytes fail their checksum
// (a file without checksums loads, with a note on stderr), no valid "model" or "config", a config
// larger than the weights the file holds, missing, mismatched or non-finite weights
// (models/checkpoint.h, nn/serialization.h).
SavedModel load_saved_model(const std::string& path);

}  // namespace common
