// grow_corpus: a large stand-in corpus grown from a small TSV sample, for measuring the
// translation example's time and memory on real-sized data (bench/RESULTS.md, "Real text").
//
//   make build/bench/grow_corpus
//   ./build/bench/grow_corpus eng-fra-5k.tsv grown50k.tsv 50000 1
//   ./examples/translation --data grown50k.tsv
//
// Writes `count` pairs "source<TAB>target": the sample's pairs in turn, each first as written,
// then again and again with a made-up name or place: the words "Tom" and "Mary" are replaced on
// both sides when both sides have them, else the name is put in front ("Name, ...") or the place
// ("In Place: ..." / "À Place : ..."). The names and places are built from syllables, about
// 5,900 of them, so the 5,000-pair English-French sample grown to 50,000 pairs has about 9,500
// distinct words: the vocabulary and the BPE merges are of a real corpus's size, not the
// sample's. The same arguments write the same file (autograd::Rng with the seed).
//
// The file is for timing and memory only. Every grown pair differs from one the sample has by a
// name, and the split puts such near copies into training and test alike: the BLEU of a model
// trained on it means nothing.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "autograd/random.h"
#include "examples/data/tokenizer.h"
#include "examples/data/tsv.h"

namespace {

// `n` distinct capitalised pseudo-words of two to four syllables.
std::vector<std::string> make_words(size_t n, autograd::Rng& rng) {
    static const char* const kSyllables[] = {"ka", "lo", "mi", "ra", "ven", "tor", "sa", "bel", "no", "dri",
                                             "fa", "gun", "hel", "ji", "mar", "pe", "qui", "ros", "ti", "zu",
                                             "an", "ber", "co", "dal", "el", "fin", "ga", "ho", "ul", "wen"};
    constexpr uint32_t kCount = sizeof kSyllables / sizeof kSyllables[0];
    std::vector<std::string> words;
    std::unordered_set<std::string> seen;
    while (words.size() < n) {
        std::string w;
        for (uint32_t s = 0, len = 2 + rng.below(3); s < len; s++) w += kSyllables[rng.below(kCount)];
        w[0] = static_cast<char>(w[0] - 'a' + 'A');
        if (seen.insert(w).second) words.push_back(w);
    }
    return words;
}

// `text` with every whole word `from` replaced by `to` (words as data::tokenize splits them).
std::string replace_word(const std::string& text, const std::string& from, const std::string& to) {
    std::string out;
    for (size_t i = 0; i < text.size();) {
        const bool starts = text.compare(i, from.size(), from) == 0;
        const bool left = i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1]));
        const size_t end = i + from.size();
        const bool right = end >= text.size() || !std::isalnum(static_cast<unsigned char>(text[end]));
        if (starts && left && right) {
            out += to;
            i = end;
        } else {
            out += text[i++];
        }
    }
    return out;
}

bool has_word(const std::string& text, const std::string& word) {
    for (const std::string& t : data::tokenize(text))
        if (t == word) return true;
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: grow_corpus sample.tsv out.tsv count seed\n");
        return 1;
    }
    const data::TsvResult sample = data::read_tsv(argv[1]);
    const long count = std::atol(argv[3]);
    autograd::Rng rng(std::strtoull(argv[4], nullptr, 10));
    const std::vector<std::string> names = make_words(4300, rng), places = make_words(1600, rng);
    std::ofstream out(argv[2], std::ios::binary);
    if (!out) {
        std::fprintf(stderr, "grow_corpus: cannot write '%s'\n", argv[2]);
        return 1;
    }
    const size_t n = sample.pairs.size();
    for (long k = 0; k < count; k++) {
        data::Pair p = sample.pairs[static_cast<size_t>(k) % n];
        if (static_cast<size_t>(k) >= n) {   // a copy: a name or a place changes it
            const std::string& name = names[rng.below(static_cast<uint32_t>(names.size()))];
            const std::string& place = places[rng.below(static_cast<uint32_t>(places.size()))];
            bool replaced = false;
            for (const char* person : {"Tom", "Mary"})
                if (has_word(p.src, person) && has_word(p.tgt, person)) {
                    p.src = replace_word(p.src, person, name);
                    p.tgt = replace_word(p.tgt, person, name);
                    replaced = true;
                    break;
                }
            if (!replaced && rng.below(2) == 0) {
                p.src = name + ", " + p.src;
                p.tgt = name + ", " + p.tgt;
            } else if (!replaced) {
                p.src = "In " + place + ": " + p.src;
                p.tgt = "\xC3\x80 " + place + " : " + p.tgt;   // "À"
            }
        }
        out << p.src << '\t' << p.tgt << '\n';
    }
    std::printf("%s: %ld pairs grown from the %zu of %s (seed %s)\n", argv[2], count, n, argv[1], argv[4]);
    return 0;
}
