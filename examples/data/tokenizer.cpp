#include "examples/data/tokenizer.h"

#include <array>

#include "autograd/io/utf8.h"

namespace data {

using autograd::io::append_utf8;
using autograd::io::to_code_points;

char32_t to_lower(char32_t c) {
    if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 0x20 : c;
    // Latin-1 Supplement: À..Þ map to à..þ, except the multiplication sign × (U+00D7)
    if (c >= 0xC0 && c <= 0xDE) return c == 0xD7 ? c : c + 0x20;
    // Latin Extended-A is made of (capital, small) pairs at adjacent code points
    if (c >= 0x100 && c <= 0x17F) {
        if (c == 0x130) return U'i';  // İ (Turkish dotted capital I)
        if (c == 0x178) return 0xFF;  // Ÿ -> ÿ, whose small form lives in Latin-1
        const bool even_run = c <= 0x137 || (c >= 0x14A && c <= 0x177);  // capital is even
        const bool odd_run = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if ((even_run && c % 2 == 0) || (odd_run && c % 2 == 1)) return c + 1;
        return c;  // already small, or caseless (ĸ, ŉ, ſ)
    }
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;  // Greek Α..Ω
    if (c >= 0x400 && c <= 0x40F) return c + 0x50;                // Cyrillic Ѐ..Џ
    if (c >= 0x410 && c <= 0x42F) return c + 0x20;                // Cyrillic А..Я
    return c;
}

std::string to_lower_utf8(std::string_view s) { return autograd::io::map_code_points(s, to_lower); }

bool is_space(char32_t c) {
    if (c <= 0x20 || c == 0x7F) return true;  // space, ASCII whitespace, other control chars
    switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
    case 0x200B: case 0xFEFF:  // zero-width space, byte order mark: invisible, dropped
        return true;
    default:
        return c >= 0x2000 && c <= 0x200A;  // en quad .. hair space (incl. thin space)
    }
}

bool is_punctuation(char32_t c) {
    if (c < 0x80) {
        return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') ||
               (c >= '[' && c <= '`' && c != '_') || (c >= '{' && c <= '~');
    }
    switch (c) {
    case 0xA1: case 0xA7: case 0xAB: case 0xB6: case 0xB7: case 0xBB: case 0xBF:  // ¡ § « ¶ · » ¿
    case 0x30FB:                                                                  // katakana ・
        return true;
    default:
        return (c >= 0x2010 && c <= 0x2027) ||  // dashes, quotes, daggers, bullet, …
               (c >= 0x2030 && c <= 0x205E) ||  // ‰ ′ ‹ › ‼ ⁇ ...
               (c >= 0x3001 && c <= 0x3003) ||  // 、 。 〃
               (c >= 0x3008 && c <= 0x3011) ||  // 〈 〉 《 》 「 」 『 』 【 】
               (c >= 0x3014 && c <= 0x301F) ||  // 〔 〕 ... 〟
               (c >= 0xFF01 && c <= 0xFF0F) ||  // fullwidth ！ ＂ ... ／
               (c >= 0xFF1A && c <= 0xFF20) ||  // fullwidth ： ； ... ＠
               (c >= 0xFF3B && c <= 0xFF40 && c != 0xFF3F) ||
               (c >= 0xFF5B && c <= 0xFF65);    // fullwidth ｛ ... and halfwidth ｡ ｢ ｣ ､ ･
    }
}

bool is_cjk(char32_t c) {
    return (c >= 0x3040 && c <= 0x30FF && c != 0x30FB) ||  // hiragana, katakana
           (c >= 0x3400 && c <= 0x4DBF) ||                  // CJK extension A
           (c >= 0x4E00 && c <= 0x9FFF) ||                  // CJK unified ideographs
           (c >= 0xF900 && c <= 0xFAFF) ||                  // CJK compatibility ideographs
           (c >= 0x20000 && c <= 0x2FA1F) ||                // extensions B..F, compatibility supp.
           (c >= 0x30000 && c <= 0x323AF);                  // extensions G, H
}

// ---- tokenizer ------------------------------------------------------------------------------

namespace {

bool is_word_char(char32_t c) { return !is_space(c) && !is_punctuation(c) && !is_cjk(c); }
bool is_digit(char32_t c) { return c >= '0' && c <= '9'; }
bool is_apostrophe(char32_t c) { return c == U'\'' || c == 0x2019; }

// A letter, loosely: a word character that is not a digit (good enough for "U.S" and clitics).
bool is_letter(char32_t c) { return is_word_char(c) && !is_digit(c) && c != U'_'; }

// Is punctuation c, seen between prev and next, part of the word rather than a token?
bool joins_word(char32_t prev, char32_t c, char32_t next) {
    switch (c) {
    case U'-': case 0x2010: case 0x2011: case U'/': case U'&': case U'@':
        return is_word_char(prev) && is_word_char(next);             // well-known, and/or
    case U',': case U':':
        return is_digit(prev) && is_digit(next);                     // 1,000  10:30
    case U'.':
        return (is_digit(prev) && is_digit(next)) ||                 // 3.5
               (is_letter(prev) && is_letter(next));                 // U.S
    default:
        return false;
    }
}

// French (and Italian-style) clitics that are elided before a vowel: l'homme, qu'il, jusqu'à.
bool is_elided_clitic(const std::string& lowered_word) {
    static const std::array<std::string_view, 14> clitics = {
        "l", "d", "j", "m", "n", "s", "t", "c", "qu", "jusqu", "lorsqu", "puisqu", "quoiqu", "presqu"};
    for (std::string_view c : clitics)
        if (lowered_word == c) return true;
    return false;
}

}  // namespace

std::vector<std::string> tokenize(std::string_view text, bool lowercase) {
    const std::u32string cps = to_code_points(text);  // invalid bytes are U+FFFD from here on
    std::vector<std::string> tokens;
    std::string word;  // the word being built, already lowercased if asked

    auto flush_word = [&] {
        if (!word.empty()) tokens.push_back(std::move(word));
        word.clear();
    };
    auto push_char = [&](std::string& dst, char32_t c) { append_utf8(dst, lowercase ? to_lower(c) : c); };
    auto single_token = [&](char32_t c) {
        flush_word();
        tokens.emplace_back();
        push_char(tokens.back(), c);
    };

    for (size_t i = 0; i < cps.size(); i++) {
        const char32_t c = cps[i];
        const char32_t prev = i > 0 ? cps[i - 1] : U' ';
        const char32_t next = i + 1 < cps.size() ? cps[i + 1] : U' ';

        if (is_space(c)) {                    // 1) whitespace ends a word
            flush_word();
        } else if (is_cjk(c)) {               // 2) one ideograph, one token
            single_token(c);
        } else if (is_punctuation(c)) {       // 3) punctuation, unless it is inside a word
            const bool inside = !word.empty() && is_word_char(next);
            if (inside && is_apostrophe(c)) {
                // a clitic has at most 6 code points (24 bytes): don't lowercase a long word again
                // at each of its apostrophes, which made "a'a'a'..." quadratic
                const bool clitic = word.size() <= 24 && is_elided_clitic(to_lower_utf8(word));
                push_char(word, c);
                if (clitic) flush_word();     // "l'" + "homme"; "don't" stays whole
            } else if (inside && joins_word(prev, c, next)) {
                push_char(word, c);
            } else {
                single_token(c);
            }
        } else {                              // 4) part of a word
            push_char(word, c);
        }
    }
    flush_word();
    return tokens;
}

namespace {

// A token made only of code points from `set` (so "..." and "?!" behave like "." and "?").
bool all_in(std::string_view token, std::u32string_view set) {
    const std::u32string cps = to_code_points(token);
    if (cps.empty()) return false;
    for (char32_t c : cps)
        if (set.find(c) == std::u32string_view::npos) return false;
    return true;
}

bool is_cjk_token(std::string_view token) {
    const std::u32string cps = to_code_points(token);
    if (cps.empty()) return false;
    for (char32_t c : cps) {
        const bool cjk_punct = (c >= 0x3000 && c <= 0x303F) || (c >= 0xFF00 && c <= 0xFF65);
        if (!is_cjk(c) && !cjk_punct) return false;
    }
    return true;
}

// "l'", "qu'", "jusqu’": a clitic that tokenize() split off the word it belongs to.
bool is_clitic_token(std::string_view token) {
    const std::u32string cps = to_code_points(token);
    return cps.size() >= 2 && is_apostrophe(cps.back()) && is_letter(cps[cps.size() - 2]);
}

}  // namespace

std::string detokenize(const std::vector<std::string>& tokens) {
    static constexpr std::u32string_view no_space_before = U".,!?;:)]}%…”’、。，．！？：；）」』】〉》";
    static constexpr std::u32string_view no_space_after = U"([{¿¡“‘„$#（「『【〈《";

    std::string out;
    bool glue_next = true;                   // no space before the next token
    bool open_double = false, open_single = false;
    std::string_view prev_token;
    for (const std::string& t : tokens) {
        if (t.empty()) continue;
        bool glue_before = false, glue_after = false;
        if (t == "\"" || t == "'") {         // straight quotes: opening, then closing, ...
            bool& open = t == "\"" ? open_double : open_single;
            glue_before = open;
            glue_after = !open;
            open = !open;
        } else if (all_in(t, no_space_before)) {
            glue_before = true;
        } else if (all_in(t, no_space_after) || is_clitic_token(t)) {
            glue_after = true;
        }
        if (is_cjk_token(t) && is_cjk_token(prev_token)) glue_before = true;

        if (!glue_next && !glue_before) out += ' ';
        out += t;
        glue_next = glue_after;
        prev_token = t;
    }
    return out;
}

}  // namespace data
