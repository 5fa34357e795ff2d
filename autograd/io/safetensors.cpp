// safetensors reader and writer: see safetensors.h for the file layout.
#include "autograd/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <unordered_set>

#include <fcntl.h>      // POSIX I/O for loading: pread, and fstat's size of the file opened
#include <sys/stat.h>
#include <unistd.h>

#include "autograd/io/atomic_file.h"
#include "autograd/io/crc32c.h"
#include "autograd/io/json.h"
#include "autograd/io/utf8.h"

// Tensor bytes are copied between memory and file as-is, which is only right on a little-endian
// machine (x86-64, ARM64 in practice). The header length is decoded byte by byte regardless.
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace autograd::io {

// ---------------------------------------------------------------------------------------------
// Small helpers shared by save and load

constexpr uint64_t kMaxHeaderBytes = 16'000'000;   // a real header is KBs; parsing costs ~80x its size in memory
constexpr size_t kMaxRank = 64;                     // no real tensor has more dimensions
constexpr double kMaxJsonInt = 9007199254740992.0;  // 2^53: larger integers aren't exact in JSON
constexpr const char* kChecksumKey = "crc32c";      // metadata: {"tensor name": "e3069283", ...}

size_t dtype_size(const std::string& dtype) {
    static const std::pair<const char*, size_t> table[] = {
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
        {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
        {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8},
    };
    for (const auto& [name, size] : table)
        if (dtype == name) return size;
    return 0;
}

// "[2, 3]", for error messages.
static std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); i++) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// A name in double quotes with JSON escapes, so odd names can't garble a message.
static std::string name_text(const std::string& name) {
    return valid_utf8(name) ? json::dump(json::Value(name)) : "<non-UTF-8 name>";
}

// product(shape) * elem_size into `bytes`; false if a dim is negative or the product overflows.
static bool shape_bytes(const std::vector<int64_t>& shape, size_t elem_size, uint64_t& bytes) {
    uint64_t n = elem_size;
    for (int64_t d : shape) {
        if (d < 0) return false;
        const uint64_t u = static_cast<uint64_t>(d);
        if (u != 0 && n > std::numeric_limits<uint64_t>::max() / u) return false;
        n *= u;
    }
    bytes = n;
    return true;
}

// ---------------------------------------------------------------------------------------------
// Saving

// Everything that could make the file unreadable is checked before the disk is touched.
static void check_records(const std::vector<TensorRecord>& tensors,
                          const std::map<std::string, std::string>& metadata) {
    auto bad = [](const std::string& what) {
        throw std::runtime_error("save_safetensors: " + what);
    };
    for (const auto& [key, value] : metadata)
        if (!valid_utf8(key) || !valid_utf8(value))
            bad("metadata key or value is not valid UTF-8");
    if (metadata.count(kChecksumKey))
        bad(std::string("metadata key '") + kChecksumKey + "' is reserved for the tensors' checksums, which the save writes");
    std::unordered_set<std::string> names;
    uint64_t total = 0;
    for (const TensorRecord& r : tensors) {
        const std::string t = "tensor " + name_text(r.name) + ": ";
        if (r.name.empty()) bad("a tensor has an empty name");
        if (!valid_utf8(r.name)) bad("a tensor name is not valid UTF-8");
        if (r.name == "__metadata__") bad(t + "the name is reserved for metadata");
        if (!names.insert(r.name).second) bad(t + "duplicate name");
        const size_t elem = dtype_size(r.dtype);
        if (elem == 0) bad(t + "unknown dtype '" + r.dtype + "'");
        uint64_t need = 0;
        if (!shape_bytes(r.shape, elem, need)) bad(t + "invalid shape " + shape_text(r.shape));
        if (r.bytes.size() != need)
            bad(t + "has " + std::to_string(r.bytes.size()) + " bytes, but shape " +
                shape_text(r.shape) + " of " + r.dtype + " needs " + std::to_string(need));
        total += need;                                        // can't overflow: these are in RAM
        if (total > (uint64_t{1} << 53))
            bad("data section too large for JSON offsets (> 2^53 bytes)");
    }
}

// The JSON header, padded with spaces to a multiple of 8 bytes so the data section starts
// 8-aligned (the reference implementation does the same). Tensor data goes in the given order.
// The metadata gains "crc32c": each tensor's CRC-32C, so a loader finds a damaged byte by name.
static std::string build_header(const std::vector<TensorRecord>& tensors,
                                const std::map<std::string, std::string>& metadata) {
    json::Object root;
    std::map<std::string, std::string> with_checksums = metadata;
    if (!tensors.empty()) {
        json::Object checksums;
        for (const TensorRecord& r : tensors) checksums.emplace_back(r.name, json::Value(crc32c_hex(crc32c(r.bytes.data(), r.bytes.size()))));
        with_checksums[kChecksumKey] = json::dump(json::Value(std::move(checksums)));
    }
    if (!with_checksums.empty()) {
        json::Object m;
        for (const auto& [key, value] : with_checksums) m.emplace_back(key, json::Value(value));
        root.emplace_back("__metadata__", json::Value(std::move(m)));
    }
    uint64_t offset = 0;
    for (const TensorRecord& r : tensors) {
        json::Array shape(r.shape.begin(), r.shape.end());
        const uint64_t end = offset + r.bytes.size();
        json::Object entry{{"dtype", json::Value(r.dtype)},
                           {"shape", json::Value(std::move(shape))},
                           {"data_offsets", json::Value(json::Array{offset, end})}};
        root.emplace_back(r.name, json::Value(std::move(entry)));
        offset = end;
    }
    std::string header = json::dump(json::Value(std::move(root)));
    header.append((8 - header.size() % 8) % 8, ' ');
    return header;
}

void save_safetensors(const std::string& path, const std::vector<TensorRecord>& tensors,
                      const std::map<std::string, std::string>& metadata) {
    // 1) validate and build the header in memory
    check_records(tensors, metadata);
    const std::string header = build_header(tensors, metadata);

    // 2) the header's length, the header, then each tensor's bytes: whole or not at all (atomic_file.h)
    char len[8];                                              // header length, little-endian
    for (int i = 0; i < 8; i++) len[i] = static_cast<char>(header.size() >> (8 * i));
    std::vector<std::string_view> pieces{std::string_view(len, 8), header};
    for (const TensorRecord& r : tensors) pieces.emplace_back(reinterpret_cast<const char*>(r.bytes.data()), r.bytes.size());
    write_file_atomically(path, pieces, "save_safetensors");
}

// ---------------------------------------------------------------------------------------------
// Loading. Helpers throw bare messages; load_safetensors prefixes them with the file name.

[[noreturn]] static void bad(const std::string& what) { throw std::runtime_error(what); }

// Read exactly n bytes at `offset` (pread: no shared file position). Throws on error or EOF.
static void read_at(int fd, uint64_t offset, void* dst, size_t n) {
    char* p = static_cast<char*>(dst);
    while (n > 0) {
        const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) bad(std::string("read error: ") + std::strerror(errno));
        if (r == 0) bad("unexpected end of file (was it truncated while reading?)");
        p += r;
        offset += static_cast<uint64_t>(r);
        n -= static_cast<size_t>(r);
    }
}

// A JSON number that must be an integer in [0, 2^53]; `what` names it in the error message.
static uint64_t json_uint(const json::Value& v, const std::string& what) {
    const bool ok = v.is_number() && v.as_number() >= 0 && v.as_number() <= kMaxJsonInt &&
                    v.as_number() == std::floor(v.as_number());
    if (!ok) bad(what + " must be a non-negative integer, got " + json::dump(v));
    return static_cast<uint64_t>(v.as_number());
}

static std::map<std::string, std::string> parse_metadata(const json::Value& v) {
    if (!v.is_object()) bad("\"__metadata__\" is not a JSON object");
    std::map<std::string, std::string> metadata;
    for (const auto& [key, value] : v.as_object()) {
        if (!value.is_string())
            bad("metadata value for key " + name_text(key) + " is not a string");
        metadata[key] = value.as_string();
    }
    return metadata;
}

// A file whose metadata has "crc32c" (every file save_safetensors writes): each tensor's bytes
// must give the checksum recorded for it, every tensor must have one, and it names no other
// tensor (a list from another file, or a tensor cut out of this one). The entry then leaves
// the metadata (it describes the bytes, not the model), and the file counts as checked. Files
// written before checksums, or by other programs, have none: they load unchecked.
static void check_checksums(SafetensorsFile& f) {
    const auto entry = f.metadata.find(kChecksumKey);
    if (entry == f.metadata.end()) return;
    json::Value sums;
    try {
        sums = json::parse(entry->second);
    } catch (const std::runtime_error& e) {
        bad(std::string("metadata '") + kChecksumKey + "' is not JSON: " + e.what());
    }
    if (!sums.is_object()) bad(std::string("metadata '") + kChecksumKey + "' is not a JSON object");
    for (const TensorRecord& r : f.tensors) {
        const json::Value* stored = sums.find(r.name);
        if (!stored || !stored->is_string()) bad("tensor " + name_text(r.name) + " has no checksum in metadata '" + kChecksumKey + "'");
        const std::string computed = crc32c_hex(crc32c(r.bytes.data(), r.bytes.size()));
        if (stored->as_string() != computed)
            bad("tensor " + name_text(r.name) + " fails its CRC-32C check (the file says " + stored->as_string() +
                ", its bytes give " + computed + "): the file is damaged");
    }
    for (const auto& [name, value] : sums.as_object())   // (JSON keys are unique: one name per tensor)
        if (!f.find(name)) bad(std::string("metadata '") + kChecksumKey + "' names tensor " + name_text(name) + ", which the file does not hold");
    f.metadata.erase(entry);
    f.checksummed = true;
}

namespace {  // file-local types: keeps them out of namespace autograd::io for other files
// Where a tensor's bytes are, relative to the start of the data section.
struct Span {
    uint64_t begin, end;
};
// An fd that closes itself, so every `bad(...)` path releases the file.
struct FileCloser {
    int fd;
    ~FileCloser() { if (fd >= 0) ::close(fd); }
};
}  // namespace

// Check one header entry {"dtype", "shape", "data_offsets"}; fill `rec` (without its bytes).
static Span parse_entry(const std::string& name, const json::Value& entry, uint64_t data_size,
                        TensorRecord& rec) {
    const std::string t = "tensor " + name_text(name) + ": ";
    if (!entry.is_object()) bad(t + "entry is not a JSON object");
    const json::Value* dtype = entry.find("dtype");
    const json::Value* shape = entry.find("shape");
    const json::Value* offsets = entry.find("data_offsets");
    if (!dtype) bad(t + "missing \"dtype\"");
    if (!shape) bad(t + "missing \"shape\"");
    if (!offsets) bad(t + "missing \"data_offsets\"");

    // 1) dtype
    if (!dtype->is_string()) bad(t + "\"dtype\" is not a string");
    rec.name = name;
    rec.dtype = dtype->as_string();
    const size_t elem = dtype_size(rec.dtype);
    if (elem == 0) bad(t + "unknown dtype " + name_text(rec.dtype));

    // 2) shape -> expected byte size
    if (!shape->is_array()) bad(t + "\"shape\" is not an array");
    if (shape->as_array().size() > kMaxRank)
        bad(t + "shape has " + std::to_string(shape->as_array().size()) + " dimensions (limit " +
            std::to_string(kMaxRank) + ")");
    for (const json::Value& d : shape->as_array())
        rec.shape.push_back(static_cast<int64_t>(json_uint(d, t + "shape dimension")));
    uint64_t need = 0;
    if (!shape_bytes(rec.shape, elem, need))
        bad(t + "shape " + shape_text(rec.shape) + " is too large (size overflows 64 bits)");

    // 3) data_offsets: [begin, end] inside the data section, matching the shape's size
    if (!offsets->is_array() || offsets->as_array().size() != 2)
        bad(t + "\"data_offsets\" must be [begin, end]");
    const Span s{json_uint(offsets->as_array()[0], t + "data_offsets begin"),
                 json_uint(offsets->as_array()[1], t + "data_offsets end")};
    if (s.begin > s.end)
        bad(t + "data_offsets begin " + std::to_string(s.begin) + " > end " +
            std::to_string(s.end));
    if (s.end > data_size)
        bad(t + "data_offsets end " + std::to_string(s.end) + " is beyond the data section (" +
            std::to_string(data_size) + " bytes): truncated file?");
    if (s.end - s.begin != need)
        bad(t + "has " + std::to_string(s.end - s.begin) + " bytes, but shape " +
            shape_text(rec.shape) + " of " + rec.dtype + " needs " + std::to_string(need));
    return s;
}

// The spec requires the tensors to tile the data section exactly: sorted by offset, each one
// starts where the previous ended, and the last ends at the end of the file (the reference
// implementation's Metadata::validate does the same walk). Sorts `order`. Each message names the
// tensors and the offsets involved, as written in the header ([begin, end] relative to the data
// section), so the broken entry can be found in the file.
static void check_coverage(const std::vector<TensorRecord>& recs, const std::vector<Span>& spans,
                           std::vector<size_t>& order, uint64_t data_size) {
    order.resize(spans.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return spans[a].begin != spans[b].begin ? spans[a].begin < spans[b].begin
                                                : spans[a].end < spans[b].end;
    });
    auto num = [](uint64_t x) { return std::to_string(x); };
    auto offsets = [&](size_t i) {                            // "[2, 6]", as the header writes it
        return std::string("[") + num(spans[i].begin) + ", " + num(spans[i].end) + "]";
    };
    uint64_t covered = 0;                                     // bytes [0, covered) are tiled
    const size_t none = spans.size();
    size_t prev = none;                                       // the tensor that ends at `covered`
    for (size_t i : order) {
        const std::string t = "tensor " + name_text(recs[i].name);
        if (spans[i].begin < covered)                         // sorted by begin: i starts inside prev
            bad(t + " (data_offsets " + offsets(i) + ") overlaps tensor " + name_text(recs[prev].name) +
                " (data_offsets " + offsets(prev) + "): it starts at byte " + num(spans[i].begin) +
                ", before the other ends at " + num(covered));
        if (spans[i].begin > covered) {
            const std::string around = prev == none
                ? "the first tensor, " + name_text(recs[i].name) + ","
                : "tensor " + name_text(recs[prev].name) + " ends at " + num(covered) + ", " + t;
            bad("data section has a hole: bytes [" + num(covered) + ", " + num(spans[i].begin) +
                ") belong to no tensor (" + around + " starts at " + num(spans[i].begin) + ")");
        }
        covered = spans[i].end;
        prev = i;
    }
    if (covered != data_size) {
        const std::string last = prev == none
            ? std::string("the header lists no tensors")
            : "the last tensor, " + name_text(recs[prev].name) + ", ends at " + num(covered);
        bad("data section has " + num(data_size - covered) + " trailing bytes that belong to no tensor: bytes [" +
            num(covered) + ", " + num(data_size) + ") (" + last + "; the data section is " + num(data_size) +
            " bytes)");
    }
}

static SafetensorsFile load_unprefixed(const std::string& path) {
    // 1) open; take the size from fstat so every later check is against the real file
    // (O_NONBLOCK: opening a FIFO would wait for a writer that never comes; it is refused below)
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) bad(std::string("cannot open: ") + std::strerror(errno));
    FileCloser closer{fd};
    struct stat st;
    if (::fstat(fd, &st) != 0) bad(std::string("cannot stat: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) bad("not a regular file");
    const uint64_t file_size = static_cast<uint64_t>(st.st_size);

    // 2) header length: 8 bytes, little-endian u64
    if (file_size < 8)
        bad("file is " + std::to_string(file_size) +
            " bytes, too short for the 8-byte header length");
    uint8_t len[8];
    read_at(fd, 0, len, 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | len[i];
    if (n > kMaxHeaderBytes)
        bad("header length " + std::to_string(n) + " is absurd (limit " +
            std::to_string(kMaxHeaderBytes) + " bytes)");
    if (n > file_size - 8)
        bad("header length " + std::to_string(n) + " is larger than the rest of the file (" +
            std::to_string(file_size - 8) + " bytes): truncated file?");

    // 3) header JSON
    std::string text(n, '\0');
    read_at(fd, 8, text.data(), n);
    json::Value header;
    try {
        header = json::parse(text);
    } catch (const std::runtime_error& e) {
        bad(std::string("bad JSON header: ") + e.what());
    }
    if (!header.is_object()) bad("header is not a JSON object");

    // 4) entries, then check they tile the data section
    const uint64_t data_start = 8 + n, data_size = file_size - data_start;
    SafetensorsFile out;
    std::vector<TensorRecord> recs;
    std::vector<Span> spans;
    for (const auto& [key, value] : header.as_object()) {     // the parser rejected duplicates
        if (key.empty()) bad("a tensor has an empty name");     // save_safetensors refuses those too
        if (key == "__metadata__") {
            out.metadata = parse_metadata(value);
            continue;
        }
        recs.emplace_back();
        spans.push_back(parse_entry(key, value, data_size, recs.back()));
    }
    std::vector<size_t> order;
    check_coverage(recs, spans, order, data_size);

    // 5) data, in file order. Sizes are now bounded by the real file size, so these
    //    allocations can't be inflated by a hostile header.
    for (size_t i : order) {
        TensorRecord& r = recs[i];
        r.bytes.resize(spans[i].end - spans[i].begin);
        read_at(fd, data_start + spans[i].begin, r.bytes.data(), r.bytes.size());
        out.tensors.push_back(std::move(r));
    }
    check_checksums(out);
    return out;
}

SafetensorsFile load_safetensors(const std::string& path) {
    try {
        return load_unprefixed(path);
    } catch (const std::runtime_error& e) {
        throw std::runtime_error("load_safetensors: '" + path + "': " + e.what());
    }
}

const TensorRecord* SafetensorsFile::find(const std::string& name) const {
    for (const TensorRecord& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Typed convenience helpers

template <class T>
static TensorRecord make_record(const char* fn, const std::string& name, const char* dtype,
                                const std::vector<int64_t>& shape, const T* data) {
    uint64_t bytes = 0;
    if (!shape_bytes(shape, sizeof(T), bytes))
        throw std::runtime_error(std::string(fn) + ": tensor " + name_text(name) +
                                 ": invalid shape " + shape_text(shape));
    TensorRecord r{name, dtype, shape, std::vector<uint8_t>(bytes)};
    if (bytes > 0) std::memcpy(r.bytes.data(), data, bytes);
    return r;
}

template <class T>
static std::vector<T> read_record(const char* fn, const TensorRecord& r, const char* dtype) {
    const std::string t = std::string(fn) + ": tensor " + name_text(r.name) + ": ";
    if (r.dtype != dtype) throw std::runtime_error(t + "dtype is " + r.dtype + ", not " + dtype);
    uint64_t bytes = 0;
    if (!shape_bytes(r.shape, sizeof(T), bytes) || bytes != r.bytes.size())
        throw std::runtime_error(t + "byte count doesn't match shape " + shape_text(r.shape));
    std::vector<T> out(bytes / sizeof(T));
    if (bytes > 0) std::memcpy(out.data(), r.bytes.data(), bytes);
    return out;
}

TensorRecord f32_record(const std::string& name, const std::vector<int64_t>& shape,
                        const float* data) {
    return make_record("f32_record", name, "F32", shape, data);
}
TensorRecord i32_record(const std::string& name, const std::vector<int64_t>& shape,
                        const int32_t* data) {
    return make_record("i32_record", name, "I32", shape, data);
}
TensorRecord i64_record(const std::string& name, const std::vector<int64_t>& shape,
                        const int64_t* data) {
    return make_record("i64_record", name, "I64", shape, data);
}
std::vector<float> as_f32(const TensorRecord& record) {
    return read_record<float>("as_f32", record, "F32");
}
std::vector<int32_t> as_i32(const TensorRecord& record) {
    return read_record<int32_t>("as_i32", record, "I32");
}
std::vector<int64_t> as_i64(const TensorRecord& record) {
    return read_record<int64_t>("as_i64", record, "I64");
}

}  // namespace autograd::io
