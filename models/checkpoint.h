// Everything a checkpoint stores besides the weights: the model's config, and whatever else a
// program needs to carry on (vocabularies, settings, the state of a random generator).
//
// A safetensors file's "__metadata__" maps strings to strings. Every value we put there is a JSON
// text (autograd/io/json.h, the parser that already reads the safetensors header), so numbers,
// flags, lists and objects all have one format, and any language reads them back:
//
//   "__metadata__": {"config": "{\"src_vocab\":11,\"tgt_vocab\":11,\"layers\":2,...}",
//                    "seq_len": "10", "task": "\"copy\""}
//
//   nn::save(model, path, models::to_metadata({{"config", models::config_to_json(model.cfg)}, {"seq_len", 10}}));
//   const SafetensorsFile f = autograd::io::load_safetensors(path);
//   std::unique_ptr<models::Seq2Seq> same = models::model_from_metadata(f, path);
//   nn::load_parameters(*same, f, path);
//
// The mapping lives here rather than in transformer.h, so that file stays the paper.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>

#include "autograd/io/json.h"
#include "autograd/random.h"
#include "models/gpt.h"
#include "models/rnn_seq2seq.h"
#include "models/transformer.h"
#include "nn/serialization.h"

namespace models {

namespace json = autograd::io::json;

// {"src_vocab": 11, "tgt_vocab": 11, "layers": 2, "d_model": 128, "d_ff": 256, "heads": 4,
//  "dropout": 0.1, "pre_norm": true, "max_len": 5000}
json::Value config_to_json(const TransformerConfig& cfg);
// Needs every key above and no other; validates. Throws std::runtime_error naming the key:
// "missing key 'd_model'", "'layers' must be an integer, got 2.5", "unknown key 'dropuot'".
TransformerConfig config_from_json(const json::Value& v);

// {"src_vocab": 11, "tgt_vocab": 11, "embed": 64, "hidden": 128, "layers": 1, "cell": "gru",
//  "context": "bahdanau" (or "sutskever", "cho"), "bidirectional": true,
//  "score": "additive" (or "dot", "general", "cosine"; "none" unless bahdanau),
//  "reverse_source": false, "dropout": 0.1}
json::Value config_to_json(const RNNSeq2SeqConfig& cfg);
// Every key needed; validates. The config of the recurrent models before they were rebuilt as
// their papers' ("attention": ..., "context": "initial_state" or "every_step") is refused by name.
RNNSeq2SeqConfig rnn_config_from_json(const json::Value& v);

// Any model a checkpoint may hold: metadata "model" names its kind ("transformer", "rnn"; a file
// without it holds a Transformer) and "config" its config. model_from_metadata builds the model
// from file.metadata (its parameters are then read with nn::load_parameters); model_to_metadata
// gives the two entries for a model; model_kind its name.
// A config can name any sizes, but the file's tensors cannot lie about how many bytes they hold:
// a config whose model has more parameters than the file holds F32 values, or more parameter
// tensors than it holds F32 tensors, is refused before the model is built, so no file makes the
// program allocate far beyond its own size: "'c.safetensors': metadata 'config' describes a
// model of 4000000000000 parameters, but the file holds only 1234 F32 values".
std::unique_ptr<Seq2Seq> model_from_metadata(const autograd::io::SafetensorsFile& file, const std::string& path);
json::Object model_to_metadata(const Seq2Seq& model);
const char* model_kind(const Seq2Seq& model);

// GPT (models/gpt.h): {"vocab": 65, "block_size": 64, "layers": 4, "heads": 4, "d_model": 128,
// "dropout": 0}, every key needed, validated. gpt_from_metadata builds the model a file's
// metadata "config" describes (metadata "model" must be "gpt"), after checking that the file
// holds as many F32 values and tensors as the model has parameters; gpt_to_metadata gives the two
// entries. GPTConfig's parameter count from its sizes alone: gpt_parameter_count.
json::Value config_to_json(const GPTConfig& cfg);
GPTConfig gpt_config_from_json(const json::Value& v);
int64_t gpt_parameter_count(const GPTConfig& cfg);   // saturates at INT64_MAX
std::unique_ptr<GPT> gpt_from_metadata(const autograd::io::SafetensorsFile& file, const std::string& path);
json::Object gpt_to_metadata(const GPT& model);

// {"state": ["s0", "s1", "s2", "s3"], "spare": 0.5, "has_spare": false}: the generator's four
// 64-bit words as decimal strings (a JSON number is a double, exact only up to 2^53) and its
// waiting Box-Muller normal, so a resumed run draws exactly the numbers the first run would have.
json::Value rng_to_json(const autograd::Rng& rng);
autograd::Rng rng_from_json(const json::Value& v);

// A whole number (a JSON number is a double): throws unless v is one that fits in int64_t.
int64_t integer_from_json(const json::Value& v);

// Each value written as its JSON text, ready for nn::save.
nn::Metadata to_metadata(const json::Object& values);

// metadata[key] parsed as JSON. Throws std::runtime_error naming the file, the key and the
// problem: "'c.safetensors': the metadata has no 'config' (it has: task, seq_len)".
json::Value metadata_json(const nn::Metadata& metadata, const std::string& key, const std::string& file);

// metadata[key] parsed as JSON and converted by `read` (config_from_json, integer_from_json, ...);
// any error names the file and the key: "'c.safetensors': metadata 'config': missing key 'd_model'".
template <class Read>
auto read_metadata(const nn::Metadata& metadata, const std::string& key, const std::string& file, Read read) {
    const json::Value v = metadata_json(metadata, key, file);
    try {
        return read(v);
    } catch (const std::exception& e) {
        throw std::runtime_error("'" + file + "': metadata '" + key + "': " + e.what());
    }
}

}  // namespace models
