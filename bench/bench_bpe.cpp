// bench_bpe: how fast BPE merges are learned (examples/data/bpe.h) on a TSV corpus.
//
//   make build/bench/bench_bpe && ./build/bench/bench_bpe corpus.tsv [merges]
//
// Reads the pairs, tokenizes both sides into words, counts them (as the translation example
// does), then learns `merges` merges (default: the example's automatic choice, distinct words / 4
// in [500, 32000]) and reports words/s of the counting and merges/s of the learning, each the
// median of 3 runs. Single-threaded.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "examples/data/bpe.h"
#include "examples/data/tokenizer.h"
#include "examples/data/tsv.h"

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_bpe corpus.tsv [merges]\n");
        return 1;
    }
    using Clock = std::chrono::steady_clock;
    const data::TsvResult tsv = data::read_tsv(argv[1]);
    std::vector<double> count_s, learn_s;
    std::unordered_map<std::string, int64_t> counts;
    int64_t words = 0;
    size_t merges_done = 0;
    int merges = 0;
    for (int run = 0; run < 3; run++) {
        const auto t0 = Clock::now();
        counts.clear();
        words = 0;
        for (const data::Pair& p : tsv.pairs)
            for (const std::string* side : {&p.src, &p.tgt})
                for (const std::string& w : data::tokenize(*side)) counts[w]++, words++;
        const auto t1 = Clock::now();
        merges = argc > 2 ? std::atoi(argv[2]) : std::clamp(static_cast<int>(counts.size() / 4), 500, 32000);
        merges_done = data::Bpe::learn(counts, merges).merges().size();
        const auto t2 = Clock::now();
        count_s.push_back(std::chrono::duration<double>(t1 - t0).count());
        learn_s.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
    std::sort(count_s.begin(), count_s.end());
    std::sort(learn_s.begin(), learn_s.end());
    std::printf("%s: %zu pairs, %lld words (%zu distinct)\n", argv[1], tsv.pairs.size(), (long long)words, counts.size());
    std::printf("tokenize + count: %.2f s (%.2fM words/s)\n", count_s[1], words / count_s[1] / 1e6);
    std::printf("learn %zu merges (asked %d): %.2f s (%.0f merges/s, %.2fM words/s)\n", merges_done, merges, learn_s[1],
                merges_done / learn_s[1], words / learn_s[1] / 1e6);
    return 0;
}
