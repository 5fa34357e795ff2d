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

using Ids = std::vector<int32_t>;

// The "src: ..." / "out: ..." pairs copy_task prints after training: the first few sequences
// ("examples"), then the first few it got wrong ("mistakes").
struct Decoded {
    Ids src, out;
};
struct Printed {
    std::vector<Decoded> examples, mistakes;
};

Ids ids_after(const std::string& line, const std::string& label) {
    std::istringstream in(line.substr(line.find(label) + label.size()));
    Ids ids;
    for (int32_t id; in >> id;) ids.push_back(id);
    return ids;   // stops at "<- wrong"
}

Printed printed_sequences(const std::string& out) {
    Printed p;
    std::vector<Decoded>* section = &p.examples;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("mistakes", 0) == 0) section = &p.mistakes;
        if (line.rfind("  src: ", 0) == 0) section->push_back({ids_after(line, "src: "), {}});
        if (line.rfind("  out: ", 0) == 0) section->back().out = ids_after(line, "out: ");
    }
    return p;
}

// Every sequence a run printed, each with the output it printed for it.
std::vector<Decoded> all_printed(const std::string& out) {
    Printed p = printed_sequences(out);
    p.examples.insert(p.examples.end(), p.mistakes.begin(), p.mistakes.end());
    return p.examples;
}

// "| 11739 parameters |" -> 11739
long long printed_parameters(const std::string& out) {
    std::smatch m;
    INFO(out);
    REQUIRE(std::regex_search(out, m, std::regex(R"(\| (\d+) parameters \|)")));
    return std::stoll(m[1]);
}

// stdout without what depends on the clock: the time and speed of training and of decoding.
std::string without_timings(const std::string& out) {
    std::string s = std::regex_replace(out, std::regex(R"(in [0-9.]+ s \([0-9.]+ ms/step\))"), "in <time>");
    return std::regex_replace(s, std::regex(R"(decoding: [0-9.]+ s, [0-9.a-z]+ tokens/s)"), "decoding: <time>");
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

// The learning rate of step s (from 1), as copy_task's --help describes each schedule.
double cosine_lr(int s, double peak, int warmup, int total) {   // linear warmup, then half a cosine to 0
    if (s <= warmup) return peak * s / warmup;
    return peak * 0.5 * (1.0 + std::cos(std::numbers::pi * (s - warmup) / (total - warmup)));
}
double noam_lr(int s, double factor, int D, int warmup) {   // Vaswani et al. (2017), eq. 3
    return factor / std::sqrt(D) * std::min(1.0 / std::sqrt(s), s / std::pow(warmup, 1.5));
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

TEST_CASE("copy_task --schedule cosine --lr --warmup: the printed lr of every step is the formula's") {
    // warmup 4 steps linear to 0.002, then half a cosine down to 0 at step 9
    const ExampleRun r = run_example("copy_task", small_copy_task({"--steps", "9", "--warmup", "4", "--lr", "0.002",
                                                                   "--schedule", "cosine", "--print-every", "1"}));
    REQUIRE(r.status == 0);
    const std::vector<StepLine> lines = step_lines(r.out);
    REQUIRE(lines.size() == 9);
    for (const StepLine& l : lines) {
        CAPTURE(l.step);
        CHECK(l.lr == doctest::Approx(cosine_lr(l.step, 0.002, 4, 9)).epsilon(1e-3));   // printed with 4 digits
    }
    CHECK(lines[3].lr == doctest::Approx(0.002).epsilon(1e-3));   // the peak, at the end of the warmup
    CHECK(lines[8].lr == 0.0);                                    // and 0 at the last step
}

TEST_CASE("copy_task --schedule noam --lr-factor --warmup: the printed lr of every step is the paper's formula") {
    const ExampleRun r = run_example("copy_task", small_copy_task({"--steps", "9", "--warmup", "4", "--lr-factor", "2",
                                                                   "--schedule", "noam", "--print-every", "1"}));
    REQUIRE(r.status == 0);
    CHECK(r.out.find("lr = 2 * Noam(D=16, warmup=4)") != std::string::npos);
    const std::vector<StepLine> lines = step_lines(r.out);
    REQUIRE(lines.size() == 9);
    for (const StepLine& l : lines) {
        CAPTURE(l.step);
        CHECK(l.lr == doctest::Approx(noam_lr(l.step, 2.0, 16, 4)).epsilon(1e-3));
    }
    // by hand: the peak at step 4 is 2 / sqrt(16) / sqrt(4) = 0.25, and step 9 is 2 / 4 / 3
    CHECK(lines[3].lr == doctest::Approx(0.25).epsilon(1e-3));
    CHECK(lines[8].lr == doctest::Approx(2.0 / 4 / 3).epsilon(1e-3));
}

TEST_CASE("copy_task --schedule: another name is refused in one line") {
    const ExampleRun r = run_example("copy_task", small_copy_task({"--schedule", "linear", "--steps", "1"}));
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("--schedule must be cosine or noam, not 'linear'") != std::string::npos);
}

TEST_CASE("copy_task --batch (and --lr reaching Adam): at lr 0, one batch of 16 is the two batches of 8 it is made of") {
    // With --lr 0 the weights never move, so each step's loss is the untrained model's mean loss
    // over that step's sequences, and the data stream is the same whatever the batch: the first
    // batch of 16 holds the first two batches of 8, and its loss is their mean (every sequence has
    // L-1 target tokens). Warmup 1, so that an lr that never reached Adam would show at step 2.
    const ExampleRun eight = run_example("copy_task", small_copy_task({"--batch", "8", "--lr", "0", "--warmup", "1",
                                                                       "--steps", "2", "--print-every", "1"}));
    const ExampleRun sixteen = run_example("copy_task", small_copy_task({"--batch", "16", "--lr", "0", "--warmup", "1",
                                                                         "--steps", "1", "--print-every", "1"}));
    REQUIRE(eight.status == 0);
    REQUIRE(sixteen.status == 0);
    CHECK(eight.out.find("2 steps of B=8,") != std::string::npos);
    CHECK(sixteen.out.find("1 steps of B=16,") != std::string::npos);
    const std::vector<StepLine> e = step_lines(eight.out), s = step_lines(sixteen.out);
    REQUIRE(e.size() == 2);
    REQUIRE(s.size() == 1);
    CHECK(e[0].loss != e[1].loss);   // two different batches, else the mean below proves nothing
    // each printed with 4 decimals: the mean of two rounded values is within 1e-4 of the rounded mean
    CHECK(std::abs(s[0].loss - (e[0].loss + e[1].loss) / 2) <= 1.01e-4);
}

TEST_CASE("copy_task --print-every: a line at each multiple and at the last step, each with the mean since the last") {
    const ExampleRun every = run_example("copy_task", small_copy_task({"--steps", "10", "--print-every", "1"}));
    const ExampleRun third = run_example("copy_task", small_copy_task({"--steps", "10", "--print-every", "3"}));
    REQUIRE(every.status == 0);
    REQUIRE(third.status == 0);
    const std::vector<StepLine> all = step_lines(every.out), some = step_lines(third.out);
    REQUIRE(all.size() == 10);
    REQUIRE(some.size() == 4);
    const int steps[] = {3, 6, 9, 10}, windows[] = {3, 3, 3, 1};   // the last step ends a short window
    for (int i = 0; i < 4; i++) {
        CAPTURE(i);
        CHECK(some[i].step == steps[i]);
        CHECK(some[i].window == windows[i]);
        // the same run (--print-every changes only the printing): the step's loss, and the mean
        // of the window's losses, from the line of every step
        const StepLine& same = all[steps[i] - 1];
        CHECK(some[i].loss == same.loss);
        double sum = 0.0;
        for (int s = steps[i] - windows[i]; s < steps[i]; s++) sum += all[s].loss;
        CHECK(std::abs(some[i].mean - sum / windows[i]) <= 1.01e-4);   // 4 decimals each
    }
}

TEST_CASE("copy_task --seed: the same seed prints the same run, another seed another one") {
    const ExampleRun a = run_example("copy_task", small_copy_task({"--steps", "5", "--seed", "7"}));
    const ExampleRun again = run_example("copy_task", small_copy_task({"--steps", "5", "--seed", "7"}));
    const ExampleRun b = run_example("copy_task", small_copy_task({"--steps", "5", "--seed", "8"}));
    REQUIRE(a.status == 0);
    REQUIRE(again.status == 0);
    REQUIRE(b.status == 0);
    CHECK(without_timings(a.out) == without_timings(again.out));
    CHECK(number_after(a.out, "final loss ") != number_after(b.out, "final loss "));
    // the seed also draws the evaluation's sequences
    CHECK(printed_sequences(a.out).examples.at(0).src != printed_sequences(b.out).examples.at(0).src);
}

TEST_CASE("copy_task --threads: the header says how many, and 1 or 2 threads print the same numbers") {
    // run_example sets OMP_NUM_THREADS=1, so "2 threads" can only come from the flag. Results are
    // bit-identical for any thread count by design (reductions in a fixed order).
    const ExampleRun one = run_example("copy_task", small_copy_task({"--steps", "3", "--threads", "1"}));
    const ExampleRun two = run_example("copy_task", small_copy_task({"--steps", "3", "--threads", "2"}));
    REQUIRE(one.status == 0);
    REQUIRE(two.status == 0);
    CHECK(one.out.find("| 1 threads") != std::string::npos);
    // a build without OpenMP runs everything on one thread, and says so
    CHECK(two.out.find(autograd::kernels::kOpenMP ? "| 2 threads" : "| 1 threads") != std::string::npos);
    CHECK(without_timings(std::regex_replace(one.out, std::regex(R"(\| \d threads)"), "")) ==
          without_timings(std::regex_replace(two.out, std::regex(R"(\| \d threads)"), "")));
}

TEST_CASE("copy_task --dropout: changes training, and only training") {
    SUBCASE("the losses of training differ from a run without dropout") {
        const ExampleRun off = run_example("copy_task", small_copy_task({"--steps", "3", "--print-every", "1"}));
        const ExampleRun on = run_example("copy_task", small_copy_task({"--steps", "3", "--print-every", "1", "--dropout", "0.5"}));
        REQUIRE(off.status == 0);
        REQUIRE(on.status == 0);
        CHECK(off.out.find("dropout=0 ") != std::string::npos);
        CHECK(on.out.find("dropout=0.5 ") != std::string::npos);
        // the first step's loss, before any update: the same weights, only dropout between them
        CHECK(step_lines(on.out).at(0).loss != step_lines(off.out).at(0).loss);
    }
    SUBCASE("an untrained model decodes the same with or without it: evaluation runs without dropout") {
        // dropout draws nothing when the model is built, so the weights are the same
        const ExampleRun off = run_example("copy_task", small_copy_task({"--steps", "0"}));
        const ExampleRun on = run_example("copy_task", small_copy_task({"--steps", "0", "--dropout", "0.5"}));
        REQUIRE(off.status == 0);
        REQUIRE(on.status == 0);
        const std::vector<Decoded> a = all_printed(off.out), b = all_printed(on.out);
        REQUIRE(a.size() == b.size());
        for (size_t i = 0; i < a.size(); i++) CHECK(a[i].out == b[i].out);
    }
}

TEST_CASE("copy_task --vocab --seq-len: the sequences have L symbols, the first 1, the others in 1..V-1") {
    const ExampleRun r = run_example("copy_task", small_copy_task({"--vocab", "5", "--seq-len", "7", "--steps", "0"}));
    REQUIRE(r.status == 0);
    CHECK(r.out.find("V=5 L=7 ") != std::string::npos);
    const std::vector<Decoded> printed = all_printed(r.out);
    REQUIRE(printed.size() >= 3);
    for (const Decoded& d : printed) {
        REQUIRE(d.src.size() == 7);
        CHECK(d.out.size() == 7);
        CHECK(d.src[0] == 1);
        CHECK(d.out[0] == 1);
        for (int32_t id : d.src) CHECK((id >= 1 && id <= 4));
        for (int32_t id : d.out) CHECK((id >= 0 && id <= 4));   // the model may say 0, never more than V-1
    }
}

TEST_CASE("copy_task --bf16: on a CPU without AVX512_BF16 refused in one line; with it, a different loss") {
    // /proc/cpuinfo names the instruction set when the CPU has it (Linux, x86). Here (the machine
    // this test was written on) it does not: the first branch ran.
    const std::string cpuinfo = read_whole_file("/proc/cpuinfo");
    const bool has_bf16 = cpuinfo.find(" avx512_bf16") != std::string::npos;
    const ExampleRun bf16 = run_example("copy_task", small_copy_task({"--steps", "3", "--bf16"}));
    if (!has_bf16) {
        CHECK(bf16.status == 2);
        CHECK(bf16.out.empty());
        CHECK(count_lines(bf16.err) == 1);
        CHECK(bf16.err.find("--bf16 needs a CPU with AVX512_BF16") != std::string::npos);
    } else {
        const ExampleRun fp32 = run_example("copy_task", small_copy_task({"--steps", "3"}));
        REQUIRE(bf16.status == 0);
        REQUIRE(fp32.status == 0);
        CHECK(bf16.out.find(" dropout=0 bf16 |") != std::string::npos);
        CHECK(number_after(bf16.out, "final loss ") != number_after(fp32.out, "final loss "));
    }
}
