// models/decoder_cache.h and models/decoding.h: the key/value cache gives what recomputing the
// whole prefix gives, and a batch of sentences decodes as each sentence does alone.
#include <doctest/doctest.h>

#include <cstring>

#include "models/batch.h"
#include "models/decoder_cache.h"
#include "models/decoding.h"
#include "tests/copy_model.h"

using namespace autograd;
using models::Transformer;

namespace {

models::TransformerConfig small(int64_t V) {
    return {.src_vocab = V, .tgt_vocab = V, .layers = 2, .d_model = 16, .d_ff = 32, .heads = 2, .dropout = 0.0f};
}

// B source rows of lengths 2..max_len (symbols 1..V-1), padded with 0 on the right: (B, S).
std::vector<std::vector<int32_t>> random_sources(Rng& rng, int64_t B, int64_t V, int64_t max_len) {
    std::vector<std::vector<int32_t>> rows(B);
    for (auto& r : rows) {
        r.resize(2 + rng.below(static_cast<uint32_t>(max_len - 1)));
        for (int32_t& id : r) id = 1 + static_cast<int32_t>(rng.below(static_cast<uint32_t>(V - 1)));
    }
    return rows;
}

bool same_bits(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

}  // namespace

// What the cache changes in the arithmetic: every linear layer, LayerNorm and the feed-forward work
// row by row, and gemm sums each output element over K in an order that does not depend on how
// many rows (M) there are, so they give the same bits on 1 row as on t. The self-attention of
// position t reads t+1 cached keys instead of T keys of which the future ones are masked: the
// masked scores are -inf, softmax turns them into exact zeros at the end of the row, and adding
// zeros after the real terms (softmax's sum, the weighted sum of values) changes no bit. Measured:
// the decoder outputs and log-probabilities are bit-identical, on padded batches too. (Should a
// future gemm change its summation order with M, the tokens would still agree, with log-probs
// within rounding: the tests below check the bits, which is what holds today.)
TEST_CASE("decode_step: step by step, the decoder's output at each position is the full-prefix output, bit for bit") {
    manual_seed(21);
    const int64_t V = 9, T = 7;
    Transformer model(small(V));
    model.eval();
    Rng rng(5);
    const Tokens src = models::pad_rows(random_sources(rng, 4, V, 8), 0);   // (4, S), padded
    const Mask src_mask = models::padding_mask(src, 0);
    const Tensor memory = model.encode(src, src_mask);
    const Tokens ys = models::pad_rows(random_sources(rng, 4, V, T), 1);      // (4, T') target prefixes
    const int64_t n = ys.size(0), Tn = ys.size(1), D = model.cfg.d_model;
    NoGradGuard no_grad;
    const Tensor full = model.decode(memory, src_mask, ys, models::subsequent_mask(Tn));   // (n, T', D)
    models::DecoderCache cache = models::start_decoder_cache(model, memory, src_mask);
    for (int64_t t = 0; t < Tn; t++) {
        Tokens column = Tokens::full({n, 1}, 0);
        for (int64_t i = 0; i < n; i++) column[i] = ys[i * Tn + t];
        const Tensor step = models::decode_step(model, cache, column);    // (n, D)
        CHECK(cache.length == t + 1);
        CHECK(cache.layers[0].self_k.shape() == Shape{n, t + 1, D});
        for (int64_t i = 0; i < n; i++) {
            CAPTURE(t);
            CAPTURE(i);
            CHECK(same_bits(step.data() + i * D, full.data() + (i * Tn + t) * D, D));
        }
    }
    CHECK(cache.layers[1].memory_k.shape() == Shape{n, src.size(1), D});
    CHECK_THROWS_WITH_AS(models::decode_step(model, cache, Tokens::full({n + 1, 1}, 1)),
                         doctest::Contains("tokens must be (n, 1) = (4, 1) for this cache, got (5, 1)"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(cache.reorder({0, 4}), doctest::Contains("row 4 of a mask with 4 rows"), std::invalid_argument);
}

TEST_CASE("DecoderCache::reorder gathers rows: every layer's keys and values, and the source mask") {
    manual_seed(22);
    Transformer model(small(6));
    model.eval();
    const Tokens src({1, 2, 3, 4, 5, 0}, {2, 3});
    const Mask src_mask = models::padding_mask(src, 0);
    models::DecoderCache cache = models::start_decoder_cache(model, model.encode(src, src_mask), src_mask);
    models::decode_step(model, cache, Tokens({1, 1}, {2, 1}));
    const Tensor k_before = cache.layers[1].self_k;   // (2, 1, D)
    cache.reorder({1, 1, 0});
    const int64_t D = model.cfg.d_model;
    CHECK(cache.rows() == 3);
    CHECK(cache.layers[1].self_k.shape() == Shape{3, 1, D});
    CHECK(same_bits(cache.layers[1].self_k.data(), k_before.data() + D, D));
    CHECK(same_bits(cache.layers[1].self_k.data() + D, k_before.data() + D, D));
    CHECK(same_bits(cache.layers[1].self_k.data() + 2 * D, k_before.data(), D));
    CHECK(cache.src_mask.data == std::vector<uint8_t>{1, 1, 0, 1, 1, 0, 1, 1, 1});
}

// The decoders on both paths: same tokens, same log-probabilities (bit for bit, see above).
static void check_cached_equals_recomputing(Transformer& model, const Tokens& src, int64_t max_len, int32_t eos) {
    const Mask m = models::padding_mask(src, 0);
    const Tokens cached = models::greedy_decode(model, src, m, {.max_len = max_len, .bos = 1, .eos = eos});
    const Tokens recomputed = models::greedy_decode(model, src, m, {.max_len = max_len, .bos = 1, .eos = eos, .kv_cache = false});
    CHECK(cached.shape == recomputed.shape);
    CHECK(cached.data == recomputed.data);
    for (int beam : {1, 3}) {
        CAPTURE(beam);
        const models::BeamSearchOptions opt{.beam_size = beam, .max_len = max_len, .bos = 1, .eos = eos, .length_penalty = 0.6f};
        models::BeamSearchOptions reference = opt;
        reference.kv_cache = false;
        const auto a = models::beam_search_batch(model, src, m, opt);
        const auto b = models::beam_search_batch(model, src, m, reference);
        REQUIRE(a.size() == b.size());
        for (size_t i = 0; i < a.size(); i++) {
            CHECK(a[i].tokens == b[i].tokens);
            CHECK(a[i].log_prob == b[i].log_prob);   // the same bits
            CHECK(a[i].score == b[i].score);
        }
    }
}

TEST_CASE("cached and recomputing decoding give the same outputs: random models, padded batches, greedy and beam") {
    for (uint64_t seed : {41, 42, 43}) {
        CAPTURE(seed);
        manual_seed(seed);
        Transformer model(small(8));
        model.eval();
        Rng rng(seed);
        const Tokens src = models::pad_rows(random_sources(rng, 5, 8, 9), 0);   // (5, S): lengths differ
        check_cached_equals_recomputing(model, src, 12, /*eos=*/-1);
        check_cached_equals_recomputing(model, src, 12, /*eos=*/2);
    }
}

TEST_CASE("cached and recomputing decoding give the same outputs: a model trained on the copy task") {
    manual_seed(7);   // two layers of four heads: the cache of more than one layer, in a model that is sure of its tokens
    Transformer model({.src_vocab = 7, .tgt_vocab = 7, .layers = 2, .d_model = 32, .d_ff = 64, .heads = 4, .dropout = 0.0f});
    const int64_t V = 7, L = 7;
    train_copy(model, 200, V, L, 13);
    Rng rng(77);
    const Tokens src = models::pad_rows(random_sources(rng, 8, V, L), 0);   // (8, S)
    check_cached_equals_recomputing(model, src, L + 2, /*eos=*/-1);
}

// Batching changes the arithmetic only by padding: a shorter source's encoder and src-attention see
// masked padding keys, whose zero weights add nothing (as in the cache's note above), and every
// other op works row by row. So a sentence decoded in a batch gets the same hypothesis, and the
// same bits of log-probability, as decoded alone.
TEST_CASE("beam_search_batch: each sentence of a padded batch gets the hypothesis it gets alone") {
    for (bool kv_cache : {true, false}) {
        CAPTURE(kv_cache);
        manual_seed(51);
        const int64_t V = 8;
        Transformer model(small(V));
        model.eval();
        Rng rng(52);
        const std::vector<std::vector<int32_t>> rows = random_sources(rng, 6, V, 9);
        const Tokens src = models::pad_rows(rows, 0);   // (6, S)
        for (int32_t eos : {-1, 2}) {
            CAPTURE(eos);
            const models::BeamSearchOptions opt{.beam_size = 3, .max_len = 10, .bos = 1, .eos = eos, .length_penalty = 0.6f,
                                                .kv_cache = kv_cache};
            const auto batch = models::beam_search_batch(model, src, models::padding_mask(src, 0), opt);
            REQUIRE(batch.size() == rows.size());
            for (size_t i = 0; i < rows.size(); i++) {
                CAPTURE(i);
                const Tokens one(rows[i], {1, static_cast<int64_t>(rows[i].size())});   // (1, S_i), no padding
                const models::Hypothesis alone = models::beam_search(model, one, models::padding_mask(one, 0), opt);
                CHECK(batch[i].tokens == alone.tokens);
                CHECK(batch[i].log_prob == alone.log_prob);
                CHECK(batch[i].score == alone.score);
            }
        }
    }
}
