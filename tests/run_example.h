// Running an example program from a test, the way a user runs it: the tests of the examples'
// flags (tests/test_example_flags_*.cpp) start `copy_task` or `translation` with a few flags and
// read what it prints, so a flag that is parsed but never reaches the code it is meant to change
// makes a test fail.
//
//   ExampleRun r = run_example("copy_task", {"--steps", "5", "--d-model", "16", "--heads", "2"});
//   CHECK(r.status == 0);
//   double loss = number_after(r.out, "final loss ");
//
// The programs are the ones this build links (Makefile: examples/ for build/, BUILD/bin/ for any
// other build), named by EXAMPLES_BIN, which the Makefile defines for the test files.
#pragma once
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>          // open
#include <signal.h>         // kill
#include <sys/resource.h>   // wait4's rusage: a run's peak RSS
#include <sys/wait.h>       // WIFEXITED, WEXITSTATUS, waitpid
#include <unistd.h>         // getpid

#ifndef EXAMPLES_BIN
#error "EXAMPLES_BIN (the folder of the example programs) is defined by the Makefile"
#endif

struct ExampleRun {
    int status = -1;    // the exit status (-1: killed by a signal, or could not start)
    std::string out;    // standard output
    std::string err;    // standard error (progress lines, messages)
};

// A folder of its own for the files a test writes (checkpoints, TSV files, SVG), removed and
// recreated on each call with the same name.
inline std::filesystem::path example_scratch_dir(const std::string& name) {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                      ("transformer-tests-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

// One argument for sh: in single quotes, a single quote written as '\''.
inline std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// The lines of a program's output (its newlines).
inline int count_lines(const std::string& text) {
    int n = 0;
    for (char c : text) n += c == '\n';
    return n;
}

inline std::string read_whole_file(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

// Runs EXAMPLES_BIN/name with `args` (and `stdin_text` on its standard input), with OMP_NUM_THREADS
// = omp_threads (one thread unless args say otherwise), and returns its exit status and everything
// it printed.
inline ExampleRun run_example(const std::string& name, const std::vector<std::string>& args,
                              const std::string& stdin_text = "", int omp_threads = 1) {
    const std::filesystem::path dir = example_scratch_dir("run");
    std::ofstream(dir / "stdin", std::ios::binary) << stdin_text;
    std::string cmd = "OMP_NUM_THREADS=" + std::to_string(omp_threads);
    cmd += ' ';
    cmd += shell_quote(std::string(EXAMPLES_BIN) + "/" + name);
    for (const std::string& a : args) {   // (appended piece by piece: GCC 12 warns, wrongly, on " " + string)
        cmd += ' ';
        cmd += shell_quote(a);
    }
    for (const auto& [redirect, file] : {std::pair{" <", "stdin"}, {" >", "out"}, {" 2>", "err"}}) {
        cmd += redirect;
        cmd += shell_quote((dir / file).string());
    }
    ExampleRun r;
    const int raw = std::system(cmd.c_str());
    r.status = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = read_whole_file(dir / "out");
    r.err = read_whole_file(dir / "err");
    std::filesystem::remove_all(dir);
    return r;
}

// Runs EXAMPLES_BIN/name with `args` as run_example does, after the sh commands in `setup` (a
// limit: "ulimit -v 1500000", "trap '' XFSZ; ulimit -f 8"), on one thread, ended by SIGKILL after
// 60 s (a run that hangs, reading a FIFO, fails its test instead of hanging the suite).
inline ExampleRun run_example_limited(const std::string& name, const std::vector<std::string>& args, const std::string& setup) {
    const std::filesystem::path dir = example_scratch_dir("limited");
    std::string cmd = setup + "; OMP_NUM_THREADS=1 exec timeout -s KILL 60 " + shell_quote(std::string(EXAMPLES_BIN) + "/" + name);
    for (const std::string& a : args) {
        cmd += ' ';
        cmd += shell_quote(a);
    }
    for (const auto& [redirect, file] : {std::pair{" </dev/null >", "out"}, {" 2>", "err"}}) {
        cmd += redirect;
        cmd += shell_quote((dir / file).string());
    }
    ExampleRun r;
    const int raw = std::system(cmd.c_str());
    r.status = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = read_whole_file(dir / "out");
    r.err = read_whole_file(dir / "err");
    std::filesystem::remove_all(dir);
    return r;
}

// The number printed right after the first occurrence of `label` in `text` ("final loss 2.1376"
// -> 2.1376); fails the test (and returns NaN) when the label is not there.
inline double number_after(const std::string& text, const std::string& label) {
    const size_t at = text.find(label);
    INFO("looking for \"" << label << "\" in:\n" << text);
    REQUIRE(at != std::string::npos);
    return std::strtod(text.c_str() + at + label.size(), nullptr);
}

// Runs EXAMPLES_BIN/name with `args` as run_example does, waits until its standard output holds
// `wait_for` (at most 60 s), then sends it each of `signals` in turn (a few ms apart), as a user's
// Ctrl-C would, and returns what it printed and its exit status once it has ended.
inline ExampleRun interrupt_example(const std::string& name, const std::vector<std::string>& args, const std::string& wait_for,
                                    const std::vector<int>& signals) {
    const std::filesystem::path dir = example_scratch_dir("interrupt");
    const std::string program = std::string(EXAMPLES_BIN) + "/" + name, out = (dir / "out").string(), err = (dir / "err").string();
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {   // the child: the program, its output to files, one thread
        std::freopen(out.c_str(), "w", stdout);
        std::freopen(err.c_str(), "w", stderr);
        ::setenv("OMP_NUM_THREADS", "1", 1);
        std::vector<char*> argv{const_cast<char*>(program.c_str())};
        for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(program.c_str(), argv.data());
        ::_exit(127);
    }
    bool seen = false;
    for (int waited = 0; !seen && waited < 60000; waited += 5) {
        seen = read_whole_file(out).find(wait_for) != std::string::npos;
        if (!seen) ::usleep(5000);
    }
    CHECK(seen);
    for (int sig : signals) {
        ::kill(pid, sig);
        ::usleep(2000);
    }
    int raw = 0;
    ::waitpid(pid, &raw, 0);
    ExampleRun r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = read_whole_file(out);
    r.err = read_whole_file(err);
    std::filesystem::remove_all(dir);
    return r;
}

// A bad flag stops the program before it runs: exit status 2, nothing on stdout, one line on
// stderr that says what was wrong.
inline void check_refused_in_one_line(const ExampleRun& r, const std::string& message) {
    INFO(r.err);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(message) != std::string::npos);
}

// The peak resident memory (bytes) of one run of an example, as the kernel counted it (wait4).
inline long long peak_rss_of(const std::string& name, const std::vector<std::string>& args) {
    const std::string program = std::string(EXAMPLES_BIN) + "/" + name;
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {   // (dup2, not freopen: that would write out the test's own buffered output a second time)
        const int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 1);
        ::dup2(null, 2);
        ::setenv("OMP_NUM_THREADS", "2", 1);
        std::vector<char*> argv{const_cast<char*>(program.c_str())};
        for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(program.c_str(), argv.data());
        ::_exit(127);
    }
    int raw = 0;
    struct rusage usage {};
    ::wait4(pid, &raw, 0, &usage);
    REQUIRE((WIFEXITED(raw) && WEXITSTATUS(raw) == 0));
    return static_cast<long long>(usage.ru_maxrss) * 1024;
}
