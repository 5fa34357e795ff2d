#include "examples/data/text_data.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <unordered_map>

#include "autograd/io/utf8.h"
#include "examples/common/output_files.h"
#include "examples/data/tokenizer.h"

namespace data {

namespace json = autograd::io::json;
using autograd::io::decode_utf8;

void check_text(std::string_view text, const std::string& name) {
    if (text.empty()) throw std::runtime_error("'" + name + "' is empty: a language model needs text to learn from");
    size_t chars = 0;
    for (size_t pos = 0; pos < text.size(); chars++) {
        const autograd::io::Utf8Char c = decode_utf8(text, pos);
        if (!c.valid)
            throw std::runtime_error("'" + name + "' is not valid UTF-8: a bad byte sequence at byte offset " + std::to_string(pos) +
                                     " (convert it to UTF-8 first, e.g. iconv -f latin1 -t utf-8)");
        pos += c.len;
    }
    if (chars < 2)
        throw std::runtime_error("'" + name + "' holds " + std::to_string(chars) +
                                 " character: at least two are needed, one to read and one to predict");
}

std::string read_text_file(const std::string& path) {
    std::string text = common::read_input_file(path, "a text file");   // a regular file, of a bounded size
    check_text(text, path);
    return text;
}

// ---------------------------------------------------------------- the simplest models

double unigram_cross_entropy(const std::vector<int32_t>& train, const std::vector<int32_t>& valid, int64_t V) {
    std::vector<double> n(static_cast<size_t>(V), 0.0);
    for (const int32_t c : train) n[static_cast<size_t>(c)]++;
    double nats = 0;
    for (const int32_t c : valid) nats -= std::log((n[static_cast<size_t>(c)] + 1) / (static_cast<double>(train.size()) + V));
    return nats / static_cast<double>(valid.size());
}

double bigram_cross_entropy(const std::vector<int32_t>& train, const std::vector<int32_t>& valid, int64_t V) {
    std::vector<double> pair(static_cast<size_t>(V * V), 0.0), first(static_cast<size_t>(V), 0.0), n(static_cast<size_t>(V), 0.0);
    for (size_t i = 0; i < train.size(); i++) {
        n[static_cast<size_t>(train[i])]++;
        if (i + 1 < train.size()) {
            pair[static_cast<size_t>(train[i] * V + train[i + 1])]++;   // n(b c)
            first[static_cast<size_t>(train[i])]++;                       // n(b ·)
        }
    }
    double nats = -std::log((n[static_cast<size_t>(valid[0])] + 1) / (static_cast<double>(train.size()) + V));
    for (size_t i = 1; i < valid.size(); i++) {
        const size_t b = static_cast<size_t>(valid[i - 1]), c = static_cast<size_t>(valid[i]);
        nats -= std::log((pair[b * static_cast<size_t>(V) + c] + 1) / (first[b] + static_cast<double>(V)));
    }
    return nats / static_cast<double>(valid.size());
}

// ---------------------------------------------------------------- characters

CorpusCodec CorpusCodec::characters(std::string_view text) {
    CorpusCodec c;
    c.chars_ = autograd::io::to_code_points(text);
    std::sort(c.chars_.begin(), c.chars_.end());
    c.chars_.erase(std::unique(c.chars_.begin(), c.chars_.end()), c.chars_.end());
    return c;
}

int64_t CorpusCodec::size() const { return subwords_ ? static_cast<int64_t>(vocab_.size()) : static_cast<int64_t>(chars_.size()); }

// ---------------------------------------------------------------- subwords

// The text's lines, each as its words and punctuation.
static std::vector<std::vector<std::string>> lines_of_words(std::string_view text) {
    std::vector<std::vector<std::string>> lines;
    for (size_t begin = 0; begin <= text.size();) {
        const size_t end = std::min(text.find('\n', begin), text.size());
        lines.push_back(tokenize(text.substr(begin, end - begin)));
        begin = end + 1;
    }
    if (!text.empty() && text.back() == '\n') lines.pop_back();   // no line after the last newline
    return lines;
}

CorpusCodec CorpusCodec::subwords(std::string_view text, int merges) {
    CorpusCodec c;
    c.subwords_ = true;
    const auto lines = lines_of_words(text);
    std::unordered_map<std::string, int64_t> words;
    for (const auto& line : lines)
        for (const std::string& w : line) words[w]++;
    c.bpe_ = Bpe::learn(words, merges);
    std::unordered_map<std::string, size_t> symbols{{"\n", lines.size()}};
    for (const auto& line : lines)
        for (const std::string& s : c.bpe_.encode(line)) symbols[s]++;
    const Vocab seen = Vocab::from_counts(symbols);
    json::Array tokens(seen.tokens().begin(), seen.tokens().end());
    for (const std::string& t : fallback_tokens())
        if (!seen.contains(t)) tokens.push_back(t);
    c.vocab_ = Vocab::from_json(tokens);
    c.newline_ = c.vocab_.id("\n");
    return c;
}

// ---------------------------------------------------------------- both

std::vector<int32_t> CorpusCodec::encode(std::string_view text) const {
    std::vector<int32_t> ids;
    if (subwords_) {
        const auto lines = lines_of_words(text);
        for (size_t i = 0; i < lines.size(); i++) {
            if (i > 0) ids.push_back(newline_);
            for (const std::string& t : to_vocab_tokens(bpe_.encode(lines[i]), vocab_)) ids.push_back(vocab_.id(t));
        }
        if (!text.empty() && text.back() == '\n') ids.push_back(newline_);
        return ids;
    }
    size_t pos = 0;
    for (const char32_t cp : autograd::io::to_code_points(text)) {
        const auto at = std::lower_bound(chars_.begin(), chars_.end(), cp);
        if (at == chars_.end() || *at != cp)
            throw std::invalid_argument("the character '" + autograd::io::encode_utf8(cp) + "' (U+" + [&] {
                char hex[16];
                std::snprintf(hex, sizeof hex, "%04X", static_cast<unsigned>(cp));
                return std::string(hex);
            }() + ", character " + std::to_string(pos) + ") is not in the model's " + std::to_string(chars_.size()) + " characters");
        ids.push_back(static_cast<int32_t>(at - chars_.begin()));
        pos++;
    }
    return ids;
}

std::string CorpusCodec::decode(const std::vector<int32_t>& ids) const {
    for (const int32_t id : ids)
        if (id < 0 || id >= size())
            throw std::out_of_range("CorpusCodec::decode: id " + std::to_string(id) + " outside [0, " + std::to_string(size()) + ")");
    std::string out;
    if (!subwords_) {
        for (const int32_t id : ids) autograd::io::append_utf8(out, chars_[static_cast<size_t>(id)]);
        return out;
    }
    std::vector<std::string> line;   // this line's subword tokens
    const auto flush = [&] {
        out += detokenize(Bpe::decode(line));
        line.clear();
    };
    for (const int32_t id : ids) {
        if (id == newline_) {
            flush();
            out += '\n';
        } else if (id >= Vocab::kNumSpecials) {   // <pad> <bos> <eos> <unk> write nothing
            line.push_back(vocab_.token(id));
        }
    }
    flush();
    return out;
}

json::Value CorpusCodec::to_json() const {
    if (!subwords_) {
        std::string chars;
        for (const char32_t cp : chars_) autograd::io::append_utf8(chars, cp);
        return json::Object{{"characters", chars}};
    }
    return json::Object{{"bpe", bpe_.to_json()}, {"vocab", vocab_.to_json()}};
}

CorpusCodec CorpusCodec::from_json(const json::Value& v) {
    if (const json::Value* chars = v.find("characters")) {
        CorpusCodec c = characters(chars->as_string());
        if (c.chars_.size() != autograd::io::count_code_points(chars->as_string()))
            throw std::runtime_error("CorpusCodec: 'characters' repeats a character");
        return c;
    }
    const json::Value *bpe = v.find("bpe"), *vocab = v.find("vocab");
    if (!bpe || !vocab) throw std::runtime_error("CorpusCodec: expected {\"characters\": ...} or {\"bpe\": ..., \"vocab\": ...}");
    CorpusCodec c;
    c.subwords_ = true;
    c.bpe_ = Bpe::from_json(*bpe);
    c.vocab_ = Vocab::from_json(*vocab);
    if (!c.vocab_.contains("\n")) throw std::runtime_error("CorpusCodec: the subword vocabulary has no \"\\n\"");
    c.newline_ = c.vocab_.id("\n");
    return c;
}

}  // namespace data
