#include "examples/data/vocab.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "autograd/io/utf8.h"

namespace data {

namespace {

const char* const kSpecials[Vocab::kNumSpecials] = {"<pad>", "<bos>", "<eos>", "<unk>"};

}  // namespace

Vocab::Vocab() {
    for (const char* s : kSpecials) add_(s);
}

void Vocab::add_(const std::string& token) {
    ids_.emplace(token, static_cast<int32_t>(tokens_.size()));
    tokens_.push_back(token);
}

Vocab Vocab::build(const std::vector<std::vector<std::string>>& sentences, size_t min_freq, size_t max_size) {
    std::unordered_map<std::string, size_t> counts;
    for (const auto& sentence : sentences)
        for (const std::string& t : sentence) counts[t]++;
    return from_counts(counts, min_freq, max_size);
}

Vocab Vocab::from_counts(const std::unordered_map<std::string, size_t>& counts, size_t min_freq, size_t max_size) {
    // 1) keep the frequent ones; sort by count (descending), then bytes: a total order, so the
    //    result does not depend on the hash map's iteration order
    Vocab v;
    std::vector<std::pair<std::string, size_t>> kept;
    for (const auto& [token, count] : counts) {
        if (token.empty()) throw std::invalid_argument("Vocab::build: empty token");
        if (!autograd::io::valid_utf8(token)) throw std::invalid_argument("Vocab::build: token is not valid UTF-8");
        if (count >= min_freq && !v.contains(token)) kept.emplace_back(token, count);
    }
    std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });

    // 2) assign ids after the specials
    for (const auto& [token, count] : kept) {
        if (max_size > 0 && v.size() >= max_size) break;
        v.add_(token);
    }
    return v;
}

int32_t Vocab::id(const std::string& token) const {
    auto it = ids_.find(token);
    return it == ids_.end() ? UNK : it->second;
}

const std::string& Vocab::token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size())
        throw std::out_of_range("Vocab::token: id " + std::to_string(id) + " is outside [0, " +
                                std::to_string(tokens_.size()) + ")");
    return tokens_[id];
}

bool Vocab::contains(const std::string& token) const { return ids_.count(token) > 0; }

std::vector<int32_t> Vocab::encode(const std::vector<std::string>& tokens, bool add_bos, bool add_eos) const {
    std::vector<int32_t> ids;
    ids.reserve(tokens.size() + 2);
    if (add_bos) ids.push_back(BOS);
    for (const std::string& t : tokens) ids.push_back(id(t));
    if (add_eos) ids.push_back(EOS);
    return ids;
}

std::vector<std::string> Vocab::decode(const std::vector<int32_t>& ids) const {
    std::vector<std::string> tokens;
    for (int32_t i : ids) {
        if (i == EOS) break;
        const std::string& t = token(i);  // range check first: a bad id throws even if skipped
        if (i == PAD || i == BOS) continue;
        tokens.push_back(t);
    }
    return tokens;
}

autograd::io::json::Value Vocab::to_json() const {
    return autograd::io::json::Array(tokens_.begin(), tokens_.end());
}

Vocab Vocab::from_json(const autograd::io::json::Value& v) {
    const auto& tokens = v.as_array();
    auto fail = [](size_t id, const std::string& what) {
        throw std::runtime_error("Vocab::from_json: id " + std::to_string(id) + ": " + what);
    };
    if (tokens.size() < static_cast<size_t>(kNumSpecials))
        throw std::runtime_error("Vocab::from_json: " + std::to_string(tokens.size()) + " tokens, fewer than the 4 specials");
    Vocab out;
    out.tokens_.clear();
    out.ids_.clear();
    for (size_t id = 0; id < tokens.size(); id++) {
        if (!tokens[id].is_string()) fail(id, "expected a string, got " + autograd::io::json::dump(tokens[id]));
        const std::string& t = tokens[id].as_string();
        if (id < static_cast<size_t>(kNumSpecials) && t != kSpecials[id]) fail(id, std::string("must be ") + kSpecials[id] + ", got '" + t + "'");
        if (t.empty()) fail(id, "empty token");
        if (!autograd::io::valid_utf8(t)) fail(id, "invalid UTF-8");
        if (out.contains(t)) fail(id, "duplicate token '" + t + "'");
        out.add_(t);
    }
    return out;
}

}  // namespace data
