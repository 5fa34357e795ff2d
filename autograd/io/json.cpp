// JSON parser and writer: see json.h for the contract.
#include "autograd/io/json.h"

#include "autograd/io/utf8.h"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <unordered_set>

namespace autograd::io::json {

// ---------------------------------------------------------------------------------------------
// Value accessors

static const char* type_name(Type t) {
    switch (t) {
        case Type::Null: return "null";
        case Type::Bool: return "a bool";
        case Type::Number: return "a number";
        case Type::String: return "a string";
        case Type::Array: return "an array";
        case Type::Object: return "an object";
    }
    return "?";
}

// Throws "json: expected a string, got a number" unless `have` is `want`.
static void check_type(Type have, Type want) {
    if (have != want)
        throw std::runtime_error(std::string("json: expected ") + type_name(want) + ", got " +
                                 type_name(have));
}

bool Value::as_bool() const { check_type(type_, Type::Bool); return bool_; }
double Value::as_number() const { check_type(type_, Type::Number); return number_; }
const std::string& Value::as_string() const { check_type(type_, Type::String); return string_; }
const Array& Value::as_array() const { check_type(type_, Type::Array); return array_; }
Array& Value::as_array() { check_type(type_, Type::Array); return array_; }
const Object& Value::as_object() const { check_type(type_, Type::Object); return object_; }
Object& Value::as_object() { check_type(type_, Type::Object); return object_; }

const Value* Value::find(std::string_view key) const {
    if (type_ != Type::Object) return nullptr;
    for (const auto& [k, v] : object_)
        if (k == key) return &v;
    return nullptr;
}

void Value::set(std::string key, Value v) {
    check_type(type_, Type::Object);
    for (auto& [k, old] : object_)
        if (k == key) { old = std::move(v); return; }
    object_.emplace_back(std::move(key), std::move(v));
}

// Equal type and equal contents; objects compare in order (they keep insertion order).
bool operator==(const Value& a, const Value& b) {
    if (a.type_ != b.type_) return false;
    switch (a.type_) {
        case Type::Null: return true;
        case Type::Bool: return a.bool_ == b.bool_;
        case Type::Number: return a.number_ == b.number_;
        case Type::String: return a.string_ == b.string_;
        case Type::Array: return a.array_ == b.array_;
        case Type::Object: return a.object_ == b.object_;
    }
    return false;
}

// ---------------------------------------------------------------------------------------------
// Parser: recursive descent, one function per grammar rule.

[[noreturn]] static void fail(const std::string& what, size_t at) {
    throw std::runtime_error("json: " + what + " at byte " + std::to_string(at));
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

// "'x'" for printable ASCII, "byte 0x1f" otherwise, so messages never contain raw binary.
static std::string describe(char c) {
    const unsigned char u = c;
    if (u >= 0x20 && u < 0x7F) return std::string("'") + c + "'";
    const char* hex = "0123456789abcdef";
    return std::string("byte 0x") + hex[u >> 4] + hex[u & 15];
}

namespace {
struct Parser {
    std::string_view text;
    size_t pos = 0;
    int depth = 0;                                            // current array/object nesting

    bool at_end() const { return pos >= text.size(); }

    void skip_ws() {
        while (!at_end() && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' ||
                             text[pos] == '\r'))
            pos++;
    }

    Value parse_value();
    Value parse_literal(std::string_view word, Value v);
    Value parse_number();
    std::string parse_string();
    void parse_escape(std::string& out, size_t string_start);
    unsigned parse_hex4(size_t escape_start);
    Value parse_array();
    Value parse_object();
    void enter_nesting();
    // After an array element or object member: consume ',' (returns true) or `close` (false).
    bool comma_or_close(char close);
};
}  // namespace

Value Parser::parse_value() {
    skip_ws();
    if (at_end()) fail("unexpected end of input", pos);
    const char c = text[pos];
    switch (c) {
        case '{': return parse_object();
        case '[': return parse_array();
        case '"': return Value(parse_string());
        case 't': return parse_literal("true", Value(true));
        case 'f': return parse_literal("false", Value(false));
        case 'n': return parse_literal("null", Value());
        default:
            if (c == '-' || is_digit(c)) return parse_number();
            fail("unexpected character " + describe(c), pos);
    }
}

Value Parser::parse_literal(std::string_view word, Value v) {
    if (text.substr(pos, word.size()) != word) fail("invalid literal", pos);
    pos += word.size();
    return v;
}

// number = [ '-' ] ( '0' | [1-9][0-9]* ) [ '.' [0-9]+ ] [ ('e'|'E') ['+'|'-'] [0-9]+ ]
// We check this grammar by hand (from_chars alone would accept "inf", "1." or leading zeros),
// then let from_chars do the correctly rounded, locale-independent conversion.
Value Parser::parse_number() {
    const size_t start = pos;
    auto digits = [&] {                                       // one or more digits
        if (at_end() || !is_digit(text[pos])) fail("invalid number", start);
        while (!at_end() && is_digit(text[pos])) pos++;
    };
    if (text[pos] == '-') pos++;
    if (!at_end() && text[pos] == '0') pos++;                 // a leading 0 stands alone
    else digits();
    if (!at_end() && text[pos] == '.') { pos++; digits(); }
    if (!at_end() && (text[pos] == 'e' || text[pos] == 'E')) {
        pos++;
        if (!at_end() && (text[pos] == '+' || text[pos] == '-')) pos++;
        digits();
    }
    double x = 0.0;
    const char* first = text.data() + start;
    const char* last = text.data() + pos;
    auto [end, ec] = std::from_chars(first, last, x);
    if (ec == std::errc::result_out_of_range) fail("number out of range", start);
    if (ec != std::errc() || end != last) fail("invalid number", start);
    return Value(x);
}

// The string starts at the opening quote; raw bytes must be valid UTF-8 and not control chars.
std::string Parser::parse_string() {
    const size_t start = pos++;                               // skip the opening quote
    std::string out;
    while (true) {
        if (at_end()) fail("unterminated string", start);
        const unsigned char c = text[pos];
        if (c == '"') { pos++; return out; }
        if (c == '\\') { parse_escape(out, start); continue; }
        if (c < 0x20) fail("control character in string", pos);
        if (c < 0x80) { out += static_cast<char>(c); pos++; continue; }
        const Utf8Char u = decode_utf8(text, pos);
        if (!u.valid) fail("invalid UTF-8 in string", pos);
        out.append(text.substr(pos, u.len));
        pos += u.len;
    }
}

// One escape, starting at the backslash. \uD83D\uDE00 (a surrogate pair) becomes one code point.
void Parser::parse_escape(std::string& out, size_t string_start) {
    const size_t at = pos++;                                  // skip the backslash
    if (at_end()) fail("unterminated string", string_start);
    const char e = text[pos++];
    switch (e) {
        case '"': case '\\': case '/': out += e; return;
        case 'b': out += '\b'; return;
        case 'f': out += '\f'; return;
        case 'n': out += '\n'; return;
        case 'r': out += '\r'; return;
        case 't': out += '\t'; return;
        case 'u': break;
        default: fail("invalid escape \\" + describe(e), at);
    }
    unsigned cp = parse_hex4(at);
    if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone surrogate", at);     // low half with no high
    if (cp >= 0xD800 && cp <= 0xDBFF) {                               // high half: need a low
        if (text.substr(pos, 2) != "\\u") fail("lone surrogate", at);
        const size_t low_at = pos;
        pos += 2;
        const unsigned low = parse_hex4(low_at);
        if (low < 0xDC00 || low > 0xDFFF) fail("lone surrogate", at);
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, cp);
}

// The four hex digits after "\u".
unsigned Parser::parse_hex4(size_t escape_start) {
    if (pos + 4 > text.size()) fail("invalid \\u escape", escape_start);
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        const char h = text[pos++];
        int d;
        if (is_digit(h)) d = h - '0';
        else if (h >= 'a' && h <= 'f') d = h - 'a' + 10;
        else if (h >= 'A' && h <= 'F') d = h - 'A' + 10;
        else fail("invalid \\u escape", escape_start);
        v = v * 16 + static_cast<unsigned>(d);
    }
    return v;
}

void Parser::enter_nesting() {
    if (++depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth), pos);
}

bool Parser::comma_or_close(char close) {
    skip_ws();
    if (at_end()) fail("unexpected end of input", pos);
    const char c = text[pos++];
    if (c == ',') return true;
    if (c == close) return false;
    fail(std::string("expected ',' or '") + close + "', got " + describe(c), pos - 1);
}

Value Parser::parse_array() {
    enter_nesting();
    pos++;                                                    // skip '['
    Array items;
    skip_ws();
    if (!at_end() && text[pos] == ']') pos++;                 // empty array
    else
        do items.push_back(parse_value());
        while (comma_or_close(']'));
    depth--;
    return Value(std::move(items));
}

Value Parser::parse_object() {
    enter_nesting();
    pos++;                                                    // skip '{'
    Object members;
    std::unordered_set<std::string> seen;                     // so duplicate checks stay O(1)
    skip_ws();
    if (!at_end() && text[pos] == '}') pos++;                 // empty object
    else
        do {
            skip_ws();
            if (at_end() || text[pos] != '"') fail("expected a string key", pos);
            const size_t key_at = pos;
            std::string key = parse_string();
            if (!seen.insert(key).second) fail("duplicate key \"" + key + "\"", key_at);
            skip_ws();
            if (at_end() || text[pos] != ':') fail("expected ':'", pos);
            pos++;
            Value v = parse_value();
            members.emplace_back(std::move(key), std::move(v));
        } while (comma_or_close('}'));
    depth--;
    return Value(std::move(members));
}

Value parse(std::string_view text) {
    Parser p{text};
    Value v = p.parse_value();
    p.skip_ws();
    if (!p.at_end()) fail("trailing characters after value", p.pos);
    return v;
}

// ---------------------------------------------------------------------------------------------
// Writer

static void write_string(std::string& out, std::string_view s) {
    static const char* hex = "0123456789abcdef";
    if (!valid_utf8(s))
        throw std::runtime_error("json: cannot write a string that is not valid UTF-8");
    out += '"';
    for (const char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {   // other control chars: \u00XX
                    out += "\\u00";
                    out += hex[c >> 4];
                    out += hex[c & 15];
                } else {
                    out += c;                                 // bytes >= 0x80 pass through
                }
        }
    }
    out += '"';
}

static void write_number(std::string& out, double x) {
    if (!std::isfinite(x)) throw std::runtime_error("json: cannot write NaN or infinity");
    // Integers below 2^53 are exact in a double; print them as integers, since readers such as
    // serde's u64 reject "3.0" or "1e+15" where an integer offset is expected.
    if (x == std::floor(x) && std::fabs(x) < 9007199254740992.0) {
        if (x == 0 && std::signbit(x)) out += "-0";
        else out += std::to_string(static_cast<long long>(x));
        return;
    }
    char buf[32];                                             // shortest round-trip form
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
    out.append(buf, end);
}

static void write_value(std::string& out, const Value& v) {
    switch (v.type()) {
        case Type::Null: out += "null"; break;
        case Type::Bool: out += v.as_bool() ? "true" : "false"; break;
        case Type::Number: write_number(out, v.as_number()); break;
        case Type::String: write_string(out, v.as_string()); break;
        case Type::Array: {
            out += '[';
            bool first = true;
            for (const Value& item : v.as_array()) {
                if (!first) out += ',';
                first = false;
                write_value(out, item);
            }
            out += ']';
            break;
        }
        case Type::Object: {
            out += '{';
            bool first = true;
            for (const auto& [key, item] : v.as_object()) {
                if (!first) out += ',';
                first = false;
                write_string(out, key);
                out += ':';
                write_value(out, item);
            }
            out += '}';
            break;
        }
    }
}

std::string dump(const Value& v) {
    std::string out;
    write_value(out, v);
    return out;
}

}  // namespace autograd::io::json
