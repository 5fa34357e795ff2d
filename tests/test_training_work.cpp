// examples/common/training_work.h: a training step's work from the sizes alone, held equal to the
// work the plain path records in its graph (tests/graph_work.h), for each model family and each
// option that changes a product; and the translation example's --data epochs, which give every
// family the same estimated time with it.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "examples/common/training_work.h"
#include "models/rnn_seq2seq.h"
#include "models/transformer.h"
#include "tests/graph_work.h"

namespace {

// A batch of B rows of S source and T target tokens, no padding: ids 3.. of a vocabulary of V.
models::Batch full_batch(int64_t B, int64_t S, int64_t T, int64_t V) {
    autograd::Tokens src = autograd::Tokens::full({B, S}, 3), tgt = autograd::Tokens::full({B, T + 1}, 4);
    for (size_t i = 0; i < src.data.size(); i++) src.data[i] = static_cast<int32_t>(3 + i % (V - 3));
    for (size_t i = 0; i < tgt.data.size(); i++) tgt.data[i] = static_cast<int32_t>(3 + (i * 7) % (V - 3));
    return models::make_batch(src, tgt, 0);
}

// The forward pass's products as the graph records them on the plain path.
double recorded_multiply_adds(models::Seq2Seq& model, const models::Batch& b) {
    autograd::FusedKernelsGuard plain(false);   // every product one "matmul" node
    return static_cast<double>(count_work(model.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask)).multiply_adds);
}

}  // namespace

TEST_CASE("forward_work: the Transformer's multiply-adds are those its graph records, at every size that enters them") {
    struct Case { int64_t N, D, F, H, V; bool pre_norm, tie; };
    for (const Case c : {Case{1, 16, 32, 2, 13, true, false}, Case{2, 8, 24, 4, 17, false, false}, Case{3, 12, 20, 3, 11, true, true}}) {
        models::TransformerConfig cfg{.src_vocab = c.V, .tgt_vocab = c.V, .layers = c.N, .d_model = c.D, .d_ff = c.F,
                                      .heads = c.H, .dropout = 0.0f, .pre_norm = c.pre_norm, .max_len = 64, .tie_weights = c.tie};
        models::Transformer model(cfg);
        for (const auto& [B, S, T] : {std::tuple{1, 5, 4}, std::tuple{3, 2, 7}, std::tuple{2, 9, 9}}) {
            CAPTURE(c.N);
            CAPTURE(c.D);
            CAPTURE(S);
            CAPTURE(T);
            const common::StepWork w = common::forward_work(model, B, S, T);
            CHECK(w.multiply_adds == recorded_multiply_adds(model, full_batch(B, S, T, c.V)));
            CHECK(w.sequential_steps == 0);
        }
    }
}

TEST_CASE("forward_work: each recurrent model's multiply-adds are those its graph records, for every cell, context and score") {
    using models::Context;
    using nn::CellKind;
    using nn::Score;
    struct Case { Context context; CellKind cell; Score score; bool bidirectional; int64_t layers; };
    const std::vector<Case> cases = {
        {Context::sutskever, CellKind::lstm, Score::additive, false, 2}, {Context::sutskever, CellKind::rnn_tanh, Score::additive, false, 1},
        {Context::cho, CellKind::gru, Score::additive, false, 1},        {Context::cho, CellKind::lstm, Score::additive, false, 2},
        {Context::bahdanau, CellKind::gru, Score::additive, true, 2},    {Context::bahdanau, CellKind::gru, Score::additive, false, 1},
        {Context::bahdanau, CellKind::lstm, Score::general, true, 1},    {Context::bahdanau, CellKind::gru, Score::cosine, true, 3},
        {Context::bahdanau, CellKind::gru, Score::dot, false, 2},
    };
    for (const Case& c : cases) {
        const models::RNNSeq2SeqConfig cfg{.src_vocab = 13, .tgt_vocab = 11, .embed = 6, .hidden = 10, .layers = c.layers,
                                           .cell = c.cell, .context = c.context, .bidirectional = c.bidirectional,
                                           .score = c.score, .dropout = 0.0f};
        models::RNNSeq2Seq model(cfg);
        for (const auto& [B, S, T] : {std::tuple{1, 4, 3}, std::tuple{3, 6, 2}}) {
            CAPTURE(cfg.describe());
            CAPTURE(S);
            CAPTURE(T);
            const common::StepWork w = common::forward_work(model, B, S, T);
            CHECK(w.multiply_adds == recorded_multiply_adds(model, full_batch(B, S, T, 11)));
            CHECK(w.sequential_steps == (c.bidirectional ? 2 : 1) * c.layers * S + T);   // each layer and direction, then the decoder
        }
    }
}

// The time model's constants against the measurements they were fitted to (tests/reference/
// translation_step_times.txt: bench_translation_cost's steps on the reference machine, both
// families, sentence lengths 4 to 60, vocabularies of 12,000 and 1,300). Each estimate is within
// 12% of its step's time, and the work the file lists is the work forward_work counts today. A
// constant of one family given to the other, or a term left out, fails here.
TEST_CASE("estimated_step_seconds: within 12% of every step measured on the reference machine, for both families") {
    std::ifstream in("tests/reference/translation_step_times.txt");
    REQUIRE(in);
    std::map<std::pair<std::string, int64_t>, std::unique_ptr<models::Seq2Seq>> models;   // (family, V) -> the --data default
    int64_t V = 0;
    int lines = 0;
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        if (line.rfind("family", 0) == 0) {   // "... (V=12000, 2 threads)"
            V = std::stoll(line.substr(line.find("(V=") + 3));
            continue;
        }
        std::istringstream fields(line);
        std::string family;
        int64_t B, S, T;
        double macs, output, scores, steps, ms;
        const bool read = static_cast<bool>(fields >> family >> B >> S >> T >> macs >> output >> scores >> steps >> ms);
        REQUIRE(read);
        std::unique_ptr<models::Seq2Seq>& m = models[{family, V}];
        if (!m && family == "transformer")
            m = std::make_unique<models::Transformer>(models::TransformerConfig{.src_vocab = V, .tgt_vocab = V, .layers = 2, .d_model = 128,
                                                                               .d_ff = 512, .heads = 4, .max_len = 512, .tie_weights = true});
        if (!m && family == "rnn-attention")
            m = std::make_unique<models::RNNSeq2Seq>(models::RNNSeq2SeqConfig{.src_vocab = V, .tgt_vocab = V, .embed = 128, .hidden = 256,
                                                                              .layers = 2, .cell = nn::CellKind::gru,
                                                                              .context = models::Context::bahdanau, .bidirectional = true});
        REQUIRE(m);
        CAPTURE(line);
        const common::StepWork w = common::forward_work(*m, B, S, T);
        CHECK(w.multiply_adds == macs);
        CHECK(w.output_multiply_adds == output);
        CHECK(w.attention_scores == scores);
        CHECK(w.sequential_steps == steps);
        CHECK(std::abs(common::estimated_step_seconds(*m, {B, S, T}) * 1000 / ms - 1) <= 0.12);
        lines++;
    }
    CHECK(lines == 36);   // 9 lengths x 2 families x 2 vocabularies
}
