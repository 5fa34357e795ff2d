// The recurrent encoder-decoders (models/rnn_seq2seq.h) and their soft attention
// (nn/soft_attention.h): each score's three stages against a hand computation and finite
// differences, padding that gets weight exactly 0, a padded batch equal to each sentence alone,
// every option changing an answer, decoding through the same greedy and beam search as the
// Transformer, and checkpoints that remember which model they hold.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "examples/data/copy_task_data.h"
#include "models/checkpoint.h"
#include "models/data_parallel.h"
#include "models/decoding.h"
#include "models/rnn_seq2seq.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tests/gradcheck_helpers.h"
#include "tests/thread_count.h"

using namespace autograd;
using models::RNNSeq2Seq;
using models::RNNSeq2SeqConfig;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.numel() * sizeof(float)) == 0;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
    REQUIRE(a.shape() == b.shape());
    double d = 0.0;
    for (int64_t i = 0; i < a.numel(); i++) d = std::max(d, std::fabs(double(a.data()[i]) - b.data()[i]));
    return d;
}

// Odd sizes, all different: B 3, S 5, Q 4, Dv 6.
struct AttentionInputs {
    Tensor query, values;
    Mask mask;
};
AttentionInputs attention_inputs() {
    manual_seed(41);
    const Mask mask({1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0}, {3, 1, 5});   // rows of 5, 3 and 4 real positions
    return {param({3, 4}), param({3, 5, 6}), mask};
}

}  // namespace

TEST_CASE("SoftAttention: each score by hand, padding gets weight exactly 0, and the weights sum to 1") {
    const AttentionInputs in = attention_inputs();
    for (nn::Score score : {nn::Score::dot, nn::Score::cosine, nn::Score::additive}) {
        CAPTURE(nn::score_name(score));
        manual_seed(43);
        nn::SoftAttention att(score, 4, 6, score == nn::Score::additive ? 7 : 4);
        const Tensor keys = att.keys(in.values);   // (3, 5, A)
        const nn::SoftAttention::Output o = att.forward(in.query, keys, in.values, in.mask);
        REQUIRE(o.context.shape() == Shape{3, 6});
        REQUIRE(o.weights.shape() == Shape{3, 5});
        for (int64_t b = 0; b < 3; b++) {
            CAPTURE(b);
            // 1) the score, written out here from the formula of nn/soft_attention.h
            std::vector<double> e(5);
            for (int64_t j = 0; j < 5; j++) {
                const int64_t A = keys.size(2);
                double dot = 0, qq = 0, kk = 0;
                if (score == nn::Score::additive) {
                    std::vector<double> wq(A, 0.0);
                    for (int64_t a = 0; a < A; a++)
                        for (int64_t q = 0; q < 4; q++) wq[a] += att.w_query->weight.at({a, q}) * in.query.at({b, q});
                    for (int64_t a = 0; a < A; a++) dot += att.v.at({a}) * std::tanh(wq[a] + keys.at({b, j, a}));
                    e[j] = dot;
                    continue;
                }
                for (int64_t a = 0; a < A; a++) {
                    dot += in.query.at({b, a}) * keys.at({b, j, a});
                    qq += in.query.at({b, a}) * in.query.at({b, a});
                    kk += keys.at({b, j, a}) * keys.at({b, j, a});
                }
                e[j] = score == nn::Score::dot ? dot : 10.0 * dot / std::sqrt(qq * kk);   // tau starts at 10
            }
            // 2) softmax over the real positions only
            double z = 0;
            for (int64_t j = 0; j < 5; j++) z += in.mask[b * 5 + j] ? std::exp(e[j]) : 0.0;
            double total = 0;
            for (int64_t j = 0; j < 5; j++) {
                const double alpha = in.mask[b * 5 + j] ? std::exp(e[j]) / z : 0.0;
                if (!in.mask[b * 5 + j]) CHECK(o.weights.at({b, j}) == 0.0f);   // exactly
                CHECK(o.weights.at({b, j}) == doctest::Approx(alpha).epsilon(1e-5));
                total += o.weights.at({b, j});
            }
            CHECK(total == doctest::Approx(1.0).epsilon(1e-6));
            // 3) the context: the values weighted by alpha
            for (int64_t d = 0; d < 6; d++) {
                double c = 0;
                for (int64_t j = 0; j < 5; j++) c += o.weights.at({b, j}) * in.values.at({b, j, d});
                CHECK(o.context.at({b, d}) == doctest::Approx(c).epsilon(1e-5));
            }
        }
    }
}

TEST_CASE("SoftAttention: gradcheck of every score, with padding, through query, values and every weight") {
    const AttentionInputs in = attention_inputs();
    for (nn::Score score : {nn::Score::dot, nn::Score::cosine, nn::Score::additive}) {
        CAPTURE(nn::score_name(score));
        manual_seed(44);
        nn::SoftAttention att(score, 4, 6, score == nn::Score::additive ? 7 : 4);
        std::vector<Tensor> inputs{in.query, in.values};
        for (const Tensor& p : att.parameters()) inputs.push_back(p);
        CHECK_GRAD([&](const std::vector<Tensor>&) { return att.forward(in.query, att.keys(in.values), in.values, in.mask).context; },
                   inputs[0], inputs[1]);
        for (size_t i = 2; i < inputs.size(); i++) {
            CAPTURE(i);
            CHECK_GRAD([&](const std::vector<Tensor>&) { return att.forward(in.query, att.keys(in.values), in.values, in.mask).context; },
                       inputs[i]);
        }
    }
}

TEST_CASE("SoftAttention: cosine scores need the temperature: at tau = 1 the weights stay near uniform") {
    // Softmax over S scores in [-1, 1] puts at most e^2 / (e^2 + S - 1) on any one: with S = 40,
    // 7.389 / 46.389 = 0.159, however well the query matches one key.
    manual_seed(45);
    const int64_t S = 40;
    const int64_t A = 32;   // wide enough that random keys are far from parallel: cosines near 0
    nn::SoftAttention att(nn::Score::cosine, A, A, A);
    Tensor values = Tensor::randn({1, S, A});
    Tensor keys = att.keys(values);
    Tensor query = Tensor::from_vector(std::vector<float>(keys.data() + 17 * A, keys.data() + 18 * A), {1, A});   // = key 17
    NoGradGuard no_grad;
    att.log_temperature.data()[0] = 0.0f;   // tau = 1
    const float at_one = att.forward(query, keys, values, Mask()).weights.at({0, 17});
    CHECK(at_one <= doctest::Approx(std::exp(2.0) / (std::exp(2.0) + S - 1)).epsilon(1e-6));
    CHECK(at_one > 0.05f);
    att.log_temperature.data()[0] = std::log(30.0f);   // tau = 30: the matching key takes nearly all
    CHECK(att.forward(query, keys, values, Mask()).weights.at({0, 17}) > 0.9f);
}

TEST_CASE("SoftAttention: bad input names the shapes; unknown score names list the valid ones") {
    nn::SoftAttention att(nn::Score::dot, 4, 6, 4);
    CHECK_THROWS_WITH_AS(att.forward(Tensor::zeros({2, 5}), Tensor::zeros({2, 3, 4}), Tensor::zeros({2, 3, 6}), Mask()),
                         doctest::Contains("expected query (B, 4)"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(nn::SoftAttention(nn::Score::cosine, 4, 6, 5), doctest::Contains("must equal query_size"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(nn::score_from_name("cos"), "unknown attention score 'cos' (dot, cosine or additive)", std::invalid_argument);
    CHECK_THROWS_WITH_AS(models::context_from_name("init"), "unknown context 'init' (initial_state or every_step)",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(nn::cell_kind_from_name("GRU"), "unknown recurrent cell 'GRU' (gru, lstm or rnn)", std::invalid_argument);
}

namespace {

RNNSeq2SeqConfig small(bool attention, nn::Score score = nn::Score::additive) {
    return {.src_vocab = 9, .tgt_vocab = 7, .embed = 5, .hidden = 6, .layers = 1, .attention = attention, .score = score,
            .dropout = 0.0f};
}

// Three sentences of 5, 3 and 4 real source tokens, padded to 5; targets of 4 positions.
struct Data {
    Tokens src, tgt_in;
    Mask src_mask;
};
Data padded_batch() {
    const Tokens src({1, 3, 4, 5, 2, 1, 6, 8, 0, 0, 1, 7, 7, 3, 0}, {3, 5});
    const Tokens tgt_in({1, 2, 3, 4, 1, 5, 5, 6, 1, 6, 2, 2}, {3, 4});
    return {src, tgt_in, models::padding_mask(src, 0)};
}

}  // namespace

TEST_CASE("RNNSeq2Seq: a padded batch gives each sentence what it gets alone, for every kind of model") {
    const Data d = padded_batch();
    std::vector<RNNSeq2SeqConfig> cfgs = {small(false), small(true, nn::Score::dot), small(true, nn::Score::cosine),
                                          small(true, nn::Score::additive)};
    RNNSeq2SeqConfig every = small(false);
    every.context = models::Context::every_step;
    RNNSeq2SeqConfig lstm2 = small(true);
    lstm2.cell = nn::CellKind::lstm;
    lstm2.layers = 2;
    lstm2.reverse_source = true;
    cfgs.push_back(every);
    cfgs.push_back(lstm2);
    for (const RNNSeq2SeqConfig& cfg : cfgs) {
        CAPTURE(cfg.describe());
        manual_seed(50);
        RNNSeq2Seq model(cfg);
        model.eval();
        model.keep_attention_weights(true);
        NoGradGuard no_grad;
        const Tensor all = model.logits(d.src, d.tgt_in, d.src_mask);   // (3, 4, 7)
        const Tensor weights = model.last_attention;                    // (3, 4, 5) with attention
        REQUIRE(all.shape() == Shape{3, 4, 7});
        const int64_t lengths[3] = {5, 3, 4};
        for (int64_t b = 0; b < 3; b++) {
            CAPTURE(b);
            const Tokens src(std::vector<int32_t>(d.src.data.begin() + b * 5, d.src.data.begin() + b * 5 + lengths[b]), {1, lengths[b]});
            const Tokens tgt(std::vector<int32_t>(d.tgt_in.data.begin() + b * 4, d.tgt_in.data.begin() + b * 4 + 4), {1, 4});
            const Tensor alone = model.logits(src, tgt, models::padding_mask(src, 0));   // (1, 4, 7)
            const Tensor row = autograd::narrow(all, 0, b, 1);
            CHECK(max_abs_diff(row, alone) < 1e-5);
            if (cfg.attention) {   // the padded positions of the batch get exactly 0
                for (int64_t t = 0; t < 4; t++)
                    for (int64_t s = lengths[b]; s < 5; s++) CHECK(weights.data()[(b * 4 + t) * 5 + s] == 0.0f);
            }
        }
    }
}

// The whole model through every parameter but the encoder layer's own (nn::GRU, gradchecked in
// test_recurrent; its inputs' and outputs' gradients are checked here through the embeddings and
// the bridge), on short sequences (3 source, 2 target positions),
// at the default tolerance but twice the default step: the float32 rounding of the logits' long
// sequential chain reaches the finite differences, so the gaps between analytic and numeric
// derivatives grow as eps shrinks (at eps = 0.02 a few of the cosine model's reach 1.5%; at 0.01,
// dozens), the mark of rounding, not of a wrong derivative. At 0.04 and 0.06 none is left, on the
// fused and the plain path; Richardson's extrapolation keeps the truncation error small there.
TEST_CASE("RNNSeq2Seq: gradcheck of the whole model with each score, padding, and two layers") {
    const Tokens src({1, 3, 4, 1, 6, 0, 7, 0, 0}, {3, 3});   // 3, 2 and 1 real tokens
    const Tokens tgt_in({1, 2, 1, 5, 1, 6}, {3, 2});
    const Mask src_mask = models::padding_mask(src, 0);
    const GradcheckOptions tolerance{.eps = 4e-2};
    for (nn::Score score : {nn::Score::dot, nn::Score::cosine, nn::Score::additive}) {
        CAPTURE(nn::score_name(score));
        manual_seed(51);
        RNNSeq2SeqConfig cfg = small(true, score);
        cfg.layers = score == nn::Score::additive ? 2 : 1;   // two layers once: the checks of every parameter add up
        RNNSeq2Seq model(cfg);
        for (const auto& named : model.named_parameters()) {
            const std::string& name = named.first;           // (not a structured binding: clang 14 cannot capture one)
            const Tensor& p = named.second;
            if (name.rfind("encoder.", 0) == 0) continue;   // nn::GRU's own: gradchecked in test_recurrent
            CAPTURE(name);
            const GradcheckResult r = gradcheck([&](const std::vector<Tensor>&) { return model.logits(src, tgt_in, src_mask); }, {p},
                                                tolerance);
            INFO(r.report);
            CHECK(r.ok);
        }
    }
}

TEST_CASE("RNNSeq2Seq: every option changes the answer") {
    const Data d = padded_batch();
    auto run = [&](const RNNSeq2SeqConfig& cfg) {
        manual_seed(52);
        RNNSeq2Seq model(cfg);
        model.eval();
        NoGradGuard no_grad;
        return std::make_pair(model.logits(d.src, d.tgt_in, d.src_mask), model.num_parameters());
    };
    const auto base = run(small(false));
    auto differs = [&](RNNSeq2SeqConfig cfg, const char* what) {
        CAPTURE(what);
        const auto other = run(cfg);
        CHECK((other.second != base.second || !same_bits(other.first, base.first)));
        return other;
    };
    RNNSeq2SeqConfig c = small(false);
    c.context = models::Context::every_step;
    const auto every = differs(c, "context every_step");
    CHECK(every.second > base.second);   // layer 0 and the output layer read C too
    c = small(false);
    c.reverse_source = true;
    const auto reversed = differs(c, "reverse_source");
    CHECK(reversed.second == base.second);   // the same weights, read in another order
    c = small(false);
    c.bidirectional = false;
    differs(c, "bidirectional");
    c = small(false);
    c.layers = 2;
    differs(c, "layers");
    c = small(false);
    c.cell = nn::CellKind::lstm;
    differs(c, "cell");
    c = small(false);
    c.hidden = 8;
    differs(c, "hidden");
    c = small(false);
    c.embed = 3;
    differs(c, "embed");
    const auto dot = differs(small(true, nn::Score::dot), "attention");
    differs(small(true, nn::Score::cosine), "score");
    // dropout: train mode draws masks, eval mode none
    c = small(true);
    c.dropout = 0.3f;
    manual_seed(53);
    RNNSeq2Seq model(c);
    NoGradGuard no_grad;
    model.eval();
    const Tensor a = model.logits(d.src, d.tgt_in, d.src_mask), b = model.logits(d.src, d.tgt_in, d.src_mask);
    CHECK(same_bits(a, b));
    model.train();
    CHECK_FALSE(same_bits(model.logits(d.src, d.tgt_in, d.src_mask), a));
}

// Where C goes, step by step: with context = every_step the output layer reads [s_i; C] and layer
// 0 reads C beside the previous word (its C columns get a gradient); with initial_state only s_i.
TEST_CASE("RNNSeq2Seq::decode_step: C at every step reaches the output layer and the first layer's input") {
    const Data d = padded_batch();
    RNNSeq2SeqConfig cfg = small(false);
    cfg.context = models::Context::every_step;
    manual_seed(59);
    RNNSeq2Seq model(cfg);
    model.eval();
    const RNNSeq2Seq::Encoded enc = model.encode(d.src, d.src_mask);
    std::vector<nn::CellState> state{{enc.context, Tensor()}};
    const Tensor w_extra = autograd::narrow(model.cells->begin()->get()->weight_ih, 1, cfg.embed, cfg.hidden);   // layer 0's C columns
    const Tensor gi_prev = Tensor::zeros({3, 3 * cfg.hidden});
    const Tensor o = model.decode_step(gi_prev, state, enc, w_extra);                     // (3, Hd + Hd)
    REQUIRE(o.shape() == Shape{3, 2 * cfg.hidden});
    CHECK(same_bits(autograd::narrow(o, 1, cfg.hidden, cfg.hidden), enc.context));      // the output layer's C
    CHECK(same_bits(autograd::narrow(o, 1, 0, cfg.hidden), state[0].h));                // and s_i
    sum(o).backward();
    double c_columns = 0;
    const Tensor g = model.cells->begin()->get()->weight_ih.grad();                      // (3Hd, E + Hd)
    for (int64_t r = 0; r < g.size(0); r++)
        for (int64_t c = cfg.embed; c < g.size(1); c++) c_columns += std::fabs(g.at({r, c}));
    CHECK(c_columns > 0.0);   // C fed layer 0
}

TEST_CASE("reverse_rows reads each row's real tokens backwards and leaves the padding") {
    const Data d = padded_batch();
    const Tokens r = models::reverse_rows(d.src, d.src_mask);
    CHECK(r.data == std::vector<int32_t>{2, 5, 4, 3, 1, 8, 6, 1, 0, 0, 3, 7, 7, 1, 0});
    const Mask holes({1, 0, 1}, {1, 1, 3});
    CHECK_THROWS_WITH_AS(models::reverse_rows(Tokens({4, 0, 5}, {1, 3}), holes), doctest::Contains("a real position after padding"),
                         std::invalid_argument);
}

TEST_CASE("RNNSeq2Seq: greedy and beam search through the Seq2Seq interface; a batch decodes as each sentence alone") {
    const Data d = padded_batch();
    manual_seed(54);
    RNNSeq2Seq model(small(true));
    model.eval();
    int64_t positions = 0;
    const Tokens all = models::greedy_decode_cached(model, d.src, d.src_mask, {.max_len = 6, .bos = 1}, &positions);
    CHECK(positions == 3 * 5);   // 5 steps of 3 rows: one position per row per step
    const std::vector<models::Hypothesis> beams =
        models::beam_search_batch(model, d.src, d.src_mask, {.beam_size = 3, .max_len = 6, .bos = 1, .eos = 2});
    const int64_t lengths[3] = {5, 3, 4};
    for (int64_t b = 0; b < 3; b++) {
        CAPTURE(b);
        const Tokens src(std::vector<int32_t>(d.src.data.begin() + b * 5, d.src.data.begin() + b * 5 + lengths[b]), {1, lengths[b]});
        const Mask m = models::padding_mask(src, 0);
        const Tokens one = models::greedy_decode(model, src, m, {.max_len = 6, .bos = 1});
        CHECK(std::vector<int32_t>(all.data.begin() + b * 6, all.data.begin() + b * 6 + 6) == one.data);
        const models::Hypothesis h = models::beam_search(model, src, m, {.beam_size = 3, .max_len = 6, .bos = 1, .eos = 2});
        CHECK(h.tokens == beams[b].tokens);
        CHECK(h.log_prob == doctest::Approx(beams[b].log_prob).epsilon(1e-5));
        // the beam's score is the model's own log-probability of its tokens, teacher-forced
        CHECK(models::sequence_log_prob(model, src, m, h.tokens) == doctest::Approx(h.log_prob).epsilon(1e-4));
    }
}

TEST_CASE("RNNSeq2Seq: with attention it learns to copy 12 symbols that one context vector cannot hold") {
    // The comparison of examples/ in miniature: the same budget, 250 steps of 32 sequences.
    auto exact = [](bool attention) {
        manual_seed(55);
        RNNSeq2Seq model({.src_vocab = 11, .tgt_vocab = 11, .embed = 16, .hidden = 32, .attention = attention, .dropout = 0.0f});
        optim::Adam opt(model.parameters(), {.lr = 5e-3f});
        Rng rng(56);
        model.train();
        for (int s = 0; s < 250; s++) {
            const models::Batch b = data::make_copy_batch(rng, 11, 32, 12);
            opt.zero_grad();
            nn::cross_entropy(model.logits(b.src, b.tgt_in, b.src_mask), b.tgt_out).backward();
            opt.step();
        }
        model.eval();
        Rng er(57);
        const models::Batch e = data::make_copy_batch(er, 11, 100, 12);
        const Tokens out = models::greedy_decode(model, e.src, e.src_mask, {.max_len = 12, .bos = 1});
        int n = 0;
        for (int64_t i = 0; i < 100; i++)
            n += std::equal(e.src.data.begin() + i * 12, e.src.data.begin() + (i + 1) * 12, out.data.begin() + i * 12);
        return n;
    };
    const int with = exact(true), without = exact(false);
    INFO("exact match with attention " << with << "/100, without " << without << "/100");
    CHECK(with >= 90);
    CHECK(with - without >= 50);
}

TEST_CASE("RNNSeq2SeqConfig::parameter_count and parameter_tensors: the built model's, for every kind of model") {
    struct Kind {   // what the decoder's first layer and the attention add
        bool attention;
        nn::Score score;
        models::Context context;
    };
    const Kind kinds[] = {{false, nn::Score::additive, models::Context::initial_state},
                          {false, nn::Score::additive, models::Context::every_step},
                          {true, nn::Score::dot, models::Context::initial_state},
                          {true, nn::Score::cosine, models::Context::initial_state},
                          {true, nn::Score::additive, models::Context::initial_state}};
    int checked = 0;
    for (const Kind& k : kinds)
        for (nn::CellKind cell : {nn::CellKind::rnn_tanh, nn::CellKind::gru, nn::CellKind::lstm})
            for (bool bidirectional : {false, true})
                for (int64_t layers : {1, 2, 3}) {
                    // sizes all different, so an E for an Hd or a V_src for a V_tgt shows
                    const RNNSeq2SeqConfig cfg{.src_vocab = 11, .tgt_vocab = 7, .embed = 5, .hidden = 3, .layers = layers, .cell = cell,
                                               .bidirectional = bidirectional, .attention = k.attention, .score = k.score,
                                               .context = k.context};
                    CAPTURE(cfg.describe());
                    const RNNSeq2Seq model(cfg);
                    CHECK(cfg.parameter_count() == model.num_parameters());
                    CHECK(cfg.parameter_tensors() == static_cast<int64_t>(model.named_parameters().size()));
                    checked++;
                }
    CHECK(checked == 90);
    // counted, not built: sizes no model could have give a number (INT64_MAX past 2^63), at once
    CHECK(RNNSeq2SeqConfig{.hidden = 1'000'000'000}.parameter_count() > 1'000'000'000'000'000'000);
    CHECK(RNNSeq2SeqConfig{.embed = int64_t{1} << 40, .hidden = int64_t{1} << 40}.parameter_count() ==
          std::numeric_limits<int64_t>::max());
}

TEST_CASE("RNNSeq2Seq::last_attention is kept only when asked: a data-parallel training step writes nothing") {
    // The shards of models::sum_over_shards run logits() side by side on one model, so a member
    // they both assigned would race (two threads writing one shared_ptr: a crash, now and then).
    // Training does not keep the weights; a picture asks for them (keep_attention_weights).
    Rng rng(61);
    const models::Batch b = data::make_copy_batch(rng, 7, 5, 4);   // 5 rows: shards of 3 and 2
    for (int threads : {1, 2}) {
        CAPTURE(threads);
        ThreadCount tc(threads);
        manual_seed(60);
        RNNSeq2Seq model(small(true));
        model.train();
        models::sum_over_shards(b, 2, [&](const models::Batch& part) {
            return nn::cross_entropy(model.logits(part.src, part.tgt_in, part.src_mask), part.tgt_out) * part.share;
        });
        CHECK(!model.last_attention.defined());
        NoGradGuard no_grad;
        model.keep_attention_weights(true);
        model.logits(b.src, b.tgt_in, b.src_mask);
        CHECK(model.last_attention.shape() == Shape{5, 3, 4});
    }
}

TEST_CASE("checkpoints remember the model's kind: an RNN model saves, loads, and is refused as a Transformer") {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "test_rnn_seq2seq_ckpt";
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "rnn.safetensors").string();
    RNNSeq2SeqConfig cfg = small(true, nn::Score::cosine);
    cfg.cell = nn::CellKind::lstm;
    cfg.context = models::Context::every_step;
    cfg.reverse_source = true;
    manual_seed(58);
    RNNSeq2Seq model(cfg);
    nn::save(model, path, models::to_metadata(models::model_to_metadata(model)));
    const io::SafetensorsFile f = io::load_safetensors(path);
    std::unique_ptr<models::Seq2Seq> loaded = models::model_from_metadata(f, path);
    nn::load_parameters(*loaded, f, path);
    auto* rnn = dynamic_cast<RNNSeq2Seq*>(loaded.get());
    REQUIRE(rnn != nullptr);
    CHECK(models::model_kind(*loaded) == std::string("rnn"));
    CHECK(rnn->cfg.describe() == cfg.describe());
    const Data d = padded_batch();
    model.eval();
    rnn->eval();
    NoGradGuard no_grad;
    CHECK(same_bits(model.logits(d.src, d.tgt_in, d.src_mask), rnn->logits(d.src, d.tgt_in, d.src_mask)));
    // read as a Transformer's config: the keys say which model the file holds
    CHECK_THROWS_WITH_AS(models::read_metadata(f.metadata, "config", path, models::config_from_json),
                         doctest::Contains("unknown key"), std::runtime_error);
    io::SafetensorsFile wrong = f;
    wrong.metadata["model"] = "\"lstm\"";
    CHECK_THROWS_WITH_AS(models::model_from_metadata(wrong, path), doctest::Contains("metadata 'model' is 'lstm'"), std::runtime_error);
    std::filesystem::remove_all(dir);
}
