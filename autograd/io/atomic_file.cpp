// Whole or not there: see atomic_file.h.
#include "autograd/io/atomic_file.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fcntl.h>      // POSIX I/O: the C++ streams cannot fsync, and fsync is what makes
#include <sys/stat.h>   // "rename over the old file" safe after a power cut
#include <unistd.h>

#include "autograd/random.h"   // splitmix64_mix: the temporary file's random name

namespace autograd::io {

#ifndef NAME_MAX
#define NAME_MAX 255
#endif

// write() all n bytes, retrying short writes and EINTR. False on error, with errno set.
static bool write_all(int fd, const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return false;
        if (w == 0) { errno = EIO; return false; }            // no progress: don't spin
        p += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

// Write the pieces to an open temp file, fsync and close it. On failure the returned errno is
// nonzero (the fd is closed either way).
static int write_file_contents(int fd, const std::vector<std::string_view>& pieces) {
    bool ok = true;
    for (size_t i = 0; ok && i < pieces.size(); i++) ok = write_all(fd, pieces[i].data(), pieces[i].size());
    ok = ok && ::fsync(fd) == 0;                              // data on disk before the rename
    int err = ok ? 0 : errno;
    if (::close(fd) != 0 && err == 0) err = errno;            // close can report a late error
    return err;
}

// Where a save really goes. PATH itself, unless PATH is a symbolic link: then the file the link
// names, followed through a chain of links, each relative target read relative to its link's
// directory (as the kernel reads it). Renaming over the link itself would turn it into a plain
// file and leave the file it names stale. A dangling link's target is written: that is the file
// the link says PATH is. 40 links is the kernel's own limit (ELOOP); a loop of links stops there.
// On an error, sets `error` and returns PATH.
static std::string follow_symlinks(const std::string& path, std::string& error) {
    namespace fs = std::filesystem;
    fs::path p = path;
    for (int links = 0;; links++) {
        std::error_code ec;
        if (!fs::is_symlink(fs::symlink_status(p, ec))) return p.string();   // a file, or nothing yet
        if (links == 40) {
            error = std::strerror(ELOOP);
            return path;
        }
        const fs::path target = fs::read_symlink(p, ec);
        if (ec) {
            error = "cannot read the symbolic link '" + p.string() + "': " + ec.message();
            return path;
        }
        p = target.is_absolute() ? target : p.parent_path() / target;
    }
}

// A device, a pipe or a folder is not a file a save may replace (renamed over, /dev/full would
// become a plain file, even for root).
std::string not_a_regular_file(const std::string& target) {
    struct stat st;
    if (::stat(target.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return "";
    const char* what = S_ISDIR(st.st_mode)    ? "a folder"
                       : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a file";
    return std::string("it is ") + what + ", not a regular file: only a regular file is replaced";
}

// The directory `file` is in: "." for a bare name.
static std::string directory_of(const std::string& file) {
    const std::string dir = std::filesystem::path(file).parent_path().string();
    return dir.empty() ? "." : dir;
}

// Create a temporary file ".NAME.XXXXXX.tmp" beside `target`, named by six random characters,
// and open it for writing. Its own name, unlike a fixed "PATH.tmp", lets two saves to one path
// (two threads, two processes) write side by side without truncating each other's half-written
// file. The leading dot hides it from `ls`, and the name never ends in ".safetensors". NAME is
// cut to fit: a target named with 250 of the 255 bytes a name may have still gets a temporary.
// This is mkstemp's loop (O_EXCL: a name that exists is never reused, try another) with one
// difference: the mode 0666 goes to open(), so the kernel applies the umask (and a directory's
// default ACL) exactly as for any new file. mkstemp creates 0600, and setting the mode after it
// would need the umask, which a process can only read by changing it (not thread-safe).
// Returns the fd (or -1 with errno set) and the name in `tmp`.
static int create_temp_beside(const std::string& target, std::string& tmp) {
    namespace fs = std::filesystem;
    static std::atomic<uint64_t> counter{0};   // distinct names within this process
    const fs::path where = fs::path(target);
    const std::string dir = where.parent_path().string();
    const std::string name = where.filename().string().substr(0, NAME_MAX - 12);   // "." NAME "." XXXXXX ".tmp"
    static const char letters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    for (int attempt = 0; attempt < 100; attempt++) {
        // the process id and the clock keep other processes (and a rerun with a reused id) apart
        const uint64_t now = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
        uint64_t bits = splitmix64_mix(counter.fetch_add(1) ^ (static_cast<uint64_t>(::getpid()) << 40) ^ splitmix64_mix(now));
        std::string suffix(6, ' ');
        for (char& c : suffix) {
            c = letters[bits % 62];
            bits /= 62;
        }
        tmp = (dir.empty() ? "" : dir + "/") + "." + name + "." + suffix + ".tmp";
        const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    errno = EEXIST;
    return -1;
}

// The temporary file being written, for save_in_progress(): a fixed buffer and an atomic flag,
// which a signal handler may read (a std::string it may not). A name too long for it is not
// offered, and then stays behind if the program is killed mid-save, as before.
static char g_saving[4096];
static std::atomic<bool> g_saving_set{false};
namespace {
struct SaveInProgress {
    explicit SaveInProgress(const std::string& tmp) {
        if (tmp.size() >= sizeof g_saving) return;
        std::memcpy(g_saving, tmp.c_str(), tmp.size() + 1);
        g_saving_set.store(true);
    }
    ~SaveInProgress() { g_saving_set.store(false); }
};
}  // namespace

const char* save_in_progress() { return g_saving_set.load() ? g_saving : nullptr; }

std::string why_not_writable(const std::string& path) {
    std::string link_error;
    const std::string target = follow_symlinks(path, link_error);
    if (!link_error.empty()) return "cannot follow its symbolic links: " + link_error;
    const std::string link = target != path ? "(a symbolic link to '" + target + "') " : "";
    if (const std::string kind = not_a_regular_file(target); !kind.empty()) return link + kind;
    const std::string dir = directory_of(target), name = std::filesystem::path(target).filename().string();
    const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);   // -1 for a folder that is not there
    if (name.size() > static_cast<size_t>(name_max > 0 ? name_max : NAME_MAX))
        return link + "its name is " + std::to_string(name.size()) + " bytes, more than the " +
               std::to_string(name_max > 0 ? name_max : NAME_MAX) + " a file name may have in '" + dir + "'";
    std::string tmp;
    const int fd = create_temp_beside(target, tmp);
    if (fd < 0) return link + "cannot write in '" + dir + "': " + std::strerror(errno);
    ::close(fd);
    ::unlink(tmp.c_str());
    return "";
}

void write_file_atomically(const std::string& path, const std::vector<std::string_view>& pieces, const std::string& who) {
    // 1) the file to replace: PATH, or the one its symbolic link names. Each error names PATH
    //    (what the user typed), the file behind it when they differ, and the reason.
    std::string link_error;
    const std::string target = follow_symlinks(path, link_error);
    const std::string cannot = who + ": cannot write '" + path + "'" +
                               (target != path ? " (a symbolic link to '" + target + "')" : "") + ": ";
    if (!link_error.empty()) throw std::runtime_error(cannot + link_error);
    // (a folder is left to the rename, which never replaces one with a file)
    if (const std::string kind = not_a_regular_file(target); !kind.empty() && !std::filesystem::is_directory(target))
        throw std::runtime_error(cannot + kind);

    // 2) write everything to a new temporary file beside the target; the old file is untouched
    //    until step 3. Loaders read only the path they are given, so a temporary left behind by
    //    a killed run is never mistaken for the file (and no code lists a directory to find one).
    std::string tmp;
    const int fd = create_temp_beside(target, tmp);
    if (fd < 0) {
        const int err = errno;
        throw std::runtime_error(cannot + "cannot create a temporary file in '" + directory_of(target) +
                                 "': " + std::strerror(err));
    }
    const SaveInProgress in_progress(tmp);   // until the rename: a signal handler may remove it
    if (int err = write_file_contents(fd, pieces); err != 0) {
        ::unlink(tmp.c_str());   // nothing half-written stays behind
        throw std::runtime_error(cannot + std::strerror(err));
    }

    // 3) atomically replace the target: readers see either the old file or the new one, never a
    //    mix, and of two saves racing to one path the last rename wins whole
    if (::rename(tmp.c_str(), target.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());   // nor a whole file under a name no loader reads
        throw std::runtime_error(cannot + "cannot rename the temporary file '" + tmp + "' to '" + target +
                                 "': " + std::strerror(err));
    }
    g_saving_set.store(false);   // renamed: the new file is whole, and no temporary is left

    // 4) fsync the directory so the rename itself survives a power cut. Some filesystems cannot
    //    sync a directory (EINVAL, ENOTSUP, ...), and a directory we may write but not read cannot
    //    be opened: the new file is complete either way, so those pass. A real failure (EIO) is
    //    reported: the save may not survive a crash, and the caller should know.
    const std::string dir = directory_of(target);
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        const int err = ::fsync(dfd) == 0 ? 0 : errno;
        ::close(dfd);
        if (err != 0 && err != EINVAL && err != ENOTSUP && err != EROFS && err != EBADF)
            throw std::runtime_error(who + ": wrote '" + path + "', but cannot fsync its directory '" + dir +
                                     "': " + std::strerror(err) + " (a power cut may undo the save)");
    }
}

}  // namespace autograd::io
