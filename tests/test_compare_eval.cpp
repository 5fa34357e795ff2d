// The pieces of examples/compare_models.cpp (examples/eval/compare_eval.h, and the reverse task's
// batches in examples/data/copy_task_data.h): where in the source each output position's symbol
// sits, checked on the batches themselves; an attention map read back into source order and
// scored against maps drawn by hand; the systems and their parameter counts; and the scores of
// a model whose every answer is known.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "examples/data/copy_task_data.h"
#include "examples/eval/compare_eval.h"
#include "models/rnn_seq2seq.h"
#include "models/transformer.h"

using namespace autograd;
using eval::Task;

namespace {

std::vector<int32_t> row(const Tokens& t, int64_t b) {
    const int64_t n = t.size(1);
    return {t.data.begin() + b * n, t.data.begin() + (b + 1) * n};
}

// A model that answers by copying its source, without weights: at output position t it names
// src[t+1] with certainty, teacher-forced or decoding.
class CopyingOracle : public models::Seq2Seq {
public:
    explicit CopyingOracle(int64_t V) : V_(V) {}
    Tensor logits(const Tokens& src, const Tokens& tgt_in, const Mask&, const Mask&) override {
        const int64_t B = tgt_in.size(0), T = tgt_in.size(1), S = src.size(1);
        std::vector<float> x(B * T * V_, -30.0f);   // (B, T, V)
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T && t + 1 < S; t++) x[(b * T + t) * V_ + src[b * S + t + 1]] = 0.0f;
        return Tensor::from_vector(x, {B, T, V_});
    }
    std::unique_ptr<models::NextTokens> start_decoding(const Tokens& src, const Mask&, const models::DecodingSetup&) override {
        return std::make_unique<Rows>(src, V_);
    }
    int64_t tgt_vocab() const override { return V_; }
    int64_t max_len() const override { return std::numeric_limits<int64_t>::max(); }

private:
    struct Rows : models::NextTokens {
        Tokens src;
        int64_t V, appended = 0;
        Rows(Tokens s, int64_t v) : src(std::move(s)), V(v) {}
        Tensor append(const Tokens& tokens) override {
            const int64_t n = tokens.size(0), S = src.size(1);
            std::vector<float> lp(n * V, -30.0f);   // (n, V)
            appended++;
            for (int64_t b = 0; b < n; b++) lp[b * V + (appended < S ? src[b * S + appended] : 1)] = 0.0f;
            return Tensor::from_vector(lp, {n, V});
        }
        void reorder(const std::vector<int64_t>&) override {}
    };
    int64_t V_;
};

}  // namespace

TEST_CASE("make_reverse_batch: the copy batch's sources; the target is the start symbol, then the source backwards") {
    Rng a(5), b(5);
    const int64_t V = 7, B = 3, L = 6;
    const models::Batch copy = data::make_copy_batch(a, V, B, L);
    const models::Batch rev = data::make_reverse_batch(b, V, B, L);
    CHECK(rev.src.data == copy.src.data);   // the same draws from the same stream
    CHECK(rev.ntokens == B * (L - 1));
    for (int64_t i = 0; i < B; i++) {
        const std::vector<int32_t> src = row(rev.src, i);
        std::vector<int32_t> tgt = {data::COPY_START};         // built here with std::reverse_copy
        std::reverse_copy(src.begin() + 1, src.end(), std::back_inserter(tgt));
        CHECK(row(rev.tgt_in, i) == std::vector<int32_t>(tgt.begin(), tgt.end() - 1));
        CHECK(row(rev.tgt_out, i) == std::vector<int32_t>(tgt.begin() + 1, tgt.end()));
    }
    SUBCASE("by hand: 1 4 2 6 3 5 becomes 1 5 3 6 2 4") {
        Rng r(11);
        const models::Batch one = data::make_reverse_batch(r, 7, 1, 6);
        const std::vector<int32_t> s = row(one.src, 0);
        CHECK(row(one.tgt_out, 0) == std::vector<int32_t>{s[5], s[4], s[3], s[2], s[1]});
        CHECK(row(one.tgt_in, 0) == std::vector<int32_t>{1, s[5], s[4], s[3], s[2]});
    }
}

TEST_CASE("aligned_source_position: the symbol that output position t names is at that source position, in both tasks") {
    // by hand, L = 6: copying, position t names src[t+1]; reversing, src[5-t]
    for (int64_t t = 0; t < 5; t++) {
        CHECK(eval::aligned_source_position(Task::copy, t, 6) == t + 1);
        CHECK(eval::aligned_source_position(Task::reverse, t, 6) == 5 - t);
    }
    // and on the batches themselves: tgt_out[t] is src[aligned_source_position(t)]
    for (Task task : {Task::copy, Task::reverse}) {
        Rng rng(3);
        const int64_t B = 4, L = 9;
        const models::Batch b = eval::make_task_batch(task, rng, 50, B, L);   // V = 50: few repeats, so a wrong place shows
        for (int64_t i = 0; i < B; i++)
            for (int64_t t = 0; t < L - 1; t++) {
                CAPTURE(eval::task_name(task));
                CHECK(b.tgt_out[i * (L - 1) + t] == b.src[i * L + eval::aligned_source_position(task, t, L)]);
            }
    }
}

TEST_CASE("task_from_name: copy and reverse, and nothing else") {
    CHECK(eval::task_from_name("copy") == Task::copy);
    CHECK(eval::task_from_name("reverse") == Task::reverse);
    CHECK_THROWS_WITH_AS(eval::task_from_name("mirror"), "unknown task 'mirror' (copy or reverse)", std::invalid_argument);
}

TEST_CASE("aligned_rows: a row counts when its largest weight is on its symbol's position, or where the encoder read it one step before") {
    // B = 1, T = 4, S = 5. Each row is one-hot-ish: its peak at peaks[t], 0.1 elsewhere.
    auto map = [](const std::vector<int64_t>& peaks) {
        std::vector<float> w(4 * 5, 0.1f);
        for (int64_t t = 0; t < 4; t++) w[t * 5 + peaks[t]] = 0.6f;
        return w;
    };
    // copying: the symbols sit at 1 2 3 4; reversing: at 4 3 2 1
    const std::vector<int64_t> on_copy = {1, 2, 3, 4}, on_reverse = {4, 3, 2, 1};
    const std::vector<int64_t> one_after = {2, 3, 4, 0}, one_before = {0, 1, 2, 3};
    SUBCASE("the Transformer: the symbol's own position only") {
        CHECK(eval::aligned_rows({map(on_copy), {}}, 1, 4, 5, Task::copy) == 4);
        CHECK(eval::aligned_rows({map(on_copy), {}}, 1, 4, 5, Task::reverse) == 0);
        CHECK(eval::aligned_rows({map(on_reverse), {}}, 1, 4, 5, Task::reverse) == 4);
        CHECK(eval::aligned_rows({map(one_after), {}}, 1, 4, 5, Task::copy) == 0);
    }
    SUBCASE("an RNN reading forwards: also one position after (its state there read the symbol one step before)") {
        CHECK(eval::aligned_rows({map(one_after), {1}}, 1, 4, 5, Task::copy) == 3);   // the last row's 0 is no neighbour of 4
        CHECK(eval::aligned_rows({map(one_before), {1}}, 1, 4, 5, Task::copy) == 0);
    }
    SUBCASE("reading the source reversed: one position before; both ways: either") {
        CHECK(eval::aligned_rows({map(one_before), {-1}}, 1, 4, 5, Task::copy) == 4);
        CHECK(eval::aligned_rows({map(one_after), {-1}}, 1, 4, 5, Task::copy) == 0);
        CHECK(eval::aligned_rows({map(one_before), {-1, 1}}, 1, 4, 5, Task::copy) == 4);
        CHECK(eval::aligned_rows({map(one_after), {-1, 1}}, 1, 4, 5, Task::copy) == 3);
    }
    SUBCASE("rows of several sequences: each counted against its own position t") {
        std::vector<float> two = map(on_copy), second = map(on_reverse);
        two.insert(two.end(), second.begin(), second.end());   // (2, 4, 5)
        CHECK(eval::aligned_rows({two, {}}, 2, 4, 5, Task::copy) == 4 + 0);
        CHECK(eval::aligned_rows({two, {}}, 2, 4, 5, Task::reverse) == 0 + 4);
    }
}

TEST_CASE("source_attention: an RNN's alpha in source order, the Transformer's last layer averaged over heads") {
    Rng rng(9);
    const models::Batch b = data::make_copy_batch(rng, 11, 3, 7);   // B 3, S 7, T 6
    NoGradGuard no_grad;
    SUBCASE("an RNN reading the source reversed: each row of alpha turned around, the other neighbour") {
        for (bool bidirectional : {false, true}) {
            manual_seed(1);
            models::RNNSeq2Seq m({.src_vocab = 11, .tgt_vocab = 11, .embed = 5, .hidden = 6, .cell = nn::CellKind::gru,
                                  .context = models::Context::bahdanau, .bidirectional = bidirectional, .reverse_source = true,
                                  .dropout = 0.0f});
            m.keep_attention_weights(true);
            m.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask);
            const std::vector<float> alpha = m.last_attention.to_vector();   // (3, 6, 7), over the encoder's positions
            const eval::SourceAttention a = eval::source_attention(m);
            REQUIRE(a.weights.size() == alpha.size());
            for (int64_t r = 0; r < 3 * 6; r++)
                for (int64_t j = 0; j < 7; j++) CHECK(a.weights[r * 7 + j] == alpha[r * 7 + 6 - j]);
            CHECK(a.next_read == (bidirectional ? std::vector<int64_t>{-1, 1} : std::vector<int64_t>{-1}));
        }
    }
    SUBCASE("an RNN reading forwards: alpha as it is") {
        manual_seed(1);
        models::RNNSeq2Seq m({.src_vocab = 11, .tgt_vocab = 11, .embed = 5, .hidden = 6, .cell = nn::CellKind::gru,
                              .context = models::Context::bahdanau, .bidirectional = false, .dropout = 0.0f});
        m.keep_attention_weights(true);
        m.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask);
        const eval::SourceAttention a = eval::source_attention(m);
        CHECK(a.weights == m.last_attention.to_vector());
        CHECK(a.next_read == std::vector<int64_t>{1});
    }
    SUBCASE("an RNN without attention, or a model of another kind: none") {
        models::RNNSeq2Seq m({.src_vocab = 11, .tgt_vocab = 11, .embed = 5, .hidden = 6, .dropout = 0.0f});
        m.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask);
        CHECK(eval::source_attention(m).weights.empty());
        CopyingOracle oracle(11);
        CHECK(eval::source_attention(oracle).weights.empty());
    }
    SUBCASE("the Transformer: its last decoder layer's src_attn, mean over the heads") {
        manual_seed(2);
        models::Transformer m({.src_vocab = 11, .tgt_vocab = 11, .layers = 2, .d_model = 12, .d_ff = 10, .heads = 3, .dropout = 0.0f});
        m.eval();
        m.keep_attention_weights(true);
        m.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask);
        const Tensor& w = (*m.decoder->layers)[1].src_attn->last_attention;   // (3, 3, 6, 7): B, H, T, S
        const eval::SourceAttention a = eval::source_attention(m);
        REQUIRE(a.weights.size() == 3 * 6 * 7);
        CHECK(a.next_read.empty());
        for (int64_t i = 0; i < 3; i++)
            for (int64_t t = 0; t < 6; t++)
                for (int64_t s = 0; s < 7; s++) {
                    const float mean = (w.at({i, 0, t, s}) + w.at({i, 1, t, s}) + w.at({i, 2, t, s})) / 3.0f;
                    CHECK(a.weights[(i * 6 + t) * 7 + s] == doctest::Approx(mean).epsilon(1e-6));
                }
        // not the first layer's: the two differ
        const Tensor& first = (*m.decoder->layers)[0].src_attn->last_attention;
        CHECK(std::abs(first.at({0, 0, 0, 0}) - w.at({0, 0, 0, 0})) > 1e-6);
    }
}

TEST_CASE("make_system: each name builds the model it names, all with about the same parameter count") {
    std::vector<int64_t> counts;
    for (const std::string& name : eval::systems()) {
        CAPTURE(name);
        const std::unique_ptr<models::Seq2Seq> m = eval::make_system(name, 11);
        counts.push_back(m->num_parameters());
        if (name == "transformer") {
            CHECK(dynamic_cast<models::Transformer*>(m.get()) != nullptr);
            continue;
        }
        const auto* rnn = dynamic_cast<models::RNNSeq2Seq*>(m.get());
        REQUIRE(rnn != nullptr);
        const bool attention = name.find("-dot") != std::string::npos || name.find("-general") != std::string::npos ||
                               name.find("-cosine") != std::string::npos || name.find("-additive") != std::string::npos;
        CHECK(rnn->cfg.attention() == attention);
        CHECK(rnn->cfg.cell == (name == "rnn-cho" ? nn::CellKind::gru : nn::CellKind::lstm));   // Cho et al.'s model is their GRU's
        // Bahdanau et al.'s encoder reads both ways, Sutskever et al.'s and Cho et al.'s one; the dot score needs one
        CHECK(rnn->cfg.bidirectional == (attention && name != "rnn-dot"));
        CHECK(rnn->cfg.reverse_source == (name.find("reversed") != std::string::npos));
        CHECK(rnn->cfg.dropout == 0.0f);
        if (attention) CHECK(std::string(nn::score_name(rnn->cfg.score)) == name.substr(4, name.find('-', 4) - 4));
        else CHECK(std::string(models::context_name(rnn->cfg.context)) == name.substr(4, name.find('-', 4) - 4));
    }
    REQUIRE(counts.size() == 9);
    const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
    CHECK(*lo == 82015);   // the range compare_eval.h states
    CHECK(*hi == 86811);
    CHECK(static_cast<double>(*hi) / static_cast<double>(*lo) < 1.1);
    CHECK(eval::system_names() == "rnn-sutskever, rnn-sutskever-reversed, rnn-cho, rnn-dot, rnn-general, rnn-cosine, rnn-additive, "
                                  "rnn-additive-reversed, transformer");
    CHECK_THROWS_WITH_AS(eval::make_system("lstm", 11), ("unknown model 'lstm' (" + eval::system_names() + ")").c_str(),
                         std::invalid_argument);
}

TEST_CASE("score: a model that copies scores 100% copying, and reversing only where a sequence reads the same both ways") {
    CopyingOracle oracle(5);
    Rng copy_rng(21);
    const eval::Scores copy = eval::score(oracle, Task::copy, copy_rng, 5, 4, 300);
    CHECK(copy.exact == 100.0);
    CHECK(copy.token == 100.0);
    CHECK(std::isnan(copy.alignment));   // no attention to score
    CHECK(copy.attention.values.empty());
    // Reversing, the same sequences: counted here from the batches the scorer draws (300 in chunks
    // of 250: two batches from one stream). V = 5, L = 4: position t is right when src[t+1] == src[3-t].
    Rng rng(21), again(21);
    const eval::Scores rev = eval::score(oracle, Task::reverse, rng, 5, 4, 300);
    int64_t exact = 0, tokens = 0;
    for (int64_t n : {250, 50}) {
        const models::Batch b = data::make_reverse_batch(again, 5, n, 4);
        for (int64_t i = 0; i < n; i++) {
            int64_t right = 0;
            for (int64_t t = 0; t < 3; t++) right += b.src[i * 4 + t + 1] == b.src[i * 4 + 3 - t];
            exact += right == 3;
            tokens += right;
        }
    }
    CHECK(exact > 0);                 // some sequences are palindromes after the start symbol (x y x)
    CHECK(tokens > 300 + exact);      // the middle position always is, and some others
    CHECK(rev.exact == doctest::Approx(100.0 * exact / 300));
    CHECK(rev.token == doctest::Approx(100.0 * tokens / 900));
}
