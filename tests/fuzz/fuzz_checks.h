// The checks behind the fuzz targets in tests/fuzz/ and the replay test in
// tests/test_fuzz_regressions.cpp: one function per parser of untrusted input, taking raw bytes.
//
//   check_json_bytes(data, size)         autograd::io::json::parse, then dump/parse round trip
//   check_safetensors_bytes(data, size)  autograd::io::load_safetensors on the bytes as a file, twice:
//                                        as-is, and as "header JSON \0 data" with the length made up
//   check_tsv_bytes(data, size)          data::parse_tsv against a small reference of its line rules
//   check_tokenizer_bytes(data, size)    autograd/io/utf8.h, tokenize/detokenize, Vocab, corpus_bleu
//
// Each one calls the API, lets the exceptions the API documents through (runtime_error,
// invalid_argument, out_of_range: they are how a parser says "bad input"), and checks what the
// API promises about its result. A broken promise calls FUZZ_CHECK_FAILED: by default it prints
// the condition and traps, so libFuzzer saves the input; the replay test defines it to throw
// fuzz::CheckFailure instead, so one bad input fails one test and not the whole run. Any other
// exception type (std::length_error, std::bad_alloc, ...) is left to escape: that is a bug too.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>  // getpid: one temp file per process, so parallel runs don't collide

#include "examples/data/bleu.h"
#include "examples/data/tokenizer.h"
#include "examples/data/tsv.h"
#include "examples/data/vocab.h"
#include "autograd/io/json.h"
#include "autograd/io/safetensors.h"
#include "autograd/io/utf8.h"

namespace fuzz {

// Thrown by the replay test's FUZZ_CHECK_FAILED. Deliberately not derived from runtime_error or
// logic_error, so the `catch` blocks below that accept the API's own errors never swallow it.
struct CheckFailure : std::exception {
    std::string what_;
    explicit CheckFailure(std::string w) : what_(std::move(w)) {}
    const char* what() const noexcept override { return what_.c_str(); }
};

}  // namespace fuzz

#ifndef FUZZ_CHECK_FAILED
#define FUZZ_CHECK_FAILED(text)                                                          \
    (std::fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", text, __FILE__, __LINE__), \
     std::fflush(stderr), __builtin_trap())
#endif

// FUZZ_CHECK(cond): cond is a promise of the API; its failure is a bug.
#define FUZZ_CHECK(cond) ((cond) ? (void)0 : (void)FUZZ_CHECK_FAILED(#cond))

namespace fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

inline bool starts_with(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
}

// Splits on '\n' exactly: "a\n\nb" -> {"a", "", "b"}; "" -> {""}.
inline std::vector<std::string> split_lines(std::string_view s) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (true) {
        const size_t nl = s.find('\n', pos);
        if (nl == std::string_view::npos) {
            out.emplace_back(s.substr(pos));
            return out;
        }
        out.emplace_back(s.substr(pos, nl - pos));
        pos = nl + 1;
    }
}

// ---- autograd::io::json ---------------------------------------------------------------------------------

// parse(text) either throws "json: <what> at byte <N>" with N <= text.size(), or returns a value
// that dump() can write and that parses back equal, with dump() a fixed point.
inline void check_json_text(std::string_view text) {
    namespace json = autograd::io::json;
    json::Value v;
    try {
        v = json::parse(text);
    } catch (const std::runtime_error& e) {
        const std::string_view msg = e.what();
        FUZZ_CHECK(starts_with(msg, "json: "));
        const size_t at = msg.rfind(" at byte ");
        FUZZ_CHECK(at != std::string_view::npos);
        const std::string_view num = msg.substr(at + 9);
        FUZZ_CHECK(!num.empty() && num.size() <= 20 &&
                   std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; }));
        FUZZ_CHECK(std::stoull(std::string(num)) <= text.size());
        return;
    }
    // Outside strings JSON is ASCII, inside them the parser demands valid UTF-8: so must the text.
    FUZZ_CHECK(autograd::io::valid_utf8(text));
    const std::string once = json::dump(v);  // must not throw: parse never makes NaN or bad UTF-8
    const json::Value back = json::parse(once);
    FUZZ_CHECK(back == v);
    FUZZ_CHECK(json::dump(back) == once);
}

inline void check_json_bytes(const uint8_t* data, size_t size) { check_json_text(as_text(data, size)); }

// ---- autograd::io::load_safetensors -----------------------------------------------------------------------

// Where the target writes its input: $FUZZ_TMPDIR, else /dev/shm (RAM, so the fsyncs of the
// round trip cost nothing), else the system temp dir. One name per process.
inline std::filesystem::path safetensors_temp_path(const char* suffix) {
    namespace fs = std::filesystem;
    static const fs::path dir = [] {
        if (const char* d = std::getenv("FUZZ_TMPDIR"); d && *d) return fs::path(d);
        std::error_code ec;
        if (fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0) return fs::path("/dev/shm");
        return fs::temp_directory_path();
    }();
    return dir / ("fuzz_safetensors_" + std::to_string(::getpid()) + suffix);
}

inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) throw std::runtime_error("fuzz: cannot write " + path.string());  // environment, not a bug
    const size_t n = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
    const bool ok = std::fclose(f) == 0 && n == bytes.size();
    if (!ok) throw std::runtime_error("fuzz: short write to " + path.string());
}

// Removes the temp files however the check ends (including a thrown CheckFailure).
struct TempFiles {
    std::vector<std::filesystem::path> paths;
    ~TempFiles() {
        std::error_code ec;
        for (const auto& p : paths) std::filesystem::remove(p, ec);
    }
};

inline bool same_records(const autograd::io::TensorRecord& a, const autograd::io::TensorRecord& b) {
    return a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.bytes == b.bytes;
}

// `file` is the complete content of a would-be safetensors file.
inline void check_safetensors_file(std::string_view file) {
    const std::filesystem::path path = safetensors_temp_path(".in");
    const std::filesystem::path again = safetensors_temp_path(".rt");
    TempFiles cleanup{{path, again}};   // a failed save removes its own temporary file
    write_file(path, file);

    // 1) load: either a runtime_error with the documented prefix, or a file we can check
    autograd::io::SafetensorsFile f;
    try {
        f = autograd::io::load_safetensors(path.string());
    } catch (const std::runtime_error& e) {
        FUZZ_CHECK(starts_with(e.what(), "load_safetensors: '" + path.string() + "': "));
        return;
    }

    // 2) what a successful load promises
    FUZZ_CHECK(file.size() >= 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | static_cast<uint8_t>(file[i]);
    FUZZ_CHECK(n <= file.size() - 8);
    const std::string_view header = file.substr(8, n), data_section = file.substr(8 + n);
    FUZZ_CHECK(autograd::io::json::parse(header).is_object());  // must not throw either
    std::set<std::string> names;
    std::string concatenated;  // tensors come in file order and tile the data section exactly
    for (const autograd::io::TensorRecord& t : f.tensors) {
        const size_t elem = autograd::io::dtype_size(t.dtype);
        FUZZ_CHECK(elem > 0);
        // product(shape) * elem == bytes.size(), computed without overflow: bytes.size() is small
        long double count = elem;
        for (int64_t d : t.shape) {
            FUZZ_CHECK(d >= 0);
            count *= static_cast<long double>(d);
        }
        FUZZ_CHECK(count == static_cast<long double>(t.bytes.size()));
        FUZZ_CHECK(t.name != "__metadata__");
        FUZZ_CHECK(names.insert(t.name).second);
        FUZZ_CHECK(f.find(t.name) == &t);
        concatenated.append(t.bytes.begin(), t.bytes.end());
    }
    FUZZ_CHECK(concatenated == data_section);
    for (const auto& [key, value] : f.metadata)
        FUZZ_CHECK(autograd::io::valid_utf8(key) && autograd::io::valid_utf8(value));

    // 3) round trip: what load accepts, save writes back and load reads back the same.
    //    Known gap (reported): load accepts a tensor named "" that save refuses; skip those.

    autograd::io::save_safetensors(again.string(), f.tensors, f.metadata);  // must not throw
    const autograd::io::SafetensorsFile g = autograd::io::load_safetensors(again.string());
    FUZZ_CHECK(g.metadata == f.metadata);
    FUZZ_CHECK(g.tensors.size() == f.tensors.size());
    for (size_t i = 0; i < f.tensors.size() && i < g.tensors.size(); i++)
        FUZZ_CHECK(same_records(f.tensors[i], g.tensors[i]));
}

// Two readings of the same bytes:
//   a) the bytes are the whole file, length prefix included (what a real file looks like);
//   b) "header JSON \0 data": the bytes before the first NUL are the header (JSON never contains
//      a raw NUL), the rest is the data, and the 8-byte length is written for them. Mutations
//      then reach the header checks without first having to guess a matching length prefix.
inline void check_safetensors_bytes(const uint8_t* data, size_t size) {
    const std::string_view in = as_text(data, size);
    check_safetensors_file(in);
    const size_t nul = in.find('\0');
    if (nul == std::string_view::npos) return;
    std::string file(8, '\0');
    for (int i = 0; i < 8; i++) file[i] = static_cast<char>((uint64_t{nul} >> (8 * i)) & 0xFF);
    file.append(in.substr(0, nul));
    file.append(in.substr(nul + 1));
    check_safetensors_file(file);
}

// ---- data::parse_tsv ----------------------------------------------------------------------------

// The line rules of examples/data/tsv.h, written again from the header's comment: parse_tsv must
// agree with this on every input.
struct TsvExpected {
    std::vector<data::Pair> pairs;
    size_t lines = 0, skipped = 0, blank = 0;
};

inline TsvExpected tsv_reference(std::string_view s) {
    auto is_ws = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; };
    auto trim = [&](std::string_view x) {
        while (!x.empty() && is_ws(x.front())) x.remove_prefix(1);
        while (!x.empty() && is_ws(x.back())) x.remove_suffix(1);
        return x;
    };
    TsvExpected r;
    if (starts_with(s, "\xEF\xBB\xBF")) s.remove_prefix(3);
    std::vector<std::string> lines = split_lines(s);
    if (!lines.empty() && lines.back().empty()) lines.pop_back();  // text ends with "\n" (or is empty)
    for (std::string& line : lines) {
        r.lines++;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (trim(line).empty()) { r.blank++; continue; }
        if (!autograd::io::valid_utf8(line)) { r.skipped++; continue; }
        const size_t tab = line.find('\t');
        if (tab == std::string::npos) { r.skipped++; continue; }
        std::string_view rest = std::string_view(line).substr(tab + 1);
        rest = rest.substr(0, rest.find('\t'));
        const std::string_view src = trim(std::string_view(line).substr(0, tab)), tgt = trim(rest);
        if (src.empty() || tgt.empty()) { r.skipped++; continue; }
        r.pairs.push_back({std::string(src), std::string(tgt)});
    }
    return r;
}

inline void check_tsv_text(std::string_view text) {
    const std::string name = "fuzz.tsv";
    const TsvExpected want = tsv_reference(text);
    data::TsvResult got;
    try {
        got = data::parse_tsv(text, name);
    } catch (const std::runtime_error& e) {
        FUZZ_CHECK(starts_with(e.what(), "parse_tsv: '" + name + "'"));
        FUZZ_CHECK(want.pairs.empty());  // documented: throws exactly when there is no valid pair
        return;
    }
    FUZZ_CHECK(!got.pairs.empty());
    FUZZ_CHECK(got.pairs == want.pairs);
    FUZZ_CHECK(got.skipped == want.skipped);
    FUZZ_CHECK(got.blank_lines == want.blank);
    FUZZ_CHECK(got.pairs.size() + got.skipped + got.blank_lines == want.lines);
    FUZZ_CHECK(got.warnings.size() == std::min(got.skipped, data::kMaxTsvWarnings));
    for (const std::string& w : got.warnings) FUZZ_CHECK(starts_with(w, name + ":"));
    for (const data::Pair& p : got.pairs)
        for (const std::string* field : {&p.src, &p.tgt})
            FUZZ_CHECK(!field->empty() && autograd::io::valid_utf8(*field) &&
                       field->find_first_of("\t\n") == std::string::npos);
}

inline void check_tsv_bytes(const uint8_t* data, size_t size) { check_tsv_text(as_text(data, size)); }

// ---- data::tokenize and friends -----------------------------------------------------------------

inline bool has_space_code_point(std::string_view s) {
    for (char32_t c : autograd::io::to_code_points(s))
        if (data::is_space(c)) return true;
    return false;
}

// Reference for autograd::io::sanitize_utf8, written from the Unicode standard rather than from the code:
// Table 3-7 gives the allowed range of each byte of a well-formed sequence, and an ill-formed one
// is replaced by one U+FFFD per "maximal subpart" (the longest prefix that some well-formed
// sequence starts with, at least one byte). Sets `clean` false if anything was replaced.
inline std::string reference_sanitize_utf8(std::string_view s, bool& clean) {
    struct Row { unsigned char lead_lo, lead_hi, lo[3], hi[3]; int tail; };
    static const Row table[] = {                 // Table 3-7, "Well-Formed UTF-8 Byte Sequences"
        {0xC2, 0xDF, {0x80, 0, 0}, {0xBF, 0, 0}, 1},
        {0xE0, 0xE0, {0xA0, 0x80, 0}, {0xBF, 0xBF, 0}, 2},
        {0xE1, 0xEC, {0x80, 0x80, 0}, {0xBF, 0xBF, 0}, 2},
        {0xED, 0xED, {0x80, 0x80, 0}, {0x9F, 0xBF, 0}, 2},
        {0xEE, 0xEF, {0x80, 0x80, 0}, {0xBF, 0xBF, 0}, 2},
        {0xF0, 0xF0, {0x90, 0x80, 0x80}, {0xBF, 0xBF, 0xBF}, 3},
        {0xF1, 0xF3, {0x80, 0x80, 0x80}, {0xBF, 0xBF, 0xBF}, 3},
        {0xF4, 0xF4, {0x80, 0x80, 0x80}, {0x8F, 0xBF, 0xBF}, 3},
    };
    std::string out;
    clean = true;
    for (size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        if (b < 0x80) { out += s[i++]; continue; }
        const Row* row = nullptr;
        for (const Row& r : table)
            if (b >= r.lead_lo && b <= r.lead_hi) row = &r;
        int ok = 0;                                // tail bytes inside their allowed range
        while (row && ok < row->tail && i + 1 + ok < s.size()) {
            const auto c = static_cast<unsigned char>(s[i + 1 + ok]);
            if (c < row->lo[ok] || c > row->hi[ok]) break;
            ok++;
        }
        if (row && ok == row->tail) {              // well-formed: copy it
            out.append(s.substr(i, 1 + ok));
        } else {                                   // ill-formed: one U+FFFD for the subpart
            out += "\xEF\xBF\xBD";
            clean = false;
        }
        i += 1 + ok;
    }
    return out;
}

// autograd/io/utf8.h, and lowercasing: decode, sanitize, validate, count and cut code points;
// checked against the reference above.
inline void check_utf8_toolkit(std::string_view text) {
    namespace io = autograd::io;
    bool reference_clean = false;
    const std::string reference = reference_sanitize_utf8(text, reference_clean);
    const bool valid = io::valid_utf8(text);
    FUZZ_CHECK(valid == reference_clean);

    std::string reencoded;  // decode_utf8 walks any input in steps of >= 1 byte, inside it
    std::vector<size_t> starts;  // where each code point starts
    for (size_t pos = 0; pos < text.size();) {
        const io::Utf8Char c = io::decode_utf8(text, pos);
        FUZZ_CHECK(c.len >= 1 && c.len <= 4 && pos + c.len <= text.size());
        FUZZ_CHECK(c.valid ? text.substr(pos, c.len) == io::encode_utf8(c.cp) : c.cp == io::kReplacementChar);
        io::append_utf8(reencoded, c.cp);
        starts.push_back(pos);
        pos += c.len;
    }
    const std::string clean = io::sanitize_utf8(text);
    FUZZ_CHECK(clean == reference);
    FUZZ_CHECK(io::valid_utf8(clean));
    FUZZ_CHECK(clean == reencoded);
    FUZZ_CHECK(!valid || clean == text);
    const std::u32string cps = io::to_code_points(text);
    FUZZ_CHECK(io::to_code_points(clean) == cps);

    // counting and cutting agree with the walk above: n code points end where the (n+1)-th starts
    FUZZ_CHECK(io::count_code_points(text) == cps.size() && cps.size() == starts.size());
    for (size_t n : {size_t{0}, size_t{1}, cps.size() / 2, cps.size(), cps.size() + 1})
        FUZZ_CHECK(io::first_code_points(text, n).size() == (n < starts.size() ? starts[n] : text.size()));

    const std::string lower = data::to_lower_utf8(text);
    FUZZ_CHECK(io::valid_utf8(lower));
    FUZZ_CHECK(io::count_code_points(lower) == cps.size());
    FUZZ_CHECK(data::to_lower_utf8(lower) == lower);  // lowercasing twice changes nothing
}

// tokenize: tokens are non-empty valid UTF-8 without whitespace, and together they hold every
// non-space code point of the (sanitized) text, in order. detokenize only adds ' ' between them.
inline void check_tokenize(std::string_view text) {
    std::string non_space;
    for (char32_t c : autograd::io::to_code_points(text))
        if (!data::is_space(c)) autograd::io::append_utf8(non_space, c);

    const std::vector<std::string> toks = data::tokenize(text, false);
    const std::vector<std::string> lowered = data::tokenize(text, true);
    FUZZ_CHECK(toks.size() == lowered.size());
    std::string joined;
    for (size_t i = 0; i < toks.size(); i++) {
        FUZZ_CHECK(!toks[i].empty());
        FUZZ_CHECK(autograd::io::valid_utf8(toks[i]));
        FUZZ_CHECK(!has_space_code_point(toks[i]));
        if (i < lowered.size()) FUZZ_CHECK(lowered[i] == data::to_lower_utf8(toks[i]));
        joined += toks[i];
    }
    FUZZ_CHECK(joined == non_space);

    const std::string detok = data::detokenize(toks);
    FUZZ_CHECK(autograd::io::valid_utf8(detok));
    std::string without_spaces = detok;
    std::erase(without_spaces, ' ');
    FUZZ_CHECK(without_spaces == joined);  // tokens hold no ' ', so only separators were added
    FUZZ_CHECK(detok.size() <= joined.size() + (toks.empty() ? 0 : toks.size() - 1));

    // detokenize on arbitrary tokens (one per line: empty, invalid UTF-8, ...) must not crash,
    // and adds at most one ' ' between two tokens: no more than the '\n's it replaces
    const std::string any = data::detokenize(split_lines(text));
    FUZZ_CHECK(any.size() <= text.size());
}

// Vocab: build from tokenized lines, encode/decode, the JSON round trip; and read the raw text
// as a JSON vocabulary, which either throws a runtime_error or gives one that round-trips.
inline void check_vocab(std::string_view text) {
    namespace json = autograd::io::json;
    std::vector<std::vector<std::string>> sentences;
    for (const std::string& line : split_lines(text)) sentences.push_back(data::tokenize(line));
    const data::Vocab v = data::Vocab::build(sentences, /*min_freq=*/1);  // tokens are all valid
    for (const auto& s : sentences) {
        FUZZ_CHECK(v.decode(v.encode(s, true, true)) == s);  // no token can be a special: '<' splits
    }
    FUZZ_CHECK(data::Vocab::from_json(json::parse(json::dump(v.to_json()))) == v);

    try {
        const data::Vocab w = data::Vocab::from_json(json::parse(text));
        FUZZ_CHECK(w.size() >= static_cast<size_t>(data::Vocab::kNumSpecials));
        FUZZ_CHECK(w.token(data::Vocab::UNK) == "<unk>");
        for (size_t i = 0; i < w.size(); i++) {
            const std::string& t = w.token(static_cast<int32_t>(i));
            FUZZ_CHECK(!t.empty() && autograd::io::valid_utf8(t));
            FUZZ_CHECK(w.id(t) == static_cast<int32_t>(i));
        }
        FUZZ_CHECK(data::Vocab::from_json(json::parse(json::dump(w.to_json()))) == w);
    } catch (const std::runtime_error& e) {
        FUZZ_CHECK(starts_with(e.what(), "Vocab::from_json: ") || starts_with(e.what(), "json: "));
    }
}

// corpus_bleu on the lines of the text: even lines are hypotheses, odd lines references.
inline void check_bleu(std::string_view text) {
    std::vector<std::string> lines = split_lines(text), hyps, refs;
    if (lines.size() > 64) lines.resize(64);  // keep each run fast
    for (size_t i = 0; i + 1 < lines.size(); i += 2) {
        hyps.push_back(lines[i]);
        refs.push_back(lines[i + 1]);
    }
    const data::BleuResult r = data::corpus_bleu(hyps, refs);
    FUZZ_CHECK(std::isfinite(r.score) && r.score >= 0 && r.score <= 100 + 1e-9);
    FUZZ_CHECK(std::isfinite(r.bp) && r.bp >= 0 && r.bp <= 1);
    for (int n = 0; n < 4; n++) {
        FUZZ_CHECK(r.correct[n] <= r.total[n]);
        FUZZ_CHECK(std::isfinite(r.precisions[n]) && r.precisions[n] >= 0 && r.precisions[n] <= 100 + 1e-9);
    }
    FUZZ_CHECK(r.total[0] == r.sys_len);
    (void)data::to_string(r);

    // a corpus scored against itself: 100 when some hypothesis has 4 tokens, else 0
    const data::BleuResult same = data::corpus_bleu(hyps, hyps);
    FUZZ_CHECK(same.sys_len == same.ref_len && same.bp == 1);
    if (same.total[3] > 0) FUZZ_CHECK(std::fabs(same.score - 100) < 1e-9);
    else FUZZ_CHECK(same.score == 0);
}

inline void check_tokenizer_text(std::string_view text) {
    check_utf8_toolkit(text);
    check_tokenize(text);
    check_vocab(text);
    check_bleu(text);
}

inline void check_tokenizer_bytes(const uint8_t* data, size_t size) {
    check_tokenizer_text(as_text(data, size));
}

}  // namespace fuzz
