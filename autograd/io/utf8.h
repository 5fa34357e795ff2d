// UTF-8, strictly: the one place in the project that decodes, validates, encodes and repairs it.
// Used by the checkpoint JSON header (autograd/io/json.cpp), the tokenizer, vocabulary, TSV reader
// and BLEU (examples/data), and the SVG, terminal and progress writers (examples/common).
//
//   valid_utf8("caf\xC3\xA9")                true
//   sanitize_utf8("a\xFFb")                   "a\uFFFDb": each ill-formed sequence becomes one U+FFFD
//   to_code_points("\xC3\xA9t\xC3\xA9")       U"été"
//   first_code_points("été", 2)              "ét" (3 bytes): cuts between characters, never inside one
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace autograd::io {

inline constexpr char32_t kReplacementChar = 0xFFFD;  // what an invalid byte sequence becomes

// One decoded code point. len >= 1 always, so `pos += c.len` makes progress on any input.
struct Utf8Char {
    char32_t cp;  // the code point, or kReplacementChar when !valid
    size_t len;   // bytes consumed
    bool valid;   // false: the bytes at pos were not well-formed UTF-8
};

// Decodes the code point starting at s[pos] (requires pos < s.size()). Strict: overlong forms,
// surrogates and values above U+10FFFF are invalid. An invalid sequence consumes its longest
// well-formed-looking prefix (at least one byte), as the Unicode standard recommends.
Utf8Char decode_utf8(std::string_view s, size_t pos);

// Appends cp as UTF-8. Surrogates and values above U+10FFFF are written as U+FFFD.
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(char32_t cp);

// The code points of s, in order; each ill-formed sequence becomes one kReplacementChar.
std::u32string to_code_points(std::string_view s);
// How many code points s holds, counted as to_code_points counts them (without building them).
size_t count_code_points(std::string_view s);
// The bytes of s's first n code points (all of s when it has fewer).
std::string_view first_code_points(std::string_view s, size_t n);

bool valid_utf8(std::string_view s);                  // well-formed: decode_utf8 finds nothing invalid
size_t first_invalid_utf8(std::string_view s);        // the byte offset of the first ill-formed sequence, or npos
std::string sanitize_utf8(std::string_view s);        // valid UTF-8: ill-formed sequences -> U+FFFD

// Each code point of s (U+FFFD for an ill-formed sequence) replaced by f(code point), encoded
// again: always valid UTF-8. E.g. map_code_points(s, data::to_lower) lowercases.
std::string map_code_points(std::string_view s, char32_t (*f)(char32_t));

}  // namespace autograd::io
