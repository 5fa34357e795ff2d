// A small, strict JSON value type with a parser and a compact writer.
//
// Used for checkpoint headers (autograd/io/safetensors.h), so it favours clear error messages and safety on
// hostile input over speed: every parse error is a std::runtime_error that names the byte offset,
// e.g. "json: unterminated string at byte 57".
//
//   json::Value v = json::parse(R"({"dtype": "F32", "shape": [2, 3]})");
//   v.find("shape")->as_array()[1].as_number();    // 3
//   json::dump(v);                                 // {"dtype":"F32","shape":[2,3]}
#pragma once

#include <concepts>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace autograd::io::json {

enum class Type { Null, Bool, Number, String, Array, Object };

class Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;  // insertion order is kept

// One JSON value. Only the member matching type() is meaningful; the others stay empty.
class Value {
public:
    Value() = default;                                        // null
    Value(std::nullptr_t) {}                                  // null
    Value(bool b) : type_(Type::Bool), bool_(b) {}
    // any int, size_t, float or double; a template so Value(3) isn't ambiguous with Value(bool)
    template <class T>
        requires(std::is_arithmetic_v<T> && !std::same_as<T, bool>)
    Value(T x) : type_(Type::Number), number_(static_cast<double>(x)) {}
    Value(const char* s) : type_(Type::String), string_(s) {}
    Value(std::string s) : type_(Type::String), string_(std::move(s)) {}
    Value(std::string_view s) : type_(Type::String), string_(s) {}
    Value(Array a) : type_(Type::Array), array_(std::move(a)) {}
    Value(Object o) : type_(Type::Object), object_(std::move(o)) {}

    Type type() const { return type_; }
    bool is_null() const { return type_ == Type::Null; }
    bool is_bool() const { return type_ == Type::Bool; }
    bool is_number() const { return type_ == Type::Number; }
    bool is_string() const { return type_ == Type::String; }
    bool is_array() const { return type_ == Type::Array; }
    bool is_object() const { return type_ == Type::Object; }

    // Typed access; each throws std::runtime_error ("json: expected a string, got a number")
    // when the value holds another type.
    bool as_bool() const;
    double as_number() const;
    const std::string& as_string() const;
    const Array& as_array() const;
    Array& as_array();
    const Object& as_object() const;
    Object& as_object();

    // Object lookup by key: nullptr when absent (or when this is not an object). Linear scan:
    // objects in checkpoint headers are small, and a scan keeps insertion order trivially.
    const Value* find(std::string_view key) const;
    // Object insert-or-replace; a new key goes to the end. Throws if this is not an object.
    void set(std::string key, Value v);

    friend bool operator==(const Value& a, const Value& b);

private:
    Type type_ = Type::Null;
    bool bool_ = false;
    double number_ = 0.0;
    std::string string_;
    Array array_;
    Object object_;
};

// Deepest nesting of arrays/objects the parser accepts. The parser recurses once per level, so
// this bound is what keeps "[[[[[[..." from overflowing the stack.
constexpr int kMaxDepth = 256;

// Parse one complete JSON text (RFC 8259): surrounding whitespace is allowed, anything else after
// the value is an error. Strings must be valid UTF-8; \uXXXX escapes (incl. surrogate pairs) are
// decoded to UTF-8. Duplicate object keys are rejected. Numbers outside the range of a double
// (e.g. 1e999, 1e-999) are rejected rather than silently rounded to inf or 0.
Value parse(std::string_view text);

// Compact text, no whitespace. Strings must be valid UTF-8 (throws otherwise: check with
// valid_utf8, autograd/io/utf8.h), so dump never writes text that parse would reject; control
// characters, '"' and '\\' are escaped.
// Integral numbers with |x| < 2^53 print without a decimal point ("3", not "3.0"); others print
// in the shortest form that parses back to the same double. Throws on NaN or infinity, which
// JSON cannot represent.
std::string dump(const Value& v);

}  // namespace autograd::io::json
