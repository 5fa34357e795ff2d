// models/decoder_cache.h and models/decoding.h: the key/value cache gives what recomputing the
// whole prefix gives, and a batch of sentences decodes as each sentence does alone; what greedy
// and beam search choose (length penalty, beam size, stopping, what follows eos) against a brute
// force over every output of a tiny model.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "examples/data/vocab.h"
#include "examples/eval/copy_task_eval.h"
#include "examples/eval/translation_eval.h"
#include "models/batch.h"
#include "models/decoder_cache.h"
#include "models/decoding.h"
#include "tests/copy_model.h"
#include "tests/hooks.h"
#include "tests/thread_count.h"

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
    models::DecoderCache cache = models::start_decoder_cache(model, memory, src_mask, Tn);
    for (int64_t t = 0; t < Tn; t++) {
        Tokens column = Tokens::full({n, 1}, 0);
        for (int64_t i = 0; i < n; i++) column[i] = ys[i * Tn + t];
        const Tensor step = models::decode_step(model, cache, column);    // (n, D)
        CHECK(cache.length() == t + 1);
        CHECK(cache.layers[0].self_attn.length == t + 1);
        CHECK(cache.layers[0].self_attn.k.shape() == Shape{n, Tn, D});   // allocated for all Tn positions
        for (int64_t i = 0; i < n; i++) {
            CAPTURE(t);
            CAPTURE(i);
            CHECK(same_bits(step.data() + i * D, full.data() + (i * Tn + t) * D, D));
        }
    }
    CHECK(cache.layers[1].src_attn.k.shape() == Shape{n, src.size(1), D});
    CHECK_THROWS_WITH_AS(models::decode_step(model, cache, Tokens::full({n + 1, 1}, 1)),
                         doctest::Contains("tokens must be (n, 1) = (4, 1) for this cache, got (5, 1)"), std::invalid_argument);
}

// Reordering moves as little as it can (the caches' slot maps): the memory's keys and values stay
// one slot per sentence, shared by its hypotheses; a self-attention slot stays with the first
// hypothesis that continues it, and only a second continuation gets a copy, in a slot nobody uses.
TEST_CASE("DecoderCache::reorder: the memory's keys and values stay put, self-attention copies a slot only for a second continuation") {
    manual_seed(22);
    Transformer model(small(6));
    model.eval();
    const Tokens src({1, 2, 3, 4, 5, 0}, {2, 3});
    const Mask src_mask = models::padding_mask(src, 0);
    const int64_t D = model.cfg.d_model, L = 4, slots = 5;
    models::DecoderCache cache = models::start_decoder_cache(model, model.encode(src, src_mask), src_mask, L, slots);
    models::decode_step(model, cache, Tokens({1, 1}, {2, 1}));
    models::decode_step(model, cache, Tokens({3, 2}, {2, 1}));
    const models::AppendingCache& self = cache.layers[1].self_attn;
    const models::ComputedOnceCache& memory = cache.layers[0].src_attn;
    CHECK(self.k.shape() == Shape{slots, L, D});   // room for 5 sequences from the start
    CHECK(self.slot == std::vector<int64_t>{0, 1});
    const std::vector<float> k_before = self.k.to_vector(), v_before = self.v.to_vector();   // values: the buffer is reused
    const Tensor memory_k = memory.k, memory_v = memory.v;                                   // (2, S, D)
    cache.reorder({1, 1, 0});
    CHECK(cache.rows() == 3);
    CHECK(cache.length() == 2);
    // sequence 0 keeps sequence 1's slot, sequence 2 sequence 0's; sequence 1 gets a copy in slot 2
    CHECK(self.slot == std::vector<int64_t>{1, 2, 0});
    CHECK(self.k.shape() == Shape{slots, L, D});
    const std::vector<int64_t> parent{1, 1, 0};
    for (int64_t i = 0; i < 3; i++) {
        CAPTURE(i);
        const int64_t s = self.slot[i], from = parent[i];
        CHECK(same_bits(self.k.data() + s * L * D, k_before.data() + from * L * D, 2 * D));   // the 2 filled positions
        CHECK(same_bits(self.v.data() + s * L * D, v_before.data() + from * L * D, 2 * D));
    }
    // the memory: no copy, the same tensors, one slot per sentence; each hypothesis reads its sentence's
    CHECK(memory.k.data() == memory_k.data());
    CHECK(memory.v.data() == memory_v.data());
    CHECK(memory.k.shape() == Shape{2, 3, D});
    CHECK(memory.slot == std::vector<int64_t>{1, 1, 0});
    CHECK(cache.src_mask.data == std::vector<uint8_t>{1, 1, 0, 1, 1, 0, 1, 1, 1});
    // a reorder that drops sequences and repeats one: what is left keeps its slots where it can
    cache.reorder({2, 1, 1});
    CHECK(self.slot == std::vector<int64_t>{0, 2, 1});   // 0 and 2 kept, the repeat of 2 copied into the free slot 1
    CHECK(memory.slot == std::vector<int64_t>{0, 1, 1});
    for (int64_t i = 0; i < 3; i++) {
        CAPTURE(i);
        const int64_t from = i == 0 ? 0 : 1;   // sentence 0's hypothesis was sequence 0's parent, sentence 1's sequence 1
        CHECK(same_bits(self.k.data() + self.slot[i] * L * D, k_before.data() + from * L * D, 2 * D));
    }
}

// A bad reorder gets a clear error, not a read past the end: in the DecoderCache (the mask checks
// first) and in a cache of either kind alone.
TEST_CASE("DecoderCache::reorder and each layer cache's reorder refuse a sequence they do not hold, and more sequences than slots") {
    manual_seed(26);
    Transformer model(small(6));
    model.eval();
    const Tokens src({1, 2, 3, 4, 5, 0, 3, 3, 3}, {3, 3});
    const Mask src_mask = models::padding_mask(src, 0);
    models::DecoderCache cache = models::start_decoder_cache(model, model.encode(src, src_mask), src_mask, 3, 4);
    models::decode_step(model, cache, Tokens({1, 1, 1}, {3, 1}));
    CHECK_THROWS_WITH_AS(cache.reorder({0, 7}), doctest::Contains("row 7 of a mask with 3 rows"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(cache.reorder({0, -1}), doctest::Contains("row -1 of a mask with 3 rows"), std::invalid_argument);
    models::AppendingCache self = cache.layers[0].self_attn;       // copies: slot maps of their own
    models::ComputedOnceCache memory = cache.layers[0].src_attn;
    CHECK_THROWS_WITH_AS(self.reorder({0, 3}), doctest::Contains("KVCache::reorder: sequence 3 of a cache with 3 sequences"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(memory.reorder({3}), doctest::Contains("KVCache::reorder: sequence 3 of a cache with 3 sequences"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(self.reorder({0, 0, 1, 1, 2}), doctest::Contains("room for 4 sequences, asked for 5"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(models::AppendingCache(3, 5, 8, 2), doctest::Contains("3 sequences need as many slots, got 2"), std::invalid_argument);
}

// What beam search does to the cache, step by step and spelled out: decode, then keep some
// hypotheses (repeating some, dropping others, a whole sentence at the end), decode again. At every
// step each hypothesis's output equals the recomputing path's (the decoder over its whole prefix,
// with its sentence's memory gathered), bit for bit, on the fused and the plain path; the memory's
// keys and values are one (B, S, D) tensor per layer that never moves; self-attention's buffers
// never move either.
TEST_CASE("DecoderCache under a beam search's reorders: each hypothesis reads its sentence's memory, nothing is reallocated") {
    for (bool fused : {true, false}) {
        CAPTURE(fused);
        FusedKernelsGuard path(fused);
        manual_seed(27);
        Transformer model(small(9));
        model.eval();
        const Tokens src = models::pad_rows({{3, 4, 5, 6, 7}, {2}, {5, 5, 1}}, 0);   // (3, 5): 0, 4 and 2 pads
        const Mask src_mask = models::padding_mask(src, 0);
        const int64_t B = 3, K = 2, D = model.cfg.d_model, L = 6;
        NoGradGuard no_grad;
        const Tensor memory = model.encode(src, src_mask);                             // (B, S, D)
        models::DecoderCache cache = models::start_decoder_cache(model, memory, src_mask, L, B * K);
        std::vector<const float*> self_buffers;
        for (const models::LayerCache& c : cache.layers) self_buffers.insert(self_buffers.end(), {c.self_attn.k.data(), c.self_attn.v.data()});
        std::vector<const float*> memory_buffers;   // filled at the first step
        // each step's reorder (row i continues row from[i]); rows of a sentence stay together, as in beam search
        const std::vector<std::vector<int64_t>> reorders{{0, 0, 1, 2, 2}, {1, 0, 2, 4, 4, 3}, {0, 0, 2, 5}, {3, 1, 0, 0}};
        std::vector<int64_t> sentence{0, 1, 2};                 // each row's sentence
        std::vector<std::vector<int32_t>> prefixes(B);          // each row's tokens so far
        Rng rng(28);
        for (size_t step = 0; step <= reorders.size(); step++) {
            CAPTURE(step);
            const int64_t n = static_cast<int64_t>(prefixes.size());
            Tokens next = Tokens::full({n, 1}, 0);              // (n, 1)
            for (int64_t i = 0; i < n; i++) {
                next[i] = 1 + static_cast<int32_t>(rng.below(8));
                prefixes[i].push_back(next[i]);
            }
            const Tensor out = models::decode_step(model, cache, next);   // (n, D)
            // the recomputing path: every row's whole prefix, its sentence's memory and mask gathered
            const Tokens ys = models::pad_rows(prefixes, 0);              // (n, t)
            const int64_t t = ys.size(1);
            const Tokens ids(std::vector<int32_t>(sentence.begin(), sentence.end()), {n});
            const Tensor full = model.decode(autograd::index_select(memory, 0, ids), models::select_mask_rows(src_mask, sentence), ys,
                                             models::subsequent_mask(t));  // (n, t, D)
            for (int64_t i = 0; i < n; i++) {
                CAPTURE(i);
                CHECK(same_bits(out.data() + i * D, full.data() + (i * t + t - 1) * D, D));
            }
            std::vector<const float*> self_now, memory_now;
            for (const models::LayerCache& c : cache.layers) {
                self_now.insert(self_now.end(), {c.self_attn.k.data(), c.self_attn.v.data()});
                memory_now.insert(memory_now.end(), {c.src_attn.k.data(), c.src_attn.v.data()});
                CHECK(c.src_attn.k.shape() == Shape{B, src.size(1), D});   // per sentence: B slots, not B x K
                CHECK(c.src_attn.slot == sentence);                         // each hypothesis reads its sentence's memory
                CHECK(c.self_attn.k.shape() == Shape{B * K, L, D});
            }
            if (step == 0) memory_buffers = memory_now;
            CHECK(self_now == self_buffers);
            CHECK(memory_now == memory_buffers);
            if (step == reorders.size()) break;
            const std::vector<int64_t>& from = reorders[step];
            cache.reorder(from);
            std::vector<int64_t> next_sentence;
            std::vector<std::vector<int32_t>> next_prefixes;
            for (int64_t f : from) {
                next_sentence.push_back(sentence[f]);
                next_prefixes.push_back(prefixes[f]);
            }
            sentence = std::move(next_sentence);
            prefixes = std::move(next_prefixes);
        }
        CHECK(sentence == std::vector<int64_t>{2, 0, 0, 0});   // sentence 1 dropped, the order changed
    }
}

// Column t of ids (n, T): the token at position t of every row, (n, 1).
static Tokens column(const Tokens& ids, int64_t t) {
    const int64_t n = ids.size(0), T = ids.size(1);
    Tokens c = Tokens::full({n, 1}, 0);   // (n, 1)
    for (int64_t i = 0; i < n; i++) c[i] = ids[i * T + t];
    return c;
}

// The cached step runs the decoder's own modules in DecoderLayer::forward's order, with the
// attentions reading the cache: bit for bit what Transformer::decode gives at position t. Here on
// both of SublayerConnection's branches (pre- and post-norm), and sources padded to different
// lengths (one a single token).
TEST_CASE("decode_step's output at position t is row t of Transformer::decode: padded sources, pre- and post-norm") {
    for (bool pre_norm : {true, false}) {
        CAPTURE(pre_norm);
        manual_seed(23);
        models::TransformerConfig cfg = small(9);
        cfg.pre_norm = pre_norm;
        Transformer model(cfg);
        model.eval();
        const Tokens src = models::pad_rows({{3, 4, 5, 6, 7, 8}, {2}, {5, 5, 1}}, 0);   // (3, 6): 0, 5 and 3 pads
        const Mask src_mask = models::padding_mask(src, 0);
        const Tensor memory = model.encode(src, src_mask);                              // (3, 6, D)
        const Tokens ys = models::pad_rows({{1, 4, 4, 2, 8, 3, 7}, {1, 2, 3, 4, 5, 6, 7}, {1, 8, 7, 6, 5, 4, 3}}, 0);   // (3, 7)
        const int64_t n = 3, T = 7, D = cfg.d_model;
        NoGradGuard no_grad;
        const Tensor full = model.decode(memory, src_mask, ys, models::subsequent_mask(T));   // (n, T, D)
        auto full_row = [&](int64_t i, int64_t t) { return full.data() + (i * T + t) * D; };

        models::DecoderCache stepped = models::start_decoder_cache(model, memory, src_mask, T);
        for (int64_t t = 0; t < T; t++) {
            const Tensor step = models::decode_step(model, stepped, column(ys, t));   // (n, D)
            for (int64_t i = 0; i < n; i++) {
                CAPTURE(t);
                CAPTURE(i);
                CHECK(same_bits(step.data() + i * D, full_row(i, t), D));
            }
        }

    }
}

// The cache is allocated once for the longest output its decoding call asks for: a step writes its
// keys and values into that buffer, never into a new one, and a step past the end is refused.
TEST_CASE("DecoderCache: allocated once for max_positions, written in place, and refuses one position more") {
    manual_seed(24);
    Transformer model(small(6));
    model.eval();
    const Tokens src({1, 2, 3, 4, 5, 0}, {2, 3});
    const Mask src_mask = models::padding_mask(src, 0);
    const int64_t L = 4, D = model.cfg.d_model;
    models::DecoderCache cache = models::start_decoder_cache(model, model.encode(src, src_mask), src_mask, L);
    CHECK(cache.capacity() == L);
    std::vector<const float*> buffers;   // every layer's K and V
    for (const models::LayerCache& c : cache.layers) buffers.insert(buffers.end(), {c.self_attn.k.data(), c.self_attn.v.data()});
    std::vector<float> k0;   // layer 1's keys of position 0, row 1
    for (int64_t t = 0; t < L; t++) {
        CAPTURE(t);
        models::decode_step(model, cache, Tokens({1, static_cast<int32_t>(2 + t)}, {2, 1}));
        std::vector<const float*> now;
        for (const models::LayerCache& c : cache.layers) now.insert(now.end(), {c.self_attn.k.data(), c.self_attn.v.data()});
        CHECK(now == buffers);
        const float* row = cache.layers[1].self_attn.k.data() + L * D;   // row 1, position 0
        if (t == 0) k0.assign(row, row + D);
        CHECK(same_bits(row, k0.data(), D));   // position 0 stays where it was written
    }
    CHECK(cache.length() == L);
    CHECK_THROWS_WITH_AS(models::decode_step(model, cache, Tokens({1, 1}, {2, 1})),
                         doctest::Contains("KVCache: room for 4 rows, 4 filled: cannot write 1 more"), std::out_of_range);
    CHECK(cache.length() == L);
}

// A self-attention cache alone: MultiHeadAttention's projections and attend_to_cache, fed one
// position at a time, give what one MultiHeadAttention call over the whole sequence with the
// subsequent mask gives; the cache is for decoding without gradients only.
TEST_CASE("AppendingCache: attention one position at a time equals one masked call; refused while recording a graph") {
    manual_seed(25);
    const int64_t B = 2, T = 5, D = 8;
    nn::MultiHeadAttention mha(D, 2, 0.0f);
    const Tensor x = Tensor::randn({B, T, D});   // (B, T, D)
    models::AppendingCache cache(B, T, D);
    const Tensor x0 = autograd::narrow(x, 1, 0, 1);
    CHECK_THROWS_WITH_AS(cache.write(mha.w_k->forward(x0), mha.w_v->forward(x0)), doctest::Contains("needs autograd::NoGradGuard"),
                         std::logic_error);
    NoGradGuard no_grad;
    const Tensor full = mha.forward(x, x, x, models::subsequent_mask(T));   // (B, T, D)
    for (int64_t t = 0; t < T; t++) {
        CAPTURE(t);
        const Tensor xt = autograd::narrow(x, 1, t, 1);                                                    // (B, 1, D)
        cache.write(mha.w_k->forward(xt), mha.w_v->forward(xt));
        const nn::AttentionOutput a = models::attend_to_cache(mha.w_q->forward(xt), cache.k, cache.v, 2, Mask(), cache.length, cache.slot);
        const Tensor out = mha.w_o->forward(a.out);                                                        // (B, 1, D)
        CHECK(a.weights.shape() == Shape{B, 2, 1, t + 1});
        for (int64_t b = 0; b < B; b++) {
            CAPTURE(b);
            for (int64_t d = 0; d < D; d++) CHECK(out.at({b, 0, d}) == doctest::Approx(full.at({b, t, d})).epsilon(1e-5));
        }
    }
}

// The decoders on both paths: same tokens, same log-probabilities (bit for bit, see above).
static void check_cached_equals_recomputing(Transformer& model, const Tokens& src, int64_t max_len, int32_t eos) {
    const Mask m = models::padding_mask(src, 0);
    const Tokens cached = models::greedy_decode_cached(model, src, m, {.max_len = max_len, .bos = 1, .eos = eos});
    const Tokens recomputed = models::greedy_decode(model, src, m, {.max_len = max_len, .bos = 1, .eos = eos});
    CHECK(cached.shape == recomputed.shape);
    CHECK(cached.data == recomputed.data);
    for (int beam : {1, 2, 3, 4}) {
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
        FusedKernelsGuard path(seed != 42);   // seed 42 on the plain path: the slot maps' index_select instead of the kernel's
        manual_seed(seed);
        Transformer model(small(8));
        model.eval();
        Rng rng(seed);
        const Tokens src = models::pad_rows(random_sources(rng, 5, 8, 9), 0);   // (5, S): lengths differ
        check_cached_equals_recomputing(model, src, 12, /*eos=*/-1);
        check_cached_equals_recomputing(model, src, 12, /*eos=*/2);
    }
}

// Under mixed precision the decoder's bf16 Linear products read the weights packed once per
// decoding call (a FrozenWeightsGuard in decoding.cpp), and give the bits they give packed per call.
TEST_CASE("decoding under bf16: each decoder weight packed once per call, cached and recomputing still the same bits") {
    manual_seed(44);
    Transformer model(small(8));
    model.eval();
    Rng rng(44);
    const Tokens src = models::pad_rows(random_sources(rng, 5, 8, 9), 0);   // (5, S)
    MixedPrecisionGuard bf16;
    const auto packs = [] { return autograd::test_hooks::frozen_weight_packs(); };
    const int64_t before = packs();
    models::greedy_decode_cached(model, src, models::padding_mask(src, 0), {.max_len = 6, .bos = 1, .eos = -1});
    // per decoder layer, the self-attention's 4 weights, the source attention's query and output
    // weights (its keys and values are projected once per call), the feed-forward's 2; and the
    // generator's. The encoder runs once per call: none of its weights.
    CHECK(packs() - before == model.cfg.layers * 8 + 1);
    check_cached_equals_recomputing(model, src, 12, /*eos=*/-1);
    check_cached_equals_recomputing(model, src, 12, /*eos=*/2);
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

// ---- the decoders' choices against a brute force ---------------------------------------------
//
// The tests above hold the fast paths equal to the slow ones, which cannot see a mistake both
// share. These check what the decoders choose: every hypothesis a tiny model can produce is
// enumerated and scored here, with plain teacher-forced decoder passes (none of the decoders'
// machinery), and the length penalty is written here again from its documentation.

namespace {

constexpr int64_t kV = 4;                  // ids 0..3, every one of them a possible output token
constexpr int32_t kBos = 1, kEos = 2;

// A 1-layer model over kV tokens with the random weights of `seed`. `sharpness` multiplies the
// output projection (weights and bias): above 1 the next-token distributions get peaked, as a
// trained model's are, so that some continuations are nearly certain.
std::unique_ptr<Transformer> tiny_model(uint64_t seed, float sharpness) {
    manual_seed(seed);
    auto model = std::make_unique<Transformer>(models::TransformerConfig{
        .src_vocab = kV, .tgt_vocab = kV, .layers = 1, .d_model = 8, .d_ff = 16, .heads = 2, .dropout = 0.0f});
    model->eval();
    for (Tensor& p : model->generator->parameters())
        for (int64_t i = 0; i < p.numel(); i++) p.data()[i] *= sharpness;
    return model;
}

// log p(v | prefix, src) for every token v: the decoder over the whole prefix (bos first), its
// last position, log-softmax. The textbook step, one sentence at a time.
std::vector<double> plain_next_log_probs(Transformer& model, const Tokens& src, const std::vector<int32_t>& prefix) {
    NoGradGuard no_grad;
    const Mask src_mask = models::padding_mask(src, 0);
    const int64_t t = static_cast<int64_t>(prefix.size());
    const Tokens ys(prefix, {1, t});
    const Tensor lp = model.generator->log_probs(model.decode(model.encode(src, src_mask), src_mask, ys, models::subsequent_mask(t)));
    const float* last = lp.data() + (t - 1) * kV;   // lp (1, t, V): the last position's row
    return std::vector<double>(last, last + kV);
}

// log p(tokens[1:] | tokens[0] = bos, src): one teacher-forced pass, summing each next token's log-probability.
double plain_log_prob(Transformer& model, const Tokens& src, const std::vector<int32_t>& tokens) {
    NoGradGuard no_grad;
    const Mask src_mask = models::padding_mask(src, 0);
    const int64_t t = static_cast<int64_t>(tokens.size()) - 1;
    const Tokens ys(std::vector<int32_t>(tokens.begin(), tokens.end() - 1), {1, t});
    const Tensor lp = model.generator->log_probs(model.decode(model.encode(src, src_mask), src_mask, ys, models::subsequent_mask(t)));
    double sum = 0.0;
    for (int64_t i = 0; i < t; i++) sum += lp.data()[i * kV + tokens[i + 1]];
    return sum;
}

// Greedy by the textbook: one decoder pass over the whole prefix per step, append the argmax;
// stop after eos (eos = -1: never) or at max_len tokens, bos included.
std::vector<int32_t> plain_greedy(Transformer& model, const Tokens& src, int64_t max_len, int32_t eos) {
    std::vector<int32_t> out{kBos};
    while (static_cast<int64_t>(out.size()) < max_len && out.back() != eos) {
        const std::vector<double> lp = plain_next_log_probs(model, src, out);
        out.push_back(static_cast<int32_t>(std::max_element(lp.begin(), lp.end()) - lp.begin()));
    }
    return out;
}

// Every hypothesis a search can end with, for outputs of max_len tokens bos included: eos ends a
// hypothesis, so it appears only last; one without eos runs to max_len.
void all_hypotheses(std::vector<int32_t>& prefix, int64_t max_len, int32_t eos, std::vector<std::vector<int32_t>>& out) {
    if (static_cast<int64_t>(prefix.size()) == max_len) {
        out.push_back(prefix);
        return;
    }
    for (int32_t v = 0; v < kV; v++) {
        prefix.push_back(v);
        if (v == eos) out.push_back(prefix);
        else all_hypotheses(prefix, max_len, eos, out);
        prefix.pop_back();
    }
}

// GNMT's length penalty (Wu et al. 2016), as docs/14-decoding.md states it: the log-probability
// divided by ((5 + len) / 6)^alpha, len = the tokens after bos, eos included.
double gnmt_score(double log_prob, size_t len, double alpha) { return log_prob / std::pow((5.0 + len) / 6.0, alpha); }

struct Scored {
    std::vector<int32_t> tokens;
    double log_prob, score;
};

// Every hypothesis of the model for src, scored, best first.
std::vector<Scored> brute_force(Transformer& model, const Tokens& src, int64_t max_len, int32_t eos, double alpha) {
    std::vector<std::vector<int32_t>> hyps;
    std::vector<int32_t> bos{kBos};
    all_hypotheses(bos, max_len, eos, hyps);
    std::vector<Scored> ranked;
    for (const auto& h : hyps) {
        const double lp = plain_log_prob(model, src, h);
        ranked.push_back({h, lp, gnmt_score(lp, h.size() - 1, alpha)});
    }
    std::sort(ranked.begin(), ranked.end(), [](const Scored& a, const Scored& b) { return a.score > b.score; });
    return ranked;
}

// "<bos> 3 0 <eos>": a hypothesis in a failure message
std::string str(const std::vector<int32_t>& tokens) {
    std::string s;
    for (size_t i = 0; i < tokens.size(); i++) {
        if (i) s += ' ';
        s += i == 0 && tokens[i] == kBos ? "<bos>" : tokens[i] == kEos ? "<eos>" : std::to_string(tokens[i]);
    }
    return s;
}

// beam_search with a beam as wide as the number of hypotheses prunes nothing and cannot have K
// finished before max_len, so it must return the brute force's best. Returns that best.
std::vector<int32_t> check_beam_is_exhaustive(Transformer& model, const Tokens& src, int64_t max_len, int32_t eos, double alpha) {
    const std::vector<Scored> ranked = brute_force(model, src, max_len, eos, alpha);
    CAPTURE(alpha);
    INFO("brute force: best " << str(ranked[0].tokens) << " (score " << ranked[0].score << "), runner-up "
                              << str(ranked[1].tokens) << " (" << ranked[1].score << ")");
    REQUIRE(ranked[0].score - ranked[1].score > 1e-4);   // a clear winner: no rounding can swap the two
    const models::Hypothesis h = models::beam_search(
        model, src, models::padding_mask(src, 0),
        {.beam_size = static_cast<int>(ranked.size()), .max_len = max_len, .bos = kBos, .eos = eos, .length_penalty = static_cast<float>(alpha)});
    CHECK(str(h.tokens) == str(ranked[0].tokens));
    CHECK(h.log_prob == doctest::Approx(ranked[0].log_prob).epsilon(1e-5));
    CHECK(h.score == doctest::Approx(ranked[0].score).epsilon(1e-5));
    return ranked[0].tokens;
}

const Tokens kSrc({3, 1, 2}, {1, 3});   // the source sentence of the beam tests (1, S)

}  // namespace

TEST_CASE("all_hypotheses, the brute force's list: eos only last, the rest run to max_len") {
    std::vector<std::vector<int32_t>> hyps;
    std::vector<int32_t> bos{kBos};
    all_hypotheses(bos, 4, kEos, hyps);
    // up to 3 tokens after bos over 4 ids, eos only last: <eos>; 3 x <eos>; 3 x 3 x (any of the 4)
    CHECK(hyps.size() == 1 + 3 + 36);
    CHECK(hyps.front() == std::vector<int32_t>{1, 0, 0, 0});
    CHECK(std::count(hyps.begin(), hyps.end(), std::vector<int32_t>{1, 2}) == 1);
    CHECK(std::count(hyps.begin(), hyps.end(), std::vector<int32_t>{1, 3, 0, 2}) == 1);
    hyps.clear();
    all_hypotheses(bos, 4, /*eos=*/-1, hyps);
    CHECK(hyps.size() == 64);   // 4^3: every sequence runs to max_len
}

TEST_CASE("beam search: the length penalty alpha changes the winner, to the one a brute force over every hypothesis picks") {
    // Raw log-probabilities (alpha = 0) favour short outputs; GNMT's penalty divides by a factor
    // that grows with the length, so a larger alpha can make a longer hypothesis win.
    SUBCASE("both winners end in eos") {
        auto model = tiny_model(35, 1.0f);
        const std::vector<int32_t> raw = check_beam_is_exhaustive(*model, kSrc, 4, kEos, 0.0);
        const std::vector<int32_t> penalized = check_beam_is_exhaustive(*model, kSrc, 4, kEos, 0.6);   // the translation example's
        CHECK(check_beam_is_exhaustive(*model, kSrc, 4, kEos, 1.0) == penalized);
        INFO("alpha 0: " << str(raw) << ", alpha 0.6: " << str(penalized));
        REQUIRE(raw.back() == kEos);   // the case this subcase is for: two finished hypotheses of different lengths
        REQUIRE(penalized.back() == kEos);
        CHECK(raw.size() < penalized.size());
    }
    SUBCASE("the longer winner runs to max_len") {
        auto model = tiny_model(25, 1.0f);
        const std::vector<int32_t> raw = check_beam_is_exhaustive(*model, kSrc, 4, kEos, 0.0);
        CHECK(check_beam_is_exhaustive(*model, kSrc, 4, kEos, 0.6) == raw);   // 0.6 is not enough here
        const std::vector<int32_t> penalized = check_beam_is_exhaustive(*model, kSrc, 4, kEos, 1.0);
        INFO("alpha 0: " << str(raw) << ", alpha 1: " << str(penalized));
        CHECK(raw.size() < penalized.size());
    }
}

TEST_CASE("beam search with a beam holding every hypothesis is exhaustive search: random models, with and without eos, any alpha") {
    for (uint64_t seed : {61, 62, 63, 64}) {
        for (float sharpness : {1.0f, 3.0f}) {
            CAPTURE(seed);
            CAPTURE(sharpness);
            auto model = tiny_model(seed, sharpness);
            for (double alpha : {0.0, 0.6, 2.0}) check_beam_is_exhaustive(*model, kSrc, 4, kEos, alpha);
            check_beam_is_exhaustive(*model, kSrc, 4, /*eos=*/-1, 0.0);   // 64 sequences of 3 tokens
        }
    }
    auto model = tiny_model(72, 2.0f);   // 121 hypotheses of up to 4 tokens
    for (double alpha : {0.0, 0.6}) check_beam_is_exhaustive(*model, kSrc, 5, kEos, alpha);
}

TEST_CASE("beam size: 1 is greedy decoding, and a beam holding every hypothesis finds what greedy misses") {
    bool wider_beam_differs = false;   // the case where beam_size changes the answer
    for (uint64_t seed : {35, 61, 62, 63}) {
        CAPTURE(seed);
        auto model = tiny_model(seed, 1.0f);
        const std::vector<int32_t> greedy = plain_greedy(*model, kSrc, 6, kEos);
        const models::Hypothesis one = models::beam_search(*model, kSrc, models::padding_mask(kSrc, 0),
                                                           {.beam_size = 1, .max_len = 6, .bos = kBos, .eos = kEos});
        CHECK(str(one.tokens) == str(greedy));
        CHECK(one.log_prob == doctest::Approx(plain_log_prob(*model, kSrc, greedy)).epsilon(1e-5));
        const std::vector<int32_t> best = check_beam_is_exhaustive(*model, kSrc, 4, kEos, 0.0);
        wider_beam_differs = wider_beam_differs || best != plain_greedy(*model, kSrc, 4, kEos);
    }
    CHECK(wider_beam_differs);
}

// Beam search does not know whether a live hypothesis will overtake the finished ones. With
// alpha > 0 it can even when its score so far is lower than theirs: a longer hypothesis is
// divided by a larger factor, so adding a nearly certain token can raise its score. A search that
// stopped as soon as a finished hypothesis beat every live one would be wrong here.
TEST_CASE("beam search does not stop while an unfinished hypothesis can still win: a finished one that leads is overtaken") {
    auto model = tiny_model(72, 2.0f);
    const int64_t max_len = 5;
    const double alpha = 2.0;
    const std::vector<Scored> ranked = brute_force(*model, kSrc, max_len, kEos, alpha);
    const size_t winner_len = ranked[0].tokens.size() - 1;
    bool overtaken = false;   // at some step, a finished hypothesis leads every live one, and a longer one wins
    for (size_t l = 1; l + 1 < static_cast<size_t>(max_len); l++) {
        double best_finished = -INFINITY, best_live = -INFINITY;
        for (const Scored& h : ranked)
            if (h.tokens.back() == kEos && h.tokens.size() - 1 <= l) best_finished = std::max(best_finished, h.score);
        std::vector<std::vector<int32_t>> prefixes;   // the live hypotheses after l steps: l tokens, no eos
        std::vector<int32_t> bos{kBos};
        all_hypotheses(bos, static_cast<int64_t>(l) + 1, kEos, prefixes);
        for (const auto& p : prefixes)
            if (p.back() != kEos) best_live = std::max(best_live, gnmt_score(plain_log_prob(*model, kSrc, p), l, alpha));
        INFO("after " << l << " steps: best finished " << best_finished << ", best live " << best_live);
        overtaken = overtaken || (best_finished > best_live && winner_len > l);
    }
    INFO("winner " << str(ranked[0].tokens));
    REQUIRE(overtaken);
    check_beam_is_exhaustive(*model, kSrc, max_len, kEos, alpha);
}

namespace {

// Beam search as docs/14-decoding.md describes it, written plainly: one hypothesis at a time, each
// step's log-probabilities from a whole-prefix decoder pass. Keep the K best (hypothesis, token)
// pairs by log-probability (ties: lower beam index, then lower id); those ending in eos are
// finished (eos = -1: none). Stop at max_len, when no hypothesis is live, or (stop_at_k_finished) when K have
// finished; if fewer than K finished, the live ones join them. Return the best score.
Scored reference_beam(Transformer& model, const Tokens& src, size_t K, int64_t max_len, int32_t eos, double alpha,
                      bool stop_at_k_finished) {
    std::vector<Scored> live{{{kBos}, 0.0, 0.0}}, finished;
    for (int64_t t = 1; t < max_len && !live.empty() && !(stop_at_k_finished && finished.size() >= K); t++) {
        struct Candidate {
            double log_prob;
            size_t beam;
            int32_t token;
        };
        std::vector<Candidate> candidates;   // in (beam, token) order, which stable_sort keeps among equals
        for (size_t i = 0; i < live.size(); i++) {
            const std::vector<double> lp = plain_next_log_probs(model, src, live[i].tokens);
            for (int32_t v = 0; v < kV; v++) candidates.push_back({live[i].log_prob + lp[v], i, v});
        }
        std::stable_sort(candidates.begin(), candidates.end(),
                         [](const Candidate& a, const Candidate& b) { return a.log_prob > b.log_prob; });
        std::vector<Scored> next;
        for (size_t c = 0; c < std::min(K, candidates.size()); c++) {
            Scored h{live[candidates[c].beam].tokens, candidates[c].log_prob, 0.0};
            h.tokens.push_back(candidates[c].token);
            h.score = gnmt_score(h.log_prob, h.tokens.size() - 1, alpha);
            (h.tokens.back() == eos ? finished : next).push_back(h);
        }
        live = next;
    }
    if (!(stop_at_k_finished && finished.size() >= K))
        for (Scored& h : live) finished.push_back({h.tokens, h.log_prob, gnmt_score(h.log_prob, h.tokens.size() - 1, alpha)});
    return *std::max_element(finished.begin(), finished.end(), [](const Scored& a, const Scored& b) { return a.score < b.score; });
}

}  // namespace

// With a narrow beam the search is not exhaustive, so the reference is the algorithm itself,
// written plainly above. The cases include ones where the rules matter: K finished hypotheses
// end the search although a live one would have scored better, and max_len ends it with a live
// hypothesis the winner.
TEST_CASE("beam search with a narrow beam: keeps K, stops when K have finished, ranks by score, as the plain reference does") {
    bool stopping_mattered = false, live_won = false;
    for (uint64_t seed : {35, 61, 62, 72}) {
        for (float sharpness : {1.0f, 2.0f}) {
            auto model = tiny_model(seed, sharpness);
            for (int K : {1, 2, 3}) {
                for (double alpha : {0.0, 0.6, 2.0}) {
                    CAPTURE(seed);
                    CAPTURE(sharpness);
                    CAPTURE(K);
                    CAPTURE(alpha);
                    const int64_t max_len = 6;
                    const Scored expected = reference_beam(*model, kSrc, K, max_len, kEos, alpha, true);
                    const models::Hypothesis h = models::beam_search(
                        *model, kSrc, models::padding_mask(kSrc, 0),
                        {.beam_size = K, .max_len = max_len, .bos = kBos, .eos = kEos, .length_penalty = static_cast<float>(alpha)});
                    CHECK(str(h.tokens) == str(expected.tokens));
                    CHECK(h.log_prob == doctest::Approx(expected.log_prob).epsilon(1e-5));
                    CHECK(h.score == doctest::Approx(expected.score).epsilon(1e-5));
                    stopping_mattered = stopping_mattered || reference_beam(*model, kSrc, K, max_len, kEos, alpha, false).tokens != expected.tokens;
                    live_won = live_won || expected.tokens.back() != kEos;
                }
            }
        }
    }
    CHECK(stopping_mattered);
    CHECK(live_won);
}

// The documented contract (models/decoding.h): each row starts with bos; once it has produced
// eos, the rest of it is pad; decoding stops when every row has, so the output is as long as the
// longest row. Each row is what the sentence gets decoded alone.
TEST_CASE("greedy_decode: after eos a row is pad at every position, and a row that ends early changes no other row") {
    auto model = tiny_model(88, 1.0f);
    // sources of different lengths, whose outputs end at different steps, the longest neither first nor last
    const std::vector<std::vector<int32_t>> sources = {{3, 1, 2}, {1, 1}, {2, 3, 3, 1, 3}, {3}};
    const Tokens src = models::pad_rows(sources, 0);   // (4, 5)
    const int64_t B = static_cast<int64_t>(sources.size()), max_len = 9;
    const int32_t pad = 3;   // not 0, so that a pad other than the one asked for shows
    std::vector<std::vector<int32_t>> alone;   // each sentence decoded alone, by the textbook
    size_t L = 0;
    std::string shown;   // for a failure message
    for (const auto& s : sources) {
        alone.push_back(plain_greedy(*model, Tokens(s, {1, static_cast<int64_t>(s.size())}), max_len, kEos));
        L = std::max(L, alone.back().size());
        shown += "\n  " + str(alone.back());
    }
    INFO("each sentence alone:" << shown);
    std::vector<int32_t> expected;   // (B, L): each row, then pad to L
    bool pad_hides_something = false;
    for (size_t b = 0; b < alone.size(); b++) {
        CAPTURE(b);
        REQUIRE(alone[b].back() == kEos);   // the case this test is for: every row ends, at different steps
        std::vector<int32_t> row = alone[b];
        row.resize(L, pad);
        expected.insert(expected.end(), row.begin(), row.end());
        // what the row would hold after its eos had it gone on: not all pad, so the pad is seen
        const std::vector<int32_t> on = plain_greedy(*model, Tokens(sources[b], {1, static_cast<int64_t>(sources[b].size())}), L, -1);
        pad_hides_something = pad_hides_something || !std::equal(on.begin() + alone[b].size(), on.end(), row.begin() + alone[b].size());
    }
    REQUIRE(L < static_cast<size_t>(max_len));   // decoding must stop before max_len
    REQUIRE(std::any_of(alone.begin(), alone.end(), [&](const auto& row) { return row.size() < L; }));   // one ends early
    REQUIRE(pad_hides_something);
    for (bool kv_cache : {true, false}) {
        CAPTURE(kv_cache);
        const Tokens out = models::greedy_decode_counted(*model, src, models::padding_mask(src, 0),
                                                         {.max_len = max_len, .bos = kBos, .eos = kEos, .pad = pad}, kv_cache, nullptr);
        CHECK(out.shape == Shape{B, static_cast<int64_t>(L)});
        CHECK(out.data == expected);   // every position of every row
    }
    // without eos every row runs to max_len
    const Tokens no_eos = models::greedy_decode(*model, src, models::padding_mask(src, 0), {.max_len = max_len, .bos = kBos, .eos = -1, .pad = pad});
    REQUIRE(no_eos.shape == Shape{B, max_len});
    for (int64_t b = 0; b < B; b++) {
        const std::vector<int32_t> row(no_eos.data.begin() + b * max_len, no_eos.data.begin() + (b + 1) * max_len);
        CHECK(row == plain_greedy(*model, Tokens(sources[b], {1, static_cast<int64_t>(sources[b].size())}), max_len, -1));
    }
}

// kv_cache = false (--no-kv-cache) gives the same outputs by design (the tests above), so what
// shows which path ran is the work it did. Recomputing runs every decoder layer's self-attention
// module over the whole prefix, and the module keeps the weights of its last call
// (last_attention (n, H, t, t)); the cached step reads the cache with one query per row. The
// options' `positions` counts the work, and the counts are known by hand: with no eos, greedy
// runs steps t = 1..5 on one row (prefixes of t tokens); beam 3 runs step 1 on one row, steps
// 2..5 on 3 rows (3 of the 4 tokens kept, none finished).
TEST_CASE("kv_cache = false recomputes the whole prefix at every step; true runs one position per step") {
    auto model = tiny_model(35, 1.0f);
    nn::MultiHeadAttention& self_attn = *(*model->decoder->layers)[0].self_attn;
    model->keep_attention_weights(true);   // a recomputing step's weights show which path ran
    const Mask m = models::padding_mask(kSrc, 0);
    const int64_t max_len = 6, H = model->cfg.heads;   // the last step reads a prefix of 5 tokens
    for (bool kv_cache : {false, true}) {
        CAPTURE(kv_cache);
        int64_t greedy_positions = 0, beam_positions = 0;
        self_attn.last_attention = Tensor();
        models::greedy_decode_counted(*model, kSrc, m, {.max_len = max_len, .bos = kBos, .eos = -1}, kv_cache, &greedy_positions);
        const Tensor& greedy_weights = self_attn.last_attention;
        if (kv_cache) CHECK((!greedy_weights.defined() || greedy_weights.size(2) == 1));
        else CHECK(greedy_weights.shape() == Shape{1, H, max_len - 1, max_len - 1});
        CHECK(greedy_positions == (kv_cache ? 5 : 1 + 2 + 3 + 4 + 5));
        self_attn.last_attention = Tensor();
        models::beam_search(*model, kSrc, m,
                            {.beam_size = 3, .max_len = max_len, .bos = kBos, .eos = -1, .kv_cache = kv_cache, .positions = &beam_positions});
        const Tensor& beam_weights = self_attn.last_attention;
        if (kv_cache) CHECK((!beam_weights.defined() || beam_weights.size(2) == 1));
        else CHECK(beam_weights.shape() == Shape{3, H, max_len - 1, max_len - 1});   // 3 live hypotheses
        CHECK(beam_positions == (kv_cache ? 1 + 3 * 4 : 1 + 3 * (2 + 3 + 4 + 5)));
    }
}

// The translation example decodes through eval::translate_ids: --beam K sets the beam (0:
// greedy), with the length penalty alpha = 0.6 of docs/14, and --no-kv-cache the path. Expected:
// greedy by the textbook, a narrow beam by the plain reference search, a beam of 40 (as many as
// the hypotheses) by the brute force at alpha 0.6.
// The model's 4 ids are the vocabulary's specials: 0 <pad>, 1 <bos>, 2 <eos>, 3 <unk>.
TEST_CASE("eval::translate_ids: --beam 0 is greedy, --beam K keeps K, and a beam holding every hypothesis finds the best at alpha 0.6") {
    static_assert(data::Vocab::PAD == 0 && data::Vocab::BOS == kBos && data::Vocab::EOS == kEos);
    auto model = tiny_model(424, 1.0f);
    const std::vector<std::vector<int32_t>> srcs = {{3, 1, 2}, {2, 3, 3, 1}};
    const int64_t max_len = 4;
    const std::vector<int> beams = {0, 2, 3, 40};
    std::vector<std::vector<std::vector<int32_t>>> expected(srcs.size());   // [sentence][beam]
    for (size_t i = 0; i < srcs.size(); i++) {
        const Tokens src(srcs[i], {1, static_cast<int64_t>(srcs[i].size())});
        const std::vector<Scored> ranked = brute_force(*model, src, max_len, kEos, 0.6);
        REQUIRE(ranked[0].score - ranked[1].score > 1e-4);
        expected[i] = {plain_greedy(*model, src, max_len, kEos), reference_beam(*model, src, 2, max_len, kEos, 0.6, true).tokens,
                       reference_beam(*model, src, 3, max_len, kEos, 0.6, true).tokens, ranked[0].tokens};
    }
    // the case this test is for: in sentence 1 each beam width gives another output than the
    // next, and alpha 0 would pick another best than alpha 0.6
    const std::vector<std::vector<int32_t>>& e = expected[1];
    INFO("sentence 1: greedy " << str(e[0]) << ", beam 2 " << str(e[1]) << ", beam 3 " << str(e[2]) << ", beam 40 " << str(e[3]));
    REQUIRE((e[0] != e[1] && e[1] != e[2] && e[2] != e[3]));
    REQUIRE(brute_force(*model, Tokens(srcs[1], {1, 4}), max_len, kEos, 0.0)[0].tokens != e[3]);

    nn::MultiHeadAttention& self_attn = *(*model->decoder->layers)[0].self_attn;
    model->keep_attention_weights(true);   // a recomputing step's weights show which path ran
    // which path ran (see the test above): recomputing leaves a square self-attention map of the
    // last prefix; the cache none, or one query per row
    auto ran_path = [&](bool kv_cache) {
        const Tensor& w = self_attn.last_attention;
        return kv_cache ? (!w.defined() || w.size(2) == 1) : (w.defined() && w.size(2) > 1 && w.size(2) == w.size(3));
    };
    for (bool kv_cache : {true, false}) {
        for (size_t k = 0; k < beams.size(); k++) {
            CAPTURE(kv_cache);
            CAPTURE(beams[k]);
            self_attn.last_attention = Tensor();
            const std::vector<std::vector<int32_t>> out = eval::translate_ids(*model, srcs, beams[k], max_len, kv_cache);
            CHECK(ran_path(kv_cache));
            REQUIRE(out.size() == srcs.size());
            for (size_t i = 0; i < srcs.size(); i++) {
                CAPTURE(i);
                CHECK(str(out[i]) == str(expected[i][k]));
            }
        }
    }
}

TEST_CASE("eval::decoding_batches: every sentence once, similar lengths together, long ones in batches whose scores fit those of 100 x 64 tokens") {
    // 250 sentences of 10 tokens, 7 of 300, one of 512, shuffled
    std::vector<std::vector<int32_t>> srcs;
    for (int i = 0; i < 250; i++) srcs.push_back(std::vector<int32_t>(10, 3));
    for (int i = 0; i < 7; i++) srcs.push_back(std::vector<int32_t>(300, 3));
    srcs.push_back(std::vector<int32_t>(512, 3));
    std::swap(srcs[3], srcs[252]), std::swap(srcs[0], srcs[257]);
    for (int beam : {0, 4}) {
        CAPTURE(beam);
        const std::vector<std::vector<size_t>> batches = eval::decoding_batches(srcs, beam);
        std::vector<int> seen(srcs.size(), 0);
        std::vector<size_t> sizes_of_300;
        for (const std::vector<size_t>& b : batches) {
            REQUIRE(!b.empty());
            size_t longest = 0, shortest = SIZE_MAX;
            for (size_t i : b) seen[i]++, longest = std::max(longest, srcs[i].size()), shortest = std::min(shortest, srcs[i].size());
            CHECK((longest == shortest || b.size() < (beam > 0 ? 50u : 100u)));   // a batch mixes lengths only where it ends early
            CHECK(b.size() <= (beam > 0 ? 50u : 100u));
            if (longest == 300) sizes_of_300.push_back(b.size());
            if (longest == 512) CHECK(b.size() == 1);
            // the budget: rows x S x S (x beam) <= 100 x 64 x 64, unless one sentence alone is more
            CHECK((b.size() == 1 || int64_t(b.size()) * int64_t(longest * longest) * std::max(beam, 1) <= 100 * 64 * 64));
        }
        CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(srcs.size()));
        // 409,600 / 90,000 = 4 rows of 300 tokens at a time (beam 4: one); 10 tokens fill whole batches
        CHECK(sizes_of_300 == (beam > 0 ? std::vector<size_t>(7, 1) : std::vector<size_t>{4, 3}));
    }
}

// The copy task decodes through eval::exact_match: --beam K (0: greedy), no eos and alpha 0
// (docs/14), --no-kv-cache the path. Expected, for each sequence the function draws (the same
// draws from a generator in the same state): greedy by the textbook, a narrow beam by the plain
// reference search, a beam of 64 (every sequence of 3 symbols after the start) by the brute force.
TEST_CASE("eval::exact_match (copy task): --beam 0 is greedy, --beam K keeps K, a beam holding every sequence finds the best") {
    static_assert(data::COPY_START == kBos);
    auto model = tiny_model(69, 1.0f);
    const int64_t L = 4, n = 40;   // 40 sequences 1 x x x over the symbols 1..3
    Rng draws(17);
    const Tokens src = data::random_sequences(draws, kV, n, L);   // what exact_match draws from Rng(17)
    const std::vector<int> beams = {0, 2, 3, 64};
    std::vector<std::vector<std::vector<int32_t>>> expected(beams.size());   // [beam][sequence]
    for (int64_t i = 0; i < n; i++) {
        const Tokens one(std::vector<int32_t>(src.data.begin() + i * L, src.data.begin() + (i + 1) * L), {1, L});
        const std::vector<Scored> ranked = brute_force(*model, one, L, /*eos=*/-1, 0.0);
        REQUIRE(ranked[0].score - ranked[1].score > 1e-4);
        expected[0].push_back(plain_greedy(*model, one, L, -1));
        expected[1].push_back(reference_beam(*model, one, 2, L, -1, 0.0, true).tokens);
        expected[2].push_back(reference_beam(*model, one, 3, L, -1, 0.0, true).tokens);
        expected[3].push_back(ranked[0].tokens);
    }
    // the case this test is for: each beam width gives another output than the next, on some sequence
    for (size_t k = 0; k + 1 < beams.size(); k++) {
        CAPTURE(beams[k]);
        REQUIRE(expected[k] != expected[k + 1]);
    }
    nn::MultiHeadAttention& self_attn = *(*model->decoder->layers)[0].self_attn;
    model->keep_attention_weights(true);   // a recomputing step's weights show which path ran
    for (bool kv_cache : {true, false}) {
        for (size_t k = 0; k < beams.size(); k++) {
            CAPTURE(kv_cache);
            CAPTURE(beams[k]);
            self_attn.last_attention = Tensor();
            Rng rng(17);
            const eval::ExactMatch r = eval::exact_match(*model, rng, kV, L, static_cast<int>(n), beams[k], kv_cache);
            const Tensor& w = self_attn.last_attention;   // which path ran (see the kv_cache test above)
            if (kv_cache) CHECK((!w.defined() || w.size(2) == 1));
            else CHECK((w.defined() && w.size(2) == L - 1 && w.size(3) == L - 1));
            REQUIRE(r.shown_src.data == src.data);
            REQUIRE(r.shown_out.shape == Shape{n, L});
            int correct = 0;   // outputs equal to their sources, counted here
            for (int64_t i = 0; i < n; i++) {
                CAPTURE(i);
                const std::vector<int32_t> out(r.shown_out.data.begin() + i * L, r.shown_out.data.begin() + (i + 1) * L);
                CHECK(str(out) == str(expected[k][i]));
                correct += std::equal(out.begin(), out.end(), src.data.begin() + i * L);
            }
            CHECK(r.correct == correct);
        }
    }
}

// ---- sampling ----------------------------------------------------------------------------------
//
// sample_decode shares greedy's loop and changes only how a row's next token is picked: drawn
// from softmax(z / T), cut to the top_k (and top_p) most likely tokens. What is checked: the
// distribution against softmax written here again in double; the frequencies of many draws
// against it (through sample_token alone and through the whole decoder, on a model whose
// next-token scores are a known table); the limits (top_k = 1 and a tiny T are greedy); the seed.

namespace {

// softmax(z / T) over the k largest z (k = 0: all), in double, by the textbook: what
// sampling_probs must return (top_p = 1).
std::vector<double> softmax_top_k(const std::vector<float>& z, double T, int k) {
    const size_t V = z.size();
    std::vector<double> p(V, 0.0);
    double sum = 0.0;
    for (size_t i = 0; i < V; i++) {
        size_t larger = 0;   // tokens more likely than i (the test's z have no ties)
        for (size_t j = 0; j < V; j++) larger += z[j] > z[i];
        if (k == 0 || larger < static_cast<size_t>(k)) sum += p[i] = std::exp(z[i] / T);
    }
    for (double& x : p) x /= sum;
    return p;
}

// A sequence-to-sequence model whose next-token log-probabilities are a fixed table, whatever the
// source: row v of z holds the scores of the token after token v. Sampling from it must give
// softmax(z[v] / T) and nothing else.
class TableScores : public models::Seq2Seq {
public:
    explicit TableScores(std::vector<std::vector<float>> z) : z_(std::move(z)) {}
    Tensor logits(const Tokens&, const Tokens&, const Mask&, const Mask&) override { throw std::logic_error("decoding only"); }
    std::unique_ptr<models::NextTokens> start_decoding(const Tokens&, const Mask&, const models::DecodingSetup&) override {
        return std::make_unique<Rows>(z_);
    }
    int64_t tgt_vocab() const override { return static_cast<int64_t>(z_[0].size()); }
    int64_t max_len() const override { return INT64_MAX; }

private:
    struct Rows : models::NextTokens {
        const std::vector<std::vector<float>>& z;
        explicit Rows(const std::vector<std::vector<float>>& table) : z(table) {}
        Tensor append(const Tokens& tokens) override {   // (n, 1) -> (n, V): log_softmax(z[token])
            const int64_t n = tokens.size(0), V = static_cast<int64_t>(z[0].size());
            std::vector<float> lp;
            for (int64_t i = 0; i < n; i++) {
                const std::vector<float>& row = z[tokens[i]];
                double sum = 0.0;
                for (float x : row) sum += std::exp(static_cast<double>(x));
                for (float x : row) lp.push_back(static_cast<float>(x - std::log(sum)));
            }
            return Tensor::from_vector(lp, {n, V});
        }
        void reorder(const std::vector<int64_t>&) override {}
    };
    std::vector<std::vector<float>> z_;
};

// Seven scores, no two equal, the largest neither first nor last.
const std::vector<float> kScores = {1.0f, -0.5f, 2.0f, 0.3f, -1.2f, 1.6f, 0.0f};

}  // namespace

// The chapter's worked example (docs/14, pinned in tests/test_docs.cpp) and random scores of odd
// lengths: sampling_probs is softmax(z / T) over the top k, by the textbook, for logits and for
// log-probabilities alike (softmax is shift-invariant).
TEST_CASE("sampling_probs: softmax(z / T) renormalised over the k most likely tokens, 0 outside them") {
    const std::vector<float> z = {2.0f, 1.0f, 0.0f};
    const auto probs = [&](float T, int k, float top_p = 1.0f) {
        return models::sampling_probs(z.data(), 3, {.temperature = T, .top_k = k, .top_p = top_p});
    };
    const std::vector<double> t1 = probs(1.0f, 0), t05 = probs(0.5f, 0), k2 = probs(1.0f, 2);
    // e^2, e^1, e^0 = 7.389, 2.718, 1 over their sum 11.107
    CHECK(t1[0] == doctest::Approx(0.6652).epsilon(1e-4));
    CHECK(t1[1] == doctest::Approx(0.2447).epsilon(1e-4));
    CHECK(t1[2] == doctest::Approx(0.0900).epsilon(1e-3));
    // T = 0.5 doubles the scores: e^4, e^2, e^0 = 54.60, 7.389, 1
    CHECK(t05[0] == doctest::Approx(0.8668).epsilon(1e-4));
    CHECK(t05[2] == doctest::Approx(0.0159).epsilon(1e-3));
    // top-2: 7.389 and 2.718 over 10.107; the third is never drawn
    CHECK(k2[0] == doctest::Approx(0.7311).epsilon(1e-4));
    CHECK(k2[1] == doctest::Approx(0.2689).epsilon(1e-4));
    CHECK(k2[2] == 0.0);
    // the nucleus: 0.6652 < 0.8 <= 0.6652 + 0.2447, so two tokens; 0.6 needs one
    const std::vector<double> nucleus = probs(1.0f, 0, 0.8f);
    for (int i = 0; i < 3; i++) CHECK(nucleus[i] == doctest::Approx(k2[i]).epsilon(1e-12));
    CHECK(probs(1.0f, 0, 0.6f) == std::vector<double>{1.0, 0.0, 0.0});
    CHECK(probs(1.0f, 1) == std::vector<double>{1.0, 0.0, 0.0});   // top-1: the argmax, certain
    CHECK(probs(1.0f, 3) == t1);                                    // k = V keeps all, as k = 0
    // ties at the cut keep the lower id, as argmax does: top-1 is greedy's token
    const std::vector<float> tied = {1.0f, 3.0f, 3.0f, 0.0f, 1.0f};
    CHECK(models::sampling_probs(tied.data(), 5, {.top_k = 1}) == std::vector<double>{0.0, 1.0, 0.0, 0.0, 0.0});
    CHECK(models::sampling_probs(tied.data(), 5, {.top_k = 3})[0] > 0.0);
    CHECK(models::sampling_probs(tied.data(), 5, {.top_k = 3})[4] == 0.0);

    Rng rng(61);
    for (int64_t V : {5, 11, 23}) {
        std::vector<float> scores(V);
        for (float& s : scores) s = rng.uniform(-4.0f, 1.0f);
        const float shift = -3.7f;   // log-probabilities are the logits minus a constant
        std::vector<float> shifted = scores;
        for (float& s : shifted) s += shift;
        for (float T : {0.3f, 1.0f, 2.5f}) {
            for (int k : {0, 1, 3, static_cast<int>(V) - 1}) {
                CAPTURE(V);
                CAPTURE(T);
                CAPTURE(k);
                const std::vector<double> expected = softmax_top_k(scores, T, k);
                const std::vector<double> p = models::sampling_probs(scores.data(), V, {.temperature = T, .top_k = k});
                const std::vector<double> q = models::sampling_probs(shifted.data(), V, {.temperature = T, .top_k = k});
                for (int64_t i = 0; i < V; i++) {
                    CHECK(p[i] == doctest::Approx(expected[i]).epsilon(1e-5));
                    CHECK(q[i] == doctest::Approx(expected[i]).epsilon(1e-4));
                    CHECK((p[i] > 0.0) == (expected[i] > 0.0));   // exactly the top k are possible
                }
            }
        }
    }
}

// Inverse-CDF sampling: with probabilities (0.2, 0, 0.5, 0.3) the token is 0 for u < 0.2, 2 for
// u < 0.7, 3 above; a token of probability 0 never, not even at u = 0.
TEST_CASE("sample_token: the first token whose cumulative probability exceeds u") {
    const std::vector<double> p = {0.2, 0.0, 0.5, 0.3};
    CHECK(models::sample_token(p, 0.0f) == 0);
    CHECK(models::sample_token(p, 0.1999f) == 0);
    CHECK(models::sample_token(p, 0.2001f) == 2);
    CHECK(models::sample_token(p, 0.6999f) == 2);
    CHECK(models::sample_token(p, 0.7001f) == 3);
    CHECK(models::sample_token(p, 0.99999994f) == 3);
    CHECK(models::sample_token({0.0, 1.0, 0.0}, 0.0f) == 1);
}

// Many draws from a known distribution: the frequencies are softmax(z / T) over the top k, each
// within 0.012 (5 standard deviations of 30,000 draws at p = 1/2). Scaling by T instead of
// dividing, or forgetting to renormalise after the cut, or keeping one token too many, moves some
// token's frequency by 0.05 or more in one of these settings.
TEST_CASE("sample_decode: over 30,000 rows the first token's frequencies are softmax(z / T) cut to the top k; nothing outside it") {
    const int64_t V = static_cast<int64_t>(kScores.size()), B = 30000;
    TableScores model(std::vector<std::vector<float>>(V, kScores));   // the same scores after every token
    const Tokens src = Tokens::full({B, 1}, 3);
    const Mask src_mask = models::padding_mask(src, 0);
    for (float T : {0.5f, 1.0f, 2.0f}) {
        for (int k : {0, 3}) {
            for (float top_p : {1.0f, 0.75f}) {
                if (k > 0 && top_p < 1.0f) continue;
                CAPTURE(T);
                CAPTURE(k);
                CAPTURE(top_p);
                std::vector<double> expected = softmax_top_k(kScores, T, k);
                if (top_p < 1.0f) expected = models::sampling_probs(kScores.data(), V, {.temperature = T, .top_p = top_p});
                const Tokens out = models::sample_decode(model, src, src_mask,
                                                         {.max_len = 2, .bos = 1, .temperature = T, .top_k = k, .top_p = top_p, .seed = 62});
                REQUIRE(out.shape == Shape{B, 2});
                std::vector<double> seen(V, 0.0);
                for (int64_t b = 0; b < B; b++) seen[out[b * 2 + 1]] += 1.0 / B;
                for (int64_t v = 0; v < V; v++) {
                    CAPTURE(v);
                    CHECK(std::fabs(seen[v] - expected[v]) < 0.012);
                    if (expected[v] == 0.0) CHECK(seen[v] == 0.0);   // outside the top k (or the nucleus): never
                }
            }
        }
    }
    // the nucleus cases above are not the top-k ones: at T = 1, p = 0.75 keeps 3 tokens, at T = 2 four
    const auto kept = [&](float T) {
        const std::vector<double> p = models::sampling_probs(kScores.data(), V, {.temperature = T, .top_p = 0.75f});
        return std::count_if(p.begin(), p.end(), [](double x) { return x > 0.0; });
    };
    CHECK(kept(1.0f) == 3);
    CHECK(kept(2.0f) == 4);
}

// The two limits that make sampling greedy: only one token allowed (top_k = 1), or a temperature
// so low that the most likely token takes all the probability. Random models (not peaked, where
// sampling at T = 1 does differ), padded batches, eos on and off, both decoding paths.
TEST_CASE("sample_decode: top_k = 1 and a tiny temperature give greedy's tokens; T = 1 does not") {
    for (uint64_t seed : {71, 72}) {
        manual_seed(seed);
        Transformer model(small(8));
        model.eval();
        Rng rng(seed);
        const Tokens src = models::pad_rows(random_sources(rng, 5, 8, 9), 0);   // (5, S)
        const Mask m = models::padding_mask(src, 0);
        for (int32_t eos : {-1, 2}) {
            for (bool kv_cache : {true, false}) {
                CAPTURE(seed);
                CAPTURE(eos);
                CAPTURE(kv_cache);
                const Tokens greedy = models::greedy_decode_counted(model, src, m, {.max_len = 10, .bos = 1, .eos = eos, .pad = 0}, kv_cache, nullptr);
                const auto sample = [&](float T, int k) {
                    return models::sample_decode(model, src, m,
                                                 {.max_len = 10, .bos = 1, .eos = eos, .pad = 0, .temperature = T, .top_k = k, .seed = seed, .kv_cache = kv_cache});
                };
                CHECK(sample(1.0f, 1).data == greedy.data);
                CHECK(sample(3.0f, 1).data == greedy.data);   // one token left: the temperature cannot matter
                CHECK(sample(1e-6f, 0).data == greedy.data);
                CHECK(sample(1.0f, 0).data != greedy.data);
            }
        }
    }
}

// With top_k = 2 every token a row gets is one of the two most likely after its prefix, by the
// textbook decoder pass (plain_next_log_probs), and over 200 rows both of them occur.
TEST_CASE("sample_decode: top_k = 2 draws only the two best tokens after each prefix, and both") {
    auto model = tiny_model(73, 1.0f);
    const int64_t B = 200, max_len = 5;
    const Tokens src = models::pad_rows(std::vector<std::vector<int32_t>>(B, {3, 1, 2}), 0);   // (B, 3)
    const Tokens out = models::sample_decode(*model, src, models::padding_mask(src, 0),
                                             {.max_len = max_len, .bos = kBos, .eos = -1, .temperature = 2.0f, .top_k = 2, .seed = 74});
    REQUIRE(out.shape == Shape{B, max_len});
    int second_best = 0;
    for (int64_t b = 0; b < B; b++) {
        std::vector<int32_t> prefix{kBos};
        for (int64_t t = 1; t < max_len; t++) {
            std::vector<double> lp = plain_next_log_probs(*model, kSrc, prefix);
            const int32_t best = static_cast<int32_t>(std::max_element(lp.begin(), lp.end()) - lp.begin());
            lp[best] = -INFINITY;
            const int32_t second = static_cast<int32_t>(std::max_element(lp.begin(), lp.end()) - lp.begin());
            const int32_t token = out[b * max_len + t];
            CAPTURE(b);
            CAPTURE(str(prefix));
            CHECK((token == best || token == second));
            second_best += token == second;
            prefix.push_back(token);
        }
    }
    CHECK(second_best > 0);
    CHECK(second_best < B * (max_len - 1));
}

// The draws are counter-based (counter_uniform(seed, row * max_len + step), as dropout's): the
// seed decides every token, on any number of threads; another seed other tokens; a generator
// passed as `rng` gives each call a fresh seed; and row 0's tokens are the ones it gets alone.
TEST_CASE("sample_decode: the same seed gives the same tokens on 1 and 2 threads, another seed others; rng draws afresh") {
    auto model = tiny_model(75, 1.0f);
    Rng rng(76);
    const std::vector<std::vector<int32_t>> rows = random_sources(rng, 6, kV, 7);
    const Tokens src = models::pad_rows(rows, 0);   // (6, S)
    const Mask m = models::padding_mask(src, 0);
    const auto sample = [&](uint64_t seed, Rng* draws = nullptr) {
        return models::sample_decode(*model, src, m, {.max_len = 9, .bos = kBos, .eos = kEos, .seed = seed, .rng = draws}).data;
    };
    const std::vector<int32_t> first = sample(5);
    {
        ThreadCount two(2);
        CHECK(sample(5) == first);
    }
    {
        ThreadCount one(1);
        CHECK(sample(5) == first);
    }
    CHECK(sample(6) != first);
    Rng a(9), b(9);
    const std::vector<int32_t> from_a = sample(0, &a);
    CHECK(sample(0, &a) != from_a);   // the generator moved on: another seed
    CHECK(sample(0, &b) == from_a);   // a generator in the same state: the same seed
    Rng c(9);
    CHECK(from_a == sample(c.next_u64()));   // what rng does: one seed drawn from it
    const Tokens one(rows[0], {1, static_cast<int64_t>(rows[0].size())});
    const Tokens alone = models::sample_decode(*model, one, models::padding_mask(one, 0), {.max_len = 9, .bos = kBos, .eos = kEos, .seed = 5});
    std::vector<int32_t> row0(first.begin(), first.begin() + static_cast<int64_t>(first.size()) / 6);
    while (row0.size() > alone.data.size() && row0.back() == 0) row0.pop_back();   // the batch's padding
    CHECK(row0 == alone.data);
}

TEST_CASE("sample_decode and sampling_probs refuse a temperature <= 0, a negative top_k and a top_p outside (0, 1], naming each") {
    auto model = tiny_model(77, 1.0f);
    const Mask m = models::padding_mask(kSrc, 0);
    const auto refused = [&](const models::SampleOptions& opt, const std::string& message) {
        CHECK_THROWS_WITH_AS(models::sample_decode(*model, kSrc, m, opt), doctest::Contains(("sample_decode: " + message).c_str()), std::invalid_argument);
        CHECK_THROWS_WITH_AS(models::sampling_probs(kScores.data(), 7, opt), doctest::Contains(("sampling_probs: " + message).c_str()),
                             std::invalid_argument);
    };
    refused({.temperature = 0.0f}, "temperature must be > 0, got 0");
    refused({.temperature = -1.5f}, "temperature must be > 0, got -1.5");
    refused({.temperature = NAN}, "temperature must be > 0, got nan");
    refused({.top_k = -1}, "top_k must be >= 0 (0: every token), got -1");
    refused({.top_p = 0.0f}, "top_p must be in (0, 1] (1: every token), got 0");
    refused({.top_p = 1.5f}, "top_p must be in (0, 1] (1: every token), got 1.5");
    CHECK_THROWS_WITH_AS(models::sample_decode(*model, kSrc, m, {.max_len = 0}), doctest::Contains("sample_decode: max_len must be >= 1, got 0"),
                         std::invalid_argument);
}
