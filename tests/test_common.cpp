// The example programs' shared utilities: argument parsing, progress lines, SVG charts, terminal
// heatmaps and checkpoint averaging.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>   // setrlimit: a file-size limit fails a write as a full disk does
#include <sys/stat.h>       // mkfifo
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/io/crc32c.h"
#include "autograd/io/json.h"
#include "autograd/io/safetensors.h"
#include "examples/common/args.h"
#include "examples/common/heatmap_terminal.h"
#include "examples/common/kept_epochs.h"
#include "examples/common/memory_budget.h"
#include "examples/common/progress.h"
#include "examples/common/run_state.h"
#include "examples/common/svg.h"
#include "examples/common/training_flags.h"
#include "examples/common/training_log.h"
#include "models/gpt.h"
#include "models/rnn_seq2seq.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "optim/optim.h"

using namespace common;

namespace {

// The message parse_or_throw throws for `args`, or "" if it does not throw.
std::string error_of(ArgParser& p, const std::vector<std::string>& args) {
    try {
        (void)p.parse_or_throw(args);
    } catch (const ArgError& e) {
        return e.what();
    }
    return "";
}

size_t count(const std::string& text, const std::string& needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) n++;
    return n;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// A small XML check: every tag closes in order, attributes are quoted, and '&' only starts
// one of the five entities. Returns "" if the text passes, else what is wrong.
std::string xml_problem(const std::string& xml) {
    std::vector<std::string> open;
    for (size_t i = 0; i < xml.size(); i++) {
        if (xml[i] == '&') {
            bool known = false;
            for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"})
                known = known || xml.compare(i, std::string(e).size(), e) == 0;
            if (!known) return "bare & at " + std::to_string(i);
            continue;
        }
        if (xml[i] == '>') return "bare > at " + std::to_string(i);
        if (xml[i] != '<') continue;
        // find the end of the tag, skipping quoted attribute values
        size_t j = i + 1;
        char quote = 0;
        for (; j < xml.size(); j++) {
            if (quote) { if (xml[j] == quote) quote = 0; else if (xml[j] == '<') return "< in attribute"; }
            else if (xml[j] == '"' || xml[j] == '\'') quote = xml[j];
            else if (xml[j] == '>') break;
        }
        if (j == xml.size()) return "unterminated tag at " + std::to_string(i);
        const std::string tag = xml.substr(i + 1, j - i - 1);
        const std::string name = tag.substr(tag[0] == '/', tag.find_first_of(" />", 1) - (tag[0] == '/'));
        if (tag[0] == '/') {
            if (open.empty() || open.back() != name) return "unexpected </" + name + ">";
            open.pop_back();
        } else if (tag.back() != '/') {
            open.push_back(name);
        }
        i = j;
    }
    return open.empty() ? "" : "unclosed <" + open.back() + ">";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ArgParser

TEST_CASE("ArgParser reads every type, in both --name value and --name=value forms") {
    ArgParser p("demo", "A demo.");
    int steps = 600;
    std::int64_t offset = 0;
    std::uint64_t seed = 1;
    float lr = 1.0f;
    std::string save;
    bool paper = false, verbose = true;
    p.add("--steps", &steps, "training steps");
    p.add("--offset", &offset, "an offset");
    p.add("--seed", &seed, "random seed");
    p.add("--lr", &lr, "learning rate");
    p.add("--save", &save, "checkpoint path", "PATH");
    p.flag("--paper", &paper, "paper preset");
    p.flag("--verbose", &verbose, "chatty");

    SUBCASE("separate values") {
        CHECK(p.parse_or_throw({"--steps", "12", "--offset", "-9000000000", "--seed",
                                "18446744073709551615", "--lr", "3e-4", "--save",
                                "out/model.safetensors", "--paper"}));
        CHECK(steps == 12);
        CHECK(offset == -9000000000LL);
        CHECK(seed == 18446744073709551615ULL);
        CHECK(lr == 3e-4f);
        CHECK(save == "out/model.safetensors");
        CHECK(paper);
        CHECK(verbose);   // untouched
    }
    SUBCASE("= form, including values that start with '-' or contain '='") {
        CHECK(p.parse_or_throw({"--steps=7", "--lr=-2.5", "--save=a=b", "--verbose=false", "--paper=1"}));
        CHECK(steps == 7);
        CHECK(lr == -2.5f);
        CHECK(save == "a=b");
        CHECK_FALSE(verbose);
        CHECK(paper);
    }
    SUBCASE("the last occurrence wins") {
        CHECK(p.parse_or_throw({"--steps", "1", "--steps", "2"}));
        CHECK(steps == 2);
    }
    SUBCASE("--help stops parsing and reports it") {
        CHECK_FALSE(p.parse_or_throw({"--steps", "3", "--help", "--steps", "4"}));
        CHECK(steps == 3);
        CHECK_FALSE(p.parse_or_throw({"-h"}));
    }
}

TEST_CASE("ArgParser usage lists each option with its help and its default") {
    ArgParser p("copy_task", "Train a Transformer to copy its input.");
    int steps = 600;
    float lr = 0.001f;
    std::string save, decode = "greedy";
    bool paper = false;
    p.add("--steps", &steps, "training steps").min(1);
    p.add("--lr", &lr, "learning rate");
    p.add("--save", &save, "write a checkpoint to PATH", "PATH");
    p.add("--decode", &decode, "decoding");
    p.flag("--paper", &paper, "use the paper's configuration");
    steps = 5;   // defaults are captured by add(), not at usage() time
    const std::string u = p.usage();
    CHECK(u.find("usage: copy_task [options]") == 0);
    CHECK(u.find("Train a Transformer to copy its input.") != std::string::npos);
    CHECK(u.find("--steps N") != std::string::npos);
    CHECK(u.find("training steps (default: 600; min: 1)") != std::string::npos);
    CHECK(u.find("learning rate (default: 0.001)") != std::string::npos);
    CHECK(u.find("--save PATH") != std::string::npos);
    CHECK(u.find("--decode STR") != std::string::npos);
    CHECK(u.find("(default: \"greedy\")") != std::string::npos);
    CHECK(u.find("--help") != std::string::npos);
}

TEST_CASE("ArgParser error messages") {
    ArgParser p("demo", "");
    int steps = 1, layers = 2;
    float lr = 1;
    std::uint64_t seed = 0;
    bool paper = false;
    p.add("--steps", &steps, "").min(1);
    p.add("--layers", &layers, "").range(1, 12);
    p.add("--lr", &lr, "").max(10);
    p.add("--seed", &seed, "");
    p.flag("--paper", &paper, "");

    SUBCASE("unknown flag") {
        CHECK(error_of(p, {"--step", "3"}) == "unknown flag '--step'");
        CHECK(error_of(p, {"--layres=3"}) == "unknown flag '--layres'");
        CHECK(error_of(p, {"-lr", "3"}) == "unknown flag '-lr'");
    }
    SUBCASE("missing value") {
        CHECK(error_of(p, {"--steps"}) == "--steps expects a value (--steps N)");
        CHECK(error_of(p, {"--steps", "--lr", "1"}) == "--steps expects a value (--steps N)");
    }
    SUBCASE("bad integers: text, trailing garbage, fractions, overflow, negative unsigned") {
        CHECK(error_of(p, {"--steps", "abc"}) == "--steps expects an integer, got 'abc'");
        CHECK(error_of(p, {"--steps", "12x"}) == "--steps expects an integer, got '12x'");
        CHECK(error_of(p, {"--steps=1.5"}) == "--steps expects an integer, got '1.5'");
        CHECK(error_of(p, {"--steps="}) == "--steps expects an integer, got ''");
        CHECK(error_of(p, {"--steps", "99999999999"}) ==
              "--steps expects an integer, got '99999999999' which is out of range");
        CHECK(error_of(p, {"--seed", "-1"}) == "--seed expects a non-negative integer, got '-1'");
    }
    SUBCASE("bad floats") {
        CHECK(error_of(p, {"--lr", "fast"}) == "--lr expects a number, got 'fast'");
        CHECK(error_of(p, {"--lr", "1e-3x"}) == "--lr expects a number, got '1e-3x'");
        CHECK(error_of(p, {"--lr", "nan"}) == "--lr expects a finite number, got 'nan'");
        CHECK(error_of(p, {"--lr", "1e999"}) == "--lr expects a number, got '1e999' which is out of range");
    }
    SUBCASE("out of range") {
        CHECK(error_of(p, {"--steps", "0"}) == "--steps must be >= 1, got 0");
        CHECK(error_of(p, {"--layers", "13"}) == "--layers must be between 1 and 12, got 13");
        CHECK(error_of(p, {"--lr", "10.5"}) == "--lr must be <= 10, got 10.5");
        CHECK(error_of(p, {"--layers", "12"}) == "");
    }
    SUBCASE("bad flag value") {
        CHECK(error_of(p, {"--paper=maybe"}) == "--paper expects true or false, got 'maybe'");
    }
    SUBCASE("positional arguments when none are accepted") {
        CHECK(error_of(p, {"data.txt"}) ==
              "unexpected argument 'data.txt' (this program takes no positional arguments)");
        CHECK(error_of(p, {"--paper", "yes"}) ==   // a flag does not take a separate value
              "unexpected argument 'yes' (this program takes no positional arguments)");
    }
}

// A float flag holds the float nearest to what was typed, and 0.99 or 1e-06 as a float lies a
// little above or below the same number as a long double: each limit --help prints, typed as it
// prints it, is accepted, and the float next to it outside is refused.
TEST_CASE("ArgParser: a float flag accepts its limits as --help prints them, and refuses the next float out") {
    ArgParser p("demo", "");
    float temperature = 1, dropout = 0, top_p = 1;
    p.add("--temperature", &temperature, "").range(1e-6, 100);
    p.add("--dropout", &dropout, "").range(0, 0.99);
    p.add("--top-p", &top_p, "").range(1e-6, 1);
    CHECK(p.usage().find("range: 1e-06..100") != std::string::npos);
    CHECK(p.usage().find("range: 0..0.99") != std::string::npos);
    for (const auto& [flag, bound] : std::vector<std::pair<std::string, std::string>>{
             {"--temperature", "1e-06"}, {"--temperature", "100"}, {"--dropout", "0"}, {"--dropout", "0.99"},
             {"--top-p", "1e-06"}, {"--top-p", "1"}}) {
        CAPTURE(flag);
        CHECK(error_of(p, {flag, bound}) == "");
    }
    CHECK(dropout == 0.99f);
    CHECK(error_of(p, {"--dropout", "0.99000007"}) == "--dropout must be between 0 and 0.99, got 0.99000007");
    CHECK(error_of(p, {"--temperature", "9.999999e-07"}) == "--temperature must be between 1e-06 and 100, got 9.999999e-07");
    CHECK(error_of(p, {"--top-p", "1.0000001"}) == "--top-p must be between 1e-06 and 1, got 1.0000001");
}

// `--save "$OUT"` with OUT unset passes "": taken as "no --save", the run would save nothing
// without a word. Every text option refuses it, in both forms, and says what else to give.
TEST_CASE("ArgParser refuses an empty value for a text option, naming the flag and, where given, the way to ask for nothing") {
    ArgParser p("demo", "");
    std::string save = "demo.safetensors", prompt = "\n";
    p.add("--save", &save, "", "PATH").if_empty("to save nothing, give --no-save");
    p.add("--prompt", &prompt, "", "TEXT");
    CHECK(error_of(p, {"--save", ""}) ==
          "--save needs PATH, got an empty value (an unset variable in a script?): to save nothing, give --no-save");
    CHECK(error_of(p, {"--save="}) == error_of(p, {"--save", ""}));
    CHECK(error_of(p, {"--prompt", ""}) == "--prompt needs TEXT, got an empty value (an unset variable in a script?)");
    CHECK(save == "demo.safetensors");
    CHECK(error_of(p, {"--prompt", " "}) == "");   // a blank is a value
    CHECK(prompt == " ");
    int n = 0;
    CHECK_THROWS_AS(p.add("--n", &n, "").if_empty("x"), std::invalid_argument);
}

TEST_CASE("ArgParser::given tells explicit flags from defaults, so a preset can yield to them") {
    ArgParser p("demo", "");
    int steps = 600, layers = 2;
    bool paper = false;
    p.add("--steps", &steps, "");
    p.add("--layers", &layers, "");
    p.flag("--paper", &paper, "");
    CHECK(p.parse_or_throw({"--paper", "--steps=600"}));
    if (paper && !p.given("--steps")) steps = 20000;
    if (paper && !p.given("--layers")) layers = 6;
    CHECK(p.given("--paper"));
    CHECK(p.given("--steps"));   // given, even though equal to the default
    CHECK_FALSE(p.given("--layers"));
    CHECK(steps == 600);
    CHECK(layers == 6);
    CHECK_THROWS_AS((void)p.given("--stpes"), std::invalid_argument);   // a typo in the program
}

TEST_CASE("ArgParser rejects malformed registrations") {
    ArgParser p("demo", "");
    int a = 0;
    std::string s;
    p.add("--a", &a, "");
    CHECK_THROWS_AS(p.add("--a", &a, ""), std::invalid_argument);     // twice
    CHECK_THROWS_AS(p.add("-b", &a, ""), std::invalid_argument);      // one dash
    CHECK_THROWS_AS(p.add("--help", &a, ""), std::invalid_argument);  // reserved
    CHECK_THROWS_AS(p.add("--c", &s, "").min(1), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Progress

TEST_CASE("make_lr_schedule: --schedule cosine ends at 0, noam is the paper's, another name is refused") {
    autograd::Tensor w = autograd::Tensor::zeros({1}).requires_grad_();
    optim::Adam opt({w}, {.lr = 0.0f});
    // the copy task's default: 100 warmup steps to 3e-3, then a cosine down to 0 at step 600
    const auto cosine = make_lr_schedule(opt, "cosine", 3e-3f, 1.0f, 128, 100, 600);
    CHECK(cosine->lr_at(1) == doctest::Approx(3e-5));                     // 3e-3 * 1/100
    CHECK(cosine->lr_at(100) == doctest::Approx(3e-3));                   // the peak, at the end of warmup
    CHECK(cosine->lr_at(350) == doctest::Approx(1.5e-3));                 // halfway down: cos(pi/2) = 0
    CHECK(cosine->lr_at(600) == doctest::Approx(0.0).epsilon(1e-12));     // 0 at the last step
    // noam ignores --lr: factor * D^-0.5 * min(step^-0.5, step * warmup^-1.5), peak at step = warmup
    const auto noam = make_lr_schedule(opt, "noam", 3e-3f, 0.5f, 512, 400, 600);
    CHECK(noam->lr_at(400) == doctest::Approx(0.5 / std::sqrt(512.0 * 400.0)));
    CHECK(noam->lr_at(600) == doctest::Approx(0.5 / std::sqrt(512.0 * 600.0)));   // still far from 0
    // a run shorter than its warmup is all warmup: the peak at its last step
    const auto short_run = make_lr_schedule(opt, "cosine", 3e-3f, 1.0f, 128, 100, 30);
    CHECK(short_run->lr_at(15) == doctest::Approx(1.5e-3));
    CHECK(short_run->lr_at(30) == doctest::Approx(3e-3));
    CHECK_THROWS_WITH_AS(make_lr_schedule(opt, "linear", 3e-3f, 1.0f, 128, 100, 600),
                         doctest::Contains("unknown learning-rate schedule 'linear'"), std::invalid_argument);
}

TEST_CASE("format_duration") {
    CHECK(format_duration(0.25) == "0.25s");
    CHECK(format_duration(12.34) == "12.3s");
    CHECK(format_duration(59.99) == "1m00s");
    CHECK(format_duration(65) == "1m05s");
    CHECK(format_duration(3725) == "1h02m");
    CHECK(format_duration(-1) == "?");
    CHECK(format_value(2.31049, 3) == "2.31");
    CHECK(format_value(0.000123456) == "0.0001235");
}

TEST_CASE("Progress to a non-terminal prints plain lines every 10% and at the end") {
    std::ostringstream out;
    double now = 0;
    {
        Progress progress(100, out);   // an ostringstream is never a terminal
        CHECK_FALSE(progress.live());
        progress.set_clock([&] { return now; });
        for (int step = 1; step <= 100; step++) {
            now += 0.5;
            progress.update(step, {{"loss", format_value(1.0 / step)}, {"tok/s", "5400"}});
        }
        progress.finish();
    }
    const std::string text = out.str();
    CHECK(text.find('\r') == std::string::npos);
    CHECK(text.find('\x1b') == std::string::npos);
    const auto lines = lines_of(text);
    REQUIRE(lines.size() == 11);   // step 1, 10, 20, ..., 100
    CHECK(lines[0] == "step 1/100 (1%)  loss 1  tok/s 5400  elapsed 0.50s  eta 49.5s");
    CHECK(lines[5] == "step 50/100 (50%)  loss 0.02  tok/s 5400  elapsed 25.0s  eta 25.0s");
    CHECK(lines[10] == "step 100/100 (100%)  loss 0.01  tok/s 5400  elapsed 50.0s");
}

TEST_CASE("Progress in plain mode also prints when a long interval has passed, and on finish") {
    std::ostringstream out;
    double now = 0;
    Progress progress(1000, out, Progress::Mode::Plain);
    progress.set_clock([&] { return now; });
    progress.set_plain_interval(60);
    for (int step = 1; step <= 5; step++) {
        now += 61;   // each step takes longer than the interval
        progress.update(step);
    }
    progress.update(6);   // no time passed: not printed yet...
    CHECK(lines_of(out.str()).size() == 5);
    progress.finish();   // ...but finish() shows the last state
    const auto lines = lines_of(out.str());
    REQUIRE(lines.size() == 6);
    CHECK(lines[5].find("step 6/1000") == 0);
    CHECK(lines[4].find("eta 16h52m") != std::string::npos);   // 995 steps left at 61 s
}

TEST_CASE("Progress in live mode redraws one line with \\r, throttled, and ends it on finish") {
    std::ostringstream out;
    double now = 0;
    Progress progress(50, out, Progress::Mode::Live);
    progress.set_clock([&] { return now; });
    for (int step = 1; step <= 49; step++) progress.update(step, {{"loss", "1.5"}});   // no time passes
    CHECK(count(out.str(), "\r") == 1);   // only the first update was drawn
    now = 1.0;
    progress.update(25, {{"loss", "0.7"}});
    CHECK(count(out.str(), "\r") == 2);
    progress.log("validation loss 0.8");   // erases the live line, prints, redraws
    progress.update(50, {{"loss", "0.5"}});   // the last step is always drawn
    progress.finish();
    const std::string text = out.str();
    CHECK(text.find("[##########----------]  25/50  loss 0.7  elapsed 1.00s  eta 1.00s") != std::string::npos);
    CHECK(text.find("\r\x1b[Kvalidation loss 0.8\n") != std::string::npos);
    CHECK(text.find("[####################]  50/50  loss 0.5  elapsed 1.00s\x1b[K\n") != std::string::npos);
    CHECK(text.back() == '\n');
}

// ---------------------------------------------------------------------------------------------
// SVG

TEST_CASE("line_plot_svg draws one path per series with escaped names") {
    Series train{"train <loss> & \"more\"", {1, 2, 3, 4}, {4.0, 2.0, 1.0, 0.5}};
    Series val{"val", {2, 4}, {2.5, 0.9}};
    const std::string svg = line_plot_svg("Copy task", "step", "loss", {train, val});
    CHECK(svg.rfind("<svg", 0) == 0);
    CHECK(svg.size() >= 7);
    CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
    CHECK(xml_problem(svg) == "");
    CHECK(count(svg, "<path") == 2);
    CHECK(svg.find("train &lt;loss&gt; &amp; &quot;more&quot;") != std::string::npos);
    CHECK(svg.find("<loss>") == std::string::npos);
    CHECK(svg.find(">step<") != std::string::npos);
    CHECK(svg.find(">loss<") != std::string::npos);
}

TEST_CASE("line_plot_svg, legend_outside: the legend right of the plot area, which keeps its width; the picture wider") {
    Series a{"a", {1, 2}, {1.0, 2.0}}, b{"a longer name", {1, 2}, {2.0, 1.0}};
    const std::string inside = line_plot_svg("T", "x", "y", {a, b}), outside = line_plot_svg("T", "x", "y", {a, b}, {.legend_outside = true});
    CHECK(xml_problem(outside) == "");
    // <rect x=".." y=".." width=".." ...: the number after `key="` at the first `marker`
    auto number_after = [](const std::string& svg, const std::string& marker, const std::string& key) {
        const size_t at = svg.find(marker);
        REQUIRE(at != std::string::npos);
        const size_t k = svg.find(key + "=\"", at);
        return std::stod(svg.substr(k + key.size() + 2));
    };
    const std::string clip = "<clipPath id=\"plot-area\"><rect", legend = "<g font-size=\"12\">\n<rect";
    const double plot_right = number_after(outside, clip, "x") + number_after(outside, clip, "width");
    CHECK(number_after(outside, clip, "width") == number_after(inside, clip, "width"));   // the plot area as wide as before
    CHECK(number_after(outside, "<svg", "width") > number_after(inside, "<svg", "width") + 50);
    CHECK(number_after(outside, legend, "x") > plot_right);                                 // beside it
    CHECK(number_after(inside, legend, "x") < number_after(inside, clip, "x") + number_after(inside, clip, "width"));   // inside it
}

TEST_CASE("line_plot_svg skips non-finite points and survives empty or one-point series") {
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = INFINITY;
    SUBCASE("NaN and inf break the line") {
        Series s{"s", {0, 1, 2, 3, 4}, {1, nan, 2, inf, 3}};
        const std::string svg = line_plot_svg("", "", "", {s});
        CHECK(xml_problem(svg) == "");
        CHECK(svg.find("nan") == std::string::npos);
        CHECK(svg.find("inf") == std::string::npos);
        CHECK(count(svg, " M") == 2);   // three runs of one point each: M, then " M" twice
    }
    SUBCASE("empty, single point, no series at all, log axis with zeros") {
        Series empty{"empty", {}, {}}, one{"one", {5}, {0.3}}, zeros{"z", {0, 1, 2}, {0, 0.1, 10}};
        CHECK(xml_problem(line_plot_svg("t", "x", "y", {empty})) == "");
        CHECK(line_plot_svg("t", "x", "y", {empty}).find("no data") != std::string::npos);
        CHECK(xml_problem(line_plot_svg("t", "x", "y", {one})) == "");
        CHECK(count(line_plot_svg("t", "x", "y", {one}), "<circle") == 1);
        CHECK(xml_problem(line_plot_svg("t", "x", "y", {})) == "");
        const std::string log_svg = line_plot_svg("t", "x", "y", {zeros}, {.log_y = true});
        CHECK(xml_problem(log_svg) == "");
        CHECK(log_svg.find(">0.1<") != std::string::npos);   // a 1-2-5 tick label
        CHECK(log_svg.find(">10<") != std::string::npos);
    }
    SUBCASE("x and y of different lengths are a programming error") {
        Series bad{"bad", {1, 2}, {1}};
        CHECK_THROWS_AS(line_plot_svg("", "", "", {bad}), std::invalid_argument);
    }
}

TEST_CASE("line plot ticks are 1-2-5 values") {
    Series s{"s", {0, 1000}, {0.13, 0.91}};
    const std::string svg = line_plot_svg("", "", "", {s});
    for (const char* label : {">0<", ">200<", ">1000<", ">0.2<", ">0.8<"})
        CHECK_MESSAGE(svg.find(label) != std::string::npos, label);
    CHECK(svg.find(">0.13<") == std::string::npos);
}

TEST_CASE("log-axis ticks: 1-2-5, finer within one decade, only decades over many") {
    const auto has = [](const std::string& svg, const char* label) {
        return svg.find(std::string(">") + label + "<") != std::string::npos;
    };
    Series narrow{"n", {0, 1}, {1.2, 3.1}};
    const std::string a = line_plot_svg("", "", "", {narrow}, {.log_y = true});
    CHECK((has(a, "1") && has(a, "2") && has(a, "3") && has(a, "4")));
    CHECK_FALSE(has(a, "5"));
    Series wide{"w", {0, 1}, {2e-5, 10}};
    const std::string b = line_plot_svg("", "", "", {wide}, {.log_y = true});
    CHECK((has(b, "1e-5") && has(b, "0.001") && has(b, "10")));
    CHECK_FALSE(has(b, "0.002"));
}

TEST_CASE("heatmaps_svg draws one rect per cell and escapes the tokens") {
    Heatmap a{"layer 0 head 0", {"<s>", "a&b"}, {"\"q\"", "x", "caf\xC3\xA9"}, {0, 0.5f, 1, 0.2f, 0.3f, 0.5f}};
    Heatmap b{"layer 0 head 1", {"\xFF bad", "\n"}, {"u", "v"}, {1, 0, 0, 1}};   // invalid UTF-8, newline
    const std::string svg = heatmaps_svg("Attention <enc>", {a, b}, 2);
    CHECK(svg.rfind("<svg", 0) == 0);
    CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
    CHECK(xml_problem(svg) == "");
    CHECK(count(svg, "class=\"cell\"") == 6 + 4);
    CHECK(svg.find("&lt;s&gt;") != std::string::npos);
    CHECK(svg.find("a&amp;b") != std::string::npos);
    CHECK(svg.find("&quot;q&quot;") != std::string::npos);
    CHECK(svg.find("caf\xC3\xA9") != std::string::npos);             // valid UTF-8 kept
    CHECK(svg.find("\xFF") == std::string::npos);                     // invalid byte replaced...
    CHECK(svg.find("\xEF\xBF\xBD bad") != std::string::npos);         // ...by U+FFFD
    CHECK(svg.find("\xE2\x90\x8A") != std::string::npos);             // "\n" shown as U+240A
    CHECK(svg.find("Attention &lt;enc&gt;") != std::string::npos);
    CHECK(svg.find("fill=\"#ffffff\"><title>&lt;s&gt;") != std::string::npos);   // 0 is white
    CHECK(svg.find("fill=\"#08306b\"") != std::string::npos);                     // 1 is dark blue
    CHECK(xml_problem(heatmaps_svg("", {}, 3)) == "");
    Heatmap wrong{"w", {"a"}, {"b", "c"}, {1}};
    CHECK_THROWS_AS(heatmaps_svg("", {wrong}, 1), std::invalid_argument);
}

TEST_CASE("heatmaps_svg, skip_white_cells: the white cells are left out, with their tooltips; every other cell is drawn as before") {
    // white: a's 0 and 0.0004, b's two 0s; not white: 0.2, 0.5 and 1
    Heatmap a{"a", {"r0", "r1"}, {"c0", "c1", "c2"}, {0, 0.5f, 1, 0.2f, 0.0004f, 0.5f}};
    Heatmap b{"b", {"u", "v"}, {"x", "y"}, {1, 0, 0, 1}};
    const std::string all = heatmaps_svg("T", {a, b}, 2), sparse = heatmaps_svg("T", {a, b}, 2, {.skip_white_cells = true});
    CHECK(xml_problem(sparse) == "");
    CHECK(count(all, "class=\"cell\"") == 6 + 4);
    CHECK(count(sparse, "class=\"cell\"") == 4 + 2);   // a: 0 and 0.0004 are white; b: its two 0s
    CHECK(sparse.find("r0 \u2192 c0") == std::string::npos);
    CHECK(sparse.find("r0 \u2192 c1: 0.500") != std::string::npos);
    // each cell kept is byte for byte the one drawn without the option
    size_t at = 0;
    while ((at = sparse.find("<rect class=\"cell\"", at)) != std::string::npos) {
        const std::string cell = sparse.substr(at, sparse.find("</rect>", at) - at);
        CHECK(all.find(cell) != std::string::npos);
        CHECK(cell.find("fill=\"#ffffff\"") == std::string::npos);
        at += cell.size();
    }
}

TEST_CASE("heatmaps_svg: a lo..hi colour scale, or a legend of swatches instead of the colour bar") {
    Heatmap m{"m", {"a"}, {"x", "y"}, {-1, 1}};
    const std::string scaled = heatmaps_svg("", {m}, 1, {.lo = -1, .hi = 1});
    CHECK(scaled.find("fill=\"#ffffff\"><title>a") != std::string::npos);   // lo is white
    CHECK(scaled.find("fill=\"#08306b\"><title>a") != std::string::npos);   // hi is dark blue
    CHECK(scaled.find("heat-scale") != std::string::npos);                   // a colour bar...
    CHECK(scaled.find(">-1<") != std::string::npos);                         // ...that reads -1..1
    CHECK(scaled.find(">-0.5<") != std::string::npos);
    const std::string legend = heatmaps_svg("", {m}, 1, {.lo = -1, .hi = 1, .legend = {{1, "may attend"}, {-1, "masked"}}});
    CHECK(xml_problem(legend) == "");
    CHECK(legend.find("heat-scale") == std::string::npos);                   // no bar for two values
    CHECK(legend.find(">may attend<") != std::string::npos);
    CHECK(legend.find(">masked<") != std::string::npos);
    CHECK_THROWS_AS(heatmaps_svg("", {m}, 1, {.lo = 1, .hi = 1}), std::invalid_argument);
}

// Every picture and text a run writes goes through a temporary file beside it: when a write
// fails (here past a file-size limit, as on a full disk) the file that was there stays whole, and
// no temporary is left. A FIFO or device there is never replaced.
TEST_CASE("write_text_file: a failed write leaves the old file whole; a FIFO is refused and left a FIFO") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("write-text-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path svg = dir / "old.svg";
    std::ofstream(svg) << "<svg>old</svg>";
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {   // the child: a 1 KB file-size limit (SIGXFSZ ignored: the write fails with EFBIG), then a 4 KB picture
        std::signal(SIGXFSZ, SIG_IGN);
        struct rlimit small {1024, 1024};
        ::setrlimit(RLIMIT_FSIZE, &small);
        try {
            write_text_file(svg.string(), std::string(4096, 'x'));
        } catch (const std::runtime_error& e) {
            ::_exit(std::string(e.what()) == "write_text_file: cannot write '" + svg.string() + "': File too large" ? 0 : 4);
        }
        ::_exit(3);
    }
    int raw = 0;
    ::waitpid(pid, &raw, 0);
    CHECK((WIFEXITED(raw) && WEXITSTATUS(raw) == 0));
    std::ifstream in(svg);
    CHECK(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()) == "<svg>old</svg>");
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);   // no temporary left
    const fs::path fifo = dir / "pipe.svg";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH_AS(write_text_file(fifo.string(), "<svg/>"),
                         ("write_text_file: cannot write '" + fifo.string() + "': it is a FIFO (named pipe), not a regular file: only a regular file is replaced").c_str(),
                         std::runtime_error);
    CHECK(fs::is_fifo(fifo));
    fs::remove_all(dir);
}

TEST_CASE("writing to an impossible path throws an error naming it") {
    const std::string path = "/nonexistent-dir/sub/plot.svg";
    try {
        write_line_plot(path, "t", "x", "y", {});
        FAIL("expected an exception");
    } catch (const std::runtime_error& e) {
        CHECK(std::string(e.what()).find(path) != std::string::npos);
    }
    CHECK_THROWS_AS(write_heatmaps(path, "t", {}, 1), std::runtime_error);
}

TEST_CASE("labels: cut between code points, never inside one; control characters made visible") {
    CHECK(utf8_truncate("caf\xC3\xA9", 4) == "caf\xC3\xA9");
    CHECK(utf8_truncate("\xC3\xA9\xC3\xA9\xC3\xA9", 2) == "\xC3\xA9\xE2\x80\xA6");   // "é…"
    CHECK(utf8_truncate("abc", 0) == "");
    CHECK(printable_text("a\nb\x7F\t") == "a\u240Ab\u2421\t");   // control pictures; tab stays
    CHECK(printable_text("\xE2\x82") == "\xEF\xBF\xBD");   // a truncated sequence is one U+FFFD (its maximal subpart, as Unicode recommends)
    CHECK(printable_text("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");                 // overlong '/'
    CHECK(printable_text("\xEF\xBF\xBF") == "\uFFFD");   // U+FFFF: not allowed in XML
    CHECK(xml_escape("a'b") == "a&apos;b");
}

// ---------------------------------------------------------------------------------------------
// Terminal heatmap

TEST_CASE("terminal_heatmap: a title line, vertical column labels, then one line per row") {
    Heatmap m{"head 0", {"a", "\xC3\xA9t\xC3\xA9"}, {"x", "yz", "w"}, {0, 0.5f, 1, 1, 0.25f, 0}};
    const auto lines = lines_of(terminal_heatmap(m, false));
    REQUIRE(lines.size() == 1 + 2 + 2);   // title, 2 header lines ("yz" is longest), 2 rows
    CHECK(lines[0].find("head 0") == 0);
    // row labels are right-aligned by code points: "été" is 3 wide, so "a" gets 2 spaces
    CHECK(lines[3] == "  a   \u2592\u2592\u2588\u2588");
    CHECK(lines[4] == "\xC3\xA9t\xC3\xA9 \u2588\u2588\u2591\u2591  ");
    // column labels stand above their cells: the first cell starts at code point 4
    CHECK(lines[1] == "      y");
    CHECK(lines[2] == "    x z w");

    const std::string colored = terminal_heatmap(m, true);
    CHECK(lines_of(colored).size() == 5);
    CHECK(colored.find("\x1b[48;5;231m") != std::string::npos);   // white for 0
    CHECK(colored.find("\x1b[0m\n") != std::string::npos);        // reset at the end of a row
}

// --average-last K of the translation example. The epochs' parameter values are written here, and
// so are their means: epoch e sets weight element j to (j + 1) * w[e] and bias element j to
// (j + 1) * b[e], with w = 1, 4, 16, 64 and b = -3, 6, -9, 30 for epochs 1..4.
TEST_CASE("KeptEpochs (--average-last K): each parameter becomes the mean of the last K epochs' values, K = 1, 2, 3") {
    nn::Linear layer(2, 3);   // weight (3, 2), bias (3)
    auto set_epoch = [&](float w, float b) {
        for (int64_t j = 0; j < layer.weight.numel(); j++) layer.weight.data()[j] = static_cast<float>(j + 1) * w;
        for (int64_t j = 0; j < layer.bias.numel(); j++) layer.bias.data()[j] = static_cast<float>(j + 1) * b;
    };
    const float w[] = {1, 4, 16, 64}, b[] = {-3, 6, -9, 30};
    const double valid[] = {2.0, 1.0, 3.0, 1.5};   // epoch 2 is the best: it must not disturb the averaging
    struct Case {
        int k;
        size_t kept;
        float weight_mean, bias_mean;   // by hand, over the last min(k, 4) epochs
    };
    for (const Case c : {Case{1, 1, 64.0f, 30.0f},                         // epoch 4 alone
                         Case{2, 2, (16 + 64) / 2.0f, (-9 + 30) / 2.0f},   // 40, 10.5
                         Case{3, 3, (4 + 16 + 64) / 3.0f, (6 - 9 + 30) / 3.0f},   // 28, 9
                         Case{5, 4, (1 + 4 + 16 + 64) / 4.0f, (-3 + 6 - 9 + 30) / 4.0f}}) {   // fewer epochs than K: all 4
        CAPTURE(c.k);
        common::KeptEpochs kept(c.k);
        for (int e = 0; e < 4; e++) {
            set_epoch(w[e], b[e]);
            kept.add(layer, e + 1, valid[e]);
        }
        set_epoch(1000.0f, 1000.0f);   // what the layer holds before averaging must not count
        kept.average_last_into(layer);
        CHECK(kept.averaging());
        CHECK(kept.last_size() == c.kept);
        for (int64_t j = 0; j < layer.weight.numel(); j++) CHECK(layer.weight.data()[j] == doctest::Approx((j + 1) * c.weight_mean).epsilon(1e-6));
        for (int64_t j = 0; j < layer.bias.numel(); j++) CHECK(layer.bias.data()[j] == doctest::Approx((j + 1) * c.bias_mean).epsilon(1e-6));
    }
    common::KeptEpochs none(0);   // --average-last 0, the default: nothing kept for averaging
    none.add(layer, 1, 1.0);
    CHECK(!none.averaging());
    common::KeptEpochs two(2);
    two.add(layer, 1, 1.0);
    nn::Linear other(3, 2);   // another shape: refused, not read out of bounds
    CHECK_THROWS_WITH_AS(two.average_last_into(other), doctest::Contains("not those of the epochs kept"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(two.restore_best(other), doctest::Contains("not those of the epochs kept"), std::invalid_argument);
}

// The best epoch (what the translation example tests and --save writes): the lowest validation
// loss so far, a tie keeps the earlier epoch, NaN is never best, and restore_best puts exactly
// that epoch's values back whatever the module holds since.
TEST_CASE("KeptEpochs: the best epoch is the one with the lowest validation loss, and restore_best brings it back") {
    nn::Linear layer(2, 3);
    auto set_all = [&](float v) {
        for (autograd::Tensor& t : layer.parameters()) std::fill(t.data(), t.data() + t.numel(), v);
    };
    common::KeptEpochs kept(0);
    CHECK(kept.best_epoch() == 0);
    set_all(0.0f);
    kept.restore_best(layer);   // nothing kept yet: the layer is left alone
    CHECK(layer.weight.data()[0] == 0.0f);
    const double valid[] = {3.0, 2.0, 2.5, 2.0, NAN, 2.25};
    const bool best[] = {true, true, false, false, false, false};
    for (int e = 0; e < 6; e++) {
        CAPTURE(e);
        set_all(static_cast<float>(e + 1));   // epoch e + 1's values: all e + 1
        CHECK(kept.add(layer, e + 1, valid[e]) == best[e]);
    }
    CHECK(kept.best_epoch() == 2);
    CHECK(kept.best_valid_loss() == 2.0);
    set_all(1000.0f);
    kept.restore_best(layer);
    for (const autograd::Tensor& t : layer.parameters())
        for (int64_t j = 0; j < t.numel(); j++) CHECK(t.data()[j] == 2.0f);
}

// The mean a result line prints: copy_task weighs every step the same (weight 1), translation
// weighs each batch's loss by its target tokens, so a batch of 30 tokens counts 3 times one of 10.
TEST_CASE("TrainingLog: take_window is the weighted mean since the last one; the curves keep every step") {
    std::ostringstream progress;
    common::TrainingLog log(5, progress);
    CHECK(std::isnan(log.last_loss()));
    log.step(1.0f, 10, {{"loss", "1"}});
    log.step(2.0f, 30, {{"loss", "2"}});
    const common::LossWindow first = log.take_window();
    CHECK(first.steps == 2);
    CHECK(first.mean == doctest::Approx((1.0 * 10 + 2.0 * 30) / 40));   // 1.75, not the plain mean 1.5
    log.add_valid(0.5);
    log.step(4.0f, 1, {});
    log.step(8.0f, 1, {});
    log.step(3.0f, 2, {});
    const common::LossWindow second = log.take_window();   // only the steps since the first window
    CHECK(second.steps == 3);
    CHECK(second.mean == doctest::Approx((4.0 + 8.0 + 2 * 3.0) / 4));
    CHECK(log.steps() == 5);
    CHECK(log.last_loss() == 3.0f);
    CHECK(progress.str().find("loss 2") != std::string::npos);   // the live fields reach the progress line
}

// A Ctrl-C in the first epoch of a translation run: no epoch has ended, so the best validation
// loss is still +inf, and a loss that went NaN makes the window's sum NaN. JSON has neither; the
// state still saves, and restores the same values.
TEST_CASE("save_run / restore_run: a run stopped before its first epoch ends (best loss +inf, a NaN window) saves and restores") {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("run-state-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "state.safetensors").string();
    models::Transformer model({.src_vocab = 7, .tgt_vocab = 7, .layers = 1, .d_model = 8, .d_ff = 16, .heads = 2, .dropout = 0.0f});
    optim::Adam opt(model.parameters(), {.lr = 1.0f});
    optim::NoamSchedule sched(opt, 8, 10);
    std::ostringstream progress;
    common::TrainingLog log(10, progress);
    log.step(2.5f, 3, {});
    log.step(NAN, 1, {});
    common::KeptEpochs kept(2);
    REQUIRE(std::isinf(kept.best_valid_loss()));
    int64_t epoch = 1;
    const common::RunState run{.model = &model, .model_metadata = models::model_to_metadata(model), .opt = &opt, .sched = &sched, .log = &log, .kept = &kept,
                               .rngs = {}, .counters = {{"epoch", &epoch}}, .settings = {}};
    REQUIRE_NOTHROW(common::save_run(run, path));
    std::ostringstream progress2;
    common::TrainingLog log2(10, progress2);
    common::KeptEpochs kept2(2);
    kept2.add(model, 1, 3.0);   // something to be overwritten
    int64_t epoch2 = 0;
    common::RunState back{.model = &model, .model_metadata = models::model_to_metadata(model), .opt = &opt, .sched = &sched, .log = &log2, .kept = &kept2, .rngs = {},
                          .counters = {{"epoch", &epoch2}}, .settings = {}};
    REQUIRE_NOTHROW(common::restore_run(path, back));
    CHECK(std::isinf(kept2.best_valid_loss()));
    CHECK(kept2.best_epoch() == 0);
    CHECK(epoch2 == 1);
    CHECK(log2.steps() == 2);
    CHECK(std::isnan(log2.state().window_sum));
    CHECK(log2.state().window_weight == 4.0);
    std::filesystem::remove_all(dir);
}

// A data file's fingerprint in a run's identity: its size and the CRC-32C of all its bytes. The
// file is read in buffers (64 KiB); this one is a few buffers long and ends in a partial one, and
// one byte changed anywhere, the first buffer or the last, changes the fingerprint, which is
// always that of the whole file worked out here in one piece.
TEST_CASE("file_fingerprint: the size and CRC-32C of the whole file, read in buffers; a byte changed past the first changes it") {
    namespace json = autograd::io::json;
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fingerprint-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "data.txt").string();
    std::string bytes(3 * 65536 + 4099, '\0');   // three whole buffers and a part of a fourth
    uint32_t x = 12345;
    for (char& c : bytes) x = x * 1103515245u + 12345u, c = static_cast<char>(x >> 24);
    auto expected = [](const std::string& b) {
        return "{\"bytes\":" + std::to_string(b.size()) + ",\"crc32c\":\"" + autograd::io::crc32c_hex(autograd::io::crc32c(b.data(), b.size())) + "\"}";
    };
    auto fingerprint_with = [&](const std::string& b) {
        std::ofstream(path, std::ios::binary | std::ios::trunc) << b;
        return json::dump(common::file_fingerprint(path));
    };
    const std::string whole = fingerprint_with(bytes);
    CHECK(whole == expected(bytes));
    for (size_t at : {size_t{10}, size_t{65536 + 7}, bytes.size() - 3}) {   // in the first buffer, the second, the last (partial) one
        CAPTURE(at);
        std::string changed = bytes;
        changed[at] = static_cast<char>(changed[at] ^ 0x20);
        const std::string other = fingerprint_with(changed);
        CHECK(other != whole);
        CHECK(other == expected(changed));
    }
    // a file one byte shorter is another file; so is one of whole buffers only, and an empty one
    for (size_t size : {bytes.size() - 1, size_t{2 * 65536}, size_t{0}}) {
        CAPTURE(size);
        CHECK(fingerprint_with(bytes.substr(0, size)) == expected(bytes.substr(0, size)));
    }
    CHECK(fingerprint_with("") == "{\"bytes\":0,\"crc32c\":\"00000000\"}");
    const std::string missing = (dir / "missing.txt").string();
    std::string message;
    try {
        (void)common::file_fingerprint(missing);
    } catch (const std::runtime_error& e) {
        message = e.what();
    }
    CHECK(message.find("cannot read '" + missing + "'") != std::string::npos);
    std::filesystem::remove_all(dir);
}

// ---- the memory estimates (memory_budget.h), term by term ----------------------------------------
//
// The tests of the examples hold each estimate's total to the peak RSS within a factor of 2, which
// a term dropped or counted once instead of N times stays inside. Here each estimate is read
// apart into its terms, by differences of the total at a few shapes (it is a polynomial in the
// batch and the lengths), and each term is checked against what the shapes say it holds.

namespace {

constexpr int64_t kProgram = 30 << 20;   // the program's own 30 MB, which every estimate adds

// A training estimate, B * (S src + T tgt + S^2 src_src + T S tgt_src + T^2 tgt_tgt) floats
// besides `fixed` bytes: the floats per source and target token, and per pair of positions of
// one row (an attention's weights).
struct TrainingTerms {
    int64_t fixed = 0;                            // bytes with no batch: weights, gradients, moments, program
    int64_t src = 0, tgt = 0;                     // floats per token
    int64_t src_src = 0, tgt_src = 0, tgt_tgt = 0;  // floats per pair
};

TrainingTerms training_terms(const models::Seq2Seq& m, bool full_logits) {
    auto at = [&](int64_t B, int64_t S, int64_t T) { return common::training_peak_bytes(m, B, S, T, full_logits); };
    auto row = [&](int64_t S, int64_t T) { return at(1, S, T) - at(0, S, T); };   // one row's bytes
    TrainingTerms k;
    k.fixed = at(0, 0, 0);
    k.src_src = (row(2, 0) - 2 * row(1, 0)) / 8;
    k.tgt_tgt = (row(0, 2) - 2 * row(0, 1)) / 8;
    k.tgt_src = (row(1, 1) - row(1, 0) - row(0, 1)) / 4;
    k.src = row(1, 0) / 4 - k.src_src;
    k.tgt = row(0, 1) / 4 - k.tgt_tgt;
    // nothing else: at other shapes the estimate is these terms added up, B rows of them
    for (const auto& [B, S, T] : {std::tuple<int64_t, int64_t, int64_t>{3, 7, 5}, {2, 11, 13}, {5, 1, 17}})
        CHECK(at(B, S, T) == k.fixed + 4 * B * (S * k.src + T * k.tgt + S * S * k.src_src + T * S * k.tgt_src + T * T * k.tgt_tgt));
    return k;
}

}  // namespace

// The Transformer (copy_task, translation): every one of the N layers keeps its attention weights,
// one float per pair of positions and head (the encoder's S x S, the cross-attention's T x S, the
// decoder's T x T); per token each encoder layer keeps about 12 D + 2 F floats, each decoder layer
// 18 D + 2 F (memory_budget.h), and the output layer three copies of the V logits when the loss
// reads them whole, one when it is fused; the weights cost 4 floats each (Adam's two moments).
TEST_CASE("training memory estimate, Transformer: attention weights per pair, head and layer; activations per token and layer; logits") {
    for (const auto& [N, D, F, H] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 12, 20, 3}, {2, 12, 20, 3}, {3, 12, 20, 1},
                                     {3, 20, 44, 2}}) {
        CAPTURE(N);
        CAPTURE(H);
        const int64_t V = 13;
        const models::Transformer m({.src_vocab = 11, .tgt_vocab = V, .layers = N, .d_model = D, .d_ff = F, .heads = H, .dropout = 0.0f});
        for (const bool full_logits : {true, false}) {
            CAPTURE(full_logits);
            const TrainingTerms k = training_terms(m, full_logits);
            CHECK(k.src_src == N * H);
            CHECK(k.tgt_src == N * H);
            CHECK(k.tgt_tgt == N * H);
            CHECK(k.src == N * (12 * D + 2 * F));
            CHECK(k.tgt == N * (18 * D + 2 * F) + (full_logits ? 3 * V : V));
            CHECK(k.fixed == 16 * m.num_parameters() + kProgram);
        }
    }
}

// A recurrent encoder-decoder (translation --model rnn-...): each layer's step keeps 12 Hd floats
// per token (gates before and after their nonlinearity, h and c), each direction of the encoder
// its own; with attention, each (target, source) pair keeps its score (additive: 2 Hd, the others
// 2); no pair of source positions (a recurrent encoder has no self-attention), no pair of targets.
TEST_CASE("training memory estimate, recurrent: steps per layer and direction, attention only between target and source") {
    struct Case {
        models::Context context;
        nn::Score score;
        bool bidirectional;
        int64_t layers;
    };
    for (const Case& c : {Case{models::Context::bahdanau, nn::Score::additive, true, 2}, Case{models::Context::bahdanau, nn::Score::dot, false, 1},
                          Case{models::Context::bahdanau, nn::Score::general, true, 1}, Case{models::Context::sutskever, nn::Score::additive, false, 3}}) {
        const int64_t E = 6, Hd = 10, V = 13, dirs = c.bidirectional ? 2 : 1;
        CAPTURE(c.layers);
        CAPTURE(dirs);
        const models::RNNSeq2Seq m({.src_vocab = 11, .tgt_vocab = V, .embed = E, .hidden = Hd, .layers = c.layers, .cell = nn::CellKind::lstm,
                                    .context = c.context, .bidirectional = c.bidirectional, .score = c.score, .dropout = 0.0f});
        const TrainingTerms k = training_terms(m, /*full_logits=*/false);
        const int64_t score = c.context != models::Context::bahdanau ? 0 : c.score == nn::Score::additive ? 2 * Hd : 2;
        CHECK(k.src_src == 0);
        CHECK(k.tgt_src == score);
        CHECK(k.tgt_tgt == 0);
        CHECK(k.src == E + c.layers * dirs * 12 * Hd);
        CHECK(k.tgt == E + c.layers * 12 * Hd + 4 * Hd + V);
        CHECK(k.fixed == 16 * m.num_parameters() + kProgram);
    }
}

// The GPT (gpt.cpp): its loss is fused (one slice of V logits per token); each of the N blocks
// keeps 12 D + 2 F floats per token, F = 4 D, and its attention weights, one float per pair of
// positions and head.
TEST_CASE("training memory estimate, GPT: attention weights per pair, head and block; each block's activations; one slice of logits") {
    for (const auto& [N, H] : {std::pair<int64_t, int64_t>{1, 2}, {2, 2}, {3, 1}, {3, 3}}) {
        CAPTURE(N);
        CAPTURE(H);
        const int64_t D = 12, V = 17;
        const models::GPT m({.vocab = V, .block_size = 32, .layers = N, .heads = H, .d_model = D});
        auto at = [&](int64_t B, int64_t T) { return common::gpt_training_peak_bytes(m, B, T); };
        auto row = [&](int64_t T) { return at(1, T) - at(0, T); };
        const int64_t pair = (row(2) - 2 * row(1)) / 8, token = row(1) / 4 - pair;
        CHECK(pair == N * H);
        CHECK(token == N * (12 * D + 2 * 4 * D) + V);
        CHECK(at(0, 9) == 16 * m.num_parameters() + kProgram);
        for (const auto& [B, T] : {std::pair<int64_t, int64_t>{3, 7}, {2, 29}})
            CHECK(at(B, T) == at(0, T) + 4 * B * (T * token + T * T * pair));
    }
}

// Decoding a Transformer (copy_task --eval, translation's test): the decoder runs on rows x beam
// hypotheses, so every term of the decoder is the beam's multiple of greedy's (greedy: beam 1);
// with the cache, each of the N layers keeps the keys and values (2 D floats) of every source and
// every target position of each hypothesis; without it nothing per layer lives on, and each step
// reruns the prefix: its self-attention's scores and weights, 2 floats per pair of targets and
// head. The encoder runs once per source, one layer at a time: its S x S scores and weights, 2 per
// head, do not grow with the beam. (The weights: once, no gradients.)
TEST_CASE("decoding memory estimate, Transformer: beam k is k times greedy's decoder; the cache per layer; the encoder per source") {
    const int64_t rows = 5, S = 9, T = 11, D = 12, F = 20, H = 3;
    auto model = [&](int64_t N, int64_t V) {
        return models::Transformer({.src_vocab = 11, .tgt_vocab = V, .layers = N, .d_model = D, .d_ff = F, .heads = H, .dropout = 0.0f});
    };
    // the decoder's part, which a wide vocabulary makes the larger passing peak: bytes besides the weights
    auto decoder = [](const models::Transformer& m, int64_t r, int64_t s, int64_t t, int beam, bool kv) {
        return common::decoding_peak_bytes(m, r, s, t, beam, kv) - common::decoding_peak_bytes(m, 0, s, t, beam, kv);
    };
    for (const bool kv : {true, false}) {
        CAPTURE(kv);
        int64_t last = 0;   // N - 1 layers' greedy bytes
        for (const int64_t N : {1, 2, 3}) {
            CAPTURE(N);
            const models::Transformer m = model(N, 997);
            CHECK(common::decoding_peak_bytes(m, 0, S, T, 1, kv) == m.num_parameters() * 4 + kProgram);
            const int64_t greedy = decoder(m, rows, S, T, 0, kv);
            CHECK(decoder(m, rows, S, T, 1, kv) == greedy);
            for (const int beam : {2, 4}) CHECK(decoder(m, rows, S, T, beam, kv) == beam * greedy);
            if (N > 1) CHECK(greedy - last == (kv ? 4 * rows * 2 * D * (S + T) : 0));   // one more layer's cache
            last = greedy;
            // the prefix rerun: 2 floats per pair of targets and head, for each hypothesis
            const int64_t t_t = decoder(m, rows, S, T + 1, 2, kv) - 2 * decoder(m, rows, S, T, 2, kv) + decoder(m, rows, S, T - 1, 2, kv);
            CHECK(t_t == (kv ? 0 : 4 * 2 * rows * 2 * H * 2));
        }
    }
    // long sources, few words: the encoder's layer is the larger passing peak, 2 floats per pair of
    // source positions and head, once per source whatever the beam and however many layers
    for (const int64_t N : {1, 3}) {
        const models::Transformer m = model(N, 5);
        for (const int beam : {1, 4}) {
            CAPTURE(beam);
            const int64_t s_s = decoder(m, 2, 201, 1, beam, true) - 2 * decoder(m, 2, 200, 1, beam, true) + decoder(m, 2, 199, 1, beam, true);
            CHECK(s_s == 4 * 2 * 2 * H * 2);
        }
    }
}

// Decoding a recurrent model: every term is per hypothesis (the encoder's states, which the beam's
// copies carry; a step's gates, scores and logits), and --no-kv-cache changes nothing (the decoder
// carries its state). Per source position each hypothesis keeps the encoder's states (dirs x Hd;
// with attention also their keys) and, with attention, a step's scores; without attention, no score.
TEST_CASE("decoding memory estimate, recurrent: beam k is k times greedy's; the cache flag changes nothing; scores only with attention") {
    const int64_t rows = 3, S = 7, T = 9, Hd = 10;
    for (const auto& [context, bidirectional] : {std::pair{models::Context::bahdanau, true}, {models::Context::sutskever, false}}) {
        const bool attention = context == models::Context::bahdanau;
        CAPTURE(attention);
        const models::RNNSeq2Seq m({.src_vocab = 11, .tgt_vocab = 13, .embed = 6, .hidden = Hd, .layers = 2, .cell = nn::CellKind::gru,
                                    .context = context, .bidirectional = bidirectional, .score = nn::Score::additive, .dropout = 0.0f});
        auto decoder = [&](int64_t s, int beam, bool kv) {
            return common::decoding_peak_bytes(m, rows, s, T, beam, kv) - common::decoding_peak_bytes(m, 0, s, T, beam, kv);
        };
        const int64_t greedy = decoder(S, 0, true);
        CHECK(decoder(S, 1, true) == greedy);
        CHECK(decoder(S, 0, false) == greedy);
        for (const int beam : {2, 5}) CHECK(decoder(S, beam, false) == beam * greedy);
        const int64_t dirs = bidirectional ? 2 : 1;
        const int64_t per_source = attention ? dirs * Hd * 2 + 2 * Hd : dirs * Hd;   // states (and keys), additive scores
        CHECK(decoder(S + 1, 3, true) - decoder(S, 3, true) == 4 * 3 * rows * per_source);
    }
}

TEST_CASE("describe_lr_schedule: the words for the schedule make_lr_schedule makes") {
    CHECK(common::describe_lr_schedule("noam", 3e-3f, 0.5f, 512, 400, 600) == "lr = 0.5 * Noam(D=512, warmup=400)");
    CHECK(common::describe_lr_schedule("cosine", 3e-3f, 1.0f, 128, 100, 600) ==
          "lr: 100 warmup steps to 0.003, then a cosine down to 0 at step 600");
    CHECK(common::describe_lr_schedule("cosine", 3e-3f, 1.0f, 128, 100, 30) ==   // all warmup
          "lr: 30 warmup steps to 0.003, then a cosine down to 0 at step 30");
}

// A second Ctrl-C while a save is under way ends the program at once, but never leaves half a
// file: the save is abandoned, its temporary file removed, the file it would have replaced kept
// as it was, and a line says so. The save is made long (64 MB) and the second signal sent once
// its temporary file exists; if the save still wins the race, the test tries again.
TEST_CASE("InterruptWatch: a second signal during a save abandons it, removes its temporary file, and says so") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("interrupt-save-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path target = dir / "state.safetensors", err = dir / "err";
    bool abandoned = false;
    for (int attempt = 0; attempt < 3 && !abandoned; attempt++) {
        std::ofstream(target) << "the earlier state";
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {   // the child: a first signal, then the save it asks for
            (void)!std::freopen(err.c_str(), "w", stderr);
            InterruptWatch watch(/*same_interrupt_within=*/0);   // the second signal comes at once: here it is a second
            ::raise(SIGINT);
            std::vector<uint8_t> big(64 << 20, 7);
            autograd::io::save_safetensors(target.string(), {{"x", "U8", {static_cast<int64_t>(big.size())}, std::move(big)}});
            ::_exit(0);
        }
        bool seen = false;
        for (int waited = 0; !seen && waited < 20000; waited++) {
            std::error_code ec;
            for (const auto& e : fs::directory_iterator(dir, ec)) seen = seen || e.path().extension() == ".tmp";
            if (!seen) ::usleep(500);
        }
        ::kill(pid, SIGINT);
        int raw = 0;
        ::waitpid(pid, &raw, 0);
        abandoned = WIFEXITED(raw) && WEXITSTATUS(raw) == 128 + SIGINT;
    }
    REQUIRE(abandoned);
    std::ifstream in(err);
    const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(said.find("interrupted again: the save was abandoned and its temporary file removed") != std::string::npos);
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename().string());
    std::sort(files.begin(), files.end());
    CHECK(files == std::vector<std::string>{"err", "state.safetensors"});
    std::ifstream kept(target);
    CHECK(std::string((std::istreambuf_iterator<char>(kept)), std::istreambuf_iterator<char>()) == "the earlier state");
    fs::remove_all(dir);
}

// `timeout -s INT` signals the process and its group: a program run from a script gets its one
// interrupt twice at once. Signals within the window of the first are that interrupt (the run is
// saved); one after it is a deliberate second (the run quits at once). A child process takes the
// signals, with a window of 0.3 s.
TEST_CASE("InterruptWatch: signals within a moment of the first are that interrupt; a later one quits at once") {
    namespace fs = std::filesystem;
    const fs::path err = fs::temp_directory_path() / ("interrupt-twice-" + std::to_string(::getpid()));
    const auto child = [&](bool wait_past_the_window) {
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            (void)!std::freopen(err.c_str(), "w", stderr);
            InterruptWatch watch(0.3);
            ::raise(SIGINT);
            ::raise(SIGINT);    // as timeout -s INT does it: the same interrupt, twice
            ::raise(SIGTERM);
            if (!watch.requested() || watch.signal_number() != SIGINT) ::_exit(3);
            if (wait_past_the_window) {
                ::usleep(400'000);
                ::raise(SIGINT);   // a deliberate second Ctrl-C
            }
            ::_exit(0);
        }
        int raw = 0;
        ::waitpid(pid, &raw, 0);
        std::ifstream in(err);
        return std::pair{WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())};
    };
    const auto [together, said_together] = child(false);
    CHECK(together == 0);
    CHECK(count(said_together, "interrupted: finishing this step") == 1);
    CHECK(said_together.find("interrupted again") == std::string::npos);
    const auto [later, said_later] = child(true);
    CHECK(later == 128 + SIGINT);
    CHECK(said_later.find("interrupted again: quitting at once") != std::string::npos);
    fs::remove(err);
}
