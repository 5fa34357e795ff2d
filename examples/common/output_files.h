// The files a run reads and writes, checked together before any work, so that no run destroys
// what the user has:
//   - no output names an input or another output, compared as resolved paths ("m", "./m" and a
//     symbolic link to m are one file): "--plot m.safetensors would replace --save
//     m.safetensors, which this run also writes: give each its own path";
//   - no file that exists is replaced unless the user asked, with --overwrite (the old file is
//     not kept: asking to overwrite is asking for it to go). A run's own files, which a resumed
//     run goes on writing (its --save, its state), are not "files that exist";
//   - only a regular file is ever replaced: an output that names a device, a FIFO or a socket
//     is refused, --overwrite or not.
//
//   common::RunFiles files;
//   files.input("--data", o.data);         // empty paths are skipped
//   files.output("--save", o.save);
//   files.output("--plot", o.plot);
//   files.check(p, o.overwrite);           // on a clash, one line naming both flags, and exit 2
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "examples/common/args.h"

namespace common {

// The most a run reads of one data file (--data, --valid, --test): 2^30 bytes, 1.07 GB. Its
// tokens take several times that in memory (gpt: 9 bytes a character), and a text past it is
// more than these examples train on in a day.
constexpr int64_t kMaxInputBytes = int64_t{1} << 30;

// The whole of a data file, `kind` naming what it should be in messages ("a text file"). Only a
// regular file is read: a FIFO would be read once, then wait forever when the run opens it again
// for its checksum (run_state.h); a device such as /dev/zero never ends. Throws
// std::runtime_error naming the file and what is wrong: missing or unreadable, a folder, not a
// regular file, more than kMaxInputBytes (checked before a byte is read), a read error.
std::string read_input_file(const std::string& path, const std::string& kind);

// --overwrite, the one flag that lets a run replace files that exist, with the same help in
// every example.
void add_overwrite_flag(ArgParser& p, bool* overwrite);

// `path` made absolute, with every symbolic link followed and "." and ".." gone, also when the
// file (or its folder) does not exist yet: two paths name one file exactly when these are equal.
std::string resolved_path(const std::string& path);

class RunFiles {
public:
    // A file the run reads.
    void input(const std::string& flag, const std::string& path);
    // A file the run writes. `if_exists` says what else the user can do when it exists (the
    // message always names --overwrite).
    void output(const std::string& flag, const std::string& path, const std::string& if_exists = "give another path");
    // A file the run writes that it wrote itself before (a resumed run's --save and state): it
    // may be replaced, but it must still not be an input or another output.
    void own_output(const std::string& flag, const std::string& path);

    // Exits through p.fail() on a clash (naming both flags and paths), on an output that is not
    // a regular file, or on an output that exists while `overwrite` is false (naming the flag and
    // --overwrite).
    void check(const ArgParser& p, bool overwrite) const;

private:
    enum class Kind { input, output, own_output };
    struct File {
        std::string flag, path, resolved, if_exists;
        Kind kind;
    };
    void add(const std::string& flag, const std::string& path, Kind kind, const std::string& if_exists);
    std::vector<File> files_;
};

}  // namespace common
