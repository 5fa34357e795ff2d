#include "examples/common/args.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
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
    if (ec != std::errc()) return "?";
    return std::string(buf, end);
}

// A limit as the user would write it: 1 rather than 1.000000, 0.5 rather than 5e-01.
std::string limit_text(long double v) {
    if (v == std::floor(v) && std::fabs(v) < 1e18L) return std::to_string(static_cast<long long>(v));
    return number_text(static_cast<double>(v));
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string join(const std::vector<std::string>& items, const std::string& sep) {
    std::string out;
    for (size_t i = 0; i < items.size(); i++) out += (i ? sep : "") + items[i];
    return out;
}

bool starts_with(const std::string& s, const std::string& prefix) {
    return s.compare(0, prefix.size(), prefix) == 0;
}

// Parse all of `text` as an integer of type T. Rejects "", "12x", " 12", "1.5", overflow.
template <typename T>
T parse_integer(const std::string& name, const std::string& text, const char* what) {
    T value{};
    const char* first = text.data();
    const char* last = first + text.size();
    auto [ptr, ec] = std::from_chars(first, last, value);
    if (ec == std::errc::result_out_of_range)
        throw ArgError(name + " expects " + what + ", got " + quoted(text) + " which is out of range");
    if (ec != std::errc() || ptr != last)
        throw ArgError(name + " expects " + what + ", got " + quoted(text));
    return value;
}

// Parse all of `text` as a finite floating-point number of type T.
template <typename T>
T parse_real(const std::string& name, const std::string& text) {
    T value{};
    const char* first = text.data();
    const char* last = first + text.size();
    auto [ptr, ec] = std::from_chars(first, last, value);
    if (ec == std::errc::result_out_of_range)
        throw ArgError(name + " expects a number, got " + quoted(text) + " which is out of range");
    if (ec != std::errc() || ptr != last)
        throw ArgError(name + " expects a number, got " + quoted(text));
    if (!std::isfinite(value))
        throw ArgError(name + " expects a finite number, got " + quoted(text));
    return value;
}

}  // namespace

int edit_distance(const std::string& a, const std::string& b) {
    // Classic dynamic programme over prefixes, one row at a time.
    // row[j] = distance between the first i chars of a and the first j chars of b.
    std::vector<int> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); j++) row[j] = static_cast<int>(j);
    for (size_t i = 1; i <= a.size(); i++) {
        int diagonal = row[0];   // distance(a[:i-1], b[:j-1])
        row[0] = static_cast<int>(i);
        for (size_t j = 1; j <= b.size(); j++) {
            const int above = row[j];   // distance(a[:i-1], b[:j])
            const int substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
            row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
            diagonal = above;
        }
    }
    return row[b.size()];
}

// ---------------------------------------------------------------------------------------------
// Option

ArgParser::Option::Option(std::string name, Target target, std::string help, std::string metavar)
    : name_(std::move(name)), help_(std::move(help)), metavar_(std::move(metavar)),
      target_(target) {
    // Remember the default now, before parsing overwrites it, for --help.
    std::visit(
        [this](auto* p) {
            using T = std::remove_pointer_t<decltype(p)>;
            if constexpr (std::is_same_v<T, std::string>)
                default_text_ = p->empty() ? "" : "\"" + *p + "\"";
            else if constexpr (std::is_same_v<T, bool>)
                default_text_ = *p ? "on" : "";
            else
                default_text_ = number_text(*p);
        },
        target_);
}

bool ArgParser::Option::is_number() const {
    return !std::holds_alternative<std::string*>(target_) && !is_flag();
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

ArgParser::Option& ArgParser::Option::choices(std::vector<std::string> allowed) {
    if (!std::holds_alternative<std::string*>(target_))
        throw std::invalid_argument(name_ + ": choices() needs a string option");
    choices_ = std::move(allowed);
    return *this;
}

void ArgParser::Option::set_from_text(const std::string& text) const {
    // 1) convert the text to the target's type; 2) check limits; 3) store.
    long double as_number = 0;   // for the range check
    std::visit(
        [&](auto* p) {
            using T = std::remove_pointer_t<decltype(p)>;
            if constexpr (std::is_same_v<T, int>) {
                *p = parse_integer<int>(name_, text, "an integer");
                as_number = *p;
            } else if constexpr (std::is_same_v<T, std::int64_t>) {
                *p = parse_integer<std::int64_t>(name_, text, "an integer");
                as_number = static_cast<long double>(*p);
            } else if constexpr (std::is_same_v<T, std::uint64_t>) {
                *p = parse_integer<std::uint64_t>(name_, text, "a non-negative integer");
                as_number = static_cast<long double>(*p);
            } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
                *p = parse_real<T>(name_, text);
                as_number = *p;
            } else if constexpr (std::is_same_v<T, std::string>) {
                if (!choices_.empty() &&
                    std::find(choices_.begin(), choices_.end(), text) == choices_.end())
                    throw ArgError(name_ + " expects one of " + join(choices_, ", ") + "; got " +
                                   quoted(text));
                *p = text;
            } else {   // bool
                if (text == "true" || text == "1" || text == "yes" || text == "on") *p = true;
                else if (text == "false" || text == "0" || text == "no" || text == "off") *p = false;
                else throw ArgError(name_ + " expects true or false, got " + quoted(text));
            }
        },
        target_);
    // The value is stored before the range check, but parse() exits on error anyway.
    const bool too_low = min_ && as_number < *min_;
    const bool too_high = max_ && as_number > *max_;
    if (too_low || too_high) {
        std::string limit;
        if (min_ && max_) limit = "between " + limit_text(*min_) + " and " + limit_text(*max_);
        else if (min_) limit = ">= " + limit_text(*min_);
        else limit = "<= " + limit_text(*max_);
        throw ArgError(name_ + " must be " + limit + ", got " + text);
    }
}

// ---------------------------------------------------------------------------------------------
// ArgParser

ArgParser::ArgParser(std::string program, std::string description)
    : program_(std::move(program)), description_(std::move(description)) {}

ArgParser::Option& ArgParser::register_option(const std::string& name, Option::Target target,
                                              const std::string& help, const std::string& metavar) {
    if (name.size() < 3 || !starts_with(name, "--") || name.find('=') != std::string::npos)
        throw std::invalid_argument("option name must look like --name, got '" + name + "'");
    if (name == "--help" || find(name))
        throw std::invalid_argument("option " + name + " is registered twice");
    if (std::visit([](auto* p) { return p == nullptr; }, target))
        throw std::invalid_argument("option " + name + " has a null target");
    options_.push_back(std::unique_ptr<Option>(new Option(name, target, help, metavar)));
    return *options_.back();
}

ArgParser::Option& ArgParser::add(const std::string& name, int* target, const std::string& help,
                                  const std::string& metavar) {
    return register_option(name, target, help, metavar.empty() ? "N" : metavar);
}
ArgParser::Option& ArgParser::add(const std::string& name, std::int64_t* target,
                                  const std::string& help, const std::string& metavar) {
    return register_option(name, target, help, metavar.empty() ? "N" : metavar);
}
ArgParser::Option& ArgParser::add(const std::string& name, std::uint64_t* target,
                                  const std::string& help, const std::string& metavar) {
    return register_option(name, target, help, metavar.empty() ? "N" : metavar);
}
ArgParser::Option& ArgParser::add(const std::string& name, float* target, const std::string& help,
                                  const std::string& metavar) {
    return register_option(name, target, help, metavar.empty() ? "X" : metavar);
}
ArgParser::Option& ArgParser::add(const std::string& name, double* target,
                                  const std::string& help, const std::string& metavar) {
    return register_option(name, target, help, metavar.empty() ? "X" : metavar);
}
ArgParser::Option& ArgParser::add(const std::string& name, std::string* target,
                                  const std::string& help, const std::string& metavar) {
    // An empty metavar is filled in by usage(): the choices if there are any, else STR.
    return register_option(name, target, help, metavar);
}
ArgParser::Option& ArgParser::flag(const std::string& name, bool* flag, const std::string& help) {
    return register_option(name, flag, help, "");
}

void ArgParser::positionals(std::vector<std::string>* out, const std::string& metavar,
                            const std::string& help) {
    if (!out) throw std::invalid_argument("positionals() needs a target");
    positionals_ = out;
    positional_metavar_ = metavar;
    positional_help_ = help;
}

ArgParser::Option* ArgParser::find(const std::string& name) const {
    for (const auto& opt : options_)
        if (opt->name_ == name) return opt.get();
    return nullptr;
}

std::string ArgParser::closest_name(const std::string& name) const {
    std::vector<std::string> known{"--help"};
    for (const auto& opt : options_) known.push_back(opt->name_);
    // 1) the nearest name by edit distance, if the typo is small for the name's length
    std::string best;
    int best_distance = 1 << 30;
    for (const auto& k : known) {
        const int d = edit_distance(name, k);
        if (d < best_distance) best_distance = d, best = k;
    }
    const int allowed = std::max<int>(2, static_cast<int>(name.size()) / 3);
    if (best_distance <= allowed) return best;
    // 2) else a unique known name that starts with what was typed ("--learn" -> "--learning-rate")
    std::string prefix_match;
    for (const auto& k : known) {
        if (name.size() >= 4 && starts_with(k, name)) {
            if (!prefix_match.empty()) return "";   // ambiguous
            prefix_match = k;
        }
    }
    return prefix_match;
}

bool ArgParser::parse_or_throw(int argc, const char* const* argv) {
    std::vector<std::string> args;
    for (int i = 1; i < argc; i++) args.emplace_back(argv[i]);
    return parse_or_throw(args);
}

bool ArgParser::parse_or_throw(const std::vector<std::string>& args) {
    bool only_positionals = false;   // set by "--"
    for (size_t i = 0; i < args.size(); i++) {
        const std::string& arg = args[i];

        // 1) positional arguments (and everything after "--")
        const bool looks_like_option = arg.size() > 1 && arg[0] == '-' &&
                                       !(std::isdigit(static_cast<unsigned char>(arg[1])) ||
                                         arg[1] == '.');
        if (only_positionals || !looks_like_option) {
            if (!positionals_)
                throw ArgError("unexpected argument " + quoted(arg) +
                               " (this program takes no positional arguments)");
            positionals_->push_back(arg);
            continue;
        }
        if (arg == "--") {
            only_positionals = true;
            continue;
        }
        if (arg == "--help" || arg == "-h") return false;

        // 2) split "--name=value"
        const size_t eq = arg.find('=');
        const std::string name = arg.substr(0, eq);
        const bool has_value = eq != std::string::npos;

        Option* opt = find(name);
        if (!opt) {
            const std::string suggestion = closest_name(name);
            throw ArgError("unknown flag " + quoted(name) +
                           (suggestion.empty() ? "" : "; did you mean " + suggestion + "?"));
        }

        // 3) find the value: after '=', in the next argument, or none for a flag
        std::string value;
        if (has_value) {
            value = arg.substr(eq + 1);
        } else if (opt->is_flag()) {
            value = "true";
        } else {
            const bool next_is_value = i + 1 < args.size() && !starts_with(args[i + 1], "--");
            if (!next_is_value) {
                std::string metavar = opt->metavar_.empty() ? "STR" : opt->metavar_;
                throw ArgError(name + " expects a value (" + name + " " + metavar + ")");
            }
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
        go_on = parse_or_throw(argc, argv);
    } catch (const ArgError& e) {
        std::cout.flush();
        std::cerr << program_ << ": " << e.what() << " (see --help)" << std::endl;
        std::exit(2);
    }
    if (!go_on) {
        std::cout << usage() << std::flush;
        std::exit(0);
    }
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
        std::string left = "  " + opt->name_;
        if (!opt->is_flag()) {
            std::string metavar = opt->metavar_;
            if (metavar.empty()) metavar = opt->choices_.empty() ? "STR" : "{" + join(opt->choices_, "|") + "}";
            left += " " + metavar;
        }
        std::vector<std::string> notes;
        if (!opt->default_text_.empty()) notes.push_back("default: " + opt->default_text_);
        if (opt->min_ && opt->max_) notes.push_back("range: " + limit_text(*opt->min_) + ".." + limit_text(*opt->max_));
        else if (opt->min_) notes.push_back("min: " + limit_text(*opt->min_));
        else if (opt->max_) notes.push_back("max: " + limit_text(*opt->max_));
        std::string right = opt->help_;
        if (!notes.empty()) right += (right.empty() ? "(" : " (") + join(notes, "; ") + ")";
        rows.push_back({left, right});
    }
    if (positionals_) rows.push_back({"  " + positional_metavar_, positional_help_});
    rows.push_back({"  -h, --help", "show this help and exit"});

    size_t width = 0;
    for (const auto& r : rows) width = std::max(width, r.left.size());
    width = std::min<size_t>(width, 30);   // a very long name gets its help on the next line

    std::ostringstream out;
    out << "usage: " << program_ << " [options]";
    if (positionals_) out << " [" << positional_metavar_ << "...]";
    out << "\n";
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
