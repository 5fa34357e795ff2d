// Word-level tokenizer for the translation example, and the code point classes it uses. UTF-8
// itself (decoding, validation, U+FFFD repair) is autograd/io/utf8.h.
//
// tokenize("L'homme n'a pas dit « non » !", false)
//     -> {"L'", "homme", "n'", "a", "pas", "dit", "«", "non", "»", "!"}
// detokenize({"Hello", ",", "world", "!"}) -> "Hello, world!"
//
// Rules of tokenize(), in the order they are checked for each code point:
//   1. whitespace (ASCII, NBSP U+00A0, U+2000..U+200A, narrow NBSP U+202F, ideographic space, ...)
//      ends the current word and is dropped; so are zero-width space and a stray BOM.
//   2. each CJK ideograph (and each kana) is a token of its own: those scripts have no spaces.
//   3. punctuation (ASCII !"#$%&'()*+,-./:;<=>?@[\]^`{|}~ and Unicode ¡ ¿ « » – — ‘ ’ “ ” … 。...)
//      is a token of its own, except inside a word:
//        - hyphen, slash, '&' and '@' between two word characters: "well-known", "and/or", "AT&T"
//        - '.' ',' ':' between two digits: "3.5", "1,000", "10:30"; '.' between two letters: "U.S"
//        - an apostrophe (' or ’) between two word characters:
//            after a French elided clitic (l d j m n s t c qu jusqu lorsqu puisqu quoiqu presqu)
//            the word is split after the apostrophe: "l'homme" -> "l'" "homme", "qu'il" -> "qu'" "il";
//            anywhere else the word stays whole: "don't", "it's", "aujourd'hui", "o'clock".
//        An apostrophe at the start or end of a word is a quote and becomes its own token.
//   4. everything else (letters, digits, '_', marks, emoji, ...) belongs to the current word.
// Invalid UTF-8 bytes become U+FFFD first, so tokens are always valid UTF-8.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace data {

// ---- code points ----------------------------------------------------------------------------

// Lowercase by code point: ASCII, Latin-1 Supplement (É -> é, Ä -> ä), Latin Extended-A
// (Ł -> ł, Œ -> œ, Ÿ -> ÿ), basic Greek and Cyrillic. Anything else is returned unchanged.
char32_t to_lower(char32_t cp);
std::string to_lower_utf8(std::string_view s);   // to_lower on each code point; bad bytes -> U+FFFD

// Code point classes used by tokenize().
bool is_space(char32_t cp);        // separates words and is dropped
bool is_punctuation(char32_t cp);  // split off words (see the rules above)
bool is_cjk(char32_t cp);          // one token per character

// ---- tokenizer ------------------------------------------------------------------------------

// Splits text into words and punctuation, following the rules at the top of this file.
std::vector<std::string> tokenize(std::string_view text, bool lowercase = false);

// Joins tokens into a readable sentence: a space between tokens, except
//   - none before . , ! ? ; : ) ] } % … ” ’ and CJK full stops/commas,
//   - none after ( [ { ¿ ¡ “ ‘ „ $ # and after an elided clitic such as "l'" or "qu'",
//   - straight quotes " and ' alternate: an opening one sticks to the next token, a closing one
//     to the previous token,
//   - none between two CJK tokens.
// French « » keep their spaces. detokenize(tokenize(s)) == s for normally spaced English text.
std::string detokenize(const std::vector<std::string>& tokens);

}  // namespace data
