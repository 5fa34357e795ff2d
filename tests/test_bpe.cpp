// Tests for examples/data/bpe.h: byte-pair encoding (learning merges, encoding, decoding), and the
// translation example's subword codec and token batches.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/io/utf8.h"
#include "autograd/random.h"
#include "examples/data/bpe.h"
#include "examples/data/tokenizer.h"
#include "examples/data/toy_grammar.h"
#include "examples/data/translation_data.h"

using data::Bpe;
using Merges = std::vector<std::pair<std::string, std::string>>;
using Words = std::vector<std::string>;

namespace {

// The dictionary of Sennrich et al. (2016), Figure 1: docs/13-tokenization.md works through it.
const std::unordered_map<std::string, int64_t> kClassic = {{"low", 5}, {"lower", 2}, {"newest", 6}, {"widest", 3}};

// The learner the incremental one must agree with: after every merge, recount every adjacent pair
// of every word from scratch. O(merges x corpus), which is why bpe.cpp does not do this.
Merges naive_merges(const std::unordered_map<std::string, int64_t>& counts, int n) {
    std::map<std::string, int64_t> sorted(counts.begin(), counts.end());
    std::vector<std::pair<Words, int64_t>> words;
    for (const auto& [w, c] : sorted) {
        Words s;
        for (size_t pos = 0; pos < w.size();) {
            const size_t len = autograd::io::decode_utf8(w, pos).len;
            s.push_back(w.substr(pos, len));
            pos += len;
        }
        s.back() += "</w>";
        words.emplace_back(s, c);
    }
    Merges out;
    while (static_cast<int>(out.size()) < n) {
        std::map<std::pair<std::string, std::string>, int64_t> pairs;   // ordered: ties -> byte-wise first
        for (const auto& [s, c] : words)
            for (size_t i = 0; i + 1 < s.size(); i++) pairs[{s[i], s[i + 1]}] += c;
        std::pair<std::string, std::string> best;
        int64_t best_count = 1;
        for (const auto& [p, c] : pairs)
            if (c > best_count) best = p, best_count = c;
        if (best_count < 2) break;
        out.push_back(best);
        for (auto& [s, c] : words) {
            Words t;
            for (size_t i = 0; i < s.size(); i++) {
                if (i + 1 < s.size() && s[i] == best.first && s[i + 1] == best.second) {
                    t.push_back(s[i] + s[i + 1]);
                    i++;
                } else {
                    t.push_back(s[i]);
                }
            }
            s = t;
        }
    }
    return out;
}

std::unordered_map<std::string, int64_t> toy_word_counts(size_t pairs) {
    std::unordered_map<std::string, int64_t> counts;
    const data::DataSplits corpus = data::make_toy_corpus(7, pairs, 1, 1);
    for (const data::Pair& p : corpus.train)
        for (const std::string* side : {&p.src, &p.tgt})
            for (const std::string& w : data::tokenize(*side)) counts[w]++;
    return counts;
}

// A vocabulary as the translation example builds one: the symbols seen, then the fallbacks.
data::Vocab subword_vocab(const Bpe& bpe, const std::vector<std::string>& sentences) {
    std::vector<Words> encoded;
    for (const std::string& s : sentences) encoded.push_back(bpe.encode(data::tokenize(s)));
    const data::Vocab seen = data::Vocab::build(encoded);
    autograd::io::json::Array tokens(seen.tokens().begin(), seen.tokens().end());
    for (const std::string& t : data::fallback_tokens())
        if (!seen.contains(t)) tokens.push_back(t);
    return data::Vocab::from_json(tokens);
}

}  // namespace

TEST_CASE("Bpe::learn: the merges of Sennrich et al.'s example, worked out by hand (docs/13-tokenization.md)") {
    // Words as characters, the last one marked: l o w</w> (5), l o w e r</w> (2),
    // n e w e s t</w> (6), w i d e s t</w> (3). Pair counts:
    //   e s 9, s t</w> 9, w e 8, l o 7, e w 6, n e 6, o w</w> 5, d e 3, i d 3, w i 3, e r</w> 2, o w 2
    // 1. e + s (9; ties with s + t</w>, and "e" comes first byte-wise)
    // 2. es + t</w> (9)                     -> n e w est</w>, w i d est</w>
    // 3. l + o (7; w e dropped to 2: newest's "w e" became "w es" in merge 1)
    // 4. e + w (6; ties with n e and w est</w>: "e" < "n" < "w")
    // 5. ew + est</w> (6)   6. n + ewest</w> (6)   7. lo + w</w> (5)
    // 8. d + est</w> (3)    9. i + dest</w> (3)   10. w + idest</w> (3)
    const Merges expected = {{"e", "s"},      {"es", "t</w>"},      {"l", "o"},        {"e", "w"},
                             {"ew", "est</w>"}, {"n", "ewest</w>"}, {"lo", "w</w>"},    {"d", "est</w>"},
                             {"i", "dest</w>"}, {"w", "idest</w>"}};
    CHECK(Bpe::learn(kClassic, 10).merges() == expected);
    CHECK(naive_merges(kClassic, 10) == expected);
    // Then only lower's pairs occur twice: e + r</w>, lo + w, low + er</w>, and nothing is left.
    const Merges all = Bpe::learn(kClassic, 1000).merges();
    CHECK(all.size() == 13);   // then no pair occurs twice: learning stops early
    CHECK(all == naive_merges(kClassic, 1000));
}

TEST_CASE("Bpe::encode_word: merges applied in the order learned; unseen words split into known pieces") {
    const Bpe bpe = Bpe::learn(kClassic, 10);
    CHECK(bpe.encode_word("newest") == Words{"newest</w>"});
    CHECK(bpe.encode_word("low") == Words{"low</w>"});
    CHECK(bpe.encode_word("lowest") == Words{"lo", "w", "est</w>"});   // "lo w" was never merged
    CHECK(bpe.encode_word("widest") == Words{"widest</w>"});
    CHECK(bpe.encode_word("zest") == Words{"z", "est</w>"});
    CHECK(bpe.encode({"low", "newest"}) == Words{"low</w>", "newest</w>"});
    CHECK(Bpe().encode_word("été") == Words{"é", "t", "é</w>"});   // no merges: characters
    // the cache forgotten (the corpus's words, after loading it): the same segmentations again
    bpe.clear_cache();
    CHECK(bpe.encode_word("lowest") == Words{"lo", "w", "est</w>"});
    CHECK(bpe.encode({"low", "newest"}) == Words{"low</w>", "newest</w>"});
}

namespace {

// The encoder every Bpe::encode_word must agree with: docs/13-tokenization.md's rule read
// literally, with no hash map and no ranks. Start from the word's characters (ASCII here), the last
// one marked with "</w>". Walk the merge list from the top; the first merge whose two symbols stand
// side by side somewhere in the word is applied at every place it occurs, left to right (so
// "a a a</w>" under a + a becomes "aa a</w>"), and the walk starts again from the top. Stop when
// no merge of the list is present.
Words naive_encode(const Merges& merges, const std::string& ascii_word) {
    Words s;
    for (char c : ascii_word) s.push_back(std::string(1, c));
    s.back() += "</w>";
    for (size_t r = 0; r < merges.size();) {
        const auto& [a, b] = merges[r];
        bool present = false;
        for (size_t i = 0; i + 1 < s.size(); i++) present = present || (s[i] == a && s[i + 1] == b);
        if (!present) {
            r++;   // not in the word: try the next merge learned
            continue;
        }
        Words t;
        for (size_t i = 0; i < s.size(); i++) {
            if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
                t.push_back(a + b);
                i++;
            } else {
                t.push_back(s[i]);
            }
        }
        s = t;
        r = 0;   // a merge made a new symbol: an earlier merge may apply now
    }
    return s;
}

// A random word of 1..max_len letters from the first `letters` of "abc": with so few letters every
// word is full of overlapping pairs ("aaa", "abab", "aab"), where the order of the merges matters.
std::string random_word(autograd::Rng& rng, int letters, int max_len) {
    std::string w(1 + rng.below(max_len), ' ');
    for (char& c : w) c = static_cast<char>('a' + rng.below(letters));
    return w;
}

}  // namespace

TEST_CASE("Bpe::encode_word: merges in the order learned, worked by hand where another order gives another answer") {
    // Each expected segmentation below is worked by hand from docs/13's rule: start from the
    // characters (the last one marked </w>), apply the earliest merge in the list whose pair is in
    // the word, at every place, left to right; repeat.
    SUBCASE("(a, a) before (a, b), and the other way round") {
        // "aaba" = a a b a</w>; pairs (a,a) (a,b) (b,a</w>). Both merges are present.
        // [a+a, a+b]: a+a first -> aa b a</w>; now no (a,b) is left.
        CHECK(Bpe::from_merges({{"a", "a"}, {"a", "b"}}).encode_word("aaba") == Words{"aa", "b", "a</w>"});
        // [a+b, a+a]: a+b first -> a ab a</w>; now no (a,a) is left. (Taking the leftmost pair
        // with any rank would merge a+a here instead.)
        CHECK(Bpe::from_merges({{"a", "b"}, {"a", "a"}}).encode_word("aaba") == Words{"a", "ab", "a</w>"});
    }
    SUBCASE("the earliest merge wins even where a later one comes first in the word") {
        // "abab" = a b a b</w>; pairs (a,b) rank 1, (b,a) rank 0, (a,b</w>) none.
        // b+a first -> a ba b</w>; pairs (a,ba) (ba,b</w>): none is a merge. Done.
        CHECK(Bpe::from_merges({{"b", "a"}, {"a", "b"}}).encode_word("abab") == Words{"a", "ba", "b</w>"});
    }
    SUBCASE("a run of one letter merges left to right") {
        // "aaab" = a a a b</w>: a+a at 0-1 -> aa; at 2 the pair is (a, b</w>), not (a, a).
        CHECK(Bpe::from_merges({{"a", "a"}}).encode_word("aaab") == Words{"aa", "a", "b</w>"});
        // "aaaaa" = a a a a a</w> -> aa aa a</w>; then (aa, a) is absent: (aa, a</w>) differs.
        CHECK(Bpe::from_merges({{"a", "a"}, {"aa", "a"}}).encode_word("aaaaa") == Words{"aa", "aa", "a</w>"});
    }
    SUBCASE("after each merge the list is searched from the top again") {
        // "aba" = a b a</w>. Only a+b (rank 1) is present -> ab a</w>; now ab+a</w> (rank 0) is
        // present -> aba</w>. (One pass down the list would stop at ab a</w>.)
        CHECK(Bpe::from_merges({{"ab", "a</w>"}, {"a", "b"}}).encode_word("aba") == Words{"aba</w>"});
    }
    SUBCASE("a merge applies at every place in the word before the next is looked for") {
        // "ababa" = a b a b a</w>. ab+a (rank 0) is absent; a+b (rank 1) -> ab ab a</w>; then
        // (ab,ab) and (ab,a</w>) are no merges. (Merging only the first a b, then searching again,
        // would make aba b a</w>.)
        CHECK(Bpe::from_merges({{"ab", "a"}, {"a", "b"}}).encode_word("ababa") == Words{"ab", "ab", "a</w>"});
    }
    SUBCASE("merges learned from a corpus") {
        // aaab x2 = a a a b</w>, abab x3 = a b a b</w>. Pair counts:
        //   (a,b</w>) 2+3 = 5, (a,a) 2x2 = 4, (a,b) 3, (b,a) 3
        // 1. a + b</w> (5)                  -> a a ab</w> x2, a b ab</w> x3
        //    counts: (a,b) 3, (b,ab</w>) 3, (a,a) 2, (a,ab</w>) 2
        // 2. a + b (3; ties with b + ab</w>, "a" < "b")   -> a a ab</w>, ab ab</w>
        // 3. ab + ab</w> (3)                -> abab</w>
        // 4. a + a (2; ties with a + ab</w>, "a" < "ab</w>")   -> aa ab</w>
        // 5. aa + ab</w> (2)                -> aaab</w>; nothing is left
        const Bpe bpe = Bpe::learn({{"aaab", 2}, {"abab", 3}}, 100);
        REQUIRE(bpe.merges() == Merges{{"a", "b</w>"}, {"a", "b"}, {"ab", "ab</w>"}, {"a", "a"}, {"aa", "ab</w>"}});
        CHECK(bpe.encode_word("aaab") == Words{"aaab</w>"});
        CHECK(bpe.encode_word("abab") == Words{"abab</w>"});
        // "aabab" = a a b a b</w>: rank 0 at the end -> a a b ab</w>; rank 1 -> a ab ab</w>;
        // rank 2 -> a abab</w>; ranks 3, 4 absent. (Leftmost first would begin with a + a.)
        CHECK(bpe.encode_word("aabab") == Words{"a", "abab</w>"});
        // "aaaab" = a a a a b</w>: rank 0 -> a a a ab</w>; rank 3 -> aa a ab</w>; rank 4 needs
        // aa next to ab</w>: absent.
        CHECK(bpe.encode_word("aaaab") == Words{"aa", "a", "ab</w>"});
        // "abaab" = a b a a b</w>: rank 0 -> a b a ab</w>; rank 1 -> ab a ab</w>; rank 3 needs a a: gone.
        CHECK(bpe.encode_word("abaab") == Words{"ab", "a", "ab</w>"});
    }
}

TEST_CASE("Bpe::encode_word equals the naive rule (docs/13) on random words, with learned and with shuffled merges") {
    autograd::Rng rng(2024);
    SUBCASE("merges learned from a small random corpus over a, b, c") {
        std::unordered_map<std::string, int64_t> counts;
        for (int i = 0; i < 60; i++) counts[random_word(rng, 3, 7)] += 1 + rng.below(5);
        const Bpe bpe = Bpe::learn(counts, 60);
        REQUIRE(bpe.merges().size() >= 40);   // enough merges that they overlap
        for (const auto& entry : counts) {
            const std::string& word = entry.first;   // not a structured binding: clang 14 will not capture one
            CAPTURE(word);
            CHECK(bpe.encode_word(word) == naive_encode(bpe.merges(), word));
        }
        const Merges reversed(bpe.merges().rbegin(), bpe.merges().rend());
        int order_matters = 0;   // words the reversed list segments otherwise: the test can see the order
        for (int i = 0; i < 3000; i++) {
            const std::string word = random_word(rng, 3, 10);
            const Words expected = naive_encode(bpe.merges(), word);
            CAPTURE(word);
            CHECK(bpe.encode_word(word) == expected);
            order_matters += naive_encode(reversed, word) != expected;
        }
        CHECK(order_matters > 1000);
    }
    SUBCASE("hand-made merge lists over a, b, in a random order") {
        // Each list is built as a chain (every merge joins letters or the results of other merges
        // of the list), then shuffled: a merge may now come before the merge that makes its
        // symbol, and overlapping merges come in every order. These lists are what see two
        // mistakes that learned lists hide: one pass down the list instead of searching it from
        // the top after each merge, and merging only the first place a pair occurs. On learned
        // merges both give the same segmentations as the rule (a learned merge's symbols were
        // made by earlier merges), and the subcase above passes with either.
        int order_matters = 0;   // words the reversed list segments otherwise: the test can see the order
        for (int list = 0; list < 300; list++) {
            Words pool = {"a", "b"};   // symbols a left side may take
            Merges merges;
            for (int m = 0; m < 8; m++) {
                const std::string left = pool[rng.below(pool.size())];
                std::string right = pool[rng.below(pool.size())];
                if (rng.below(3) == 0) right += "</w>";
                merges.emplace_back(left, right);
                if (right.find("</w>") == std::string::npos) pool.push_back(left + right);
            }
            for (size_t i = merges.size() - 1; i > 0; i--) std::swap(merges[i], merges[rng.below(i + 1)]);
            const Bpe bpe = Bpe::from_merges(merges);
            for (int i = 0; i < 40; i++) {
                const std::string word = random_word(rng, 2, 9);
                const Words expected = naive_encode(merges, word);
                CAPTURE(list);
                CAPTURE(word);
                CHECK(bpe.encode_word(word) == expected);
                order_matters += naive_encode(Merges(merges.rbegin(), merges.rend()), word) != expected;
            }
        }
        CHECK(order_matters > 1000);
    }
}

// A pair that occurs once would make a symbol for one word seen once: learning stops before it.
// Counts are occurrences (a word's count times), so "ab" seen twice is merged and "cd" once is not.
TEST_CASE("Bpe::learn: only pairs that occur at least twice are merged, counting each word's occurrences") {
    CHECK(Bpe::learn({{"cd", 1}, {"ab", 2}}, 10).merges() == Merges{{"a", "b</w>"}});
    CHECK(Bpe::learn({{"cd", 1}, {"xy", 1}}, 10).merges().empty());
    CHECK(Bpe::learn({{"cd", 1}, {"xcd", 1}}, 10).merges() == Merges{{"c", "d</w>"}});   // in two words once each
}

TEST_CASE("Bpe::learn: the incremental learner picks exactly the merges of the naive recount") {
    const auto counts = toy_word_counts(300);
    CHECK(Bpe::learn(counts, 400).merges() == naive_merges(counts, 400));
}

TEST_CASE("Bpe::learn: deterministic; the order words arrive in does not matter") {
    const auto counts = toy_word_counts(300);
    std::unordered_map<std::string, int64_t> reordered(counts.size() * 3);   // other buckets, other order
    std::vector<std::pair<std::string, int64_t>> reversed(counts.begin(), counts.end());
    std::reverse(reversed.begin(), reversed.end());
    reordered.insert(reversed.begin(), reversed.end());
    const Merges a = Bpe::learn(counts, 300).merges();
    CHECK(a.size() == 300);
    CHECK(a == Bpe::learn(reordered, 300).merges());
    CHECK(a == Bpe::learn(counts, 300).merges());
    CHECK_THROWS_WITH_AS(Bpe::learn({{"", 1}}, 3), doctest::Contains("non-empty valid UTF-8"), std::invalid_argument);
    CHECK_THROWS_AS(Bpe::learn(counts, -1), std::invalid_argument);
}

TEST_CASE("Bpe: text -> subwords -> text gives back the detokenized text, for any UTF-8 (byte fallback)") {
    const std::vector<std::string> training = {"the lower widest newest low .", "a low dog sees the newest cat !"};
    std::unordered_map<std::string, int64_t> counts;
    for (const auto& s : training)
        for (const auto& w : data::tokenize(s)) counts[w]++;
    const Bpe bpe = Bpe::learn(counts, 30);
    const data::Vocab vocab = subword_vocab(bpe, training);
    const std::vector<std::string> texts = {
        "the lowest dog !",                    // known pieces
        "Crème brûlée, s'il vous plaît.",      // accents the vocabulary never saw
        "東京は大きい。",                       // CJK: one token per ideograph, then bytes
        "I ❤ emoji 😀👍🏽 !",                   // 4-byte characters and a modifier
        "naïve \xFF\xFE bytes \xE2\x82",        // invalid UTF-8: the tokenizer makes it U+FFFD
        "",
    };
    for (const std::string& text : texts) {
        CAPTURE(text);
        const Words tokens = data::to_vocab_tokens(bpe.encode(data::tokenize(text)), vocab);
        for (const std::string& t : tokens) CHECK(vocab.contains(t));   // never <unk>
        CHECK(data::detokenize(Bpe::decode(tokens)) == data::detokenize(data::tokenize(text)));
    }
    // "é" is not in the vocabulary: its two bytes stand in for it, then "</w>" ends the word
    CHECK(data::to_vocab_tokens({"é</w>"}, vocab) == Words{"<0xC3>", "<0xA9>", "</w>"});
}

TEST_CASE("Bpe::decode: whatever a model outputs becomes valid words") {
    CHECK(Bpe::decode({"lo", "w</w>", "est</w>"}) == Words{"low", "est"});
    CHECK(Bpe::decode({"lo", "w"}) == Words{"low"});                      // no end marker: the word ends anyway
    CHECK(Bpe::decode({"<0xC3>", "<0xA9>", "t", "</w>"}) == Words{"ét"});
    CHECK(Bpe::decode({"<0xC3>", "</w>", "a</w>"}) == Words{"\uFFFD", "a"});   // a cut character
    CHECK(Bpe::decode({"</w>", "</w>"}).empty());
    CHECK(Bpe::decode({"<0x4>", "<0xZZ>"}) == Words{"<0x4><0xZZ>"});   // not byte tokens: text
    CHECK(data::byte_token(0xE4) == "<0xE4>");
    CHECK(data::fallback_tokens().size() == 257);
}

TEST_CASE("Bpe: JSON round trip, and clear errors for bad merges") {
    const Bpe bpe = Bpe::learn(toy_word_counts(100), 50);
    const Bpe back = Bpe::from_json(autograd::io::json::parse(autograd::io::json::dump(bpe.to_json())));
    CHECK(back.merges() == bpe.merges());
    CHECK(back.encode_word("Hund") == bpe.encode_word("Hund"));
    CHECK_THROWS_WITH(Bpe::from_json(autograd::io::json::parse(R"({"merges": [["a"]]})")), doctest::Contains("merge 0"));
    CHECK_THROWS_WITH(Bpe::from_json(autograd::io::json::parse(R"({"merges": [["a</w>", "b"]]})")), doctest::Contains("cannot be a merge"));
    CHECK_THROWS_WITH(Bpe::from_json(autograd::io::json::parse(R"([1])")), doctest::Contains("merges"));
}

TEST_CASE("TextCodec with subwords: one shared vocabulary, stored in the checkpoint metadata and read back") {
    // A tiny TSV corpus through the translation example's data path.
    const std::string path = "/tmp/test_bpe_corpus_" + std::to_string(::getpid()) + ".tsv";
    {
        std::FILE* f = std::fopen(path.c_str(), "w");
        REQUIRE(f);
        const data::DataSplits toy = data::make_toy_corpus(3, 200, 1, 1);
        for (const data::Pair& p : toy.train) std::fprintf(f, "%s\t%s\n", p.src.c_str(), p.tgt.c_str());
        std::fclose(f);
    }
    data::CorpusOptions options;
    options.data = path;
    options.bpe = 100;
    const data::TranslationData d = data::load_translation_data(options);
    std::remove(path.c_str());
    CHECK(d.codec.subwords);
    CHECK(d.codec.bpe.merges().size() == 100);
    CHECK(d.codec.src_vocab == d.codec.tgt_vocab);
    for (const std::string& t : data::fallback_tokens()) CHECK(d.codec.src_vocab.contains(t));

    const nn::Metadata meta = models::to_metadata(data::codec_to_json(d.codec));
    const data::TextCodec back = data::read_codec(meta, "test.safetensors");
    CHECK(back.subwords);
    CHECK(back.bpe.merges() == d.codec.bpe.merges());
    CHECK(back.src_vocab == d.codec.src_vocab);
    const std::string text = "Der Zwölfjährige sieht 🐕 !";
    CHECK(back.tokenize(text) == d.codec.tokenize(text));
    const std::vector<int32_t> ids = back.encode_target(back.tokenize(text));
    CHECK(std::find(ids.begin(), ids.end(), data::Vocab::UNK) == ids.end());
    CHECK(back.decode_target(ids) == data::detokenize(data::tokenize(text)));

    // word level: "bpe" is null, and the codec is word level again
    data::TextCodec words = d.codec;
    words.subwords = false;
    CHECK_FALSE(data::read_codec(models::to_metadata(data::codec_to_json(words)), "w.safetensors").subwords);
}

TEST_CASE("token_batches: every pair once, at most N tokens a side with padding, regrouped per epoch, same for the same seed") {
    std::vector<data::Example> examples;
    autograd::Rng lengths(11);
    for (int i = 0; i < 300; i++)
        examples.push_back({std::vector<int32_t>(1 + lengths.below(30), 5), std::vector<int32_t>(2 + lengths.below(30), 5)});
    examples.push_back({std::vector<int32_t>(150, 5), std::vector<int32_t>(3, 5)});   // longer than N alone
    const int N = 120;
    autograd::Rng rng(1), same(1);
    const auto a = data::token_batches(examples, N, &rng), b = data::token_batches(examples, N, &rng);
    CHECK(a == data::token_batches(examples, N, &same));
    CHECK(a != b);   // the next epoch groups equal lengths differently
    for (const auto& batches : {a, b, data::token_batches(examples, N)}) {
        std::vector<int> seen(examples.size(), 0);
        for (const auto& batch : batches) {
            size_t s = 0, t = 0;
            for (size_t i : batch) {
                seen[i]++;
                s = std::max(s, examples[i].src.size());
                t = std::max(t, examples[i].tgt.size());
            }
            if (batch.size() > 1) CHECK(batch.size() * std::max(s, t) <= static_cast<size_t>(N));
        }
        CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
        CHECK(batches.size() < examples.size() / 3);   // batches do fill up
    }
}
