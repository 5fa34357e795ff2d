#include "models/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace models {

namespace {

// object[key], with the key named in any error: "key 'layers': expected an integer, got 2.5".
template <class Read>
auto read_key(const json::Value& object, const char* key, Read read) {
    const json::Value* v = object.find(key);
    if (!v) throw std::runtime_error(std::string("missing key '") + key + "'");
    try {
        return read(*v);
    } catch (const std::exception& e) {
        throw std::runtime_error(std::string("key '") + key + "': " + e.what());
    }
}

void reject_unknown_keys(const json::Value& object, std::initializer_list<const char*> known) {
    for (const auto& [key, value] : object.as_object())
        if (std::find(known.begin(), known.end(), key) == known.end())
            throw std::runtime_error("unknown key '" + key + "'");
}

double as_number(const json::Value& v) { return v.as_number(); }
bool as_bool(const json::Value& v) { return v.as_bool(); }

// The shortest decimal that reads back as the same float: 0.1f is written 0.1, not 0.10000000149.
double shortest(float x) {
    char buf[32];
    const auto end = std::to_chars(buf, buf + sizeof buf, x).ptr;
    *end = '\0';
    return std::strtod(buf, nullptr);
}

// "123" -> 123: the whole text must be an unsigned 64-bit decimal.
uint64_t u64_from_json(const json::Value& v) {
    const std::string& text = v.as_string();
    uint64_t x = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
    if (ec != std::errc() || end != text.data() + text.size())
        throw std::runtime_error("expected an unsigned 64-bit integer in decimal, got '" + text + "'");
    return x;
}

}  // namespace

int64_t integer_from_json(const json::Value& v) {
    const double x = v.as_number();
    if (x != std::floor(x) || std::fabs(x) > 9007199254740992.0)   // 2^53: beyond it a double skips integers
        throw std::runtime_error("expected an integer, got " + json::dump(v));
    return static_cast<int64_t>(x);
}

// ---------------------------------------------------------------- the model's config

json::Value config_to_json(const TransformerConfig& c) {
    return json::Object{{"src_vocab", c.src_vocab}, {"tgt_vocab", c.tgt_vocab}, {"layers", c.layers},
                        {"d_model", c.d_model},     {"d_ff", c.d_ff},           {"heads", c.heads},
                        {"dropout", shortest(c.dropout)}, {"pre_norm", c.pre_norm}, {"max_len", c.max_len},
                        {"tie_weights", c.tie_weights}};
}

TransformerConfig config_from_json(const json::Value& v) {
    reject_unknown_keys(v, {"src_vocab", "tgt_vocab", "layers", "d_model", "d_ff", "heads", "dropout", "pre_norm", "max_len", "tie_weights"});
    TransformerConfig c;
    c.src_vocab = read_key(v, "src_vocab", integer_from_json);
    c.tgt_vocab = read_key(v, "tgt_vocab", integer_from_json);
    c.layers = read_key(v, "layers", integer_from_json);
    c.d_model = read_key(v, "d_model", integer_from_json);
    c.d_ff = read_key(v, "d_ff", integer_from_json);
    c.heads = read_key(v, "heads", integer_from_json);
    c.dropout = static_cast<float>(read_key(v, "dropout", as_number));
    c.pre_norm = read_key(v, "pre_norm", as_bool);
    c.max_len = read_key(v, "max_len", integer_from_json);
    if (v.find("tie_weights")) c.tie_weights = read_key(v, "tie_weights", as_bool);   // optional: false
    c.validate();
    return c;
}

json::Value config_to_json(const RNNSeq2SeqConfig& c) {
    const char* cell = c.cell == nn::CellKind::gru ? "gru" : c.cell == nn::CellKind::lstm ? "lstm" : "rnn";
    return json::Object{{"src_vocab", c.src_vocab}, {"tgt_vocab", c.tgt_vocab}, {"embed", c.embed},
                        {"hidden", c.hidden},       {"layers", c.layers},       {"cell", cell},
                        {"context", context_name(c.context)}, {"bidirectional", c.bidirectional},
                        {"score", c.attention() ? nn::score_name(c.score) : "none"},
                        {"reverse_source", c.reverse_source}, {"dropout", shortest(c.dropout)}};
}

RNNSeq2SeqConfig rnn_config_from_json(const json::Value& v) {
    // A config with "attention" (and "context": "initial_state" or "every_step") is of the models
    // before they were rebuilt as their papers': a bridge into the decoder's first state, the
    // LSTM's memory restarted at 0, a "dot" that scored through a key map. Their weights fit none
    // of today's models, so such a file is refused by name.
    if (v.find("attention"))
        throw std::runtime_error("a recurrent model of an earlier version (its config has 'attention' and context 'initial_state' "
                                 "or 'every_step'), whose weights fit none of today's models (sutskever, cho, bahdanau): retrain it");
    reject_unknown_keys(v, {"src_vocab", "tgt_vocab", "embed", "hidden", "layers", "cell", "context", "bidirectional", "score",
                            "reverse_source", "dropout"});
    RNNSeq2SeqConfig c;
    c.src_vocab = read_key(v, "src_vocab", integer_from_json);
    c.tgt_vocab = read_key(v, "tgt_vocab", integer_from_json);
    c.embed = read_key(v, "embed", integer_from_json);
    c.hidden = read_key(v, "hidden", integer_from_json);
    c.layers = read_key(v, "layers", integer_from_json);
    c.cell = read_key(v, "cell", [](const json::Value& x) { return nn::cell_kind_from_name(x.as_string()); });
    c.context = read_key(v, "context", [](const json::Value& x) { return context_from_name(x.as_string()); });
    c.bidirectional = read_key(v, "bidirectional", as_bool);
    const std::string score = read_key(v, "score", [](const json::Value& x) { return x.as_string(); });
    if (c.attention() != (score != "none"))
        throw std::runtime_error("key 'score': '" + score + "' with context '" + context_name(c.context) + "' (only bahdanau has a score; "
                                 "the others have \"none\")");
    if (c.attention()) c.score = read_key(v, "score", [](const json::Value& x) { return nn::score_from_name(x.as_string()); });
    c.reverse_source = read_key(v, "reverse_source", as_bool);
    c.dropout = static_cast<float>(read_key(v, "dropout", as_number));
    c.validate();
    return c;
}

// ---------------------------------------------------------------- any model

// The F32 tensors a file holds and their values: every parameter of the model it is a checkpoint
// of is one of them.
struct F32Held {
    int64_t tensors = 0, values = 0;
};
static F32Held f32_held(const autograd::io::SafetensorsFile& file) {
    F32Held held;
    for (const autograd::io::TensorRecord& t : file.tensors)
        if (t.dtype == "F32") {
            held.tensors++;
            held.values += static_cast<int64_t>(t.bytes.size() / 4);
        }
    return held;
}

std::unique_ptr<Seq2Seq> model_from_metadata(const autograd::io::SafetensorsFile& file, const std::string& path) {
    const nn::Metadata& metadata = file.metadata;
    // checkpoints written before the recurrent models have no "model": they hold a Transformer
    const std::string kind = metadata.count("model") ? read_metadata(metadata, "model", path, [](const json::Value& v) {
        return v.as_string();
    }) : "transformer";
    // the config's sizes against the file's tensors and bytes, before a single parameter is allocated
    const F32Held held = f32_held(file);
    const auto check_fits = [&](int64_t count, int64_t tensors) {
        if (count > held.values)
            throw std::runtime_error("'" + path + "': metadata 'config' describes a model of " + std::to_string(count) +
                                     " parameters, but the file holds only " + std::to_string(held.values) + " F32 values");
        if (tensors > held.tensors)
            throw std::runtime_error("'" + path + "': metadata 'config' describes a model of " + std::to_string(tensors) +
                                     " parameter tensors, but the file holds only " + std::to_string(held.tensors) + " F32 tensors");
    };
    if (kind == "transformer") {
        const TransformerConfig cfg = read_metadata(metadata, "config", path, config_from_json);
        check_fits(cfg.parameter_count(), cfg.parameter_tensors());
        return std::make_unique<Transformer>(cfg);
    }
    if (kind == "rnn") {
        const RNNSeq2SeqConfig cfg = read_metadata(metadata, "config", path, rnn_config_from_json);
        check_fits(cfg.parameter_count(), cfg.parameter_tensors());
        return std::make_unique<RNNSeq2Seq>(cfg);
    }
    throw std::runtime_error("'" + path + "': metadata 'model' is '" + kind + "', not a model this program knows (transformer, rnn)");
}

json::Object model_to_metadata(const Seq2Seq& model) {
    if (const auto* t = dynamic_cast<const Transformer*>(&model)) return {{"model", "transformer"}, {"config", config_to_json(t->cfg)}};
    if (const auto* r = dynamic_cast<const RNNSeq2Seq*>(&model)) return {{"model", "rnn"}, {"config", config_to_json(r->cfg)}};
    throw std::logic_error("model_to_metadata: a model of a kind checkpoints do not know");
}

const char* model_kind(const Seq2Seq& model) { return dynamic_cast<const RNNSeq2Seq*>(&model) ? "rnn" : "transformer"; }

// ---------------------------------------------------------------- GPT

json::Value config_to_json(const GPTConfig& c) {
    return json::Object{{"vocab", c.vocab},   {"block_size", c.block_size}, {"layers", c.layers},
                        {"heads", c.heads},   {"d_model", c.d_model},       {"dropout", shortest(c.dropout)}};
}

GPTConfig gpt_config_from_json(const json::Value& v) {
    reject_unknown_keys(v, {"vocab", "block_size", "layers", "heads", "d_model", "dropout"});
    GPTConfig c;
    c.vocab = read_key(v, "vocab", integer_from_json);
    c.block_size = read_key(v, "block_size", integer_from_json);
    c.layers = read_key(v, "layers", integer_from_json);
    c.heads = read_key(v, "heads", integer_from_json);
    c.d_model = read_key(v, "d_model", integer_from_json);
    c.dropout = static_cast<float>(read_key(v, "dropout", as_number));
    c.validate();
    return c;
}

int64_t gpt_parameter_count(const GPTConfig& c) {
    // wte (V, D) and wpe (T_max, D); per block two LayerNorms, four (D, D) projections with biases,
    // the feed-forward D -> 4D -> D; ln_f. The output layer is wte.
    const long double D = c.d_model, V = c.vocab, T = c.block_size, N = c.layers;
    const long double block = 2 * 2 * D + 4 * (D * D + D) + (D * 4 * D + 4 * D) + (4 * D * D + D);
    const long double total = V * D + T * D + N * block + 2 * D;
    return total >= 0x1p63L ? INT64_MAX : static_cast<int64_t>(total);
}

std::unique_ptr<GPT> gpt_from_metadata(const autograd::io::SafetensorsFile& file, const std::string& path) {
    const std::string kind = read_metadata(file.metadata, "model", path, [](const json::Value& v) { return v.as_string(); });
    if (kind != "gpt") throw std::runtime_error("'" + path + "': metadata 'model' is '" + kind + "', not a GPT");
    const GPTConfig cfg = read_metadata(file.metadata, "config", path, gpt_config_from_json);
    const F32Held held = f32_held(file);
    const long double tensors = 2 + static_cast<long double>(cfg.layers) * 16 + 2;   // a block: 4 norm, 8 attention, 4 feed-forward
    if (gpt_parameter_count(cfg) > held.values || tensors > held.tensors)
        throw std::runtime_error("'" + path + "': metadata 'config' describes a GPT of " + std::to_string(gpt_parameter_count(cfg)) +
                                 " parameters, but the file holds only " + std::to_string(held.values) + " F32 values in " +
                                 std::to_string(held.tensors) + " tensors");
    return std::make_unique<GPT>(cfg);
}

json::Object gpt_to_metadata(const GPT& model) { return {{"model", "gpt"}, {"config", config_to_json(model.cfg)}}; }

// ---------------------------------------------------------------- a random generator's state

json::Value rng_to_json(const autograd::Rng& rng) {
    const autograd::Rng::State st = rng.state();
    json::Array words;
    for (uint64_t w : st.s) words.emplace_back(std::to_string(w));
    return json::Object{{"state", std::move(words)}, {"spare", st.spare}, {"has_spare", st.has_spare}};
}

autograd::Rng rng_from_json(const json::Value& v) {
    reject_unknown_keys(v, {"state", "spare", "has_spare"});
    autograd::Rng::State st{};
    read_key(v, "state", [&](const json::Value& words) {
        if (words.as_array().size() != 4)
            throw std::runtime_error("expected 4 words, got " + std::to_string(words.as_array().size()));
        for (int i = 0; i < 4; i++) st.s[i] = u64_from_json(words.as_array()[i]);
        if ((st.s[0] | st.s[1] | st.s[2] | st.s[3]) == 0)
            throw std::runtime_error("the four words are all 0 (xoshiro256** would draw only zeros)");
        return 0;
    });
    st.spare = static_cast<float>(read_key(v, "spare", as_number));   // a float, written exactly as a double
    st.has_spare = read_key(v, "has_spare", as_bool);
    autograd::Rng rng;
    rng.set_state(st);
    return rng;
}

// ---------------------------------------------------------------- metadata: every value a JSON text

nn::Metadata to_metadata(const json::Object& values) {
    nn::Metadata out;
    for (const auto& [key, value] : values) out[key] = json::dump(value);
    return out;
}

json::Value metadata_json(const nn::Metadata& metadata, const std::string& key, const std::string& file) {
    const auto it = metadata.find(key);
    if (it == metadata.end()) {
        std::string keys;
        for (const auto& [k, v] : metadata) keys += (keys.empty() ? "" : ", ") + k;
        throw std::runtime_error("'" + file + "': the metadata has no '" + key + "' (it has: " +
                                 (keys.empty() ? "nothing" : keys) + ")");
    }
    try {
        return json::parse(it->second);
    } catch (const std::exception& e) {
        throw std::runtime_error("'" + file + "': metadata '" + key + "' is not JSON: " + e.what());
    }
}

}  // namespace models
