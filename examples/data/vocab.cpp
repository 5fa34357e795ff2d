#include "examples/data/vocab.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "autograd/io/utf8.h"

namespace data {

namespace {

const char* const kSpecials[Vocab::kNumSpecials] = {"<pad>", "<bos>", "<eos>", "<unk>"};
const std::string kHeader = "vocab v1 ";

std::string escape(const std::string& token) {
    std::string out;
    for (char c : token) {
        switch (c) {
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default: out += c;
        }
    }
    return out;
}

[[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("Vocab::deserialize: " + what);
}

std::string unescape(std::string_view line, size_t line_no) {
    std::string out;
    for (size_t i = 0; i < line.size(); i++) {
        if (line[i] != '\\') {
            out += line[i];
            continue;
        }
        if (i + 1 == line.size()) fail("line " + std::to_string(line_no) + ": dangling '\\'");
        switch (line[++i]) {
        case '\\': out += '\\'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        default:
            fail("line " + std::to_string(line_no) + ": unknown escape '\\" + std::string(1, line[i]) + "'");
        }
    }
    return out;
}

}  // namespace

Vocab::Vocab() {
    for (const char* s : kSpecials) add_(s);
}

void Vocab::add_(const std::string& token) {
    ids_.emplace(token, static_cast<int32_t>(tokens_.size()));
    tokens_.push_back(token);
}

Vocab Vocab::build(const std::vector<std::vector<std::string>>& sentences, size_t min_freq, size_t max_size) {
    // 1) count
    std::unordered_map<std::string, size_t> counts;
    for (const auto& sentence : sentences) {
        for (const std::string& t : sentence) {
            if (t.empty()) throw std::invalid_argument("Vocab::build: empty token");
            if (!autograd::io::valid_utf8(t)) throw std::invalid_argument("Vocab::build: token is not valid UTF-8");
            counts[t]++;
        }
    }

    // 2) keep the frequent ones; sort by count (descending), then bytes: a total order, so the
    //    result does not depend on the hash map's iteration order
    Vocab v;
    std::vector<std::pair<std::string, size_t>> kept;
    for (auto& [token, count] : counts)
        if (count >= min_freq && !v.contains(token)) kept.emplace_back(token, count);
    std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });

    // 3) assign ids after the specials
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

std::string Vocab::serialize() const {
    std::string out = kHeader + std::to_string(tokens_.size()) + "\n";
    for (const std::string& t : tokens_) out += escape(t) + "\n";
    return out;
}

Vocab Vocab::deserialize(std::string_view text) {
    // 1) split into lines; a final newline is optional
    std::vector<std::string_view> lines;
    for (size_t pos = 0; pos < text.size();) {
        size_t nl = text.find('\n', pos);
        if (nl == std::string_view::npos) nl = text.size();
        lines.push_back(text.substr(pos, nl - pos));
        pos = nl + 1;
    }
    if (lines.empty()) fail("empty text");

    // 2) header "vocab v1 <size>"
    const std::string_view header = lines[0];
    if (header.substr(0, kHeader.size()) != kHeader)
        fail("missing header 'vocab v1 <size>' (got '" + std::string(header.substr(0, 40)) + "')");
    const std::string_view count_text = header.substr(kHeader.size());
    size_t count = 0;
    if (count_text.empty() || count_text.size() > 9) fail("bad size in header");
    for (char c : count_text) {
        if (c < '0' || c > '9') fail("bad size in header");
        count = count * 10 + static_cast<size_t>(c - '0');
    }
    if (lines.size() - 1 != count)
        fail("header says " + std::to_string(count) + " tokens but " + std::to_string(lines.size() - 1) +
             " lines follow");
    if (count < static_cast<size_t>(kNumSpecials)) fail("fewer tokens than the 4 specials");

    // 3) tokens, checked one by one
    Vocab v;
    v.tokens_.clear();
    v.ids_.clear();
    for (size_t i = 0; i < count; i++) {
        const size_t line_no = i + 2;  // 1-based, after the header
        std::string t = unescape(lines[i + 1], line_no);
        if (i < static_cast<size_t>(kNumSpecials) && t != kSpecials[i])
            fail("id " + std::to_string(i) + " must be " + kSpecials[i] + ", got '" + t + "'");
        if (t.empty()) fail("line " + std::to_string(line_no) + ": empty token");
        if (!autograd::io::valid_utf8(t)) fail("line " + std::to_string(line_no) + ": invalid UTF-8");
        if (v.contains(t)) fail("line " + std::to_string(line_no) + ": duplicate token '" + t + "'");
        v.add_(t);
    }
    return v;
}

}  // namespace data
