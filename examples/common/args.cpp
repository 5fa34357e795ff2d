#include "examples/common/args.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <system_error>

namespace common {

namespace {

// The shortest text that reads back as the same value: 0.001f -> "0.001", 600 -> "600".
template <typename T>
std::string number_text(T value) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
    return ec == std::errc() ? std::string(buf, end) : "?";
}

// A limit as the user would write it: 1 rather than 1.000000, 0.5 rather than 5e-01.
std::string limit_text(long double v) {
    if (v == std::floor(v) && std::fabs(v) < 1e18L) return std::to_string(static_cast<long long>(v));
    return number_text(static_cast<double>(v));
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// All of `text` as a number of type T ("what" names the kind in the message). Rejects "", "12x",
// " 12", "1.5" for integers, overflow, and non-finite floats.
template <typename T>
T parse_number(const std::string& name, const std::string& text, const char* what) {
    T value{};
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc::result_out_of_range)
        throw ArgError(name + " expects " + what + ", got " + quoted(text) + " which is out of range");
    if (ec != std::errc() || ptr != text.data() + text.size()) throw ArgError(name + " expects " + what + ", got " + quoted(text));
    if constexpr (std::is_floating_point_v<T>)
        if (!std::isfinite(value)) throw ArgError(name + " expects a finite number, got " + quoted(text));
    return value;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Option

ArgParser::Option::Option(std::string name, Target target, std::string help, std::string metavar)
    : name_(std::move(name)), help_(std::move(help)), metavar_(std::move(metavar)), target_(target) {
    // Remember the default now, before parsing overwrites it, for --help.
    std::visit(
        [this](auto* p) {
            using T = std::remove_pointer_t<decltype(p)>;
            if constexpr (std::is_same_v<T, std::string>) default_text_ = p->empty() ? "" : "\"" + *p + "\"";
            else if constexpr (std::is_same_v<T, bool>) default_text_ = *p ? "on" : "";
            else default_text_ = number_text(*p);
        },
        target_);
    if (metavar_.empty()) metavar_ = std::holds_alternative<float*>(target_) ? "X" : is_number() ? "N" : "STR";
}

ArgParser::Option& ArgParser::Option::min(long double lo) {
    if (!is_number()) throw std::invalid_argument(name_ + ": min() needs a numeric option");
    min_ = lo;
    return *this;
}

ArgParser::Option& ArgParser::Option::max(long double hi) {
    if (!is_number()) throw std::invalid_argument(name_ + ": max() needs a numeric option");
    max_ = hi;
    return *this;
}

ArgParser::Option& ArgParser::Option::if_empty(const std::string& hint) {
    if (!std::holds_alternative<std::string*>(target_)) throw std::invalid_argument(name_ + ": if_empty() needs a text option");
    if_empty_ = hint;
    return *this;
}

void ArgParser::Option::set_from_text(const std::string& text) const {
    // 1) convert the text to the target's type and store it; 2) check limits (parse() exits on
    //    an error, so a stored out-of-range value is never used)
    long double as_number = 0, lo = min_.value_or(0), hi = max_.value_or(0);
    std::visit(
        [&](auto* p) {
            using T = std::remove_pointer_t<decltype(p)>;
            if constexpr (std::is_same_v<T, std::string>) {
                // "" is what `--save "$OUT"` passes when OUT is unset: taken as "no --save", the run
                // would quietly save nothing
                if (text.empty())
                    throw ArgError(name_ + " needs " + metavar_ + ", got an empty value (an unset variable in a script?)" +
                                   (if_empty_.empty() ? "" : ": " + if_empty_));
                *p = text;
            } else if constexpr (std::is_same_v<T, bool>) {
                if (text == "true" || text == "1" || text == "yes" || text == "on") *p = true;
                else if (text == "false" || text == "0" || text == "no" || text == "off") *p = false;
                else throw ArgError(name_ + " expects true or false, got " + quoted(text));
            } else {
                *p = parse_number<T>(name_, text, std::is_floating_point_v<T> ? "a number"
                                                  : std::is_signed_v<T>       ? "an integer"
                                                                              : "a non-negative integer");
                as_number = static_cast<long double>(*p);
                // A float holds the nearest float to what was typed, and so must its limits: 0.99 is
                // 0.9900000095 as a float, above 0.99 as a long double, and the bound printed in
                // --help would be refused. Compared as the same float, the bound is accepted.
                if constexpr (std::is_floating_point_v<T>) {
                    lo = static_cast<long double>(static_cast<T>(lo));
                    hi = static_cast<long double>(static_cast<T>(hi));
                }
            }
        },
        target_);
    if ((min_ && as_number < lo) || (max_ && as_number > hi)) {
        const std::string limit = min_ && max_ ? "between " + limit_text(*min_) + " and " + limit_text(*max_)
                                  : min_       ? ">= " + limit_text(*min_)
                                               : "<= " + limit_text(*max_);
        throw ArgError(name_ + " must be " + limit + ", got " + text);
    }
}

// ---------------------------------------------------------------------------------------------
// ArgParser

ArgParser::ArgParser(std::string program, std::string description)
    : program_(std::move(program)), description_(std::move(description)) {}

ArgParser::Option& ArgParser::register_option(const std::string& name, Option::Target target, const std::string& help,
                                              const std::string& metavar) {
    if (name.size() < 3 || !starts_with(name, "--") || name.find('=') != std::string::npos)
        throw std::invalid_argument("option name must look like --name, got '" + name + "'");
    if (name == "--help" || find(name)) throw std::invalid_argument("option " + name + " is registered twice");
    if (std::visit([](auto* p) { return p == nullptr; }, target))
        throw std::invalid_argument("option " + name + " has a null target");
    options_.push_back(std::unique_ptr<Option>(new Option(name, target, help, metavar)));
    return *options_.back();
}

ArgParser::Option& ArgParser::flag(const std::string& name, bool* flag, const std::string& help) {
    return register_option(name, flag, help, "");
}

ArgParser::Option* ArgParser::find(const std::string& name) const {
    for (const auto& opt : options_)
        if (opt->name_ == name) return opt.get();
    return nullptr;
}

bool ArgParser::parse_or_throw(const std::vector<std::string>& args) {
    for (size_t i = 0; i < args.size(); i++) {
        const std::string& arg = args[i];
        // 1) options only: "-5" or "-.5" would be a number, not an option
        const bool looks_like_option = arg.size() > 1 && arg[0] == '-' && !std::isdigit(static_cast<unsigned char>(arg[1])) && arg[1] != '.';
        if (!looks_like_option) throw ArgError("unexpected argument " + quoted(arg) + " (this program takes no positional arguments)");
        if (arg == "--help" || arg == "-h") return false;

        // 2) split "--name=value"
        const size_t eq = arg.find('=');
        const std::string name = arg.substr(0, eq);
        Option* opt = find(name);
        if (!opt) throw ArgError("unknown flag " + quoted(name));

        // 3) the value: after '=', in the next argument, or none for a flag
        std::string value;
        if (eq != std::string::npos) {
            value = arg.substr(eq + 1);
        } else if (opt->is_flag()) {
            value = "true";
        } else {
            if (i + 1 == args.size() || starts_with(args[i + 1], "--"))
                throw ArgError(name + " expects a value (" + name + " " + opt->metavar_ + ")");
            value = args[++i];
        }
        opt->set_from_text(value);
        opt->given_ = true;
    }
    return true;
}

void ArgParser::parse(int argc, const char* const* argv) {
    bool go_on = false;
    try {
        go_on = parse_or_throw(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const ArgError& e) {
        fail(e.what());
    }
    if (!go_on) {
        std::cout << usage() << std::flush;
        std::exit(0);
    }
}

void ArgParser::warn(const std::string& message) const { std::fprintf(stderr, "%s: %s\n", program_.c_str(), message.c_str()); }

void ArgParser::fail(const std::string& message) const {
    std::cout.flush();
    std::cerr << program_ << ": " << message << " (see --help)" << std::endl;
    std::exit(2);
}

bool ArgParser::given(const std::string& name) const {
    const Option* opt = find(name);
    if (!opt) throw std::invalid_argument("given(): no option named " + name);
    return opt->given_;
}

std::string ArgParser::usage() const {
    // One row per option: "  --name META" padded to a common width, then help and notes.
    struct Row { std::string left, right; };
    std::vector<Row> rows;
    for (const auto& opt : options_) {
        std::string notes;
        const auto note = [&](const std::string& n) { notes += (notes.empty() ? "" : "; ") + n; };
        if (!opt->default_text_.empty()) note("default: " + opt->default_text_);
        if (opt->min_ && opt->max_) note("range: " + limit_text(*opt->min_) + ".." + limit_text(*opt->max_));
        else if (opt->min_) note("min: " + limit_text(*opt->min_));
        else if (opt->max_) note("max: " + limit_text(*opt->max_));
        std::string right = opt->help_;
        if (!notes.empty()) right += (right.empty() ? "(" : " (") + notes + ")";
        rows.push_back({"  " + opt->name_ + (opt->is_flag() ? "" : " " + opt->metavar_), right});
    }
    rows.push_back({"  -h, --help", "show this help and exit"});

    size_t width = 0;
    for (const auto& r : rows) width = std::max(width, r.left.size());
    width = std::min<size_t>(width, 30);   // a very long name gets its help on the next line

    std::ostringstream out;
    out << "usage: " << program_ << " [options]\n";
    if (!description_.empty()) out << "\n" << description_ << "\n";
    out << "\noptions:\n";
    for (const auto& r : rows) {
        out << r.left;
        if (r.left.size() > width) out << "\n" << std::string(width, ' ');
        else out << std::string(width - r.left.size(), ' ');
        out << "  " << r.right << "\n";
    }
    return out.str();
}

}  // namespace common
