// Plain text for a language model (examples/gpt.cpp): a file read and checked, and a codec that
// turns it into token ids and back, either character by character (a character is a Unicode code
// point, not a byte: "é" is one token) or in the translation example's subwords (bpe.h).
//
//   const std::string text = data::read_text_file("shakespeare.txt");   // valid UTF-8, 2+ characters
//   data::CorpusCodec codec = data::CorpusCodec::characters(text);          // its distinct characters, sorted
//   std::vector<int32_t> ids = codec.encode(text);                      // one id per character
//   std::string back = codec.decode(ids);                               // == text
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/io/json.h"
#include "examples/data/bpe.h"
#include "examples/data/vocab.h"

namespace data {

// The file's bytes. Throws std::runtime_error naming the file and the problem: a directory,
// missing or unreadable, not a regular file (a FIFO, a device), larger than
// common::kMaxInputBytes (examples/common/output_files.h), empty, invalid UTF-8 (with the byte offset of the first bad sequence),
// fewer than two characters (nothing to predict).
std::string read_text_file(const std::string& path);
// The same checks on text already read (name: what the messages call it).
void check_text(std::string_view text, const std::string& name);

// The two simplest language models of a text, for a loss to be compared with: the mean
// cross-entropy, in nats per token, of `valid` under counts taken from `train` (ids in [0, V)),
// with add-one (Laplace) smoothing so that no token of `valid` has probability 0:
//   unigram: p(c) = (n(c) + 1) / (N + V), whatever came before
//   bigram:  p(c | b) = (n(b c) + 1) / (n(b ·) + V), from the token before (the first token of
//            `valid` is scored by the unigram)
double unigram_cross_entropy(const std::vector<int32_t>& train, const std::vector<int32_t>& valid, int64_t V);
double bigram_cross_entropy(const std::vector<int32_t>& train, const std::vector<int32_t>& valid, int64_t V);

class CorpusCodec {
public:
    // Every distinct code point of text, in code point order (its id).
    static CorpusCodec characters(std::string_view text);
    // Byte-pair encoding with up to `merges` merges learned from text's words: each line is
    // tokenized into words and punctuation (tokenizer.h), the words split into subwords, and every
    // line ends with a "\n" token. Spaces are not kept: decode writes the words back as
    // detokenize does.
    static CorpusCodec subwords(std::string_view text, int merges);

    bool is_subwords() const { return subwords_; }
    int64_t size() const;                                   // V: ids are 0..V-1
    // text -> ids. Characters: throws std::invalid_argument naming a character the codec does not
    // hold (and where it is); subwords: an unknown symbol is spelled from its UTF-8 bytes.
    std::vector<int32_t> encode(std::string_view text) const;
    std::string decode(const std::vector<int32_t>& ids) const;   // ids -> text (throws on an id >= V)

    // As JSON, for a saved model: {"characters": "abc..."} or {"bpe": ..., "vocab": [...]}.
    autograd::io::json::Value to_json() const;
    static CorpusCodec from_json(const autograd::io::json::Value& v);   // throws std::runtime_error saying what is wrong

private:
    bool subwords_ = false;
    std::u32string chars_;   // characters: id -> code point, sorted
    Bpe bpe_;                // subwords: the merges, and the vocabulary of their symbols
    Vocab vocab_;
    int32_t newline_ = -1;   // subwords: the id of "\n"
};

}  // namespace data
