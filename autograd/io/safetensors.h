// Reading and writing the safetensors checkpoint format, independent of the Tensor class.
//
// File layout (https://github.com/huggingface/safetensors, "Format"):
//   bytes [0, 8)        N, the header length, a little-endian u64
//   bytes [8, 8+N)      a JSON object, padded with trailing spaces:
//                         { "__metadata__": {"k": "v", ...},                       (optional)
//                           "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
//                           ... }
//   bytes [8+N, end)    the data section: each tensor's raw little-endian bytes, row-major.
//                       data_offsets are relative to the start of this section, and the tensors
//                       must cover it exactly: no gaps, no overlaps, nothing left over.
//
//   std::vector<autograd::io::TensorRecord> recs{autograd::io::f32_record("w", {2, 3}, w_data)};
//   autograd::io::save_safetensors("model.safetensors", recs, {{"step", "1000"}});
//   autograd::io::SafetensorsFile f = autograd::io::load_safetensors("model.safetensors");
//   std::vector<float> w = autograd::io::as_f32(*f.find("w"));
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace autograd::io {

// One named tensor as it sits in the file: dtype name ("F32", "I64", ...), shape, raw bytes.
struct TensorRecord {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;   // little-endian, row-major; size = product(shape) * dtype size
};

// Bytes per element of a safetensors dtype name, or 0 if the name is unknown.
// Known: BOOL U8 I8 F8_E4M3 F8_E5M2 (1), I16 U16 F16 BF16 (2), I32 U32 F32 (4), I64 U64 F64 (8).
size_t dtype_size(const std::string& dtype);

// Write `tensors` (data in the given order) and string `metadata` to `path`. The metadata gains
// "crc32c", each tensor's CRC-32C (autograd/io/crc32c.h) as JSON: {"w": "e3069283", ...}; the
// metadata object is left out when there is nothing in it, as the reference implementation does.
// Atomic (autograd/io/atomic_file.h): writes a new temporary file ".NAME.XXXXXX.tmp" in PATH's
// directory (its own name, so saves racing to one path never mix), fsyncs it, rename()s it over
// PATH and fsyncs the directory, so a crash or a full disk never destroys an earlier good file, and
// a reader sees the old file or the new one, whole. The new file gets the permissions of any new
// file (0666 less the umask). When PATH is a symbolic link (or a chain of them), the file it names
// is replaced and the link stays a link; a dangling link's target is created. Only a regular file
// is replaced (not a device or a FIFO). On failure the temporary file is removed and
// std::runtime_error names PATH and the reason, e.g. "save_safetensors: cannot write
// 'x.safetensors': No space left on device".
// Also throws (before touching the disk) on an invalid record: empty or duplicate name, the
// reserved name "__metadata__", the reserved metadata key "crc32c", unknown dtype, negative dim, or bytes.size() not matching shape.
void save_safetensors(const std::string& path, const std::vector<TensorRecord>& tensors,
                      const std::map<std::string, std::string>& metadata = {});


// A loaded file: metadata plus tensors in file order (the order of their data in the file).
struct SafetensorsFile {
    std::map<std::string, std::string> metadata;
    std::vector<TensorRecord> tensors;
    bool checksummed = false;   // the file recorded each tensor's CRC-32C, and every one matched
    const TensorRecord* find(const std::string& name) const;   // nullptr when absent
};

// Read and fully validate a safetensors file. Every problem (missing file, truncation, bad JSON,
// bad dtype/shape/offsets, holes or overlaps in the data, ...) throws std::runtime_error with a
// message starting "load_safetensors: '<path>': ". Never reads outside the file, and reads only
// `path`: never a temporary file a killed save left beside it. A file with checksums ("crc32c",
// as save_safetensors writes) must match them: "load_safetensors: 'm.safetensors': tensor
// "w" fails its CRC-32C check (...): the file is damaged", and name no tensor the file lacks;
// a checksum is compared as its text, eight lowercase hex digits; the entry is not in the metadata
// returned, and `checksummed` says it was there. A file without loads unchecked.
SafetensorsFile load_safetensors(const std::string& path);

// Convenience: build a record from / read a record into plain arrays. `data` holds
// product(shape) elements. as_* throw std::runtime_error if the dtype doesn't match.
TensorRecord f32_record(const std::string& name, const std::vector<int64_t>& shape,
                        const float* data);
TensorRecord i32_record(const std::string& name, const std::vector<int64_t>& shape,
                        const int32_t* data);
TensorRecord i64_record(const std::string& name, const std::vector<int64_t>& shape,
                        const int64_t* data);
std::vector<float> as_f32(const TensorRecord& record);
std::vector<int32_t> as_i32(const TensorRecord& record);
std::vector<int64_t> as_i64(const TensorRecord& record);

}  // namespace autograd::io
