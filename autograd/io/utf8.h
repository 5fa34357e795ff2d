// UTF-8, strictly: decoding with validation, encoding, and repair. Used by the checkpoint JSON
// header (autograd/io/json.cpp), the tokenizer (examples/data) and the SVG writers (examples/common).
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

bool valid_utf8(std::string_view s);
std::string sanitize_utf8(std::string_view s);        // invalid sequences -> U+FFFD
}  // namespace autograd::io
