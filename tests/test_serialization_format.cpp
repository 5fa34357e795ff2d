// Tests for autograd/io/: the checkpoint file formats (json.h, safetensors.h), UTF-8 (utf8.h) and
// the loaders' problem list (problems.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <grp.h>            // setgroups
#include <sys/resource.h>   // setrlimit: a file size limit makes a write fail, even for root
#include <sys/stat.h>       // umask
#include <sys/wait.h>
#include <unistd.h>

#include "autograd/io/crc32c.h"
#include "autograd/io/json.h"
#include "autograd/io/problems.h"
#include "autograd/io/safetensors.h"
#include "autograd/io/utf8.h"
#include "tests/error_of.h"

namespace fs = std::filesystem;
using autograd::io::json::Value;

// ---------------------------------------------------------------------------------------------
// helpers

namespace {

// A fresh directory under the system temp dir, removed (with its contents) at scope exit.
struct TempDir {
    fs::path path;
    TempDir() {
        static int counter = 0;
        path = fs::temp_directory_path() /
               ("nn_format_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return (path / name).string(); }
};

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    fs::remove(path);   // a fresh file, not a truncated one: ext4 flushes on truncate+rewrite
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file built by hand: u64 little-endian length, header text as given, then data.
std::vector<uint8_t> make_file(const std::string& header, const std::vector<uint8_t>& data) {
    std::vector<uint8_t> f;
    const uint64_t n = header.size();
    for (int i = 0; i < 8; i++) f.push_back(static_cast<uint8_t>(n >> (8 * i)));
    f.insert(f.end(), header.begin(), header.end());
    f.insert(f.end(), data.begin(), data.end());
    return f;
}

// Write a file with this header and data to a temp dir and load it.
autograd::io::SafetensorsFile load_built(const std::string& header, const std::vector<uint8_t>& data) {
    TempDir dir;
    const std::string path = dir.file("built.safetensors");
    write_bytes(path, make_file(header, data));
    return autograd::io::load_safetensors(path);
}

// One header entry: "name":{"dtype":"U8","shape":[2],"data_offsets":[begin,end]}.
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  int begin, int end) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
}

// A U8 tensor over data bytes [begin, end): its shape always fits its offsets.
std::string u8(const std::string& name, int begin, int end) {
    std::string shape = "[";                    // (appended, not "[" + ...: g++ 12 -O3 warns there)
    shape += std::to_string(end - begin);
    shape += "]";
    return entry(name, "U8", shape, begin, end);
}

// "{e1,e2,...}"
std::string header_of(const std::vector<std::string>& entries) {
    std::string h = "{";
    for (size_t i = 0; i < entries.size(); i++) {
        if (i) h += ',';
        h += entries[i];
    }
    return h + "}";
}

// Every name in a directory, dot files included, sorted: what a save left behind.
std::vector<std::string> files_in(const fs::path& dir) {
    std::vector<std::string> names;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

// The first tensor of a loaded file, as floats.
std::vector<float> as_f32_of(const autograd::io::SafetensorsFile& f) { return autograd::io::as_f32(f.tensors.at(0)); }

// The message of the std::runtime_error fn throws ("" if none), without the power to write where
// permissions say no: in this process when it is not root; as root (who may write anywhere) in a
// child process that first becomes user "nobody" (uid and gid 65534), the message coming back
// through a pipe. nullopt when there is no such child.
template <class Fn>
std::optional<std::string> error_without_root(Fn fn) {
    if (::geteuid() != 0) return error_of(fn);
    int fds[2];
    if (::pipe(fds) != 0) return std::nullopt;
    const pid_t child = ::fork();
    if (child == 0) {   // leaves with _exit: no doctest, no destructors in the child
        ::close(fds[0]);
        if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
        const std::string msg = error_of(fn);
        ::_exit(::write(fds[1], msg.data(), msg.size()) == static_cast<ssize_t>(msg.size()) ? 0 : 1);
    }
    ::close(fds[1]);
    std::string msg;
    char buf[256];
    for (ssize_t n; child > 0 && (n = ::read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    int status = 0;
    if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
    return msg;
}

// Check that `expr` throws a std::runtime_error whose message contains `part`.
#define CHECK_FAILS_WITH(expr, part) \
    CHECK_THROWS_WITH_AS(expr, doctest::Contains(part), std::runtime_error)

}  // namespace

// ---------------------------------------------------------------------------------------------
// JSON

TEST_CASE("json: parse reads every value type and keeps object key order") {
    Value v = autograd::io::json::parse(R"( {"z": null, "b": [true, false, -1.5e2, 0, 12],
                                   "a": {"s": "hi"}} )");
    REQUIRE(v.is_object());
    const auto& obj = v.as_object();
    REQUIRE(obj.size() == 3);
    CHECK(obj[0].first == "z");                               // insertion order, not sorted
    CHECK(obj[1].first == "b");
    CHECK(obj[2].first == "a");
    CHECK(v.find("z")->is_null());
    const auto& b = v.find("b")->as_array();
    REQUIRE(b.size() == 5);
    CHECK(b[0].as_bool() == true);
    CHECK(b[1].as_bool() == false);
    CHECK(b[2].as_number() == -150.0);
    CHECK(b[3].as_number() == 0.0);
    CHECK(b[4].as_number() == 12.0);
    CHECK(v.find("a")->find("s")->as_string() == "hi");
    CHECK(v.find("missing") == nullptr);
}

TEST_CASE("json: string escapes and \\u escapes decode to UTF-8") {
    CHECK(autograd::io::json::parse(R"("\"\\\/\b\f\n\r\t")").as_string() == "\"\\/\b\f\n\r\t");
    CHECK(autograd::io::json::parse(R"("\u0041\u00e9\u20AC")").as_string() == "A\xC3\xA9\xE2\x82\xAC");
    // U+1F600 is the surrogate pair D83D DE00 in JSON, four bytes in UTF-8
    CHECK(autograd::io::json::parse(R"("\uD83D\uDE00")").as_string() == "\xF0\x9F\x98\x80");
    CHECK(autograd::io::json::parse("\"caf\xC3\xA9\"").as_string() == "caf\xC3\xA9");  // raw UTF-8 kept
}

TEST_CASE("json: dump is compact and writes integral numbers without a decimal point") {
    using autograd::io::json::dump;
    CHECK(dump(Value(3.0)) == "3");
    CHECK(dump(Value(-7)) == "-7");
    CHECK(dump(Value(0.5)) == "0.5");
    CHECK(dump(Value(4503599627370497.0)) == "4503599627370497");     // 2^52 + 1: still integer
    CHECK(dump(Value(1e300)) == "1e+300");                             // too big for int64
    CHECK(dump(Value(0.1)) == "0.1");                                  // shortest round-trip form
    CHECK(dump(Value("a\"b\\c\n\x01")) == R"("a\"b\\c\n\u0001")");
    autograd::io::json::Object o{{"k", Value(autograd::io::json::Array{1, "x", nullptr, true})},
                       {"e", Value(autograd::io::json::Object{})}};
    CHECK(dump(Value(o)) == R"({"k":[1,"x",null,true],"e":{}})");
    CHECK_FAILS_WITH(dump(Value(std::nan(""))), "NaN");
    CHECK_FAILS_WITH(dump(Value("\xFF")), "not valid UTF-8");
}

TEST_CASE("json: parse(dump(v)) == v and dump(parse(text)) == text") {
    const char* texts[] = {
        R"({"a":[1,2.5,-0.001,1e-300,123456789012345680000],"b":{"c":"\u0000\n"},"d":[]})",
        R"([null,true,false,"","\u001f",0.3333333333333333])",
        R"("\ud83d\ude00")",
    };
    for (const char* t : texts) {
        CAPTURE(t);
        Value v = autograd::io::json::parse(t);
        CHECK(autograd::io::json::parse(autograd::io::json::dump(v)) == v);
    }
    const std::string compact = R"({"x":[1,-2,0.5,"s",{"y":null}],"z":true})";
    CHECK(autograd::io::json::dump(autograd::io::json::parse(compact)) == compact);
}

TEST_CASE("json: each malformed input gets its own message with a byte offset") {
    struct Case { std::string text, message; };
    const Case cases[] = {
        {"", "unexpected end of input at byte 0"},
        {"[1, 2] x", "trailing characters after value at byte 7"},
        {"  \"abc", "unterminated string at byte 2"},
        {"\"a\x01\"", "control character in string at byte 2"},
        {R"("a\x")", "invalid escape \\'x' at byte 2"},
        {R"("\u12G4")", "invalid \\u escape at byte 1"},
        {R"("\u12)", "invalid \\u escape at byte 1"},
        {R"("\uD800")", "lone surrogate at byte 1"},
        {R"("\uDC00")", "lone surrogate at byte 1"},
        {R"("\uD800\u0041")", "lone surrogate at byte 1"},
        {"\"\xC0\xAF\"", "invalid UTF-8 in string at byte 1"},        // overlong '/'
        {"\"\xED\xA0\x80\"", "invalid UTF-8 in string at byte 1"},    // encoded surrogate
        {"-", "invalid number at byte 0"},
        {"1.", "invalid number at byte 0"},
        {"1e+", "invalid number at byte 0"},
        {"01", "trailing characters after value at byte 1"},
        {".5", "unexpected character '.' at byte 0"},
        {"1e999", "number out of range at byte 0"},
        {"[1,]", "unexpected character ']' at byte 3"},
        {"[1 2]", "expected ',' or ']', got '2' at byte 3"},
        {"{\"a\" 1}", "expected ':' at byte 5"},
        {"{1:2}", "expected a string key at byte 1"},
        {"{\"a\":1,}", "expected a string key at byte 7"},
        {R"({"a":1,"a":2})", "duplicate key \"a\" at byte 7"},
        {"tru", "invalid literal at byte 0"},
        {"[true", "unexpected end of input at byte 5"},
        {"\xEF\xBB\xBF{}", "unexpected character byte 0xef at byte 0"},  // BOM is not JSON
    };
    for (const Case& c : cases) {
        CAPTURE(c.text);
        CHECK(error_of([&] { autograd::io::json::parse(c.text); }) == "json: " + c.message);
    }
}

TEST_CASE("json: nesting is limited, so hostile input can't overflow the stack") {
    const int max = autograd::io::json::kMaxDepth;
    std::string ok = std::string(max, '[') + std::string(max, ']');
    CHECK_NOTHROW(autograd::io::json::parse(ok));
    std::string deep = std::string(max + 1, '[') + std::string(max + 1, ']');
    CHECK(error_of([&] { autograd::io::json::parse(deep); }) ==
          "json: nesting deeper than 256 at byte " + std::to_string(max));
    std::string hostile(1'000'000, '[');                      // would crash a naive parser
    CHECK_FAILS_WITH(autograd::io::json::parse(hostile), "nesting deeper");
}

TEST_CASE("json: typed accessors reject the wrong type") {
    Value v = autograd::io::json::parse("[1]");
    CHECK_THROWS_WITH_AS(v.as_string(), "json: expected a string, got an array",
                         std::runtime_error);
    CHECK_THROWS_WITH_AS(v.as_array()[0].as_bool(), "json: expected a bool, got a number",
                         std::runtime_error);
}

// ---------------------------------------------------------------------------------------------
// safetensors

TEST_CASE("safetensors: round trip keeps names, shapes, values, metadata and order") {
    TempDir dir;
    const std::string path = dir.file("model.safetensors");
    const float w[6] = {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e-30f};
    const int32_t ids[4] = {0, -1, 2147483647, -2147483647 - 1};
    const float scalar = 42.0f;
    autograd::io::TensorRecord raw_i64{"step_counter", "I64", {2}, std::vector<uint8_t>(16)};
    for (int i = 0; i < 16; i++) raw_i64.bytes[i] = static_cast<uint8_t>(i * 17);
    // deliberately not in alphabetical order: the file must keep the order we give
    const std::vector<autograd::io::TensorRecord> saved = {
        autograd::io::f32_record("z.weight", {2, 3}, w),
        autograd::io::i32_record("a.ids", {4}, ids),
        autograd::io::f32_record("scalar", {}, &scalar),                 // 0-dim: one element
        autograd::io::f32_record("empty", {0, 5}, nullptr),              // zero elements, zero bytes
        raw_i64,
    };
    const std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "1000"}};
    autograd::io::save_safetensors(path, saved, meta);
    CHECK(files_in(dir.path) == std::vector<std::string>{"model.safetensors"});   // the temporary file was renamed

    autograd::io::SafetensorsFile f = autograd::io::load_safetensors(path);
    CHECK(f.metadata == meta);
    REQUIRE(f.tensors.size() == saved.size());
    for (size_t i = 0; i < saved.size(); i++) {
        CAPTURE(saved[i].name);
        CHECK(f.tensors[i].name == saved[i].name);
        CHECK(f.tensors[i].dtype == saved[i].dtype);
        CHECK(f.tensors[i].shape == saved[i].shape);
        CHECK(f.tensors[i].bytes == saved[i].bytes);          // bit-exact, incl. -0.0 and 1e-30
    }
    CHECK(autograd::io::as_f32(*f.find("z.weight")) == std::vector<float>(w, w + 6));
    CHECK(autograd::io::as_i32(*f.find("a.ids")) == std::vector<int32_t>(ids, ids + 4));
    CHECK(autograd::io::as_f32(*f.find("scalar")) == std::vector<float>{42.0f});
    CHECK(autograd::io::as_f32(*f.find("empty")).empty());
    CHECK(f.find("nope") == nullptr);
}

TEST_CASE("safetensors: saved bytes match the format spec exactly") {
    TempDir dir;
    const std::string path = dir.file("spec.safetensors");
    const float w[2] = {1.0f, -2.0f};
    const int32_t n[1] = {7};
    autograd::io::save_safetensors(path, {autograd::io::f32_record("w", {2}, w), autograd::io::i32_record("n", {1}, n)},
                         {{"k", "v"}});
    const std::vector<uint8_t> file = read_bytes(path);

    const std::vector<uint8_t> data = {0x00, 0x00, 0x80, 0x3F,          // 1.0f
                                       0x00, 0x00, 0x00, 0xC0,          // -2.0f
                                       0x07, 0x00, 0x00, 0x00};         // int32 7
    // The metadata gains each tensor's CRC-32C, a JSON object in a string (the metadata's keys in
    // order); the header JSON is then 184 bytes, a multiple of 8 that needs no padding.
    const std::string crc_w = autograd::io::crc32c_hex(autograd::io::crc32c(data.data(), 8));
    const std::string crc_n = autograd::io::crc32c_hex(autograd::io::crc32c(data.data() + 8, 4));
    const std::string json =
        R"({"__metadata__":{"crc32c":"{\"w\":\")" + crc_w + R"(\",\"n\":\")" + crc_n + R"(\"}","k":"v"},)"
        R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
        R"("n":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}})";
    REQUIRE(json.size() == 184);
    const std::string header = json;    // 184 = 23 * 8
    REQUIRE(file.size() == 8 + 184 + 12);
    CHECK(std::vector<uint8_t>(file.begin(), file.begin() + 8) ==
          std::vector<uint8_t>{184, 0, 0, 0, 0, 0, 0, 0});                 // u64 LE
    CHECK(std::string(file.begin() + 8, file.begin() + 8 + 184) == header);
    CHECK(std::vector<uint8_t>(file.begin() + 192, file.end()) == data);
    CHECK(file == make_file(header, data));
}

TEST_CASE("safetensors: a hand-written file loads; file order follows the data offsets") {
    // Unpadded header, extra whitespace, an unknown extra key, and header order != data order.
    const std::string header =
        R"( { "b": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6], "extra": 1},)"
        R"(   "a": {"shape": [1, 1], "dtype": "F32", "data_offsets": [0, 4]} } )";
    TempDir dir;
    const std::string path = dir.file("hand.safetensors");
    write_bytes(path, make_file(header, {0x00, 0x00, 0x20, 0x41, 9, 8}));   // 10.0f, then 9, 8
    autograd::io::SafetensorsFile f = autograd::io::load_safetensors(path);
    CHECK(f.metadata.empty());
    REQUIRE(f.tensors.size() == 2);
    CHECK(f.tensors[0].name == "a");
    CHECK(f.tensors[0].shape == std::vector<int64_t>{1, 1});
    CHECK(autograd::io::as_f32(f.tensors[0]) == std::vector<float>{10.0f});
    CHECK(f.tensors[1].name == "b");
    CHECK(f.tensors[1].bytes == std::vector<uint8_t>{9, 8});
}

TEST_CASE("safetensors: each kind of corruption gets its own message") {
    // A good file has one entry {"w": F32 [2] at [0, 8)}; each case breaks one thing.
    const std::string good = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
    const std::vector<uint8_t> data8(8, 0);
    auto w = [](const std::string& body) { return "{\"w\":{" + body + "}}"; };

    SUBCASE("sanity: the uncorrupted file loads") {
        CHECK(load_built("{" + good + "}", data8).tensors.size() == 1);
    }
    SUBCASE("bad JSON, with the parser's message") {
        CHECK_FAILS_WITH(load_built("{" + good, data8),
                         "bad JSON header: json: unexpected end of input at byte");
    }
    SUBCASE("header not an object") {
        CHECK_FAILS_WITH(load_built("[1, 2]", {}), "header is not a JSON object");
    }
    SUBCASE("duplicate names") {
        CHECK_FAILS_WITH(load_built("{" + good + "," + good + "}", data8), "duplicate key \"w\"");
        // The same name for two readings of the same 4 bytes (U8 [4] and F32 [1]): a reader that
        // keeps the first or the last entry would load either one. The format forbids duplicate
        // keys (safetensors README, "Format", notes), so both must be refused. The second "w" starts
        // at byte 53 of the header: after "{" (1 byte), the first entry (51) and "," (1).
        const std::string twice = header_of({entry("w", "U8", "[4]", 0, 4), entry("w", "F32", "[1]", 0, 4)});
        REQUIRE(twice.find(",\"w\"") + 1 == 53);
        CHECK_FAILS_WITH(load_built(twice, {0, 0, 0x80, 0x3F}),
                         "bad JSON header: json: duplicate key \"w\" at byte 53");
    }
    SUBCASE("metadata that isn't string to string") {
        CHECK_FAILS_WITH(load_built(R"({"__metadata__":{"a":1}})", {}),
                         "metadata value for key \"a\" is not a string");
        CHECK_FAILS_WITH(load_built(R"({"__metadata__":[]})", {}),
                         "\"__metadata__\" is not a JSON object");
    }
    SUBCASE("missing or mistyped fields") {
        CHECK_FAILS_WITH(load_built(R"({"w":3})", {}), "tensor \"w\": entry is not a JSON object");
        CHECK_FAILS_WITH(load_built(w(R"("shape":[2],"data_offsets":[0,8])"), data8),
                         "tensor \"w\": missing \"dtype\"");
        CHECK_FAILS_WITH(load_built(w(R"("dtype":"F32","data_offsets":[0,8])"), data8),
                         "tensor \"w\": missing \"shape\"");
        CHECK_FAILS_WITH(load_built(w(R"("dtype":"F32","shape":[2])"), data8),
                         "tensor \"w\": missing \"data_offsets\"");
        CHECK_FAILS_WITH(load_built(w(R"("dtype":5,"shape":[2],"data_offsets":[0,8])"), data8),
                         "\"dtype\" is not a string");
        CHECK_FAILS_WITH(load_built(w(R"("dtype":"F32","shape":2,"data_offsets":[0,8])"), data8),
                         "\"shape\" is not an array");
    }
    SUBCASE("unknown dtype") {
        CHECK_FAILS_WITH(load_built(w(R"("dtype":"F99","shape":[2],"data_offsets":[0,8])"), data8),
                         "tensor \"w\": unknown dtype \"F99\"");
        // dtype names are case-sensitive upper case in the format ("F32", never "f32")
        CHECK_FAILS_WITH(load_built(w(R"("dtype":"f32","shape":[2],"data_offsets":[0,8])"), data8),
                         "tensor \"w\": unknown dtype \"f32\"");
        CHECK_FAILS_WITH(load_built(w(R"("dtype":"","shape":[2],"data_offsets":[0,8])"), data8),
                         "tensor \"w\": unknown dtype \"\"");
    }
    SUBCASE("negative, fractional or overflowing shape") {
        CHECK_FAILS_WITH(load_built(w(R"("dtype":"F32","shape":[-2],"data_offsets":[0,8])"), data8),
                         "shape dimension must be a non-negative integer, got -2");
        CHECK_FAILS_WITH(load_built(w(R"("dtype":"F32","shape":[1.5],"data_offsets":[0,8])"),
                                    data8),
                         "shape dimension must be a non-negative integer, got 1.5");
        // 2^40 * 2^40 * 4 bytes overflows 64 bits: checked arithmetic must catch it
        const std::string huge = R"("dtype":"F32","shape":[1099511627776,1099511627776],)"
                                 R"("data_offsets":[0,8])";
        CHECK_FAILS_WITH(load_built(w(huge), data8), "is too large (size overflows 64 bits)");
    }
    SUBCASE("data_offsets not [begin, end] with begin <= end") {
        CHECK_FAILS_WITH(load_built(w(R"("dtype":"F32","shape":[2],"data_offsets":[0])"), data8),
                         "\"data_offsets\" must be [begin, end]");
        CHECK_FAILS_WITH(load_built(w(R"("dtype":"F32","shape":[0],"data_offsets":[8,0])"), data8),
                         "data_offsets begin 8 > end 0");
    }
    SUBCASE("offsets beyond the end of the file (truncated data)") {
        CHECK_FAILS_WITH(load_built("{" + good + "}", {0, 0, 0, 0}),
                         "tensor \"w\": data_offsets end 8 is beyond the data section (4 bytes): "
                         "truncated file?");
    }
    SUBCASE("byte size doesn't match the shape") {
        CHECK_FAILS_WITH(load_built(w(R"("dtype":"F32","shape":[3],"data_offsets":[0,8])"), data8),
                         "tensor \"w\": has 8 bytes, but shape [3] of F32 needs 12");
        // end - begin would fit the same shape in another dtype: the element size is the dtype's
        // (format spec: F16 2 bytes, I64 8, BOOL 1), not guessed from the offsets
        CHECK_FAILS_WITH(load_built(w(R"("dtype":"F16","shape":[2],"data_offsets":[0,8])"), data8),
                         "tensor \"w\": has 8 bytes, but shape [2] of F16 needs 4");
        CHECK_FAILS_WITH(load_built(w(R"("dtype":"I64","shape":[2],"data_offsets":[0,8])"), std::vector<uint8_t>(16)),
                         "tensor \"w\": has 8 bytes, but shape [2] of I64 needs 16");
        CHECK_FAILS_WITH(load_built(w(R"("dtype":"BOOL","shape":[2, 1],"data_offsets":[0,8])"), data8),
                         "tensor \"w\": has 8 bytes, but shape [2, 1] of BOOL needs 2");
        // and the right sizes load: 4 F16, 1 I64, 8 BOOL in the same 8 bytes
        CHECK(load_built(w(R"("dtype":"F16","shape":[4],"data_offsets":[0,8])"), data8).tensors.size() == 1);
        CHECK(load_built(w(R"("dtype":"I64","shape":[],"data_offsets":[0,8])"), data8).tensors.size() == 1);
        CHECK(load_built(w(R"("dtype":"BOOL","shape":[2,4],"data_offsets":[0,8])"), data8).tensors.size() == 1);
    }
}

// The reference implementation (Metadata::validate) sorts the entries by offsets and requires each
// to start where the previous one ended, and the last to end where the data section ends: no hole,
// no overlap, no byte left over, whatever order the header lists them in. Each refusal names the
// tensors and the offsets, so the entry to fix can be found in the header.
TEST_CASE("safetensors: the tensors must tile the data section: holes, overlaps, leftover bytes are refused") {
    auto load_msg = [](const std::vector<std::string>& entries, size_t data_bytes) {
        return error_of([&] { load_built(header_of(entries), std::vector<uint8_t>(data_bytes, 7)); });
    };
    auto contains = [](const std::string& msg, const std::string& part) {
        INFO("message: " << msg);
        CHECK(msg.find(part) != std::string::npos);
    };

    SUBCASE("sanity: tiled exactly, in any header order, with zero-size tensors at the joins") {
        // "z0" [0,0], "z4" [4,4] and "z7" [7,7] hold no bytes: they sit at a join (or an end)
        const autograd::io::SafetensorsFile f = load_built(
            header_of({u8("b", 4, 7), u8("z4", 4, 4), u8("a", 0, 4), u8("z0", 0, 0), u8("z7", 7, 7)}),
            {1, 2, 3, 4, 5, 6, 7});
        REQUIRE(f.tensors.size() == 5);
        std::vector<std::string> names;
        for (const auto& t : f.tensors) names.push_back(t.name);
        CHECK(names == std::vector<std::string>{"z0", "a", "z4", "b", "z7"});   // file order
        CHECK(f.find("b")->bytes == std::vector<uint8_t>{5, 6, 7});
    }
    SUBCASE("a hole between two tensors") {
        const std::string msg = load_msg({u8("a", 0, 4), u8("b", 6, 8)}, 8);
        contains(msg, "data section has a hole: bytes [4, 6) belong to no tensor");
        contains(msg, "tensor \"a\" ends at 4, tensor \"b\" starts at 6");
    }
    SUBCASE("a hole before the first tensor") {
        const std::string msg = load_msg({u8("a", 2, 6)}, 6);
        contains(msg, "data section has a hole: bytes [0, 2) belong to no tensor");
        contains(msg, "the first tensor, \"a\", starts at 2");
    }
    SUBCASE("offsets out of header order that leave a hole") {
        // listed b, c, a; in data order a [0,2), c [3,5), b [5,8): byte 2 is nobody's
        const std::string msg = load_msg({u8("b", 5, 8), u8("c", 3, 5), u8("a", 0, 2)}, 8);
        contains(msg, "bytes [2, 3) belong to no tensor");
        contains(msg, "tensor \"a\" ends at 2, tensor \"c\" starts at 3");
    }
    SUBCASE("two tensors overlapping") {
        const std::string msg = load_msg({u8("a", 0, 4), u8("b", 2, 6)}, 6);
        contains(msg, "tensor \"b\" (data_offsets [2, 6]) overlaps tensor \"a\" (data_offsets [0, 4])");
        contains(msg, "it starts at byte 2, before the other ends at 4");
    }
    SUBCASE("offsets out of header order that overlap") {
        // listed c, b, a; in data order a [0,3), b [3,6), c [5,8): c starts inside b
        const std::string msg = load_msg({u8("c", 5, 8), u8("b", 3, 6), u8("a", 0, 3)}, 8);
        contains(msg, "tensor \"c\" (data_offsets [5, 8]) overlaps tensor \"b\" (data_offsets [3, 6])");
    }
    SUBCASE("one tensor inside another, and two on the same bytes") {
        contains(load_msg({u8("a", 0, 6), u8("b", 2, 4)}, 6),
                 "tensor \"b\" (data_offsets [2, 4]) overlaps tensor \"a\" (data_offsets [0, 6])");
        // same begin: the shorter sorts first, so the longer one is the one that overlaps
        contains(load_msg({u8("a", 0, 6), u8("b", 0, 2)}, 6),
                 "tensor \"a\" (data_offsets [0, 6]) overlaps tensor \"b\" (data_offsets [0, 2])");
        contains(load_msg({u8("a", 0, 4), u8("b", 0, 4)}, 4),
                 "tensor \"b\" (data_offsets [0, 4]) overlaps tensor \"a\" (data_offsets [0, 4])");
        // a zero-size tensor strictly inside another: it would alias the other's bytes
        contains(load_msg({u8("a", 0, 4), u8("z", 2, 2)}, 4),
                 "tensor \"z\" (data_offsets [2, 2]) overlaps tensor \"a\" (data_offsets [0, 4])");
    }
    SUBCASE("bytes after the last tensor") {
        const std::string msg = load_msg({u8("a", 0, 4)}, 7);
        contains(msg, "data section has 3 trailing bytes that belong to no tensor: bytes [4, 7)");
        contains(msg, "the last tensor, \"a\", ends at 4; the data section is 7 bytes");
    }
    SUBCASE("bytes and no tensor at all") {
        const std::string msg = load_msg({}, 3);
        contains(msg, "data section has 3 trailing bytes that belong to no tensor: bytes [0, 3)");
        contains(msg, "the header lists no tensors");
    }
    SUBCASE("the message names the file") {
        TempDir dir;
        const std::string path = dir.file("holey.safetensors");
        write_bytes(path, make_file(header_of({u8("a", 1, 2)}), {0, 0}));
        CHECK(error_of([&] { autograd::io::load_safetensors(path); })
                  .rfind("load_safetensors: '" + path + "': data section has a hole", 0) == 0);
    }
}

TEST_CASE("safetensors: file-level problems name the file") {
    TempDir dir;
    const std::string path = dir.file("f.safetensors");
    auto load_msg = [&] { return error_of([&] { autograd::io::load_safetensors(path); }); };
    const std::string prefix = "load_safetensors: '" + path + "': ";

    SUBCASE("missing file") {
        // the project's part of the message; the rest is the OS's text for ENOENT, which varies
        CHECK(load_msg().rfind(prefix + "cannot open: ", 0) == 0);
    }
    SUBCASE("shorter than 8 bytes") {
        write_bytes(path, {1, 2, 3, 4, 5});
        CHECK(load_msg() == prefix + "file is 5 bytes, too short for the 8-byte header length");
    }
    SUBCASE("header length larger than the file") {
        std::vector<uint8_t> f = make_file("{}", {});
        f[0] = 200;                                           // claims 200 header bytes, has 2
        write_bytes(path, f);
        CHECK(load_msg() == prefix + "header length 200 is larger than the rest of the file "
                                     "(2 bytes): truncated file?");
    }
    SUBCASE("header length one past the end, and exactly at the end") {
        std::vector<uint8_t> f = make_file("{}", {});        // 8 + 2 bytes, no data
        f[0] = 3;                                             // one byte more than there is
        write_bytes(path, f);
        CHECK(load_msg() == prefix + "header length 3 is larger than the rest of the file "
                                     "(2 bytes): truncated file?");
        f[0] = 2;                                             // all of it: an empty data section
        write_bytes(path, f);
        CHECK(load_msg().empty());
        CHECK(autograd::io::load_safetensors(path).tensors.empty());
    }
    SUBCASE("absurd header length") {
        std::vector<uint8_t> f = make_file("{}", {});
        f[7] = 0x7F;                                          // ~9e18 bytes: mustn't allocate
        write_bytes(path, f);
        CHECK(load_msg().find("is absurd (limit 16000000 bytes)") != std::string::npos);
    }
    SUBCASE("a directory is not a file") {
        fs::create_directory(path);
        CHECK(load_msg() == prefix + "not a regular file");
    }
}

// Run under `make sanitize`, this is what shows the loader never reads out of bounds.
TEST_CASE("safetensors: any truncation or one-byte corruption loads or throws, never crashes") {
    TempDir dir;
    const std::string good = dir.file("good.safetensors"), bad = dir.file("bad.safetensors");
    const float w[3] = {1, 2, 3};
    const int32_t n[2] = {4, 5};
    autograd::io::save_safetensors(good, {autograd::io::f32_record("w", {3}, w), autograd::io::i32_record("n", {2}, n)},
                         {{"k", "v"}});
    const std::vector<uint8_t> file = read_bytes(good);

    const std::string prefix = "load_safetensors: '" + bad + "': ";
    for (size_t len = 0; len < file.size(); len++) {          // every proper prefix must fail
        write_bytes(bad, std::vector<uint8_t>(file.begin(), file.begin() + len));
        CAPTURE(len);
        CHECK_FAILS_WITH(autograd::io::load_safetensors(bad), prefix.c_str());
    }
    // Any byte, several bad values: the load either throws a runtime_error that names the loader
    // and the file, or returns records that are consistent (each one's bytes fit its dtype and
    // shape). A byte in the data section changes a value and loads; one in the header mostly throws.
    int loaded = 0, thrown = 0;
    for (size_t i = 0; i < file.size(); i++) {
        for (uint8_t v : {uint8_t(0x00), uint8_t(0xFF), uint8_t('"'), uint8_t('9')}) {
            std::vector<uint8_t> f = file;
            f[i] = v;
            write_bytes(bad, f);
            CAPTURE(i);
            CAPTURE(int(v));
            try {
                const autograd::io::SafetensorsFile got = autograd::io::load_safetensors(bad);
                loaded++;
                for (const autograd::io::TensorRecord& r : got.tensors) {
                    int64_t numel = 1;
                    for (int64_t d : r.shape) numel *= d;
                    CHECK(static_cast<int64_t>(r.bytes.size()) == numel * static_cast<int64_t>(autograd::io::dtype_size(r.dtype)));
                }
            } catch (const std::runtime_error& e) {
                thrown++;
                CHECK(std::string(e.what()).rfind(prefix, 0) == 0);
            }
        }
    }
    CHECK(loaded > 0);   // both outcomes really occur
    CHECK(thrown > 0);
}

TEST_CASE("safetensors: a failed save leaves the earlier good file intact, and no temporary file") {
    TempDir dir;
    const std::string path = dir.file("ckpt.safetensors");
    const float old_w[2] = {1, 2}, new_w[2] = {3, 4};
    autograd::io::save_safetensors(path, {autograd::io::f32_record("w", {2}, old_w)}, {{"step", "1"}});
    auto save_new = [&](const std::string& p) {
        return error_of([&] { autograd::io::save_safetensors(p, {autograd::io::f32_record("w", {2}, new_w)}, {}); });
    };
    auto old_file_intact = [&] {
        const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(path);
        CHECK(f.metadata.at("step") == "1");
        CHECK(autograd::io::as_f32(f.tensors.at(0)) == std::vector<float>{1, 2});
        CHECK(files_in(dir.path) == std::vector<std::string>{"ckpt.safetensors"});   // the temporary is gone
    };
    // the message starts with the project's part; the OS's reason (strerror) follows, and varies

    SUBCASE("the disk fills up halfway through writing (a file size limit, which binds root too)") {
        // Past RLIMIT_FSIZE write() fails with EFBIG, once SIGXFSZ (which would kill us) is ignored.
        struct rlimit saved_limit;
        REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved_limit) == 0);
        void (*saved_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
        struct rlimit small = saved_limit;
        small.rlim_cur = 100;   // bytes: the header fits, the file does not
        REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
        std::vector<float> big(1000, 5.0f);
        const std::string msg = error_of([&] { autograd::io::save_safetensors(path, {autograd::io::f32_record("w", {1000}, big.data())}, {}); });
        ::setrlimit(RLIMIT_FSIZE, &saved_limit);
        std::signal(SIGXFSZ, saved_handler);
        CHECK(msg == "save_safetensors: cannot write '" + path + "': " + std::strerror(EFBIG));
        old_file_intact();
    }
    SUBCASE("the rename fails: the path is a directory") {
        const std::string blocked = dir.file("blocked.safetensors");
        fs::create_directory(blocked);
        CHECK(save_new(blocked).rfind("save_safetensors: cannot write '" + blocked + "': cannot rename the temporary file '" +
                                      dir.file(".blocked.safetensors."), 0) == 0);
        fs::remove(blocked);
        old_file_intact();
    }
    SUBCASE("a missing directory fails the same way, before anything exists") {
        const std::string nowhere = dir.file("no/such/dir/x.safetensors");
        CHECK(save_new(nowhere) == "save_safetensors: cannot write '" + nowhere + "': cannot create a temporary file in '" +
                                       dir.file("no/such/dir") + "': " + std::strerror(ENOENT));
        old_file_intact();
    }
    SUBCASE("a stale temporary file of a killed save is never read, and never in the way") {
        write_bytes(dir.file(".ckpt.safetensors.AbC123.tmp"), {1, 2, 3});   // what a killed run leaves
        CHECK(as_f32_of(autograd::io::load_safetensors(path)) == std::vector<float>{1, 2});
        CHECK(save_new(path).empty());
        CHECK(as_f32_of(autograd::io::load_safetensors(path)) == std::vector<float>{3, 4});
        CHECK(files_in(dir.path) == std::vector<std::string>{".ckpt.safetensors.AbC123.tmp", "ckpt.safetensors"});
    }
    // And once the obstacle is gone, saving over the old file works.
    CHECK(save_new(path).empty());
    CHECK(as_f32_of(autograd::io::load_safetensors(path)) == std::vector<float>{3, 4});
}

// Only a regular file is replaced: renamed over a FIFO (or, for root, a device node such as
// /dev/full) the save would turn it into a plain file. And a FIFO given to load is refused at once,
// where open() would wait for a writer that never comes.
TEST_CASE("safetensors: a save onto a FIFO is refused and leaves it a FIFO; loading a FIFO is refused without waiting") {
    TempDir dir;
    const std::string fifo = dir.file("pipe.safetensors");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const float w[2] = {1, 2};
    CHECK(error_of([&] { autograd::io::save_safetensors(fifo, {autograd::io::f32_record("w", {2}, w)}, {}); }) ==
          "save_safetensors: cannot write '" + fifo + "': it is a FIFO (named pipe), not a regular file: only a regular file is replaced");
    struct stat st {};
    REQUIRE(::lstat(fifo.c_str(), &st) == 0);
    CHECK(S_ISFIFO(st.st_mode));
    CHECK(files_in(dir.path) == std::vector<std::string>{"pipe.safetensors"});   // no temporary either
    const std::string link = dir.file("link.safetensors");   // through a link: the same
    fs::create_symlink("pipe.safetensors", link);
    CHECK(error_of([&] { autograd::io::save_safetensors(link, {autograd::io::f32_record("w", {2}, w)}, {}); })
              .find("it is a FIFO (named pipe), not a regular file") != std::string::npos);
    // loading, in a child that an alarm ends if open() waits for a writer
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::alarm(20);
        ::_exit(error_of([&] { autograd::io::load_safetensors(fifo); }) == "load_safetensors: '" + fifo + "': not a regular file" ? 0 : 1);
    }
    int raw = 0;
    ::waitpid(pid, &raw, 0);
    CHECK((WIFEXITED(raw) && WEXITSTATUS(raw) == 0));
}

TEST_CASE("safetensors: saving into a directory we may not write fails clearly and leaves nothing behind") {
    TempDir dir;
    const std::string path = dir.file("x.safetensors");
    const float w[2] = {1, 2};
    fs::permissions(dir.path, fs::perms(0555));   // r-x for everyone
    const std::optional<std::string> msg = error_without_root([&] {
        autograd::io::save_safetensors(path, {autograd::io::f32_record("w", {2}, w)}, {});
    });
    fs::permissions(dir.path, fs::perms(0755));
    if (!msg) {
        MESSAGE("skipped: running as root, and a child process could not become user nobody to check it");
        return;
    }
    CHECK(*msg == "save_safetensors: cannot write '" + path + "': cannot create a temporary file in '" + dir.path.string() +
                      "': " + std::strerror(EACCES));
    CHECK(files_in(dir.path).empty());
}

TEST_CASE("safetensors: a new file gets the permissions of any new file, 0666 less the umask") {
    TempDir dir;
    const float w[2] = {1, 2};
    for (const mode_t mask : {mode_t(022), mode_t(077), mode_t(002), mode_t(0)}) {
        CAPTURE(mask);
        std::string name = "x";                 // (appended, not "x" + ...: g++ 12 -O3 warns there)
        name += std::to_string(mask);
        const std::string path = dir.file(name + ".safetensors");
        const mode_t saved = ::umask(mask);
        autograd::io::save_safetensors(path, {autograd::io::f32_record("w", {2}, w)}, {});
        autograd::io::save_safetensors(path, {autograd::io::f32_record("w", {2}, w)}, {});   // replacing: a new file again
        ::umask(saved);
        CHECK((fs::status(path).permissions() & fs::perms::all) == fs::perms(0666 & ~mask));
    }
}

TEST_CASE("safetensors: a save through a symbolic link replaces the file it names; the link stays a link") {
    TempDir dir;
    fs::create_directories(dir.path / "runs" / "best");
    const float old_w[2] = {1, 2}, new_w[2] = {3, 4};
    auto save = [&](const std::string& p, const float* w) {
        autograd::io::save_safetensors(p, {autograd::io::f32_record("w", {2}, w)}, {});
    };
    auto values = [](const std::string& p) { return as_f32_of(autograd::io::load_safetensors(p)); };
    const std::string real = dir.file("runs/best/model.safetensors");
    save(real, old_w);

    SUBCASE("a relative link, read from the link's directory") {
        fs::create_symlink("runs/best/model.safetensors", dir.path / "latest.safetensors");
        save(dir.file("latest.safetensors"), new_w);
        CHECK(fs::is_symlink(dir.path / "latest.safetensors"));
        CHECK(fs::read_symlink(dir.path / "latest.safetensors") == "runs/best/model.safetensors");
        CHECK(values(real) == std::vector<float>{3, 4});
        CHECK(files_in(dir.path) == std::vector<std::string>{"latest.safetensors", "runs"});   // no temporary, here
        CHECK(files_in(dir.path / "runs" / "best") == std::vector<std::string>{"model.safetensors"});   // nor there
    }
    SUBCASE("a chain of links, absolute and relative") {
        fs::create_symlink("best/model.safetensors", dir.path / "runs" / "link1");   // relative to runs/, not to the cwd
        fs::create_symlink(dir.path / "runs" / "link1", dir.path / "link2");          // absolute
        save(dir.file("link2"), new_w);
        CHECK(fs::is_symlink(dir.path / "link2"));
        CHECK(fs::is_symlink(dir.path / "runs" / "link1"));
        CHECK(values(real) == std::vector<float>{3, 4});
    }
    SUBCASE("a dangling link: the file it names is created") {
        fs::create_symlink("runs/new.safetensors", dir.path / "next.safetensors");
        save(dir.file("next.safetensors"), new_w);
        CHECK(fs::is_symlink(dir.path / "next.safetensors"));
        CHECK(values(dir.file("runs/new.safetensors")) == std::vector<float>{3, 4});
        CHECK(values(real) == std::vector<float>{1, 2});
    }
    SUBCASE("a loop of links is refused, naming the path") {
        fs::create_symlink("b", dir.path / "a");
        fs::create_symlink("a", dir.path / "b");
        CHECK(error_of([&] { save(dir.file("a"), new_w); }) ==
              "save_safetensors: cannot write '" + dir.file("a") + "': " + std::strerror(ELOOP));
        CHECK(files_in(dir.path) == std::vector<std::string>{"a", "b", "runs"});
    }
    SUBCASE("an error names the link and the file behind it") {
        fs::create_symlink("nowhere/x.safetensors", dir.path / "broken.safetensors");
        CHECK(error_of([&] { save(dir.file("broken.safetensors"), new_w); }) ==
              "save_safetensors: cannot write '" + dir.file("broken.safetensors") + "' (a symbolic link to '" +
                  dir.file("nowhere/x.safetensors") + "'): cannot create a temporary file in '" + dir.file("nowhere") + "': " +
                  std::strerror(ENOENT));
    }
}

// Two writers save to one path at once, again and again, each its own contents, while a reader
// loads it: every load, and the file at the end, must be exactly one writer's whole file. With a
// shared temporary name ("PATH.tmp") one writer truncates the other's half-written file and the
// rename publishes the mix.
namespace {
struct RacingSaves {
    TempDir dir;
    std::string path = dir.file("shared.safetensors");
    std::vector<float> a = std::vector<float>(50000, 1.0f), b = std::vector<float>(50000, 2.0f);   // 200 KB each
    void save(const std::vector<float>& w, int times) const {
        for (int i = 0; i < times; i++)
            autograd::io::save_safetensors(path, {autograd::io::f32_record("w", {50000}, w.data())}, {{"writer", w == a ? "a" : "b"}});
    }
    // true if the file at `path` is exactly a's or b's
    bool whole() const {
        const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(path);
        const std::vector<float> w = as_f32_of(f);
        return (w == a && f.metadata.at("writer") == "a") || (w == b && f.metadata.at("writer") == "b");
    }
};
}  // namespace

TEST_CASE("safetensors: two threads saving to one path each leave a whole file, and no temporary file") {
    RacingSaves race;
    race.save(race.a, 1);
    std::atomic<int> running{2};
    std::string error_a, error_b;
    std::thread ta([&] { error_a = error_of([&] { race.save(race.a, 25); }); running--; });
    std::thread tb([&] { error_b = error_of([&] { race.save(race.b, 25); }); running--; });
    int loads = 0, broken = 0;
    while (running > 0) {   // a reader meanwhile sees one whole file or the other, never a mix
        broken += !race.whole();
        loads++;
    }
    ta.join();
    tb.join();
    CHECK(error_a == "");
    CHECK(error_b == "");
    CHECK(loads > 0);
    CHECK(broken == 0);
    CHECK(race.whole());
    CHECK(files_in(race.dir.path) == std::vector<std::string>{"shared.safetensors"});
}

TEST_CASE("safetensors: two processes saving to one path each leave a whole file, and no temporary file") {
    RacingSaves race;
    race.save(race.a, 1);
    int ready[2];   // the child says "started" through a pipe, so the two loops overlap
    REQUIRE(::pipe(ready) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {   // the child saves b and leaves with _exit: no doctest, no destructors
        const bool told = ::write(ready[1], "g", 1) == 1;
        const std::string error = error_of([&] { race.save(race.b, 25); });
        ::_exit(told && error.empty() ? 0 : 1);
    }
    char go = 0;
    CHECK(::read(ready[0], &go, 1) == 1);
    ::close(ready[0]);
    ::close(ready[1]);
    const std::string error = error_of([&] { race.save(race.a, 25); });
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(error == "");
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    CHECK(race.whole());
    CHECK(files_in(race.dir.path) == std::vector<std::string>{"shared.safetensors"});
}

TEST_CASE("safetensors: save rejects invalid records before touching the disk") {
    TempDir dir;
    const std::string path = dir.file("x.safetensors");
    const float w[2] = {1, 2};
    auto save_msg = [&](std::vector<autograd::io::TensorRecord> recs) {
        return error_of([&] { autograd::io::save_safetensors(path, recs, {}); });
    };
    CHECK(save_msg({{"w", "F99", {2}, std::vector<uint8_t>(8)}}) ==
          "save_safetensors: tensor \"w\": unknown dtype 'F99'");
    CHECK(save_msg({{"w", "F32", {3}, std::vector<uint8_t>(8)}}) ==
          "save_safetensors: tensor \"w\": has 8 bytes, but shape [3] of F32 needs 12");
    CHECK(save_msg({{"w", "F32", {-1}, {}}}) ==
          "save_safetensors: tensor \"w\": invalid shape [-1]");
    CHECK(save_msg({autograd::io::f32_record("w", {2}, w), autograd::io::f32_record("w", {2}, w)}) ==
          "save_safetensors: tensor \"w\": duplicate name");
    CHECK(save_msg({autograd::io::f32_record("__metadata__", {2}, w)}) ==
          "save_safetensors: tensor \"__metadata__\": the name is reserved for metadata");
    CHECK(save_msg({autograd::io::f32_record("", {2}, w)}) == "save_safetensors: a tensor has an empty name");
    CHECK(files_in(dir.path).empty());
}

TEST_CASE("safetensors: typed helpers check the dtype") {
    const int32_t ids[2] = {1, 2};
    autograd::io::TensorRecord r = autograd::io::i32_record("ids", {2}, ids);
    CHECK(r.bytes.size() == 8);
    CHECK_THROWS_WITH_AS(autograd::io::as_f32(r), "as_f32: tensor \"ids\": dtype is I32, not F32",
                         std::runtime_error);
    CHECK_THROWS_WITH_AS(autograd::io::as_i64(r), "as_i64: tensor \"ids\": dtype is I32, not I64",
                         std::runtime_error);

    // I64 (step counts in optimizer checkpoints): 8 little-endian bytes per element
    const int64_t steps[3] = {1, -2, int64_t{1} << 40};
    const autograd::io::TensorRecord s = autograd::io::i64_record("steps", {3}, steps);
    CHECK(s.dtype == "I64");
    REQUIRE(s.bytes.size() == 24);
    CHECK(std::vector<uint8_t>(s.bytes.begin(), s.bytes.begin() + 8) == std::vector<uint8_t>{1, 0, 0, 0, 0, 0, 0, 0});
    CHECK(std::vector<uint8_t>(s.bytes.begin() + 8, s.bytes.begin() + 16) ==
          std::vector<uint8_t>{0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF});          // -2, two's complement
    CHECK(s.bytes[16 + 5] == 1);                                                          // 2^40 = byte 5 bit 0
    CHECK(autograd::io::as_i64(s) == std::vector<int64_t>(steps, steps + 3));
    CHECK(autograd::io::dtype_size("BF16") == 2);
    CHECK(autograd::io::dtype_size("F64") == 8);
    CHECK(autograd::io::dtype_size("f32") == 0);                        // names are case-sensitive
}

// ---------------------------------------------------------------------------------------------
// UTF-8

TEST_CASE("utf8: strict decoding and encoding") {
    SUBCASE("encode/decode round trip across all lengths") {
        for (char32_t cp : {U'A', U'é', U'€', U'我', U'\uFFFD', U'\U0001F355', U'\U0010FFFF'}) {
            const std::string s = autograd::io::encode_utf8(cp);
            const autograd::io::Utf8Char c = autograd::io::decode_utf8(s, 0);
            CHECK(c.valid);
            CHECK(c.cp == cp);
            CHECK(c.len == s.size());
        }
        CHECK(autograd::io::encode_utf8(0xD800) == "\uFFFD");    // a surrogate cannot be encoded
        CHECK(autograd::io::encode_utf8(0x110000) == "\uFFFD");  // beyond Unicode
    }
    SUBCASE("ill-formed sequences are rejected") {
        CHECK_FALSE(autograd::io::valid_utf8("\xC0\x80"));          // overlong NUL
        CHECK_FALSE(autograd::io::valid_utf8("\xE0\x80\xAF"));      // overlong '/'
        CHECK_FALSE(autograd::io::valid_utf8("\xED\xA0\x80"));      // surrogate U+D800
        CHECK_FALSE(autograd::io::valid_utf8("\xF4\x90\x80\x80"));  // U+110000
        CHECK_FALSE(autograd::io::valid_utf8("\x80"));              // lone continuation byte
        CHECK_FALSE(autograd::io::valid_utf8("\xE6\x88"));          // truncated
        CHECK(autograd::io::valid_utf8("plain ASCII, é, 我, 🍕"));
    }
    SUBCASE("an invalid sequence is replaced once, and the next character survives") {
        // E2 82 is the start of a 3-byte character cut short by 'A': one U+FFFD, then 'A'
        CHECK(autograd::io::sanitize_utf8("\xE2\x82" "A") == "\uFFFD" "A");
        CHECK(autograd::io::sanitize_utf8("\xFF\xFE") == "\uFFFD\uFFFD");
    }
    SUBCASE("code points: counted and cut as to_code_points sees them, never inside a character") {
        const std::string s = "a\xC3\xA9\xFF\xE6\x88" "b\U0001F355";   // a é <bad> <truncated> b 🍕
        CHECK(autograd::io::to_code_points(s) == std::u32string{U'a', U'é', 0xFFFD, 0xFFFD, U'b', U'\U0001F355'});
        CHECK(autograd::io::count_code_points(s) == 6);
        CHECK(autograd::io::count_code_points("") == 0);
        CHECK(autograd::io::first_code_points(s, 0) == "");
        CHECK(autograd::io::first_code_points(s, 2) == "a\xC3\xA9");
        CHECK(autograd::io::first_code_points(s, 4) == "a\xC3\xA9\xFF\xE6\x88");   // a bad sequence is one unit
        CHECK(autograd::io::first_code_points(s, 6) == s);
        CHECK(autograd::io::first_code_points(s, 99) == s);
        // map_code_points: one call of f per code point, and the result is encoded again
        const auto next = [](char32_t cp) -> char32_t { return cp == U'a' ? U'\U0001F355' : cp + 1; };
        CHECK(autograd::io::map_code_points(s, next) == "\U0001F355\xC3\xAA\uFFFE\uFFFE" "c\U0001F356");
    }
}

// ---------------------------------------------------------------------------------------------
// Problems: the loaders' "collect every problem, then throw" helper

TEST_CASE("Problems: nothing to report does not throw; otherwise one message lists them all") {
    autograd::io::Problems none("load: 'a' does not fit");
    CHECK(none.empty());
    CHECK_NOTHROW(none.throw_if_any());

    autograd::io::Problems one("load: 'a' does not fit");
    one.add("missing 'w'");
    CHECK_THROWS_WITH_AS(one.throw_if_any(), "load: 'a' does not fit (1 problem):\n  missing 'w'", std::runtime_error);

    autograd::io::Problems many("ctx");
    for (int i = 0; i < 12; i++) many.add(std::string(1, 'p').append(std::to_string(i)));   // not "p" + ...: GCC 12 -Wrestrict false alarm
    CHECK(many.size() == 12);
    std::string msg;
    try {
        many.throw_if_any();
    } catch (const std::runtime_error& e) {
        msg = e.what();
    }
    CHECK(msg.rfind("ctx (12 problems):\n  p0\n  p1\n", 0) == 0);
    CHECK(msg.find("\n  p9\n  ... and 2 more") != std::string::npos);   // the first 10, then a count
    CHECK(msg.find("p10") == std::string::npos);
}

// CRC-32C: the check value of the standard ("123456789" -> 0xE3069283), and in pieces the same.
TEST_CASE("crc32c: the standard's check value, and the same when computed in pieces") {
    const std::string digits = "123456789";
    CHECK(autograd::io::crc32c(digits.data(), digits.size()) == 0xE3069283u);
    CHECK(autograd::io::crc32c(digits.data() + 4, 5, autograd::io::crc32c(digits.data(), 4)) == 0xE3069283u);
    CHECK(autograd::io::crc32c_hex(0xE3069283u) == "e3069283");
    CHECK(autograd::io::crc32c(nullptr, 0) == 0u);
}

// Every file save_safetensors writes records each tensor's CRC-32C; a loader refuses a tensor
// whose bytes no longer give it, by name, and a file without checksums loads unchecked.
TEST_CASE("safetensors: each tensor's CRC-32C is recorded; a changed byte is refused naming the tensor; none: loads unchecked") {
    TempDir dir;
    const std::string path = dir.file("m.safetensors");
    const float a[3] = {1.0f, 2.0f, 3.0f}, b[2] = {4.0f, 5.0f};
    autograd::io::save_safetensors(path, {autograd::io::f32_record("a", {3}, a), autograd::io::f32_record("b", {2}, b)}, {{"k", "1"}});
    const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(path);
    CHECK(f.checksummed);
    CHECK(f.metadata == std::map<std::string, std::string>{{"k", "1"}});   // the checksums are not the caller's metadata
    std::vector<uint8_t> bytes = read_bytes(path);
    bytes[bytes.size() - 5] ^= 0x01;   // in "b": the last 8 bytes
    write_bytes(path, bytes);
    CHECK(error_of([&] { autograd::io::load_safetensors(path); }) ==
          "load_safetensors: '" + path + "': tensor \"b\" fails its CRC-32C check (the file says " +
              autograd::io::crc32c_hex(autograd::io::crc32c(b, sizeof b)) + ", its bytes give " +
              autograd::io::crc32c_hex(autograd::io::crc32c(bytes.data() + bytes.size() - 8, 8)) + "): the file is damaged");
    CHECK(error_of([&] { autograd::io::save_safetensors(path, {}, {{"crc32c", "{}"}}); }).find("'crc32c' is reserved") != std::string::npos);
    // written by hand, as before checksums: loads, and says it was not checked
    write_bytes(path, make_file(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})", {7, 8}));
    CHECK_FALSE(autograd::io::load_safetensors(path).checksummed);
}

namespace {

const char* const kChecksummedV1 = "tests/reference/checksummed_v1.safetensors";

// The fixture's header text and data section, apart.
std::pair<std::string, std::vector<uint8_t>> header_and_data(const std::vector<uint8_t>& file) {
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= static_cast<uint64_t>(file[i]) << (8 * i);
    return {std::string(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(n)),
            std::vector<uint8_t>(file.begin() + 8 + static_cast<std::ptrdiff_t>(n), file.end())};
}

// `text` with its one `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    REQUIRE(text.find(from, at + 1) == std::string::npos);
    return text.replace(at, from.size(), to);
}

}  // namespace

// A file an earlier build wrote must still load: tests/reference/checksummed_v1.safetensors is a
// checkpoint of the first format with checksums, written by hand from the format by
// tests/reference/make_checksummed_v1.py (see its header). Its tensor "w" has the checksum
// 0x0b07c051, whose text keeps its leading zero: "0b07c051" (and an empty tensor's is "00000000").
// It loads, checked, to its values; and today's save of the same tensors and metadata writes its
// very bytes, so a change of the format (the checksum's text, the header's order or padding) fails
// here the day it is made.
TEST_CASE("safetensors: a checksummed file of the first format loads to its values, and today's save writes its very bytes") {
    const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(kChecksummedV1);
    CHECK(f.checksummed);
    CHECK(f.metadata == std::map<std::string, std::string>{{"note", "checksummed_v1"}, {"step", "7"}});
    REQUIRE(f.tensors.size() == 4);
    CHECK(f.tensors[0].name == "w");
    CHECK(f.tensors[0].shape == std::vector<int64_t>{2, 3});
    CHECK(autograd::io::as_f32(f.tensors[0]) == std::vector<float>{0.5f, -1.25f, 2.0f, 3.0f, -0.125f, 0.125f});
    CHECK(f.tensors[1].name == "ids");
    CHECK(autograd::io::as_i64(f.tensors[1]) == std::vector<int64_t>{7, -1, (int64_t{1} << 40) + 3});
    CHECK(f.tensors[2].name == "flags");
    CHECK(f.tensors[2].dtype == "U8");
    CHECK(f.tensors[2].bytes == std::vector<uint8_t>{0, 1, 2, 254, 255});
    CHECK(f.tensors[3].name == "empty");
    CHECK(f.tensors[3].shape == std::vector<int64_t>{2, 0});
    CHECK(f.tensors[3].bytes.empty());
    const std::vector<uint8_t> file = read_bytes(kChecksummedV1);
    const std::string header = header_and_data(file).first;
    CHECK(autograd::io::crc32c_hex(autograd::io::crc32c(f.tensors[0].bytes.data(), 24)) == "0b07c051");
    CHECK(header.find(R"({\"w\":\"0b07c051\",\"ids\":\")") != std::string::npos);   // the leading zero kept, as the file holds it
    CHECK(header.find(R"(\"empty\":\"00000000\"})") != std::string::npos);           // no bytes: eight zeros
    TempDir dir;
    const std::string again = dir.file("again.safetensors");
    autograd::io::save_safetensors(again, f.tensors, f.metadata);
    CHECK(read_bytes(again) == file);
}

// The format defines a checksum as the text of eight lowercase hex digits, compared as text: the
// same number written another way (without its leading zero, in capitals, as a JSON number) is
// not what any build wrote, and is refused naming the tensor. So is a checksum list that names a
// tensor the file does not hold (a list copied from another file, a tensor cut out of this one).
TEST_CASE("safetensors: a checksum in another text form, or for a tensor the file lacks, is refused naming the tensor") {
    const auto [header, data] = header_and_data(read_bytes(kChecksummedV1));
    TempDir dir;
    const std::string path = dir.file("m.safetensors");
    auto load_error = [&](const std::string& h) {
        write_bytes(path, make_file(h, data));
        return error_of([&] { autograd::io::load_safetensors(path); });
    };
    REQUIRE(load_error(header).empty());   // as written, it loads
    const std::string prefix = "load_safetensors: '" + path + "': ";
    for (const char* other : {"b07c051", "0B07C051", " 0b07c051", "0x0b07c051"}) {
        CAPTURE(other);
        CHECK(load_error(replaced(header, R"(\"w\":\"0b07c051\")", std::string(R"(\"w\":\")") + other + R"(\")")) ==
              prefix + "tensor \"w\" fails its CRC-32C check (the file says " + other + ", its bytes give 0b07c051): the file is damaged");
    }
    CHECK(load_error(replaced(header, R"(\"w\":\"0b07c051\")", R"(\"w\":185057361)")) ==
          prefix + "tensor \"w\" has no checksum in metadata 'crc32c'");   // 0x0b07c051 as a number
    // one more checksum, for a tensor "ghost" the file does not hold; and "ids" cut out of the file
    // (its header entry gone, the data after it moved up) with its checksum left in the list
    CHECK(load_error(replaced(header, R"(\"empty\":\"00000000\"})", R"(\"empty\":\"00000000\",\"ghost\":\"00000000\"})")) ==
          prefix + "metadata 'crc32c' names tensor \"ghost\", which the file does not hold");
    std::string cut = replaced(header, R"("ids":{"dtype":"I64","shape":[3],"data_offsets":[24,48]},)", "");
    cut = replaced(cut, R"("data_offsets":[48,53])", R"("data_offsets":[24,29])");
    cut = replaced(cut, R"("data_offsets":[53,53])", R"("data_offsets":[29,29])");
    std::vector<uint8_t> without_ids(data.begin(), data.begin() + 24);
    without_ids.insert(without_ids.end(), data.begin() + 48, data.end());
    write_bytes(path, make_file(cut, without_ids));
    CHECK(error_of([&] { autograd::io::load_safetensors(path); }) ==
          prefix + "metadata 'crc32c' names tensor \"ids\", which the file does not hold");
}
