// models/: the Transformer's shapes and masks, decoding, and a tiny model learning the copy task.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include <unistd.h>   // getpid: temp file names unique to this run

#include "examples/data/copy_task_data.h"
#include "examples/data/translation_data.h"
#include "examples/data/tokenizer.h"
#include "examples/data/toy_grammar.h"
#include "examples/data/vocab.h"
#include "models/batch.h"
#include "models/checkpoint.h"
#include "models/decoding.h"
#include "models/rnn_seq2seq.h"
#include "models/transformer.h"
#include "optim/optim.h"
#include "tests/compare.h"
#include "tests/copy_model.h"

using namespace autograd;
using models::Transformer;
using models::TransformerConfig;

static TransformerConfig tiny(int64_t V = 7) {
    return {.src_vocab = V, .tgt_vocab = V, .layers = 2, .d_model = 16, .d_ff = 32, .heads = 2, .dropout = 0.0f};
}

TEST_CASE("masks: padding (B, 1, S), subsequent (1, T, T), target = both") {
    const Tokens ids({5, 3, 0, 0, 4, 4, 4, 0}, {2, 4});
    const Mask pad = models::padding_mask(ids, 0);
    CHECK(pad.shape == Shape{2, 1, 4});
    CHECK(pad.data == std::vector<uint8_t>{1, 1, 0, 0, 1, 1, 1, 0});
    const Mask sub = models::subsequent_mask(3);
    CHECK(sub.shape == Shape{1, 3, 3});
    CHECK(sub.data == std::vector<uint8_t>{1, 0, 0, 1, 1, 0, 1, 1, 1});
    const Mask tgt = models::target_mask(ids, 0);
    CHECK(tgt.shape == Shape{2, 4, 4});
    // batch 0, query 3: sees 0, 1 (2 and 3 are padding); query 1: sees 0, 1
    CHECK(std::vector<uint8_t>(tgt.data.begin() + 12, tgt.data.begin() + 16) == std::vector<uint8_t>{1, 1, 0, 0});
    CHECK(std::vector<uint8_t>(tgt.data.begin() + 4, tgt.data.begin() + 8) == std::vector<uint8_t>{1, 1, 0, 0});
}

TEST_CASE("Batch: the target shifted right is read, shifted left is predicted; masks and token count") {
    // two pairs padded with 0: tgt row 0 is <1 5 6 2>, row 1 is <1 7 2 0>
    const Tokens src({4, 3, 9, 8, 0, 0}, {2, 3}), tgt({1, 5, 6, 2, 1, 7, 2, 0}, {2, 4});
    const models::Batch b = models::make_batch(src, tgt, 0);
    CHECK(b.src.data == src.data);
    CHECK(b.tgt_in.shape == Shape{2, 3});
    CHECK(b.tgt_in.data == std::vector<int32_t>{1, 5, 6, 1, 7, 2});
    CHECK(b.tgt_out.data == std::vector<int32_t>{5, 6, 2, 7, 2, 0});
    CHECK(b.ntokens == 5);   // the padding in tgt_out is not counted
    CHECK(b.src_mask.data == models::padding_mask(src, 0).data);
    CHECK(b.tgt_mask.data == models::target_mask(b.tgt_in, 0).data);
    CHECK_THROWS_WITH_AS(models::make_batch(src, Tokens::full({2, 1}, 1), 0), doctest::Contains("tgt (B, T + 1) with T >= 1"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(models::make_batch(src, Tokens::full({3, 4}, 1), 0), doctest::Contains("got src (2, 3) and tgt (3, 4)"),
                         std::invalid_argument);

    const Tokens padded = models::pad_rows({{1, 2, 3}, {4}, {}}, 9);
    CHECK(padded.shape == Shape{3, 3});
    CHECK(padded.data == std::vector<int32_t>{1, 2, 3, 4, 9, 9, 9, 9, 9});
}

TEST_CASE("checkpoint metadata: the config as JSON, and errors that name the file, the key and the problem") {
    namespace json = models::json;
    TransformerConfig cfg = tiny();
    cfg.dropout = 0.1f;
    const json::Value j = models::config_to_json(cfg);
    CHECK(json::dump(j) == R"({"src_vocab":7,"tgt_vocab":7,"layers":2,"d_model":16,"d_ff":32,"heads":2,"dropout":0.1,"pre_norm":true,"max_len":5000,"tie_weights":false})");
    const TransformerConfig back = models::config_from_json(json::parse(json::dump(j)));
    CHECK(back.dropout == 0.1f);   // the float, exactly
    CHECK(json::dump(models::config_to_json(back)) == json::dump(j));

    // every value of the metadata is a JSON text
    const nn::Metadata meta = models::to_metadata({{"config", j}, {"task", "copy"}, {"seq_len", 10}});
    CHECK(meta.at("task") == "\"copy\"");
    CHECK(meta.at("seq_len") == "10");
    CHECK(models::read_metadata(meta, "seq_len", "c.safetensors", models::integer_from_json) == 10);

    using doctest::Contains;
    // the message of reading `text` as the config of c.safetensors ("" if it reads)
    const auto config_error = [](const std::string& text) {
        try {
            models::read_metadata(nn::Metadata{{"config", text}}, "config", "c.safetensors", models::config_from_json);
        } catch (const std::runtime_error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    // the good config with one edit
    const auto with = [&](const std::string& from, const std::string& to) {
        std::string t = json::dump(j);
        t.replace(t.find(from), from.size(), to);
        return t;
    };
    CHECK(config_error(json::dump(j)) == "");
    CHECK(config_error(with("\"d_model\":16,", "")) == "'c.safetensors': metadata 'config': missing key 'd_model'");
    CHECK(config_error(with("\"layers\":2", "\"layers\":2.5")) == "'c.safetensors': metadata 'config': key 'layers': expected an integer, got 2.5");
    CHECK(config_error(with("\"layers\":2", "\"layers\":\"2\"")) == "'c.safetensors': metadata 'config': key 'layers': json: expected a number, got a string");
    CHECK(config_error(with("\"pre_norm\":true", "\"pre_norm\":1")) == "'c.safetensors': metadata 'config': key 'pre_norm': json: expected a bool, got a number");
    CHECK(config_error(with("\"dropout\"", "\"dropuot\"")) == "'c.safetensors': metadata 'config': unknown key 'dropuot'");
    CHECK(config_error(with("\"heads\":2", "\"heads\":3")) ==
          "'c.safetensors': metadata 'config': TransformerConfig: d_model (16) must be a multiple of heads (3)");
    CHECK(config_error("[1, 2]") == "'c.safetensors': metadata 'config': json: expected an object, got an array");
    CHECK_THROWS_WITH_AS(models::read_metadata(meta, "config2", "c.safetensors", models::config_from_json),
                         Contains("'c.safetensors': the metadata has no 'config2' (it has: config, seq_len, task)"), std::runtime_error);
    CHECK_THROWS_WITH_AS(models::read_metadata(nn::Metadata{{"config", "src_vocab=7"}}, "config", "c.safetensors", models::config_from_json),
                         Contains("'c.safetensors': metadata 'config' is not JSON: json: "), std::runtime_error);
}

TEST_CASE("TransformerConfig::parameter_count and parameter_tensors: the built model's, from the sizes alone") {
    for (int64_t layers : {1, 2, 3})
        for (bool tie : {false, true})
            for (bool pre_norm : {true, false}) {
                // sizes all different, so a D for an F or a V_src for a V_tgt shows
                const TransformerConfig cfg{.src_vocab = 13, .tgt_vocab = tie ? 13 : 11, .layers = layers, .d_model = 6, .d_ff = 10,
                                            .heads = 3, .dropout = 0.0f, .pre_norm = pre_norm, .tie_weights = tie};
                CAPTURE(layers);
                CAPTURE(tie);
                const Transformer model(cfg);
                CHECK(cfg.parameter_count() == model.num_parameters());
                CHECK(cfg.parameter_tensors() == static_cast<int64_t>(model.named_parameters().size()));
            }
    // sizes no model could have: counted, not built, and a count past 2^63 stays at INT64_MAX instead of wrapping
    const TransformerConfig deep{.layers = 1'000'000'000, .d_model = 512, .d_ff = 2048, .heads = 8};
    CHECK(deep.parameter_count() > 1'000'000'000'000'000);
    const TransformerConfig wide{.d_model = int64_t{1} << 40, .d_ff = int64_t{1} << 40, .heads = 1};
    CHECK(wide.parameter_count() == std::numeric_limits<int64_t>::max());
    // max_len is no parameter, so validate() bounds it: the positional table is max_len x D floats
    CHECK_NOTHROW(TransformerConfig{.max_len = int64_t{1} << 20}.validate());
    CHECK_THROWS_WITH_AS(TransformerConfig{.max_len = (int64_t{1} << 20) + 1}.validate(),
                         "TransformerConfig: max_len must be in [1, 1048576] (the positional table is max_len x d_model floats), got 1048577",
                         std::invalid_argument);
}

// A checkpoint file in memory: metadata "model" and "config", and these F32 weights.
static autograd::io::SafetensorsFile checkpoint_of(const char* kind, const models::json::Value& config,
                                                   std::vector<autograd::io::TensorRecord> tensors) {
    return {models::to_metadata({{"model", kind}, {"config", config}}), std::move(tensors)};
}

TEST_CASE("a checkpoint whose config needs more parameters than its file holds is refused before the model is built") {
    namespace json = models::json;
    const std::string path = "crafted.safetensors";   // only named in messages: the files are in memory
    auto error_building = [&](const autograd::io::SafetensorsFile& f) {
        try {
            models::model_from_metadata(f, path);
        } catch (const std::runtime_error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    manual_seed(7);
    const TransformerConfig cfg = tiny();
    const int64_t n = Transformer(cfg).num_parameters();
    Transformer model(cfg);
    const autograd::io::SafetensorsFile exact = checkpoint_of("transformer", models::config_to_json(cfg), nn::parameter_records(model));
    CHECK(error_building(exact) == "");
    // one float short: a bias one element shorter
    autograd::io::SafetensorsFile short_one = exact;
    for (autograd::io::TensorRecord& r : short_one.tensors)
        if (r.name == "generator.proj.bias") {
            r.bytes.resize(r.bytes.size() - 4);
            r.shape = {6};
        }
    CHECK(error_building(short_one) == "'crafted.safetensors': metadata 'config' describes a model of " + std::to_string(n) +
                                           " parameters, but the file holds only " + std::to_string(n - 1) + " F32 values");
    // other dtypes are no parameters (load_parameters wants F32), extra F32 tensors (optimizer state) may come along
    autograd::io::SafetensorsFile with_ids = short_one;
    const int32_t id = 5;
    with_ids.tensors.push_back(autograd::io::i32_record("step", {1}, &id));
    CHECK(error_building(with_ids).find("holds only " + std::to_string(n - 1) + " F32 values") != std::string::npos);
    autograd::io::SafetensorsFile with_state = exact;
    const float moment = 0.5f;
    with_state.tensors.push_back(autograd::io::f32_record("optim.m", {1}, &moment));
    CHECK(error_building(with_state) == "");

    // A larger config than the weights, still small enough to build: if this is not refused, the
    // absurd sizes below must not be tried (they would allocate terabytes).
    json::Value twice = models::config_to_json(cfg);
    for (auto& [key, value] : twice.as_object())
        if (key == "d_model") value = json::Value(32);
    REQUIRE(error_building(checkpoint_of("transformer", twice, nn::parameter_records(model))).find("describes a model of") !=
            std::string::npos);

    // absurd sizes beside three floats: refused at once, without allocating
    const float w[3] = {1, 2, 3};
    auto crafted = [&](const char* kind, json::Value config, const char* key, double value) {
        for (auto& [k, v] : config.as_object())
            if (k == key) v = json::Value(value);
        return checkpoint_of(kind, config, {autograd::io::f32_record("w", {3}, w)});
    };
    const json::Value tf = models::config_to_json(TransformerConfig{.src_vocab = 7, .tgt_vocab = 7, .layers = 1, .d_model = 4, .d_ff = 4, .heads = 1});
    const json::Value rnn = models::config_to_json(models::RNNSeq2SeqConfig{.src_vocab = 7, .tgt_vocab = 7, .embed = 4, .hidden = 4});
    struct Absurd {   // not a structured binding: CAPTURE's lambda captures it
        const char* kind;
        const json::Value& config;
        const char* key;
        double value;
    };
    for (const Absurd& a : {Absurd{"transformer", tf, "layers", 1e9}, Absurd{"transformer", tf, "d_model", 1e9},
                            Absurd{"transformer", tf, "d_ff", 1e9}, Absurd{"transformer", tf, "src_vocab", 1e9},
                            Absurd{"transformer", tf, "d_model", 9007199254740992.0}, Absurd{"rnn", rnn, "layers", 1e9},
                            Absurd{"rnn", rnn, "hidden", 1e9}, Absurd{"rnn", rnn, "embed", 1e9}, Absurd{"rnn", rnn, "tgt_vocab", 1e9}}) {
        CAPTURE(std::string(a.kind) + " " + a.key);
        const std::string msg = error_building(crafted(a.kind, a.config, a.key, a.value));
        CHECK(msg.rfind("'crafted.safetensors': metadata 'config' describes a model of ", 0) == 0);
        CHECK(msg.find("but the file holds only 3 F32 values") != std::string::npos);
    }
    // many layers of one float each, and the values for them in one tensor: a few hundred bytes
    // of bookkeeping per parameter tensor against 4 in the file, so their number is checked too
    const TransformerConfig thin{.src_vocab = 1, .tgt_vocab = 1, .layers = 2000, .d_model = 1, .d_ff = 1, .heads = 1};
    const std::vector<float> values(static_cast<size_t>(thin.parameter_count()), 0.5f);
    CHECK(error_building(checkpoint_of("transformer", models::config_to_json(thin),
                                       {autograd::io::f32_record("all", {thin.parameter_count()}, values.data())})) ==
          "'crafted.safetensors': metadata 'config' describes a model of 84008 parameter tensors, but the file holds only 1 F32 tensors");
    CHECK(error_building(crafted("transformer", tf, "max_len", 1e9)) ==
          "'crafted.safetensors': metadata 'config': TransformerConfig: max_len must be in [1, 1048576] (the positional table is "
          "max_len x d_model floats), got 1000000000");
}

TEST_CASE("the fuzz seeds of crafted checkpoints load as files, and are refused as models") {
    // tests/fuzz/corpus/safetensors/checkpoint_*.bin: valid safetensors files whose metadata asks for
    // a model far larger than their weights (layers = 10^9, d_model = 2^53, ...). The fuzz target
    // checks them as files; here each one must also be refused by model_from_metadata.
    namespace fs = std::filesystem;
    // with a broken check the seeds would allocate terabytes: a small config too large for its
    // weights must be refused first
    manual_seed(8);
    Transformer model(tiny());
    models::json::Value twice = models::config_to_json(tiny());
    for (auto& [key, value] : twice.as_object())
        if (key == "layers") value = models::json::Value(4);
    REQUIRE_THROWS_AS(models::model_from_metadata(checkpoint_of("transformer", twice, nn::parameter_records(model)), "x"), std::runtime_error);
    int seeds = 0;
    for (const fs::directory_entry& e : fs::directory_iterator("tests/fuzz/corpus/safetensors")) {
        const std::string name = e.path().filename().string();
        if (name.rfind("checkpoint_", 0) != 0) continue;
        CAPTURE(name);
        seeds++;
        const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(e.path().string());
        const std::string msg = [&] {
            try {
                models::model_from_metadata(f, name);
            } catch (const std::runtime_error& ex) {
                return std::string(ex.what());
            }
            return std::string();
        }();
        CHECK((msg.find("describes a model of") != std::string::npos || msg.find("max_len must be in") != std::string::npos));
    }
    CHECK(seeds >= 6);
}

TEST_CASE("Transformer: shapes through every module, parameter names") {
    manual_seed(1);
    Transformer model(tiny());
    const int64_t B = 3, S = 5, T = 4, D = 16;
    Tokens src = Tokens::full({B, S}, 2), tgt = Tokens::full({B, T}, 3);
    const Mask sm = models::padding_mask(src, 0), tm = models::target_mask(tgt, 0);
    const Tensor memory = model.encode(src, sm);
    CHECK(memory.shape() == Shape{B, S, D});
    const Tensor out = model.decode(memory, sm, tgt, tm);
    CHECK(out.shape() == Shape{B, T, D});
    CHECK(model.generator->log_probs(out).shape() == Shape{B, T, 7});
    CHECK(model.logits(src, tgt, sm, tm).shape() == Shape{B, T, 7});
    CHECK(!(*model.decoder->layers)[1].src_attn->last_attention.defined());   // kept only when asked
    model.keep_attention_weights(true);
    model.logits(src, tgt, sm, tm);
    CHECK((*model.decoder->layers)[1].src_attn->last_attention.shape() == Shape{B, 2, T, S});
    bool found = false;
    for (auto& [name, p] : model.named_parameters()) found = found || name == "decoder.layers.1.self_attn.w_q.weight";
    CHECK(found);
    // N * (encoder layer) + N * (decoder layer) + norms + embeddings + generator
    const int64_t attn = 4 * (D * D + D), ff = D * 32 + 32 + 32 * D + D, ln = 2 * D;
    const int64_t expected = 2 * (attn + ff + 2 * ln) + 2 * (2 * attn + ff + 3 * ln) + 2 * ln + 2 * 7 * D + (D * 7 + 7);
    CHECK(model.num_parameters() == expected);
    CHECK_THROWS_WITH_AS(Transformer(TransformerConfig{.d_model = 10, .heads = 3}), doctest::Contains("d_model (10) must be a multiple of heads (3)"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(model.encode(Tokens::full({2, 3}, 9), models::padding_mask(Tokens::full({2, 3}, 9), 0)),
                         doctest::Contains("token id 9 at flat position 0 of ids (2, 3) is outside the vocabulary [0, 7)"), std::out_of_range);   // id 9 outside a vocabulary of 7
}

TEST_CASE("decoder: output t does not depend on target inputs after t; all source positions are seen") {
    manual_seed(2);
    Transformer model(tiny());
    model.eval();
    const Tokens src({1, 4, 2, 6, 3}, {1, 5});
    const Mask sm = models::padding_mask(src, 0);
    const Tokens a({1, 2, 3, 4}, {1, 4}), b({1, 2, 5, 6}, {1, 4});   // differ from position 2 on
    const Tensor oa = model.logits(src, a, sm, models::target_mask(a, 0));
    const Tensor ob = model.logits(src, b, sm, models::target_mask(b, 0));
    for (int t = 0; t < 2; t++)
        for (int v = 0; v < 7; v++) CHECK(oa.at({0, t, v}) == ob.at({0, t, v}));
    bool later_differs = false;
    for (int v = 0; v < 7; v++) later_differs = later_differs || oa.at({0, 3, v}) != ob.at({0, 3, v});
    CHECK(later_differs);
    // every source position changes the output (encoder-decoder attention sees all of them)
    for (int s = 0; s < 5; s++) {
        Tokens src2 = src;
        src2[s] = src[s] == 5 ? 4 : 5;
        const Tensor o2 = model.logits(src2, a, sm, models::target_mask(a, 0));
        float diff = 0.0f;
        for (int64_t i = 0; i < o2.numel(); i++) diff += std::fabs(o2.data()[i] - oa.data()[i]);
        CHECK(diff > 0.0f);
    }
}

// Train a tiny model on a tiny copy task: the whole pipeline must learn, not just run.
TEST_CASE("a tiny Transformer learns a tiny copy task; greedy and beam search agree") {
    manual_seed(3);
    const int64_t V = 6, L = 6;
    Transformer model({.src_vocab = V, .tgt_vocab = V, .layers = 1, .d_model = 32, .d_ff = 64, .heads = 2, .dropout = 0.0f});
    train_copy(model, 300, V, L, 11);
    Rng rng(99);
    const int64_t N = 50;
    const Tokens src = data::random_sequences(rng, V, N, L);
    const Tokens out = models::greedy_decode(model, src, models::padding_mask(src, 0), {.max_len = L, .bos = 1});
    int correct = 0;
    for (int64_t i = 0; i < N; i++)
        correct += std::equal(src.data.begin() + i * L, src.data.begin() + (i + 1) * L, out.data.begin() + i * L);
    // >= 90% exact. Measured: 50 of 50 with -march=native (AVX-512), x86-64-v2 and x86-64 (SSE2)
    // builds alike, whose gemm kernels round differently: the margin is 5 sequences.
    INFO("exact copies: " << correct << " of " << N);
    CHECK(correct >= 45);

    for (int64_t i = 0; i < 10; i++) {
        const Tokens one(std::vector<int32_t>(src.data.begin() + i * L, src.data.begin() + (i + 1) * L), {1, L});
        const Mask m = models::padding_mask(one, 0);
        const Tokens g = models::greedy_decode(model, one, m, {.max_len = L, .bos = 1});
        const models::Hypothesis b1 = models::beam_search(model, one, m, {.beam_size = 1, .max_len = L, .bos = 1});
        CHECK(b1.tokens == g.data);                               // beam 1 is greedy
        const models::Hypothesis b4 = models::beam_search(model, one, m, {.beam_size = 4, .max_len = L, .bos = 1});
        const double greedy_lp = models::sequence_log_prob(model, one, m, g.data);
        CHECK(b1.log_prob == doctest::Approx(greedy_lp).epsilon(1e-4));
        CHECK(models::sequence_log_prob(model, one, m, b4.tokens) == doctest::Approx(b4.log_prob).epsilon(1e-4));
    }
}

// Beam search is not guaranteed to beat greedy (the greedy prefix can fall out of the beam), but
// it is exact when the beam holds every prefix: with V tokens and L generated positions, a beam of
// V^(L-1) keeps all prefixes up to the last step, so it must return the most likely of all V^L
// sequences, which brute force finds.
TEST_CASE("beam search with a beam holding every prefix finds the most likely sequence") {
    const int64_t V = 5, L = 3;   // 125 sequences of 3 tokens after bos
    for (uint64_t seed : {30, 31, 32}) {
        CAPTURE(seed);
        manual_seed(seed);
        Transformer model(tiny(V));
        model.eval();
        const Tokens src({2, 3, 4, 1}, {1, 4});
        const Mask m = models::padding_mask(src, 0);
        double best = -INFINITY;
        std::vector<int32_t> best_tokens;
        for (int32_t a = 0; a < V; a++)
            for (int32_t b = 0; b < V; b++)
                for (int32_t c = 0; c < V; c++) {
                    const std::vector<int32_t> seq = {1, a, b, c};
                    const double lp = models::sequence_log_prob(model, src, m, seq);
                    if (lp > best) best = lp, best_tokens = seq;
                }
        const models::Hypothesis h = models::beam_search(model, src, m, {.beam_size = 25, .max_len = L + 1, .bos = 1});
        CHECK(h.tokens == best_tokens);
        CHECK(h.log_prob == doctest::Approx(best).epsilon(1e-5));
        // a narrower beam can only do as well or worse, and still returns a consistent score
        const models::Hypothesis narrow = models::beam_search(model, src, m, {.beam_size = 2, .max_len = L + 1, .bos = 1});
        CHECK(narrow.log_prob <= best + 1e-5);
        CHECK(models::sequence_log_prob(model, src, m, narrow.tokens) == doctest::Approx(narrow.log_prob).epsilon(1e-5));
    }
}

TEST_CASE("beam search stops at eos and honours the length penalty") {
    manual_seed(4);
    Transformer model(tiny(5));
    model.eval();
    const Tokens src({1, 3, 4}, {1, 3});
    const Mask m = models::padding_mask(src, 0);
    const models::Hypothesis h = models::beam_search(model, src, m, {.beam_size = 3, .max_len = 12, .bos = 1, .eos = 2});
    CHECK(h.tokens.front() == 1);
    CHECK(h.tokens.size() <= 12);
    for (size_t i = 1; i + 1 < h.tokens.size(); i++) CHECK(h.tokens[i] != 2);   // eos only at the end
    const models::Hypothesis hp =
        models::beam_search(model, src, m, {.beam_size = 3, .max_len = 12, .bos = 1, .eos = 2, .length_penalty = 1.0f});
    CHECK(hp.score == doctest::Approx(hp.log_prob / ((5.0 + (hp.tokens.size() - 1)) / 6.0)));
    CHECK_THROWS_WITH_AS(models::beam_search(model, Tokens::full({2, 3}, 1), m, {}), doctest::Contains("one sentence (1, S), got (2, 3)"),
                         std::invalid_argument);
}

// Every named parameter of b holds exactly a's bits (and the names and shapes agree).
static void check_same_parameters(const nn::Module& a, const nn::Module& b) {
    const auto pa = a.named_parameters(), pb = b.named_parameters();
    REQUIRE(pa.size() == pb.size());
    for (size_t i = 0; i < pa.size(); i++) {
        CAPTURE(pa[i].first);
        CHECK(pa[i].first == pb[i].first);
        REQUIRE(pa[i].second.shape() == pb[i].second.shape());
        CHECK(std::memcmp(pa[i].second.data(), pb[i].second.data(), pa[i].second.numel() * sizeof(float)) == 0);
    }
}

// Some parameter of b differs from a's (so that a load has something to prove).
static bool any_parameter_differs(const nn::Module& a, const nn::Module& b) {
    const auto pa = a.named_parameters(), pb = b.named_parameters();
    for (size_t i = 0; i < pa.size(); i++)
        if (pa[i].second.to_vector() != pb[i].second.to_vector()) return true;
    return false;
}

TEST_CASE("a saved Transformer loads into a fresh one: every parameter, bit for bit (tied weights: stored once)") {
    TransformerConfig tied = tiny();
    tied.tie_weights = true;
    for (const TransformerConfig& cfg : {tiny(), tied}) {
        CAPTURE(cfg.tie_weights);
        manual_seed(5);
        Transformer a(cfg);
        const std::string path = (std::filesystem::temp_directory_path() / ("tf_" + std::to_string(::getpid()) + ".safetensors")).string();
        nn::save(a, path, models::to_metadata({{"config", models::config_to_json(a.cfg)}}));
        const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(path);
        manual_seed(6);
        Transformer b(models::read_metadata(f.metadata, "config", path, models::config_from_json));
        CHECK(models::json::dump(models::config_to_json(b.cfg)) == models::json::dump(models::config_to_json(a.cfg)));
        CHECK(any_parameter_differs(a, b));
        nn::load_parameters(b, f, path);
        check_same_parameters(a, b);
        std::filesystem::remove(path);
        int vocab_matrices = 0;   // the embeddings' and the projection's (V, D) records
        for (const auto& r : nn::parameter_records(a))
            vocab_matrices += r.name.find("embed") != std::string::npos || r.name.find("proj.weight") != std::string::npos;
        CHECK(vocab_matrices == (cfg.tie_weights ? 1 : 3));
        CHECK((&b.tgt_embed->lut->weight.node() == &b.generator->proj->weight.node()) == cfg.tie_weights);
    }
}

TEST_CASE("a translation checkpoint (model + vocabularies in metadata): the same parameters and vocabularies after loading") {
    const data::ToyCorpus corpus = data::make_toy_corpus(3, 200, 10, 10);
    std::vector<std::vector<std::string>> src, tgt;
    for (const auto& p : corpus.train) src.push_back(data::tokenize(p.src)), tgt.push_back(data::tokenize(p.tgt));
    const data::TextCodec codec{.src_vocab = data::Vocab::build(src), .tgt_vocab = data::Vocab::build(tgt), .lowercase = true,
                                .max_len = 12};
    const data::Vocab &sv = codec.src_vocab, &tv = codec.tgt_vocab;
    manual_seed(7);
    Transformer a({.src_vocab = (int64_t)sv.size(), .tgt_vocab = (int64_t)tv.size(), .layers = 1, .d_model = 16, .d_ff = 32,
                   .heads = 2, .dropout = 0.0f});
    const std::string path = (std::filesystem::temp_directory_path() / ("tr_" + std::to_string(::getpid()) + ".safetensors")).string();
    models::json::Object meta = data::codec_to_json(codec);
    meta.push_back({"config", models::config_to_json(a.cfg)});
    nn::save(a, path, models::to_metadata(meta));

    const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(path);
    const data::TextCodec codec2 = data::read_codec(f.metadata, path);
    const data::Vocab &sv2 = codec2.src_vocab, &tv2 = codec2.tgt_vocab;
    CHECK(sv2 == sv);
    CHECK(tv2 == tv);
    CHECK(codec2.lowercase);
    CHECK(codec2.max_len == 12);
    manual_seed(8);
    Transformer b(models::read_metadata(f.metadata, "config", path, models::config_from_json));
    CHECK(any_parameter_differs(a, b));
    nn::load_parameters(b, f, path);
    check_same_parameters(a, b);
    a.eval();
    b.eval();
    for (const auto& p : corpus.test) {
        const std::vector<int32_t> ids = sv.encode(data::tokenize(p.src), false, true);
        const Tokens s(ids, {1, (int64_t)ids.size()});
        const Mask m = models::padding_mask(s, data::Vocab::PAD);
        const auto ha = models::beam_search(a, s, m, {.beam_size = 3, .max_len = 12, .bos = data::Vocab::BOS, .eos = data::Vocab::EOS});
        const auto hb = models::beam_search(b, s, m, {.beam_size = 3, .max_len = 12, .bos = data::Vocab::BOS, .eos = data::Vocab::EOS});
        CHECK(tv.decode(ha.tokens) == tv2.decode(hb.tokens));
    }
    std::filesystem::remove(path);
}

TEST_CASE("anomaly mode: a healthy training step raises nothing; a poisoned weight is traced to its op") {
    manual_seed(9);
    Transformer model(tiny());
    Rng rng(1);
    const models::Batch b = data::make_copy_batch(rng, 7, 4, 5);
    {
        DetectAnomalyGuard guard;
        const Tensor loss = nn::cross_entropy(model.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask), b.tgt_out);
        CHECK_NOTHROW(loss.backward());
    }
    model.generator->proj->weight.data()[3] = std::numeric_limits<float>::quiet_NaN();
    DetectAnomalyGuard guard;
    CHECK_THROWS_WITH_AS(model.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask), doctest::Contains("forward of 'linear'"),
                         std::runtime_error);
}

TEST_CASE("beam search never returns an unfinished prefix once K hypotheses have finished") {
    // an untrained model with eos = 1 finishes hypotheses early and at different lengths
    for (uint64_t seed = 20; seed < 40; seed++) {
        manual_seed(seed);
        Transformer model({.src_vocab = 6, .tgt_vocab = 6, .layers = 1, .d_model = 16, .d_ff = 32, .heads = 2, .dropout = 0.0f});
        model.eval();
        const Tokens src({2, 3, 4}, {1, 3});
        const auto h = models::beam_search(model, src, models::padding_mask(src, 0), {.beam_size = 3, .max_len = 30, .bos = 1, .eos = 1});
        CAPTURE(seed);
        CHECK((h.tokens.back() == 1 || h.tokens.size() == 30));   // ends in eos, or ran to max_len
    }
}

// ---- weight tying (section 3.4) ---------------------------------------------------------------

namespace {

// A loss that uses all three places of the shared matrix: source and target embeddings, and the
// pre-softmax projection.
Tensor tied_test_loss(Transformer& model) {
    const Tokens src({1, 4, 3, 2, 4, 2}, {2, 3}), tgt({1, 3, 4, 1, 2, 2}, {2, 3});   // (B=2, 3)
    const models::Batch b = models::make_batch(src, tgt, 0);
    return nn::cross_entropy(model.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask), b.tgt_out, {.ignore_index = 0});
}

TransformerConfig tiny_config(bool tie_weights) {
    TransformerConfig cfg = {.src_vocab = 5, .tgt_vocab = 5, .layers = 1, .d_model = 8, .d_ff = 16, .heads = 2, .dropout = 0.0f};
    cfg.tie_weights = tie_weights;
    return cfg;
}

}  // namespace

// A model's loss(batch) is cross_entropy(logits(batch)) with the last layer fused into the loss
// (models/seq2seq.h). With a vocabulary of 3,000 and 800 target tokens, the logits are more than
// one chunk (about 700 rows), so the chunked op runs: the same loss, the same gradient of every
// parameter (up to rounding), dropout included (the same draws, in the same order), tied or not.
TEST_CASE("Seq2Seq::loss equals cross_entropy of logits, value and every gradient: Transformer (tied or not) and RNN, in chunks") {
    const int64_t B = 8, T = 100, vocab = 3000;
    Rng g(5);
    std::vector<int32_t> src_ids, tgt_ids;
    for (int64_t i = 0; i < B * 12; i++) src_ids.push_back(1 + static_cast<int32_t>(g.uniform(0.0f, 1.0f) * 18));
    for (int64_t r = 0; r < B; r++)
        for (int64_t t = 0; t <= T; t++) tgt_ids.push_back(t > T - r * 5 ? 0 : 1 + static_cast<int32_t>(g.uniform(0.0f, 1.0f) * (vocab - 2)));
    const models::Batch b = models::make_batch(Tokens(src_ids, {B, 12}), Tokens(tgt_ids, {B, T + 1}), 0);
    const nn::CrossEntropyOptions opt{.ignore_index = 0, .label_smoothing = 0.1f};
    auto compare = [&](models::Seq2Seq& model) {
        auto run = [&](bool fused_loss) {
            model.zero_grad();
            manual_seed(9);   // the same dropout draws both ways
            const Tensor loss = fused_loss ? model.loss(b, opt)
                                           : nn::cross_entropy(model.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask), b.tgt_out, opt);
            if (fused_loss) CHECK(std::string(loss.op()) == "linear_cross_entropy");
            loss.backward();
            std::vector<Tensor> grads;
            for (const auto& [name, p] : model.named_parameters()) grads.push_back(p.grad().detach());
            return std::pair<float, std::vector<Tensor>>{loss.item(), grads};
        };
        model.train();
        const auto fused = run(true), plain = run(false);
        CHECK(fused.first == doctest::Approx(plain.first).epsilon(1e-6));
        const auto names = model.named_parameters();
        for (size_t i = 0; i < names.size(); i++) expect_close(fused.second[i], plain.second[i], 1e-3, 1e-6, names[i].first);
    };
    for (const bool tie : {false, true}) {
        CAPTURE(tie);
        manual_seed(1);
        Transformer model({.src_vocab = vocab, .tgt_vocab = vocab, .layers = 1, .d_model = 16, .d_ff = 32, .heads = 2, .dropout = 0.1f,
                           .tie_weights = tie});
        compare(model);
    }
    manual_seed(2);
    models::RNNSeq2Seq rnn({.src_vocab = 20, .tgt_vocab = vocab, .embed = 8, .hidden = 12, .cell = nn::CellKind::gru,
                            .context = models::Context::bahdanau, .bidirectional = true});
    compare(rnn);
}

TEST_CASE("tied weights: one (V, D) matrix for both embeddings and the projection, listed and counted once") {
    manual_seed(3);
    Transformer tied(tiny_config(true)), untied(tiny_config(false));
    const int64_t V = 5, D = 8;
    CHECK(tied.num_parameters() == untied.num_parameters() - 2 * V * D);
    CHECK(tied.parameters().size() == untied.parameters().size() - 2);
    CHECK(&tied.src_embed->lut->weight.node() == &tied.tgt_embed->lut->weight.node());
    CHECK(&tied.src_embed->lut->weight.node() == &tied.generator->proj->weight.node());
    int shared_listed = 0;
    for (const auto& [name, t] : tied.named_parameters()) {
        CHECK(name != "tgt_embed.lut.weight");
        CHECK(name != "generator.proj.weight");
        shared_listed += &t.node() == &tied.src_embed->lut->weight.node();
    }
    CHECK(shared_listed == 1);
    CHECK_THROWS_WITH_AS(Transformer(TransformerConfig{.src_vocab = 5, .tgt_vocab = 6, .tie_weights = true}),
                         doctest::Contains("tie_weights needs one shared vocabulary"), std::invalid_argument);
    CHECK_THROWS_WITH(tied.generator->proj->share_parameter("weight", Tensor::zeros({V, D + 1})), doctest::Contains("(5, 8)"));
}

TEST_CASE("tied weights: the gradient is the sum of the three untied gradients, and passes gradcheck") {
    manual_seed(4);
    Transformer tied(tiny_config(true)), untied(tiny_config(false));
    // the untied model gets the tied one's values: the shared matrix in all three places
    const Tensor shared = tied.src_embed->lut->weight;
    for (auto& named : untied.named_parameters()) {
        const std::string& name = named.first;   // not a structured binding: the lambda below and FAIL's capture it
        Tensor& t = named.second;
        const bool is_shared = name == "src_embed.lut.weight" || name == "tgt_embed.lut.weight" || name == "generator.proj.weight";
        const Tensor from = is_shared ? shared : [&] {
            for (auto& [n, u] : tied.named_parameters())
                if (n == name) return u;
            FAIL("no parameter " << name);
            return Tensor();
        }();
        std::copy(from.data(), from.data() + from.numel(), t.data());
    }
    const Tensor a = tied_test_loss(tied), b = tied_test_loss(untied);
    CHECK(a.item() == doctest::Approx(b.item()).epsilon(1e-6));
    a.backward();
    b.backward();
    const std::vector<float> g = shared.grad().to_vector();
    const std::vector<float> g1 = untied.src_embed->lut->weight.grad().to_vector(),
                             g2 = untied.tgt_embed->lut->weight.grad().to_vector(),
                             g3 = untied.generator->proj->weight.grad().to_vector();
    for (size_t i = 0; i < g.size(); i++) CHECK(g[i] == doctest::Approx(g1[i] + g2[i] + g3[i]).epsilon(1e-4).scale(1e-6));
    // each use contributes: none of the three is all zero
    for (const auto* part : {&g1, &g2, &g3}) CHECK(std::any_of(part->begin(), part->end(), [](float x) { return x != 0.0f; }));

    // A smaller step than the default: the embeddings are scaled by sqrt(D), so a step of 2e-2
    // moves some feed-forward ReLU inputs across their kink, and no difference quotient is exact
    // there (the untied model's three matrices fail the same way at the default step).
    tied.zero_grad();
    const GradcheckResult r = gradcheck([&](const std::vector<Tensor>&) { return tied_test_loss(tied); }, {shared}, {.eps = 2e-3, .atol = 2e-4, .rtol = 1e-3});
    CHECK_MESSAGE(r.ok, r.report);
    for (const Tensor& w : {untied.src_embed->lut->weight, untied.tgt_embed->lut->weight, untied.generator->proj->weight}) {
        untied.zero_grad();
        const GradcheckResult u = gradcheck([&](const std::vector<Tensor>&) { return tied_test_loss(untied); }, {w}, {.eps = 2e-3, .atol = 2e-4, .rtol = 1e-3});
        CHECK_MESSAGE(u.ok, u.report);
    }
}
