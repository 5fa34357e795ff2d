// Vocabulary: a two-way map between tokens and integer ids, with four special tokens.
//
//   Vocab v = Vocab::build(tokenized_sentences, /*min_freq=*/2);
//   std::vector<int32_t> ids = v.encode({"the", "dog"}, /*add_bos=*/true, /*add_eos=*/true);
//   // ids == {1, id("the"), id("dog"), 2}
//   std::vector<std::string> back = v.decode(ids);   // {"the", "dog"}
//   json::Value j = v.to_json();                     // ["<pad>","<bos>","<eos>","<unk>","the",...]
//   Vocab same = Vocab::from_json(j);                // (a checkpoint stores it in its metadata)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/io/json.h"

namespace data {

class Vocab {
public:
    // Special ids, identical in every vocabulary.
    static constexpr int32_t PAD = 0;  // "<pad>": fills a batch row after the sentence ends
    static constexpr int32_t BOS = 1;  // "<bos>": the decoder's first input
    static constexpr int32_t EOS = 2;  // "<eos>": ends a sentence
    static constexpr int32_t UNK = 3;  // "<unk>": any token the vocabulary does not know
    static constexpr int32_t kNumSpecials = 4;

    Vocab();  // only the four special tokens

    // Counts tokens over all sentences and keeps those seen at least min_freq times, most frequent
    // first, ties in byte-wise lexicographic order, so the ids depend only on the data.
    // max_size > 0 caps the size (specials included). A token spelled like a special ("<unk>")
    // maps to that special. Throws std::invalid_argument on an empty or invalid-UTF-8 token.
    static Vocab build(const std::vector<std::vector<std::string>>& sentences, size_t min_freq = 1,
                       size_t max_size = 0);
    // The same from counts already made (token -> times seen), e.g. over several lists of sentences
    // without copying them into one.
    static Vocab from_counts(const std::unordered_map<std::string, size_t>& counts, size_t min_freq = 1, size_t max_size = 0);

    int32_t id(const std::string& token) const;    // UNK when unknown
    const std::string& token(int32_t id) const;    // throws std::out_of_range on a bad id
    bool contains(const std::string& token) const;
    size_t size() const { return tokens_.size(); }
    const std::vector<std::string>& tokens() const { return tokens_; }  // index = id

    // tokens -> ids, optionally wrapped in <bos> ... <eos>.
    std::vector<int32_t> encode(const std::vector<std::string>& tokens, bool add_bos, bool add_eos) const;
    // ids -> tokens: stops at the first <eos>, skips <pad> and <bos>, keeps "<unk>".
    // Throws std::out_of_range on an id outside [0, size()).
    std::vector<std::string> decode(const std::vector<int32_t>& ids) const;

    // As JSON: the tokens in id order, an array of strings. from_json() checks the specials at
    // ids 0..3, empty tokens and duplicates, and throws std::runtime_error saying what is wrong.
    autograd::io::json::Value to_json() const;
    static Vocab from_json(const autograd::io::json::Value& v);

    bool operator==(const Vocab& other) const { return tokens_ == other.tokens_; }

private:
    void add_(const std::string& token);  // appends a new token with the next id

    std::vector<std::string> tokens_;                 // id -> token
    std::unordered_map<std::string, int32_t> ids_;    // token -> id (lookup only, never iterated)
};

}  // namespace data
