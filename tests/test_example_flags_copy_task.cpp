// copy_task's flags, each in a test that fails when the flag's effect is removed or inverted: the
// program is run as a user runs it (tests/run_example.h), on a model small enough to train in a
// fraction of a second, and what it prints is checked against a value known without the program:
// a formula worked out here (parameter count, learning rate), a brute force over a saved model
// (greedy and exhaustive decoding), or a relation between two runs that holds only if the flag
// did its job (a batch of 2B is two batches of B).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numbers>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "autograd/io/safetensors.h"
#include "autograd/kernels/threads.h"
#include "models/checkpoint.h"
#include "models/transformer.h"
#include "tests/run_example.h"

namespace {

// A copy task of 16-wide, 2-head model: a step takes a few milliseconds on one thread.
std::vector<std::string> small_copy_task(std::vector<std::string> more) {
    std::vector<std::string> args = {"--d-model", "16", "--heads", "2", "--d-ff", "32", "--batch", "16", "--eval", "8"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

// ---- reading what copy_task prints ----

// "step    20  loss 2.3073  (mean of last 20: 2.4053)  lr 3.125e-04", one per --print-every steps
struct StepLine {
    int step = 0;
    double loss = 0.0;
    int window = 0;       // steps averaged in `mean`
    double mean = 0.0;
    double lr = 0.0;
};

std::vector<StepLine> step_lines(const std::string& out) {
    std::vector<StepLine> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        StepLine s;
        if (std::sscanf(line.c_str(), "step %d loss %lf (mean of last %d: %lf) lr %lf", &s.step, &s.loss, &s.window, &s.mean,
                        &s.lr) == 5)
            lines.push_back(s);
    }
    return lines;
}

// "| 11739 parameters |" -> 11739
long long printed_parameters(const std::string& out) {
    std::smatch m;
    INFO(out);
    REQUIRE(std::regex_search(out, m, std::regex(R"(\| (\d+) parameters \|)")));
    return std::stoll(m[1]);
}

int count_lines(const std::string& text) {
    int n = 0;
    for (char c : text) n += c == '\n';
    return n;
}

// ---- answers worked out without copy_task ----

// The encoder-decoder Transformer's parameters, counted from the paper's architecture (every
// Linear has a bias, every LayerNorm a gain and a bias; pre-norm adds no parameter):
//   attention        4 projections D -> D (q, k, v, out):   4 (D^2 + D)
//   feed-forward     D -> F -> D:                           (D F + F) + (F D + D)
//   LayerNorm        gain and bias:                         2 D
//   encoder layer    attention + feed-forward + 2 LayerNorms
//   decoder layer    2 attentions (self, over memory) + feed-forward + 3 LayerNorms
//   + a final LayerNorm after each stack, two embeddings V x D (source, target), and the
//     generator D -> V with its bias. Positional encodings are fixed, not parameters; the number
//     of heads h splits D and adds nothing.
long long transformer_parameters(long long N, long long D, long long F, long long V) {
    const long long attention = 4 * (D * D + D), feed_forward = (D * F + F) + (F * D + D), norm = 2 * D;
    const long long encoder_layer = attention + feed_forward + 2 * norm;
    const long long decoder_layer = 2 * attention + feed_forward + 3 * norm;
    return N * (encoder_layer + decoder_layer) + 2 * norm + 2 * V * D + (D * V + V);
}

}  // namespace

TEST_CASE("copy_task --steps: the run trains that many steps, and more steps reach a lower loss") {
    const ExampleRun few = run_example("copy_task", small_copy_task({"--steps", "3"}));
    const ExampleRun more = run_example("copy_task", small_copy_task({"--steps", "40"}));
    REQUIRE(few.status == 0);
    REQUIRE(more.status == 0);
    CHECK(number_after(few.out, "trained ") == 3);
    CHECK(number_after(more.out, "trained ") == 40);
    CHECK(number_after(more.out, "final loss ") < number_after(few.out, "final loss "));
}

TEST_CASE("copy_task --layers --d-model --d-ff --vocab --heads: the model has the paper's parameter count for them") {
    struct Shape {
        long long N, D, F, h, V;
    };
    // odd, all different, so no flag can stand in for another
    for (const Shape s : {Shape{3, 18, 22, 3, 13}, Shape{1, 10, 7, 5, 5}, Shape{2, 12, 40, 1, 29}}) {
        INFO("N=" << s.N << " D=" << s.D << " F=" << s.F << " h=" << s.h << " V=" << s.V);
        const ExampleRun r = run_example("copy_task", {"--layers", std::to_string(s.N), "--d-model", std::to_string(s.D),
                                                       "--d-ff", std::to_string(s.F), "--heads", std::to_string(s.h),
                                                       "--vocab", std::to_string(s.V), "--steps", "0", "--eval", "1"});
        REQUIRE(r.status == 0);
        CHECK(printed_parameters(r.out) == transformer_parameters(s.N, s.D, s.F, s.V));
        const std::string config = "N=" + std::to_string(s.N) + " D=" + std::to_string(s.D) + " F=" + std::to_string(s.F) +
                                   " h=" + std::to_string(s.h) + " ";
        CHECK(r.out.find(config) != std::string::npos);
        CHECK(r.out.find("V=" + std::to_string(s.V) + " ") != std::string::npos);
    }
}

TEST_CASE("copy_task --heads: must divide --d-model, and splits attention differently for another count") {
    SUBCASE("a count that does not divide D is refused in one line, before anything runs") {
        const ExampleRun r = run_example("copy_task", small_copy_task({"--heads", "3", "--steps", "1"}));
        CHECK(r.status == 2);
        CHECK(r.out.empty());
        CHECK(count_lines(r.err) == 1);
        CHECK(r.err.find("--d-model (16) must be a multiple of --heads (3)") != std::string::npos);
    }
    SUBCASE("h = 1, 2, 4 over the same D: the same parameters, three different losses") {
        // The heads share the parameters (h only splits D), so only the attention itself can make
        // the losses differ: the first step's loss, before any update, already does.
        std::vector<double> losses;
        std::vector<long long> params;
        for (const char* h : {"1", "2", "4"}) {
            const ExampleRun r = run_example("copy_task", small_copy_task({"--heads", h, "--steps", "3", "--print-every", "1"}));
            REQUIRE(r.status == 0);
            CHECK(r.out.find(std::string(" h=") + h + " ") != std::string::npos);
            losses.push_back(step_lines(r.out).at(0).loss);
            params.push_back(printed_parameters(r.out));
        }
        CHECK(params[0] == params[1]);
        CHECK(params[1] == params[2]);
        CHECK(losses[0] != losses[1]);
        CHECK(losses[1] != losses[2]);
        CHECK(losses[0] != losses[2]);
    }
}
