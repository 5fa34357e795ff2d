#include "examples/data/bpe.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <queue>
#include <stdexcept>

#include "autograd/io/utf8.h"

namespace data {

namespace {

bool ends_with_marker(const std::string& s) {
    const size_t m = std::char_traits<char>::length(Bpe::kEndOfWord);
    return s.size() >= m && s.compare(s.size() - m, m, Bpe::kEndOfWord) == 0;
}

std::string without_marker(const std::string& s) {
    return ends_with_marker(s) ? s.substr(0, s.size() - std::char_traits<char>::length(Bpe::kEndOfWord)) : s;
}

// A word as its first symbols: one per character, the last one marked as the end of the word.
std::vector<std::string> characters(const std::string& word) {
    std::vector<std::string> out;
    for (size_t pos = 0; pos < word.size();) {
        const autograd::io::Utf8Char c = autograd::io::decode_utf8(word, pos);
        out.push_back(word.substr(pos, c.len));
        pos += c.len;
    }
    if (!out.empty()) out.back() += Bpe::kEndOfWord;
    return out;
}

std::string rank_key(const std::string& left, const std::string& right) { return left + '\n' + right; }

// The byte of a byte token "<0xE4>", or -1 when s is not one.
int byte_of_token(const std::string& s) {
    if (s.size() != 6 || s.compare(0, 3, "<0x") != 0 || s[5] != '>') return -1;
    auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
    const int hi = hex(s[3]), lo = hex(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// ---- learning -------------------------------------------------------------------------------
//
// The naive learner recounts every adjacent pair of every word after each merge: O(merges x
// corpus), minutes for a few hundred thousand sentences. A merge of (a, b) changes only the words
// that contain a next to b, and only the counts of the pairs around each occurrence. So, as
// subword-nmt and sentencepiece do, the learner keeps
//   - the count of every pair (over word frequencies),
//   - an index pair -> the words it occurs in (may hold words that lost the pair since: checked),
//   - a max-heap of (count, pair) with lazy deletion: a count change pushes the new count, and a
//     popped entry whose count is no longer the pair's count is dropped,
// and a merge rewrites only the words of its pair, updating the counts by the difference.

using PairKey = uint64_t;   // left symbol id << 32 | right symbol id
PairKey pair_key(int32_t a, int32_t b) { return static_cast<PairKey>(a) << 32 | static_cast<uint32_t>(b); }
int32_t left_of(PairKey k) { return static_cast<int32_t>(k >> 32); }
int32_t right_of(PairKey k) { return static_cast<int32_t>(k & 0xffffffffu); }

class Learner {
public:
    explicit Learner(const std::unordered_map<std::string, int64_t>& word_counts) {
        // Words in byte order, so nothing below depends on the hash map's order.
        std::vector<std::pair<std::string, int64_t>> sorted(word_counts.begin(), word_counts.end());
        std::sort(sorted.begin(), sorted.end());
        for (const auto& [word, count] : sorted) {
            if (word.empty() || !autograd::io::valid_utf8(word))
                throw std::invalid_argument("Bpe::learn: words must be non-empty valid UTF-8, got '" +
                                            autograd::io::sanitize_utf8(word) + "'");
            if (count <= 0) continue;
            std::vector<int32_t> seq;
            for (const std::string& c : characters(word)) seq.push_back(intern(c));
            words_.push_back(std::move(seq));
            freq_.push_back(count);
        }
        seen_in_merge_.assign(words_.size(), -1);
        for (size_t w = 0; w < words_.size(); w++) {
            const auto& s = words_[w];
            for (size_t i = 0; i + 1 < s.size(); i++) {
                const PairKey k = pair_key(s[i], s[i + 1]);
                count_[k] += freq_[w];
                where_[k].push_back(static_cast<int32_t>(w));
            }
        }
        for (const auto& [k, n] : count_) heap_.push({n, k});
    }

    // The next merge, or false when no pair occurs twice.
    bool merge_next(std::pair<std::string, std::string>& merged) {
        const PairKey k = pop_best();
        if (k == kNone) return false;
        const int32_t a = left_of(k), b = right_of(k);
        merged = {symbols_[a], symbols_[b]};
        const int32_t c = intern(symbols_[a] + symbols_[b]);
        const int merge_index = merges_done_++;

        // Rewrite each word holding a b (once, even if the index lists it twice), and sum the
        // changes of the pair counts.
        std::unordered_map<PairKey, int64_t> delta;
        const std::vector<int32_t> words = std::move(where_[k]);
        where_.erase(k);
        for (int32_t w : words) {
            if (seen_in_merge_[w] == merge_index) continue;
            seen_in_merge_[w] = merge_index;
            std::vector<int32_t>& s = words_[w];
            std::vector<int32_t> t;
            t.reserve(s.size());
            for (size_t i = 0; i < s.size(); i++) {
                if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
                    t.push_back(c);
                    i++;
                } else {
                    t.push_back(s[i]);
                }
            }
            if (t.size() == s.size()) continue;   // the index was stale: this word lost a b earlier
            for (size_t i = 0; i + 1 < s.size(); i++) delta[pair_key(s[i], s[i + 1])] -= freq_[w];
            for (size_t i = 0; i + 1 < t.size(); i++) {
                delta[pair_key(t[i], t[i + 1])] += freq_[w];
                if (t[i] == c || t[i + 1] == c) where_[pair_key(t[i], t[i + 1])].push_back(w);   // the only new pairs
            }
            s = std::move(t);
        }
        for (const auto& [p, d] : delta) {
            if (d == 0) continue;
            int64_t& n = count_[p];
            n += d;
            if (n > 0) heap_.push({n, p});
            else count_.erase(p);
        }
        return true;
    }

private:
    static constexpr PairKey kNone = ~PairKey{0};

    struct Entry {
        int64_t count;
        PairKey pair;
    };

    // The most frequent pair (ties: the byte-wise first left symbol, then right symbol), if it
    // occurs at least twice.
    PairKey pop_best() {
        while (!heap_.empty()) {
            const Entry e = heap_.top();
            heap_.pop();
            const auto it = count_.find(e.pair);
            if (it == count_.end() || it->second != e.count) continue;   // stale: the count changed since
            return e.count >= 2 ? e.pair : kNone;
        }
        return kNone;
    }

    int32_t intern(const std::string& s) {
        const auto [it, added] = ids_.try_emplace(s, static_cast<int32_t>(symbols_.size()));
        if (added) symbols_.push_back(s);
        return it->second;
    }

    // Heap order: is x worse than y? Lower count, then the byte-wise later pair.
    struct Worse {
        const std::vector<std::string>* symbols;
        bool operator()(const Entry& x, const Entry& y) const {
            if (x.count != y.count) return x.count < y.count;
            const std::string &xa = (*symbols)[left_of(x.pair)], &ya = (*symbols)[left_of(y.pair)];
            if (xa != ya) return xa > ya;
            return (*symbols)[right_of(x.pair)] > (*symbols)[right_of(y.pair)];
        }
    };

    std::vector<std::string> symbols_;                    // symbol id -> text
    std::unordered_map<std::string, int32_t> ids_;        // text -> symbol id
    std::vector<std::vector<int32_t>> words_;             // each distinct word as symbol ids
    std::vector<int64_t> freq_;                           // how often each word occurs
    std::vector<int> seen_in_merge_;                      // the last merge that rewrote each word
    std::unordered_map<PairKey, int64_t> count_;          // pair -> occurrences (> 0 only)
    std::unordered_map<PairKey, std::vector<int32_t>> where_;   // pair -> words that had it
    std::priority_queue<Entry, std::vector<Entry>, Worse> heap_{Worse{&symbols_}};
    int merges_done_ = 0;
};

}  // namespace

// ---- Bpe ------------------------------------------------------------------------------------

Bpe Bpe::learn(const std::unordered_map<std::string, int64_t>& word_counts, int merges, LearnStats* stats) {
    if (merges < 0) throw std::invalid_argument("Bpe::learn: merges must be >= 0, got " + std::to_string(merges));
    const auto t0 = std::chrono::steady_clock::now();
    Learner learner(word_counts);
    std::vector<std::pair<std::string, std::string>> out;
    for (std::pair<std::string, std::string> m; static_cast<int>(out.size()) < merges && learner.merge_next(m);) out.push_back(m);
    if (stats) {
        stats->words = 0;
        for (const auto& [_, n] : word_counts) stats->words += n;
        stats->distinct_words = static_cast<int64_t>(word_counts.size());
        stats->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    return from_merges(std::move(out));
}

Bpe Bpe::from_merges(std::vector<std::pair<std::string, std::string>> merges) {
    Bpe bpe;
    bpe.merges_ = std::move(merges);
    for (size_t i = 0; i < bpe.merges_.size(); i++) bpe.rank_.try_emplace(rank_key(bpe.merges_[i].first, bpe.merges_[i].second), static_cast<int>(i));
    return bpe;
}

const std::vector<std::string>& Bpe::encode_word(const std::string& word) const {
    if (const auto it = cache_.find(word); it != cache_.end()) return it->second;
    std::vector<std::string> s = characters(autograd::io::sanitize_utf8(word));
    // Apply the earliest learned merge present in the word, at every place it occurs; repeat.
    while (s.size() > 1) {
        int best = INT_MAX;
        for (size_t i = 0; i + 1 < s.size(); i++)
            if (const auto r = rank_.find(rank_key(s[i], s[i + 1])); r != rank_.end()) best = std::min(best, r->second);
        if (best == INT_MAX) break;
        const auto& [a, b] = merges_[best];
        std::vector<std::string> t;
        for (size_t i = 0; i < s.size(); i++) {
            if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
                t.push_back(a + b);
                i++;
            } else {
                t.push_back(std::move(s[i]));
            }
        }
        s = std::move(t);
    }
    return cache_.emplace(word, std::move(s)).first->second;
}

std::vector<std::string> Bpe::encode(const std::vector<std::string>& words) const {
    std::vector<std::string> out;
    for (const std::string& w : words) {
        const auto& s = encode_word(w);
        out.insert(out.end(), s.begin(), s.end());
    }
    return out;
}

std::vector<std::string> Bpe::decode(const std::vector<std::string>& symbols) {
    std::vector<std::string> words;
    std::string word;   // bytes of the word being assembled
    auto end_word = [&] {
        if (!word.empty()) words.push_back(autograd::io::sanitize_utf8(word));
        word.clear();
    };
    for (const std::string& s : symbols) {
        if (const int byte = byte_of_token(s); byte >= 0) {
            word += static_cast<char>(byte);
        } else {
            word += without_marker(s);
            if (ends_with_marker(s)) end_word();
        }
    }
    end_word();   // a model may stop before it ends the last word
    return words;
}

autograd::io::json::Value Bpe::to_json() const {
    autograd::io::json::Array merges;
    for (const auto& [a, b] : merges_) merges.push_back(autograd::io::json::Array{a, b});
    return autograd::io::json::Object{{"merges", merges}};
}

Bpe Bpe::from_json(const autograd::io::json::Value& v) {
    const autograd::io::json::Value* merges = v.is_object() ? v.find("merges") : nullptr;
    if (!merges || !merges->is_array()) throw std::runtime_error("Bpe::from_json: expected {\"merges\": [[left, right], ...]}");
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& m : merges->as_array()) {
        const std::string where = "Bpe::from_json: merge " + std::to_string(out.size());
        if (!m.is_array() || m.as_array().size() != 2 || !m.as_array()[0].is_string() || !m.as_array()[1].is_string())
            throw std::runtime_error(where + ": expected [left, right], got " + autograd::io::json::dump(m));
        const std::string &a = m.as_array()[0].as_string(), &b = m.as_array()[1].as_string();
        if (a.empty() || b.empty() || ends_with_marker(a)) throw std::runtime_error(where + ": '" + a + "' + '" + b + "' cannot be a merge");
        out.emplace_back(a, b);
    }
    return from_merges(std::move(out));
}

std::string byte_token(unsigned char byte) {
    static const char* hex = "0123456789ABCDEF";
    return std::string("<0x") + hex[byte >> 4] + hex[byte & 15] + ">";
}

std::vector<std::string> fallback_tokens() {
    std::vector<std::string> out;
    for (int b = 0; b < 256; b++) out.push_back(byte_token(static_cast<unsigned char>(b)));
    out.push_back(Bpe::kEndOfWord);
    return out;
}

std::vector<std::string> to_vocab_tokens(const std::vector<std::string>& symbols, const Vocab& vocab) {
    std::vector<std::string> out;
    for (const std::string& s : symbols) {
        if (vocab.contains(s)) {
            out.push_back(s);
            continue;
        }
        for (unsigned char byte : without_marker(s)) out.push_back(byte_token(byte));
        if (ends_with_marker(s)) out.push_back(Bpe::kEndOfWord);
    }
    return out;
}

}  // namespace data
