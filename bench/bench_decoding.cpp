// Decoding benchmark: tokens per second of greedy decoding and of beam search (K = 4), with the
// key/value cache and recomputing the whole prefix every step (models/decoding.h), for output
// lengths 5, 10, 20, 50 and 200.
//   ./build/bench/bench_decoding [reps]
// The model is the copy task's default (N=2 D=128 F=256 h=4, V=11), untrained: the cost of a
// decoding step does not depend on the weights, and with no end symbol every output runs to its
// full length, so each row decodes exactly L-1 tokens. B = 8 sequences decode together (beam:
// 8 x 4 rows). Reports the median over `reps` runs (default 3), cached and recomputing alternated.
//
//   ./build/bench/bench_decoding --bf16 [reps]
// decodes with bf16 products (mixed precision, docs/16) the --paper model (N=2 D=512 F=2048 h=8,
// V=11, untrained): greedy with the cache, L = 20, B = 1, 8, 64 and 250 rows. There, packing the
// weights for the bf16 kernel is most of a step with few rows; decoding packs each weight once per
// call (autograd/frozen_weights.h). Compare builds by alternating them. Without AVX512_BF16 the
// portable path runs (rounded copies, then the fp32 kernel), and the line says so.
//
//   ./build/bench/bench_decoding --gpt [reps]
// samples from the gpt example's default model (N=4 D=128 h=4, context 64, V=65, untrained)
// after a one-token prompt, one row: tokens/s with the key/value cache and recomputing the window
// at every step (models/gpt_sampling.h), for 25 to 500 new tokens. Past 64 tokens both follow the
// sampler's window rule (a full window starts again from its last 32 tokens).
//
//   ./build/bench/bench_decoding --toy-test-sources PATH
// writes the source sentences of the translation example's toy test set (seed 1), one per line,
// for timing `translation --stdin` (bench/RESULTS.md, "Decoding speed").
//
//   ./build/bench/bench_decoding --cache-picture docs/figures/kv_cache.svg
// draws the picture of docs/14-decoding.md: what each way of decoding computes, and what the
// cache stores (with the project's SVG heatmaps, examples/common/svg.h). `make figures` runs it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "autograd/kernels/gemm_bf16.h"
#include "autograd/mixed_precision.h"
#include "examples/common/svg.h"
#include "examples/data/copy_task_data.h"
#include "examples/data/translation_data.h"
#include "models/decoding.h"
#include "models/gpt_sampling.h"

namespace {

double seconds_of(const std::function<void()>& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int write_toy_test_sources(const std::string& path) {
    const data::TranslationData d = data::load_translation_data({});
    std::ofstream out(path);
    for (const data::Pair& p : d.text.test) out << p.src << '\n';
    if (!out) {
        std::fprintf(stderr, "bench_decoding: cannot write '%s'\n", path.c_str());
        return 1;
    }
    std::printf("wrote %zu sentences to %s\n", d.text.test.size(), path.c_str());
    return 0;
}

// Four panels for T = 8 output positions, S = 6 source positions and N = 2 layers. Dark: computed
// at that step; light: stored in the cache (and read from it); white: nothing. Three values, so a
// legend of three swatches rather than a colour bar.
int draw_cache_picture(const std::string& path) {
    const int T = 8, S = 6, N = 2, now = 5;   // the cache panels show the state during step `now`
    std::vector<std::string> steps, positions, sources, kv_rows;
    const auto label = [](const char* prefix, int i, const char* suffix = "") {
        std::string s = prefix;
        return s.append(std::to_string(i)).append(suffix);
    };
    for (int t = 0; t < T; t++) steps.push_back(label("step ", t + 1)), positions.push_back(label("", t));
    for (int s = 0; s < S; s++) sources.push_back(label("s", s));
    for (int l = 1; l <= N; l++) kv_rows.push_back(label("layer ", l, " K")), kv_rows.push_back(label("layer ", l, " V"));
    common::Heatmap recompute{"recomputing: positions run through the decoder", steps, positions, std::vector<float>(T * T, 0.0f)};
    common::Heatmap cached{"cached: run (dark) and read from the cache (light)", steps, positions, std::vector<float>(T * T, 0.0f)};
    for (int t = 0; t < T; t++)
        for (int p = 0; p <= t; p++) {
            recompute.values[t * T + p] = 1.0f;
            cached.values[t * T + p] = p == t ? 1.0f : 0.25f;
        }
    common::Heatmap self_kv{label("self-attention cache at step ", now + 1, ": 2 x N x t x D"), kv_rows, positions,
                            std::vector<float>(2 * N * T, 0.0f)};
    for (int r = 0; r < 2 * N; r++)
        for (int p = 0; p <= now; p++) self_kv.values[r * T + p] = p == now ? 1.0f : 0.25f;   // the newest column appended now
    common::Heatmap memory_kv{"memory's K and V: 2 x N x S x D, computed once", kv_rows, sources, std::vector<float>(2 * N * S, 0.25f)};
    common::write_heatmaps(path, "Decoding with a key/value cache (rows of each panel: what is computed or stored)",
                           {recompute, cached, self_kv, memory_kv}, 2,
                           {.legend = {{1.0f, "computed at this step"}, {0.25f, "stored in the cache, read from it"},
                                       {0.0f, "nothing (not needed yet)"}}});
    std::printf("wrote %s\n", path.c_str());
    return 0;
}

int bf16_decoding(int reps) {
    const int64_t V = 11, L = 20;
    autograd::manual_seed(0);
    models::Transformer model({.src_vocab = V, .tgt_vocab = V, .layers = 2, .d_model = 512, .d_ff = 2048, .heads = 8, .dropout = 0.0f});
    model.eval();
    autograd::MixedPrecisionGuard bf16;
    autograd::Rng rng(1);
    std::printf("bf16 decoding: --paper model N=2 D=512 F=2048 h=8 (untrained), greedy, key/value cache, L=%lld, %s, median of %d runs\n",
                (long long)L, autograd::kernels::bf16_dot_supported() ? "AVX512_BF16 kernel" : "portable path (no AVX512_BF16)", reps);
    std::printf("%5s %12s %10s\n", "B", "tokens/s", "ms/call");
    for (int64_t B : {1, 8, 64, 250}) {
        const autograd::Tokens src = data::random_sequences(rng, V, B, L);   // (B, L)
        const autograd::Mask mask = models::padding_mask(src, 0);
        models::greedy_decode_cached(model, src, mask, {.max_len = L, .bos = 1});   // warm: memory, caches
        std::vector<double> times;
        for (int r = 0; r < reps; r++)
            times.push_back(seconds_of([&] { models::greedy_decode_cached(model, src, mask, {.max_len = L, .bos = 1}); }));
        const double t = median(times);
        std::printf("%5lld %12.0f %10.1f\n", (long long)B, static_cast<double>(B * (L - 1)) / t, 1e3 * t);
        std::fflush(stdout);
    }
    return 0;
}

}  // namespace

int gpt_sampling(int reps) {
    autograd::manual_seed(0);
    models::GPT model({.vocab = 65, .block_size = 64, .layers = 4, .heads = 4, .d_model = 128, .dropout = 0.0f});
    model.eval();
    const autograd::Tokens prompt = autograd::Tokens::full({1, 1}, 0);   // (1, 1)
    std::printf("GPT sampling: the gpt example's default model N=4 D=128 h=4 T=64, V=65 (untrained), one row, median of %d runs\n", reps);
    std::printf("%6s %16s %16s %8s\n", "tokens", "cached tok/s", "recompute tok/s", "speedup");
    models::generate(model, prompt, {.new_tokens = 100, .kv_cache = false});   // a warm-up: the first call pays for the heap's pages
    for (int64_t n : {25, 50, 64, 100, 200, 300, 400, 500}) {
        std::vector<double> cached, recomputed;
        for (int r = 0; r < reps; r++) {   // A/B alternated, so a slow spell of the machine hits both
            cached.push_back(seconds_of([&] { models::generate(model, prompt, {.new_tokens = n, .seed = 1, .kv_cache = true}); }));
            recomputed.push_back(seconds_of([&] { models::generate(model, prompt, {.new_tokens = n, .seed = 1, .kv_cache = false}); }));
        }
        const double c = median(cached), w = median(recomputed), tokens = static_cast<double>(n);
        std::printf("%6lld %16.0f %16.0f %7.1fx\n", (long long)n, tokens / c, tokens / w, w / c);
        std::fflush(stdout);
    }
    return 0;
}

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "--gpt") == 0) return gpt_sampling(argc > 2 ? std::max(1, std::atoi(argv[2])) : 5);
    if (argc > 1 && std::strcmp(argv[1], "--bf16") == 0) return bf16_decoding(argc > 2 ? std::max(1, std::atoi(argv[2])) : 5);
    if (argc > 2 && std::strcmp(argv[1], "--toy-test-sources") == 0) return write_toy_test_sources(argv[2]);
    if (argc > 2 && std::strcmp(argv[1], "--cache-picture") == 0) return draw_cache_picture(argv[2]);
    const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
    const int64_t V = 11, B = 8;
    const int beam = 4;
    autograd::manual_seed(0);
    models::Transformer model({.src_vocab = V, .tgt_vocab = V, .layers = 2, .d_model = 128, .d_ff = 256, .heads = 4, .dropout = 0.0f});
    model.eval();
    autograd::Rng rng(1);
    std::printf("decoding: copy-task model N=2 D=128 F=256 h=4 (untrained), B=%lld sequences, median of %d runs\n",
                (long long)B, reps);
    std::printf("%-8s %4s %16s %16s %8s\n", "search", "L", "cached tok/s", "recompute tok/s", "speedup");
    for (int64_t L : {5, 10, 20, 50, 200}) {
        const autograd::Tokens src = data::random_sequences(rng, V, B, L);   // (B, L)
        const autograd::Mask mask = models::padding_mask(src, 0);
        const double tokens = static_cast<double>(B * (L - 1));
        for (int k : {0, beam}) {
            auto run = [&](bool kv_cache) {
                if (k == 0) models::greedy_decode_counted(model, src, mask, {.max_len = L, .bos = 1}, kv_cache, nullptr);
                else models::beam_search_batch(model, src, mask, {.beam_size = k, .max_len = L, .bos = 1, .kv_cache = kv_cache});
            };
            std::vector<double> cached, recomputed;
            for (int r = 0; r < reps; r++) {   // A/B alternated, so a slow spell of the machine hits both
                cached.push_back(seconds_of([&] { run(true); }));
                recomputed.push_back(seconds_of([&] { run(false); }));
            }
            const double c = median(cached), n = median(recomputed);
            std::printf("%-8s %4lld %16.0f %16.0f %7.1fx\n", k == 0 ? "greedy" : "beam 4", (long long)L, tokens / c, tokens / n, n / c);
            std::fflush(stdout);
        }
    }
    return 0;
}
