// A small declarative command-line parser for the example programs.
//
//   common::ArgParser p("copy_task", "Train a Transformer to copy its input.");
//   int steps = 600;       p.add("--steps", &steps, "training steps").min(1);
//   float lr = 1.0f;       p.add("--lr", &lr, "learning-rate factor").range(0, 100);
//   std::string save;      p.add("--save", &save, "write a checkpoint to PATH", "PATH");
//   bool paper = false;    p.flag("--paper", &paper, "use the paper's configuration");
//   p.parse(argc, argv);   // on error: one line on stderr, exit 2. --help: usage, exit 0.
//   if (paper && !p.given("--steps")) steps = 20000;   // a preset that explicit flags override
//
// Accepted forms: `--name value`, `--name=value`, and for flags `--name` (or `--name=true|false`).
// The default shown by --help is the variable's value when add() was called. An empty value
// (`--save ""`, what a script's unset variable gives) is refused, never taken as "not given".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace common {

// Thrown by ArgParser::parse_or_throw. what() is one line, without the program name.
class ArgError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class ArgParser {
public:
    // One registered option. add() returns a reference so limits can be chained:
    // p.add("--steps", &steps, "training steps").min(1);
    class Option {
    public:
        Option& min(long double lo);   // numbers only: value >= lo
        Option& max(long double hi);   // numbers only: value <= hi
        Option& range(long double lo, long double hi) { return min(lo).max(hi); }
        // Text only: what the refusal of an empty value adds, the way to ask for what an empty
        // value once meant ("to save nothing, give --no-save").
        Option& if_empty(const std::string& hint);

    private:
        friend class ArgParser;
        using Target = std::variant<int*, std::int64_t*, std::uint64_t*, float*, std::string*, bool*>;
        Option(std::string name, Target target, std::string help, std::string metavar);

        void set_from_text(const std::string& text) const;   // throws ArgError
        bool is_flag() const { return std::holds_alternative<bool*>(target_); }
        bool is_number() const { return !is_flag() && !std::holds_alternative<std::string*>(target_); }

        std::string name_, help_, metavar_, default_text_, if_empty_;
        Target target_;
        std::optional<long double> min_, max_;
        bool given_ = false;
    };

    ArgParser(std::string program, std::string description);

    // An option that takes a value: int, int64_t, uint64_t, float or std::string. metavar is the
    // placeholder shown in --help ("--save PATH"); empty: N for integers, X for floats, STR.
    template <class T>
    Option& add(const std::string& name, T* target, const std::string& help, const std::string& metavar = "") {
        return register_option(name, target, help, metavar);
    }
    // A boolean switch: `--paper` sets it to true; `--paper=false` sets it to false.
    Option& flag(const std::string& name, bool* flag, const std::string& help);

    // Parse argv (argv[0] is the program path and is skipped). On an error prints
    // "program: message (see --help)" to stderr and exits with code 2; on --help / -h prints
    // usage() to stdout and exits with code 0.
    void parse(int argc, const char* const* argv);

    // The same without exiting, on the arguments after the program path: throws ArgError.
    // Returns false when --help / -h was given (nothing after it is parsed), true otherwise.
    [[nodiscard]] bool parse_or_throw(const std::vector<std::string>& args);

    // For checks that involve several options, after parse(): prints
    // "program: message (see --help)" to stderr and exits with code 2, as parse() does.
    [[noreturn]] void fail(const std::string& message) const;
    // "program: message" on stderr, and parsing goes on: a value it corrects, e.g.
    void warn(const std::string& message) const;

    // Whether `name` appeared on the command line. Throws std::invalid_argument if `name`
    // was never registered (a typo in the program, not in the user's input).
    bool given(const std::string& name) const;
    // Whether this program offers an option named `name` at all.
    bool has(const std::string& name) const { return find(name) != nullptr; }

    std::string usage() const;   // the --help text

private:
    Option& register_option(const std::string& name, Option::Target target, const std::string& help,
                            const std::string& metavar);
    Option* find(const std::string& name) const;

    std::string program_, description_;
    std::vector<std::unique_ptr<Option>> options_;   // pointers stay valid as options_ grows
};

}  // namespace common
