// The flags of the smaller programs that write files, attention_by_hand's --graph and
// make_figures' --out: like every example's outputs (examples/common/output_files.h), a file
// that exists is replaced only with --overwrite, and no output is a file the program reads.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/run_example.h"

TEST_CASE("attention_by_hand --graph: an existing file is replaced only with --overwrite") {
    const std::filesystem::path dir = example_scratch_dir("attention-graph");
    const std::string dot = (dir / "mha.dot").string();
    std::ofstream(dot) << "the user's graph";
    check_refused_in_one_line(run_example("attention_by_hand", {"--graph", dot}),
                              "--graph " + dot + " exists, and this run would replace it: add --overwrite");
    CHECK(read_whole_file(dot) == "the user's graph");
    const ExampleRun r = run_example("attention_by_hand", {"--graph", dot, "--overwrite"});
    CHECK(r.status == 0);
    CHECK(read_whole_file(dot).rfind("digraph", 0) == 0);
    std::filesystem::remove_all(dir);
}

TEST_CASE("make_figures --out: a figure there is replaced only with --overwrite; a model read is never a figure written") {
    const std::filesystem::path dir = example_scratch_dir("figures-out");
    std::ofstream(dir / "masks.svg") << "the user's figure";
    check_refused_in_one_line(run_example("make_figures", {"--out", dir.string()}),
                              (dir / "masks.svg").string() + " exists, and this run would replace it: add --overwrite");
    CHECK(read_whole_file(dir / "masks.svg") == "the user's figure");
    const std::string model = (dir / "copy_attention.svg").string();   // a model file named like the figure drawn from it
    std::ofstream(model) << "a model";
    check_refused_in_one_line(run_example("make_figures", {"--out", dir.string(), "--copy-model", model, "--overwrite"}),
                              "--out " + model + " would replace --copy-model " + model + ", which this run reads");
    CHECK(read_whole_file(model) == "a model");
    std::filesystem::remove_all(dir);
}

// Every limit an example's --help prints ("range: 1e-06..100", "min: 1") is a value it accepts,
// typed as --help prints it: all the lower limits on one command line, then all the upper ones,
// each parsed (and checked against its limits) before --help ends the run.
TEST_CASE("every example accepts each limit its --help prints") {
    for (const char* program : {"gpt", "copy_task", "translation", "compare_models", "attention_by_hand", "make_figures"}) {
        CAPTURE(program);
        const ExampleRun help = run_example(program, {"--help"});
        REQUIRE(help.status == 0);
        std::vector<std::string> lows, highs;
        std::string flag;   // the option the current line of --help belongs to
        std::istringstream lines(help.out);
        for (std::string line; std::getline(lines, line);) {
            if (line.rfind("  --", 0) == 0) flag = line.substr(2, line.find(' ', 2) - 2);
            const auto limit = [&](const std::string& label, const std::string& end) {
                const size_t at = line.find(label);
                if (at == std::string::npos) return std::string();
                const size_t from = at + label.size();
                return line.substr(from, line.find_first_of(end, from) - from);
            };
            if (const std::string range = limit("range: ", ";)"); !range.empty()) {
                const size_t dots = range.find("..");
                lows.insert(lows.end(), {flag, range.substr(0, dots)});
                highs.insert(highs.end(), {flag, range.substr(dots + 2)});
            } else if (const std::string lo = limit("min: ", ";)"); !lo.empty()) {
                lows.insert(lows.end(), {flag, lo});
            } else if (const std::string hi = limit("max: ", ";)"); !hi.empty()) {
                highs.insert(highs.end(), {flag, hi});
            }
        }
        if (std::string(program) != "attention_by_hand" && std::string(program) != "make_figures") CHECK(lows.size() >= 10);
        for (std::vector<std::string> args : {lows, highs}) {
            args.push_back("--help");
            const ExampleRun r = run_example(program, args);
            INFO(r.err);
            CHECK(r.status == 0);
            CHECK(r.err.empty());
        }
    }
}
