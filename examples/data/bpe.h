// Byte-pair encoding (Sennrich, Haddow and Birch 2016, "Neural Machine Translation of Rare Words
// with Subword Units"): subword units learned from the training text, so that frequent words stay
// whole, rare words and names are spelled from smaller pieces, and no word is ever <unk>.
//
// The word-level tokenizer (tokenizer.h) stays the first step; BPE splits its words:
//
//   Bpe bpe = Bpe::learn(word_counts, /*merges=*/8000);    // from the training words (both languages)
//   bpe.encode_word("lowest")  -> {"low", "est</w>"}       // "</w>" marks the end of a word
//   bpe.decode({"low", "est</w>", "!</w>"}) -> {"lowest", "!"}   // words again: detokenize() them
//
// Learning starts from characters: each word is a sequence of its characters, the last one
// marked with "</w>". Each merge takes the most frequent adjacent pair of symbols in the corpus
// (counted over word frequencies) and makes it one symbol. Ties between equally frequent pairs go
// to the pair that comes first byte-wise (left symbol, then right symbol), so the merges depend
// only on the word counts. docs/13-tokenization.md walks through an example.
//
// Encoding applies the merges in the order they were learned (the earliest learned pair present
// in the word first), so it is deterministic and reproduces the segmentation of training words.
// A character the merges never saw stays a symbol of its own; a symbol the model's vocabulary
// lacks falls back to its UTF-8 bytes ("<0xE4>" "<0xB8>" "<0x80>", see to_vocab_tokens), so
// any text can be represented.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/io/json.h"
#include "examples/data/vocab.h"

namespace data {

class Bpe {
public:
    static constexpr const char* kEndOfWord = "</w>";

    struct LearnStats {
        int64_t words = 0;           // running words counted (sum of the counts)
        int64_t distinct_words = 0;  // distinct words
        double seconds = 0.0;        // time spent learning
    };

    Bpe() = default;

    // Learns up to `merges` merges from word counts (word -> how often it occurs). Stops early
    // when no pair occurs at least twice (a merge used once saves nothing). Words must be valid
    // UTF-8 and non-empty (what tokenize() produces).
    static Bpe learn(const std::unordered_map<std::string, int64_t>& word_counts, int merges, LearnStats* stats = nullptr);

    // One word -> its subword symbols, the last one ending in "</w>". Cached, so each distinct
    // word is segmented once.
    const std::vector<std::string>& encode_word(const std::string& word) const;
    // Words -> subword symbols, word after word.
    std::vector<std::string> encode(const std::vector<std::string>& words) const;
    // Forgets the segmentations cached so far (the references encode_word gave go with them): a
    // corpus's tens of thousands of words, which later text does not need all of.
    void clear_cache() const { decltype(cache_)().swap(cache_); }
    // Subword symbols (and byte tokens) -> words: concatenates the symbols, a word ends after a
    // symbol ending in "</w>"; byte tokens are turned back into bytes, and any ill-formed UTF-8 that
    // a model's output may spell becomes U+FFFD.
    static std::vector<std::string> decode(const std::vector<std::string>& symbols);

    const std::vector<std::pair<std::string, std::string>>& merges() const { return merges_; }

    // As JSON: {"merges": [["l","o"], ["lo","w</w>"], ...]} in the order they were learned.
    autograd::io::json::Value to_json() const;
    static Bpe from_json(const autograd::io::json::Value& v);   // throws std::runtime_error saying what is wrong
    static Bpe from_merges(std::vector<std::pair<std::string, std::string>> merges);

private:
    std::vector<std::pair<std::string, std::string>> merges_;        // in the order learned
    std::unordered_map<std::string, int> rank_;                      // left + '\n' + right -> merge index
    mutable std::unordered_map<std::string, std::vector<std::string>> cache_;   // word -> symbols
};

// "<0xE4>": the token of one byte, for symbols the vocabulary does not know.
std::string byte_token(unsigned char byte);
// The 256 byte tokens and "</w>": every vocabulary of subwords holds them, so to_vocab_tokens
// can always fall back to them.
std::vector<std::string> fallback_tokens();

// Symbols -> tokens the vocabulary holds: a symbol it lacks becomes its UTF-8 bytes as byte
// tokens, followed by a lone "</w>" if the symbol ended a word. Bpe::decode reads them back.
std::vector<std::string> to_vocab_tokens(const std::vector<std::string>& symbols, const Vocab& vocab);

}  // namespace data
