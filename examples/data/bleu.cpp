#include "examples/data/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <unordered_map>

#include "autograd/io/utf8.h"
#include "examples/data/tokenizer.h"

namespace data {

using autograd::io::decode_utf8;
using autograd::io::Utf8Char;

namespace {

// Python's str.isspace(): what str.split() and str.rstrip() treat as whitespace.
bool is_python_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Splits on runs of whitespace, like Python's str.split() with no argument.
std::vector<std::string> split_whitespace(std::string_view s) {
    std::vector<std::string> words;
    std::string word;
    for (size_t pos = 0; pos < s.size();) {
        const Utf8Char c = decode_utf8(s, pos);
        if (c.valid && is_python_space(c.cp)) {
            if (!word.empty()) words.push_back(std::move(word));
            word.clear();
        } else {
            word.append(s.substr(pos, c.len));
        }
        pos += c.len;
    }
    if (!word.empty()) words.push_back(std::move(word));
    return words;
}

std::string_view rstrip(std::string_view s) {
    // decode forward and remember where the last non-space code point ended
    size_t keep = 0;
    for (size_t pos = 0; pos < s.size();) {
        const Utf8Char c = decode_utf8(s, pos);
        pos += c.len;
        if (!(c.valid && is_python_space(c.cp))) keep = pos;
    }
    return s.substr(0, keep);
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
    std::string out;
    size_t pos = 0;
    for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size())
        out.append(s, pos, hit - pos).append(to);
    out.append(s, pos);
    s = std::move(out);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The ASCII class [{-~[-` -&(-+:-@/] of the 13a rule: every symbol but ' , - . (and digits,
// letters). Space is in it too, which only adds spaces around spaces.
bool is_13a_symbol(char c) {
    return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
           (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

// A regex substitution whose pattern matches exactly two characters, applied like re.sub:
// scan left to right; where match(s[i], s[i+1]) holds, write the replacement and go on at i+2.
// Working on bytes gives the same result as on code points here, because every pattern
// character is ASCII and the one "any non-digit" class accepts any byte of a multi-byte
// character: a match can only start on the last byte of one, or end on the first byte of one.
template <class Match, class Replace>
std::string substitute_pairs(const std::string& s, Match match, Replace replace) {
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
        if (i + 1 < s.size() && match(s[i], s[i + 1])) {
            replace(out, s[i], s[i + 1]);
            i += 2;
        } else {
            out += s[i++];
        }
    }
    return out;
}

}  // namespace

std::string tokenize_13a(std::string_view line) {
    // 1) sacreBLEU's preprocessing and mteval-v13a's language-independent part
    std::string s(rstrip(line));
    replace_all(s, "<skipped>", "");
    replace_all(s, "-\n", "");
    replace_all(s, "\n", " ");
    replace_all(s, "&quot;", "\"");
    replace_all(s, "&amp;", "&");
    replace_all(s, "&lt;", "<");
    replace_all(s, "&gt;", ">");
    s = " " + s + " ";

    // 2) spaces around symbols
    std::string spaced;
    for (char c : s) {
        if (is_13a_symbol(c)) spaced.append(1, ' ').append(1, c).append(1, ' ');
        else spaced += c;
    }

    // 3) period and comma: split unless preceded by a digit ...
    spaced = substitute_pairs(
        spaced, [](char a, char b) { return !is_digit(a) && (b == '.' || b == ','); },
        [](std::string& out, char a, char b) { out.append(1, a).append(1, ' ').append(1, b).append(1, ' '); });
    // ... and unless followed by a digit
    spaced = substitute_pairs(
        spaced, [](char a, char b) { return (a == '.' || a == ',') && !is_digit(b); },
        [](std::string& out, char a, char b) { out.append(1, ' ').append(1, a).append(1, ' ').append(1, b); });

    // 4) dash after a digit
    spaced = substitute_pairs(
        spaced, [](char a, char b) { return is_digit(a) && b == '-'; },
        [](std::string& out, char a, char b) { out.append(1, a).append(1, ' ').append(1, b).append(1, ' '); });

    // 5) single spaces
    std::string joined;
    for (const std::string& w : split_whitespace(spaced)) {
        if (!joined.empty()) joined += ' ';
        joined += w;
    }
    return joined;
}

BleuResult corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                       const BleuOptions& opt) {
    if (hypotheses.size() != references.size())
        throw std::invalid_argument("corpus_bleu: " + std::to_string(hypotheses.size()) + " hypotheses but " +
                                    std::to_string(references.size()) + " references");
    constexpr int N = 4;  // max n-gram order
    BleuResult r;

    // 1) sufficient statistics, summed over the corpus
    for (size_t s = 0; s < hypotheses.size(); s++) {
        const auto prepare = [&](const std::string& line) {
            return split_whitespace(tokenize_13a(opt.lowercase ? to_lower_utf8(line) : line));
        };
        const std::vector<std::string> hyp = prepare(hypotheses[s]), ref = prepare(references[s]);
        r.sys_len += hyp.size();
        r.ref_len += ref.size();

        // n-gram -> count; the key is the n tokens joined by ' ' (tokens hold no spaces, and
        // the number of spaces tells the order apart)
        auto count_ngrams = [](const std::vector<std::string>& toks) {
            std::unordered_map<std::string, size_t> counts;
            for (size_t i = 0; i < toks.size(); i++) {
                std::string key;
                for (size_t n = 1; n <= N && i + n <= toks.size(); n++) {
                    if (n > 1) key += ' ';
                    key += toks[i + n - 1];
                    counts[key]++;
                }
            }
            return counts;
        };
        const auto hyp_counts = count_ngrams(hyp), ref_counts = count_ngrams(ref);
        for (const auto& [ngram, count] : hyp_counts) {  // sums only: iteration order is irrelevant
            const size_t n = static_cast<size_t>(std::count(ngram.begin(), ngram.end(), ' ')) + 1;
            auto it = ref_counts.find(ngram);
            if (it != ref_counts.end()) r.correct[n - 1] += std::min(count, it->second);
        }
        for (size_t n = 1; n <= N; n++)
            if (hyp.size() >= n) r.total[n - 1] += hyp.size() - n + 1;
    }

    // 2) brevity penalty
    if (r.sys_len < r.ref_len)
        r.bp = r.sys_len > 0 ? std::exp(1.0 - static_cast<double>(r.ref_len) / static_cast<double>(r.sys_len)) : 0.0;
    else
        r.bp = 1.0;

    // 3) precisions with 'exp' smoothing; nothing matched at all -> 0
    bool any_match = false;
    for (int n = 0; n < N; n++) any_match = any_match || r.correct[n] > 0;
    if (!any_match) return r;
    double smooth = 1.0;
    for (int n = 0; n < N; n++) {
        if (r.total[n] == 0) break;  // no hypothesis this long: p_n (and the score) stay 0
        if (r.correct[n] == 0) {
            smooth *= 2;
            r.precisions[n] = 100.0 / (smooth * static_cast<double>(r.total[n]));
        } else {
            r.precisions[n] = 100.0 * static_cast<double>(r.correct[n]) / static_cast<double>(r.total[n]);
        }
    }

    // 4) geometric mean
    for (int n = 0; n < N; n++)
        if (r.precisions[n] == 0.0) return r;  // log(0): score 0
    double log_sum = 0;
    for (int n = 0; n < N; n++) log_sum += std::log(r.precisions[n]);
    r.score = r.bp * std::exp(log_sum / N);
    return r;
}

std::string to_string(const BleuResult& r) {
    const double ratio = r.ref_len ? static_cast<double>(r.sys_len) / static_cast<double>(r.ref_len) : 0.0;
    char buf[256];
    std::snprintf(buf, sizeof buf, "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %zu ref_len = %zu)",
                  r.score, r.precisions[0], r.precisions[1], r.precisions[2], r.precisions[3], r.bp, ratio,
                  r.sys_len, r.ref_len);
    return buf;
}

std::string bleu_signature(const BleuOptions& opt) {
    return std::string("nrefs:1|case:") + (opt.lowercase ? "lc" : "mixed") + "|eff:no|tok:13a|smooth:exp";
}

}  // namespace data
