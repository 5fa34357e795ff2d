#include "autograd/io/utf8.h"

namespace autograd::io {

// Byte patterns of well-formed UTF-8 (Unicode 15, table 3-7):
//   U+0000..U+007F     0xxxxxxx
//   U+0080..U+07FF     110xxxxx 10xxxxxx                     lead C2..DF
//   U+0800..U+FFFF     1110xxxx 10xxxxxx 10xxxxxx            lead E0..EF (no surrogates)
//   U+10000..U+10FFFF  11110xxx 10xxxxxx 10xxxxxx 10xxxxxx   lead F0..F4
// The lead bytes E0, ED, F0 and F4 narrow the range of the byte after them; that is what rules
// out overlong forms, surrogates D800..DFFF and values above U+10FFFF.

Utf8Char decode_utf8(std::string_view s, size_t pos) {
    const auto b0 = static_cast<unsigned char>(s[pos]);
    if (b0 < 0x80) return {b0, 1, true};

    // 1) the lead byte says how many continuation bytes follow, and the range of the first one
    size_t need = 0;
    char32_t cp = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1, cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2, cp = b0 & 0x0F;
        if (b0 == 0xE0) lo = 0xA0;  // else overlong
        if (b0 == 0xED) hi = 0x9F;  // else a surrogate
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3, cp = b0 & 0x07;
        if (b0 == 0xF0) lo = 0x90;  // else overlong
        if (b0 == 0xF4) hi = 0x8F;  // else above U+10FFFF
    } else {
        return {kReplacementChar, 1, false};  // stray continuation byte, C0, C1 or F5..FF
    }

    // 2) continuation bytes; the first bad one ends the invalid sequence (it is not consumed)
    for (size_t k = 1; k <= need; k++) {
        if (pos + k >= s.size()) return {kReplacementChar, k, false};
        const auto b = static_cast<unsigned char>(s[pos + k]);
        if (b < lo || b > hi) return {kReplacementChar, k, false};
        cp = (cp << 6) | (b & 0x3F);
        lo = 0x80, hi = 0xBF;
    }
    return {cp, need + 1, true};
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacementChar;
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

std::string encode_utf8(char32_t cp) {
    std::string out;
    append_utf8(out, cp);
    return out;
}

std::u32string to_code_points(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    for (size_t pos = 0; pos < s.size();) {
        const Utf8Char c = decode_utf8(s, pos);
        out += c.cp;
        pos += c.len;
    }
    return out;
}

size_t count_code_points(std::string_view s) {
    size_t n = 0;
    for (size_t pos = 0; pos < s.size(); n++) pos += decode_utf8(s, pos).len;
    return n;
}

std::string_view first_code_points(std::string_view s, size_t n) {
    size_t pos = 0;
    for (size_t k = 0; k < n && pos < s.size(); k++) pos += decode_utf8(s, pos).len;
    return s.substr(0, pos);
}

bool valid_utf8(std::string_view s) { return first_invalid_utf8(s) == std::string_view::npos; }

size_t first_invalid_utf8(std::string_view s) {
    for (size_t pos = 0; pos < s.size();) {
        const Utf8Char c = decode_utf8(s, pos);
        if (!c.valid) return pos;
        pos += c.len;
    }
    return std::string_view::npos;
}

std::string map_code_points(std::string_view s, char32_t (*f)(char32_t)) {
    std::string out;
    out.reserve(s.size());
    for (size_t pos = 0; pos < s.size();) {
        const Utf8Char c = decode_utf8(s, pos);
        append_utf8(out, f(c.cp));
        pos += c.len;
    }
    return out;
}

std::string sanitize_utf8(std::string_view s) {
    return map_code_points(s, [](char32_t cp) { return cp; });   // decoding alone repairs
}

}  // namespace autograd::io
