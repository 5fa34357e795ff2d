// Writing a file so that it is whole or not there: every file a program writes (a checkpoint, a
// run's state, an SVG, a graph) goes to a temporary file beside it first, every write and the
// close checked, then is renamed over the old one. A full disk, a crash or a second Ctrl-C in
// the middle leaves the old file as it was.
//
//   autograd::io::write_file_atomically("loss.svg", {svg_text}, "write_line_plot");
//   const std::string why = autograd::io::why_not_writable("model.safetensors");   // "" when it can be
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace autograd::io {

// Writes `pieces`, one after the other, to a new temporary file ".NAME.XXXXXX.tmp" in PATH's
// folder (its own name, so writes racing to one path never mix; NAME cut short when the whole
// would pass the 255 bytes a file name may have), fsyncs it, rename()s it over PATH and fsyncs
// the folder, so that a reader sees the old file or the new one, whole. The new file gets the
// permissions of any new file (0666 less the umask). When PATH is a symbolic link (or a chain of
// them), the file it names is replaced and the link stays a link; a dangling link's target is
// created. Only a regular file is replaced: a PATH that is (or whose link names) a device, a
// FIFO, a socket or a folder is refused, even to root, before anything is written. On failure
// the temporary file is removed and std::runtime_error says "WHO: cannot write 'PATH': " and why
// ("No space left on device", ...).
void write_file_atomically(const std::string& path, const std::vector<std::string_view>& pieces, const std::string& who);

// Why write_file_atomically(path, ...) would fail before writing a byte, or "" when it would
// not: a loop of symbolic links, a file there that is not a regular file, a name longer than a
// file name may be, a folder that is missing or takes no new file. It creates and removes a
// temporary file beside the target to know, and changes nothing else. For checking an output
// before the work that makes it.
std::string why_not_writable(const std::string& path);

// "" when `path` (its symbolic links followed) is a regular file or nothing; else what is there,
// as "it is a FIFO (named pipe), not a regular file: only a regular file is replaced".
std::string not_a_regular_file(const std::string& path);

// The temporary file a write_file_atomically is writing at this moment, or nullptr: what a
// signal handler that ends the program mid-save removes (reading it and unlink() are
// async-signal-safe).
const char* save_in_progress();

}  // namespace autograd::io
