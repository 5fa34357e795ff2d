#include "examples/common/output_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "autograd/io/atomic_file.h"

namespace common {

namespace fs = std::filesystem;

std::string read_input_file(const std::string& path, const std::string& kind) {
    // O_NONBLOCK: a FIFO opens at once (to be refused), instead of waiting for a writer
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw std::runtime_error("cannot open '" + path + "': " + std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st;
    if (::fstat(fd, &st) != 0) throw std::runtime_error("cannot read '" + path + "': " + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) throw std::runtime_error("'" + path + "' is a directory, not " + kind);
    if (!S_ISREG(st.st_mode))
        throw std::runtime_error("'" + path + "' is " + (S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)" : S_ISCHR(st.st_mode) ? "a character device" :
                                                         S_ISBLK(st.st_mode) ? "a block device" : "a socket") +
                                 ", not a regular file: a run reads its data more than once (for the checksum --resume checks) "
                                 "and to its end; save it to a file first");
    const auto too_big = [&](int64_t bytes) {
        return std::runtime_error("'" + path + "' holds " + std::to_string(bytes) + " bytes, more than the 2^30 (" + std::to_string(kMaxInputBytes) +
                                  ") a run reads from one file: give a part of it (head -c 1000000000 " + path + " > part)");
    };
    if (st.st_size > kMaxInputBytes) throw too_big(static_cast<int64_t>(st.st_size));
    std::string bytes(static_cast<size_t>(st.st_size), '\0');
    size_t got = 0;
    for (;;) {   // to the end, which a file that grows while read puts later
        if (got == bytes.size()) bytes.resize(std::min<size_t>(bytes.size() + (1 << 16), kMaxInputBytes + 1));
        const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw std::runtime_error("error while reading '" + path + "': " + std::strerror(errno));
        if (n == 0) break;
        got += static_cast<size_t>(n);
        if (got > static_cast<size_t>(kMaxInputBytes)) throw too_big(static_cast<int64_t>(got));
    }
    bytes.resize(got);
    return bytes;
}

void add_overwrite_flag(ArgParser& p, bool* overwrite) {
    p.flag("--overwrite", overwrite,
           "let this run replace files that exist (its --save, --plot, ... and its state); without it a run that would "
           "replace one is refused before it starts. The old file is not kept");
}

std::string resolved_path(const std::string& path) {
    std::error_code ec;
    const fs::path absolute = fs::absolute(path, ec);
    if (ec) return path;
    // weakly_canonical: the part that exists is canonical (links followed), the rest appended;
    // a dangling link's target counts as the file (a save writes through it)
    fs::path p = fs::weakly_canonical(absolute, ec);
    if (ec) return absolute.lexically_normal().string();
    for (int links = 0; links < 40 && fs::is_symlink(fs::symlink_status(p, ec)); links++) {
        const fs::path target = fs::read_symlink(p, ec);
        if (ec) break;
        p = fs::weakly_canonical(target.is_absolute() ? target : p.parent_path() / target, ec);
    }
    return p.string();
}

void RunFiles::add(const std::string& flag, const std::string& path, Kind kind, const std::string& if_exists) {
    if (!path.empty()) files_.push_back({flag, path, resolved_path(path), if_exists, kind});
}

void RunFiles::input(const std::string& flag, const std::string& path) { add(flag, path, Kind::input, ""); }
void RunFiles::output(const std::string& flag, const std::string& path, const std::string& if_exists) {
    add(flag, path, Kind::output, if_exists);
}
void RunFiles::own_output(const std::string& flag, const std::string& path) { add(flag, path, Kind::own_output, ""); }

void RunFiles::check(const ArgParser& p, bool overwrite) const {
    // 1) clashes: an output that is an input or another output (two inputs may be one file)
    for (size_t i = 0; i < files_.size(); i++)
        for (size_t j = 0; j < i; j++) {
            const File &a = files_[j], &b = files_[i];
            if (a.resolved != b.resolved || (a.kind == Kind::input && b.kind == Kind::input)) continue;
            const File& writer = b.kind != Kind::input ? b : a;
            const File& other = &writer == &b ? a : b;
            p.fail(writer.flag + " " + writer.path + " would replace " + other.flag + " " + other.path + ", which this run " +
                   (other.kind == Kind::input ? "reads" : "also writes") + ": give " + writer.flag + " another path");
        }
    // 2) an output that is there but not a regular file (a device, a FIFO): never replaced, even
    //    with --overwrite (a save renames its file over the path: /dev/full would become a file)
    for (const File& f : files_)
        if (f.kind != Kind::input)
            if (const std::string what = autograd::io::not_a_regular_file(f.path); !what.empty()) p.fail(f.flag + " " + f.path + ": " + what);
    // 3) outputs that exist: replaced only when asked
    if (overwrite) return;
    std::error_code ec;
    for (const File& f : files_)
        if (f.kind == Kind::output && fs::exists(f.path, ec))
            p.fail(f.flag + " " + f.path + " exists, and this run would replace it: add --overwrite to let it (the old file is "
                   "not kept), or " + f.if_exists);
}

}  // namespace common
