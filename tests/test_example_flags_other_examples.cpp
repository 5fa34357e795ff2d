// The flags of the smaller programs that write files, attention_by_hand's --graph and
// make_figures' --out: like every example's outputs (examples/common/output_files.h), a file
// that exists is replaced only with --overwrite, and no output is a file the program reads.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

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
