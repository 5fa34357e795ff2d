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

#include <fcntl.h>
#include <sys/resource.h>   // wait4's rusage: a run's peak RSS
#include <sys/wait.h>

#include "autograd/io/safetensors.h"
#include "examples/common/memory_budget.h"
#include "autograd/runtime.h"
#include "autograd/kernels/threads.h"
#include "models/checkpoint.h"
#include "models/transformer.h"
#include "tests/resume_identity.h"
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

// "exact match: 5/6 (83.3%)" -> {5, 6}
std::pair<int, int> exact_match(const std::string& out) {
    std::smatch m;
    INFO(out);
    REQUIRE(std::regex_search(out, m, std::regex(R"(exact match: (\d+)/(\d+) )")));
    return {std::stoi(m[1]), std::stoi(m[2])};
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

// A model copy_task saved, read back here, so its decoding can be worked out by brute force.
struct LoadedModel {
    std::unique_ptr<models::Transformer> model;
    explicit LoadedModel(const std::filesystem::path& path) {
        const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(path.string());
        model = std::make_unique<models::Transformer>(
            models::read_metadata(f.metadata, "config", path.string(), models::config_from_json));
        nn::load_parameters(*model, f, path.string());
        model->eval();
    }

    // log p(y[t] | src, y[<t]) of every t >= 1, from one teacher-forced pass over the whole of y
    std::vector<std::vector<double>> next_log_probs(const Ids& src, const Ids& y) const {
        autograd::NoGradGuard no_grad;
        const autograd::Tokens s(src, {1, static_cast<int64_t>(src.size())});
        const autograd::Tokens t(Ids(y.begin(), y.end() - 1), {1, static_cast<int64_t>(y.size()) - 1});
        const autograd::Tensor logits =
            model->logits(s, t, models::padding_mask(s, 0), models::target_mask(t, 0));   // (1, T, V)
        const int64_t T = logits.size(1), V = logits.size(2);
        std::vector<std::vector<double>> lp(T, std::vector<double>(V));
        for (int64_t i = 0; i < T; i++) {
            const float* row = logits.data() + i * V;
            double max = row[0], sum = 0.0;
            for (int64_t v = 0; v < V; v++) max = std::max(max, static_cast<double>(row[v]));
            for (int64_t v = 0; v < V; v++) sum += std::exp(row[v] - max);
            for (int64_t v = 0; v < V; v++) lp[i][v] = row[v] - max - std::log(sum);
        }
        return lp;
    }

    // Greedy by hand: the whole prefix through the model at every step, the most likely token
    // appended, until the output is as long as the source (copy_task's rule).
    Ids greedy(const Ids& src) const {
        Ids y = {1};   // the start symbol
        while (y.size() < src.size()) {
            y.push_back(0);   // a placeholder: position t's distribution depends on y[<t] only
            const std::vector<double> lp = next_log_probs(src, y).back();
            y.back() = static_cast<int32_t>(std::max_element(lp.begin(), lp.end()) - lp.begin());
        }
        return y;
    }

    // The most likely output of the source's length, by trying every one of V^(L-1).
    Ids most_likely(const Ids& src) const {
        const int64_t V = model->cfg.tgt_vocab, n = static_cast<int64_t>(src.size()) - 1;
        int64_t count = 1;
        for (int64_t i = 0; i < n; i++) count *= V;
        Ids best;
        double best_lp = -INFINITY;
        for (int64_t code = 0; code < count; code++) {
            Ids y = {1};
            for (int64_t i = 0, c = code; i < n; i++, c /= V) y.push_back(static_cast<int32_t>(c % V));
            const std::vector<std::vector<double>> lp = next_log_probs(src, y);
            double total = 0.0;
            for (int64_t t = 0; t < n; t++) total += lp[t][y[t + 1]];
            if (total > best_lp) best_lp = total, best = y;
        }
        return best;
    }
};

// A folder of the test's own, removed when it goes out of scope, also when a REQUIRE fails.
struct ScratchDir {
    std::filesystem::path path;
    explicit ScratchDir(const std::string& name) : path(example_scratch_dir(name)) {}
    ~ScratchDir() { std::filesystem::remove_all(path); }
    ScratchDir(const ScratchDir&) = delete;   // one owner: a copy would remove it too
    ScratchDir& operator=(const ScratchDir&) = delete;
};

// Models for the tests that load a checkpoint, V=3 (symbols 1 and 2) and L=5, each trained once
// (its folder goes when the tests end) and saved by copy_task:
//   half trained (60 steps):    copies 1 of the first 6 sequences here; greedy's choice is often
//                               not the most likely output, which a beam finds
//   mostly trained (100 steps): copies 3 of the first 6, the first among them, so that a count
//                               of exact matches has both kinds to count, from the first on
const std::vector<std::string> saved_model_shape = {"--vocab", "3", "--seq-len", "5", "--d-model", "16", "--heads", "2",
                                                    "--d-ff", "32", "--batch", "16", "--lr", "0.01", "--warmup", "20"};

struct SavedModel {
    ScratchDir dir;
    std::filesystem::path path;
    ExampleRun run;   // the training run that saved it (--eval 6)

    explicit SavedModel(const std::string& steps) : dir("copy-flags-model-" + steps), path(dir.path / "copy.safetensors") {
        std::vector<std::string> args = saved_model_shape;
        args.insert(args.end(), {"--steps", steps, "--eval", "6", "--save", path.string()});
        run = run_example("copy_task", args);
    }
};

const SavedModel& half_trained_model() {
    static const SavedModel m("60");
    REQUIRE(m.run.status == 0);
    return m;
}

const SavedModel& mostly_trained_model() {
    static const SavedModel m("100");
    REQUIRE(m.run.status == 0);
    return m;
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
        // TransformerConfig::validate()'s message, the one check of the model's shape
        check_refused_in_one_line(r, "d_model (16) must be a multiple of heads (3)");
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
    check_refused_in_one_line(r, "--schedule must be cosine or noam, not 'linear'");
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
    CHECK(one.out.find("| 1 thread,") != std::string::npos);
    // a build without OpenMP runs everything on one thread, and says so
    const int two_threads = autograd::kernels::kOpenMP ? std::min(2, autograd::available_cores()) : 1;   // clamped to the cores
    CHECK(two.out.find("| " + std::to_string(two_threads) + " thread") != std::string::npos);   // "1 thread", "2 threads"
    CHECK(without_timings(std::regex_replace(one.out, std::regex(R"(\| \d threads?)"), "")) ==
          without_timings(std::regex_replace(two.out, std::regex(R"(\| \d threads?)"), "")));
    // and the other way round: --threads 1 holds where the environment offers 2
    const ExampleRun one_of_two = run_example("copy_task", small_copy_task({"--steps", "0", "--threads", "1"}), "", 2);
    REQUIRE(one_of_two.status == 0);
    CHECK(one_of_two.out.find("| 1 thread,") != std::string::npos);
    // more threads than cores only wait for their turn: clamped to the cores, with a warning
    const ExampleRun many = run_example("copy_task", small_copy_task({"--steps", "0", "--threads", "1000"}));
    REQUIRE(many.status == 0);
    const int cores = autograd::available_cores();
    CHECK(many.err.find("--threads 1000 is more than the " + std::to_string(cores) + " cores this process may use") != std::string::npos);
    CHECK(many.out.find("| " + std::to_string(autograd::kernels::kOpenMP ? cores : 1) + " thread") != std::string::npos);   // "1 thread", "2 threads"
}

TEST_CASE("copy_task --shards: the header says how many; another count trains another run, the same on 1 and 2 threads") {
    // With dropout, each shard draws its own masks, and its gradients are summed apart: a
    // different count is a different (equally good) run; the thread count changes nothing.
    auto run = [](const std::string& shards, const std::string& threads) {
        return run_example("copy_task", small_copy_task({"--steps", "3", "--print-every", "1", "--dropout", "0.1",
                                                          "--shards", shards, "--threads", threads}));
    };
    const ExampleRun one = run("1", "1"), two = run("2", "1"), two_on_2 = run("2", "2"), three = run("3", "2");
    for (const ExampleRun* r : {&one, &two, &two_on_2, &three}) REQUIRE(r->status == 0);
    CHECK(one.out.find("| 1 thread, 1 shard |") != std::string::npos);
    CHECK(two.out.find("| 1 thread, 2 shards |") != std::string::npos);
    const int two_threads = autograd::kernels::kOpenMP ? std::min(2, autograd::available_cores()) : 1;   // clamped to the cores
    CHECK(three.out.find(two_threads == 2 ? "| 2 threads, 3 shards |" : "| 1 thread, 3 shards |") != std::string::npos);
    const std::vector<StepLine> l1 = step_lines(one.out), l2 = step_lines(two.out), l3 = step_lines(three.out);
    REQUIRE(l1.size() == 3);
    REQUIRE(l2.size() == 3);
    REQUIRE(l3.size() == 3);
    CHECK(l1[0].loss != l2[0].loss);   // the first step: the same weights, other masks
    CHECK(l2[0].loss != l3[0].loss);
    CHECK(without_timings(std::regex_replace(two.out, std::regex(R"(\| \d threads?)"), "")) ==
          without_timings(std::regex_replace(two_on_2.out, std::regex(R"(\| \d threads?)"), "")));
    check_refused_in_one_line(run("0", "1"), "--shards must be between 1 and 64, got 0");
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
        check_refused_in_one_line(bf16, "--bf16 needs a CPU with AVX512_BF16");
    } else {
        const ExampleRun fp32 = run_example("copy_task", small_copy_task({"--steps", "3"}));
        REQUIRE(bf16.status == 0);
        REQUIRE(fp32.status == 0);
        CHECK(bf16.out.find(" dropout=0 bf16 |") != std::string::npos);
        CHECK(number_after(bf16.out, "final loss ") != number_after(fp32.out, "final loss "));
    }
}

// With --load there is no training, but decoding multiplies too: --bf16 must reach it (the model
// line prints the precision the products read at the time, as the training run's does).
TEST_CASE("copy_task --load --bf16: the loaded model decodes with bf16 products") {
    const SavedModel& m = mostly_trained_model();
    const ExampleRun bf16 = run_example("copy_task", {"--load", m.path.string(), "--eval", "6", "--bf16"});
    if (read_whole_file("/proc/cpuinfo").find(" avx512_bf16") == std::string::npos) {
        check_refused_in_one_line(bf16, "--bf16 needs a CPU with AVX512_BF16");
    } else {
        REQUIRE(bf16.status == 0);
        CHECK(bf16.out.find("model N=2 D=16 F=32 h=2 dropout=0 bf16 |") != std::string::npos);
        const ExampleRun fp32 = run_example("copy_task", {"--load", m.path.string(), "--eval", "6"});
        REQUIRE(fp32.status == 0);
        CHECK(fp32.out.find(" bf16 |") == std::string::npos);
    }
}

// --reference trains through the plain autograd ops of nn/ instead of the fused kernels. The two
// compute the same values up to float rounding (they sum in different orders), and draw the same
// dropout masks, so over 20 steps every printed loss agrees to 3 decimals, while bit-identical
// output is not promised. The header line says which path ran.
TEST_CASE("copy_task --reference: says it runs the plain autograd ops, and trains to the fused run's losses") {
    const std::vector<std::string> run = small_copy_task({"--steps", "20", "--print-every", "1", "--dropout", "0.1"});
    std::vector<std::string> reference_run = run;
    reference_run.push_back("--reference");
    const ExampleRun fused = run_example("copy_task", run);
    const ExampleRun plain = run_example("copy_task", reference_run);
    REQUIRE(fused.status == 0);
    REQUIRE(plain.status == 0);
    CHECK(fused.out.find("| kernels: fused\n") != std::string::npos);
    CHECK(plain.out.find("| kernels: plain autograd ops (--reference)\n") != std::string::npos);
    // and decodes by the plain greedy_decode, the whole prefix each step, not through the cache
    CHECK(fused.out.find("decoder positions (key/value cache)") != std::string::npos);
    CHECK(plain.out.find("decoder positions (recomputing the prefix: --no-kv-cache or --reference)") != std::string::npos);
    const std::vector<StepLine> a = step_lines(fused.out), b = step_lines(plain.out);
    REQUIRE(a.size() == 20);
    REQUIRE(b.size() == 20);
    for (size_t i = 0; i < a.size(); i++) {
        CAPTURE(i);
        CHECK(std::abs(b[i].loss - a[i].loss) <= 1e-3);
        CHECK(std::abs(b[i].mean - a[i].mean) <= 1e-3);
        CHECK(b[i].lr == a[i].lr);   // the schedule does not depend on the path
    }
    CHECK(a.back().loss < a.front().loss - 0.1);   // both runs learned something: the losses compared are not flat
    SUBCASE("with --bf16: the plain path's products read bf16 too, so its losses follow the fused bf16 run's") {
        // Without AVX512_BF16 both are refused for the CPU, not for the combination. With it, the
        // first loss is the forward pass alone (no update yet): there the two paths' summation
        // orders move it by less than the 4 printed decimals, while rounding the products' inputs
        // to bf16 moves it by 1.1e-3 (this model, this seed), so it tells bf16 from fp32. The later
        // losses follow, within bf16's rounding: where the two paths' fp32 inputs to a product
        // differ in the last bits, the bf16 rounding of one of them may move by 2^-8 of itself
        // (the -O1 sanitizer build: up to 1.2e-3 over the 20 steps).
        std::vector<std::string> fused_bf16 = run, plain_bf16 = reference_run;
        fused_bf16.push_back("--bf16");
        plain_bf16.push_back("--bf16");
        const ExampleRun f16 = run_example("copy_task", fused_bf16), p16 = run_example("copy_task", plain_bf16);
        if (read_whole_file("/proc/cpuinfo").find(" avx512_bf16") == std::string::npos) {
            check_refused_in_one_line(f16, "--bf16 needs a CPU with AVX512_BF16");
            check_refused_in_one_line(p16, "--bf16 needs a CPU with AVX512_BF16");
        } else {
            REQUIRE(f16.status == 0);
            REQUIRE(p16.status == 0);
            const std::vector<StepLine> c = step_lines(f16.out), d = step_lines(p16.out);
            REQUIRE(c.size() == d.size());
            REQUIRE(!c.empty());
            CHECK(std::abs(d[0].loss - c[0].loss) <= 2e-4);   // the same forward, up to the last printed digit
            CHECK(std::abs(d[0].loss - b[0].loss) >= 5e-4);   // and not the fp32 plain path's
            for (size_t i = 0; i < c.size(); i++) CHECK(std::abs(d[i].loss - c[i].loss) <= 3e-3);
        }
    }
}

TEST_CASE("copy_task --eval: exact match counts that many fresh sequences, right") {
    // Loaded, to decode only. With 6 sequences every mistake is listed (up to 6 are), so the
    // count is 6 minus the listed mistakes, and each listed output is checked by a greedy search
    // done here, outside copy_task. With 2, the count is that of the 2 examples shown.
    const SavedModel& m = mostly_trained_model();
    const LoadedModel model(m.path);
    const ExampleRun six = run_example("copy_task", {"--load", m.path.string(), "--eval", "6"});
    const ExampleRun two = run_example("copy_task", {"--load", m.path.string(), "--eval", "2"});
    REQUIRE(six.status == 0);
    REQUIRE(two.status == 0);
    const Printed p6 = printed_sequences(six.out), p2 = printed_sequences(two.out);
    const auto [correct6, total6] = exact_match(six.out);
    CHECK(total6 == 6);
    CHECK(correct6 == 6 - static_cast<int>(p6.mistakes.size()));
    CHECK(correct6 > 0);   // both kinds, so that a count of either would be seen
    CHECK(correct6 < 6);
    for (const Decoded& d : all_printed(six.out)) CHECK(d.out == model.greedy(d.src));
    for (const Decoded& d : p6.mistakes) CHECK(d.out != d.src);
    // --eval 2: the first two of the same fresh sequences (one seed), and their count by hand
    const auto [correct2, total2] = exact_match(two.out);
    CHECK(total2 == 2);
    REQUIRE(p2.examples.size() == 2);
    int copies = 0;
    for (int i = 0; i < 2; i++) {
        CHECK(p2.examples[i].src == p6.examples.at(i).src);
        CHECK(p2.examples[i].out == model.greedy(p2.examples[i].src));
        copies += p2.examples[i].out == p2.examples[i].src;
    }
    CHECK(correct2 == copies);
    CHECK(p2.examples[0].out == p2.examples[0].src);   // a copy first, so a count that skipped it would be seen
    CHECK(p2.examples[1].out != p2.examples[1].src);
}

TEST_CASE("copy_task --save --load: the loaded model is the trained one, and its config comes from the file") {
    const SavedModel& m = mostly_trained_model();
    REQUIRE(std::filesystem::exists(m.path));
    CHECK(m.run.out.find("saved " + m.path.string()) != std::string::npos);
    // 1) the file holds the trained model: decoded here, it gives what the training run printed,
    //    which differs from what the same model printed untrained (so the file is not the init)
    const LoadedModel model(m.path);
    const std::vector<Decoded> trained = all_printed(m.run.out);
    for (const Decoded& d : trained) CHECK(d.out == model.greedy(d.src));
    std::vector<std::string> args = saved_model_shape;
    for (const char* a : {"--steps", "0", "--eval", "6"}) args.push_back(a);
    const ExampleRun untrained = run_example("copy_task", args);
    REQUIRE(untrained.status == 0);
    CHECK(all_printed(untrained.out).at(0).out != trained.at(0).out);
    // 2) --load evaluates it without training, on the same fresh sequences: the same lines. No
    //    shape flags: the file's config wins over the defaults (D=128).
    const ExampleRun loaded = run_example("copy_task", {"--load", m.path.string(), "--eval", "6"});
    REQUIRE(loaded.status == 0);
    CHECK(loaded.out.find("loaded " + m.path.string()) != std::string::npos);
    CHECK(loaded.out.find("trained") == std::string::npos);
    CHECK(loaded.out.find("V=3 L=5 | model N=2 D=16 F=32 h=2 ") != std::string::npos);
    CHECK(printed_parameters(loaded.out) == transformer_parameters(2, 16, 32, 3));
    const auto training_eval = m.run.out.substr(m.run.out.find("examples ("));
    const auto loaded_eval = loaded.out.substr(loaded.out.find("examples ("));
    CHECK(without_timings(loaded_eval) == without_timings(training_eval));
}

TEST_CASE("copy_task --decode: prints the greedy output of each line of the file, and only that") {
    const SavedModel& m = half_trained_model();
    const LoadedModel model(m.path);
    // sequences of several lengths, the output as long as its source
    const std::vector<Ids> sources = {{1, 2, 2, 1, 2}, {1, 2, 1}, {1, 1, 2, 2, 2, 1, 2}, {1, 2}, {1, 2, 1, 1}};
    const ScratchDir dir("copy-flags-decode");
    std::ofstream file(dir.path / "sources.txt");
    for (const Ids& s : sources) {
        for (size_t i = 0; i < s.size(); i++) file << (i ? " " : "") << s[i];
        file << "\n";
    }
    file.close();
    const ExampleRun r = run_example("copy_task", {"--load", m.path.string(), "--decode", (dir.path / "sources.txt").string()});
    REQUIRE(r.status == 0);
    std::istringstream out(r.out);
    int not_copies = 0;
    for (const Ids& s : sources) {
        std::string line;
        REQUIRE(std::getline(out, line));
        std::istringstream ids(line);
        Ids printed;
        for (int32_t id; ids >> id;) printed.push_back(id);
        CHECK(printed == model.greedy(s));
        not_copies += printed != s;
    }
    CHECK(not_copies > 0);   // so echoing the input would be seen
    std::string rest;
    CHECK_FALSE(std::getline(out, rest));   // nothing else on stdout

    const ExampleRun no_model = run_example("copy_task", {"--decode", "sources.txt"});
    CHECK(no_model.status == 2);
    CHECK(no_model.err.find("--decode needs a model: give --load PATH") != std::string::npos);
}

// Output line k answers input line k: a blank line gives a blank line. What cannot be decoded (a
// folder, an id the model has no symbol for, a line longer than its positions) is an error naming
// the file and line, not an empty output and status 0.
TEST_CASE("copy_task --decode: blank lines stay blank; a folder, an unknown id or an over-long line is an error naming it") {
    const SavedModel& m = half_trained_model();
    const LoadedModel model(m.path);
    const ScratchDir dir("copy-flags-decode-lines");
    const std::string path = (dir.path / "s.txt").string();
    std::ofstream(path) << "1 2 2 1\n\n  \n1 2 1\n";
    const ExampleRun r = run_example("copy_task", {"--load", m.path.string(), "--decode", path});
    REQUIRE(r.status == 0);
    auto joined = [](const Ids& ids) {
        std::string s;
        for (size_t i = 0; i < ids.size(); i++) {
            if (i) s += ' ';
            s += std::to_string(ids[i]);
        }
        return s;
    };
    CHECK(r.out == joined(model.greedy({1, 2, 2, 1})) + "\n\n\n" + joined(model.greedy({1, 2, 1})) + "\n");
    const ExampleRun folder = run_example("copy_task", {"--load", m.path.string(), "--decode", dir.path.string()});
    CHECK(folder.status == 1);
    CHECK(folder.err.find("--decode '" + dir.path.string() + "' is a folder") != std::string::npos);
    std::ofstream(path) << "1 2\n1 2 99\n";
    const ExampleRun unknown = run_example("copy_task", {"--load", m.path.string(), "--decode", path});
    CHECK(unknown.status == 1);
    CHECK(unknown.err.find(path + ":2: id 99 is not a symbol of this model (0..") != std::string::npos);
    std::string longer = "1";
    for (int i = 0; i < 6000; i++) longer += " 2";
    std::ofstream(path) << longer << "\n";
    const ExampleRun too_long = run_example("copy_task", {"--load", m.path.string(), "--decode", path});
    CHECK(too_long.status == 1);
    CHECK(too_long.err.find(path + ":1: 6001 ids, more than the model reads") != std::string::npos);
}

TEST_CASE("copy_task --beam: a beam as wide as all prefixes finds the most likely output, which greedy misses") {
    // L=5: outputs of 4 tokens over V=3, 81 of them. A beam of 27 keeps every 3-token prefix, so
    // at the last step it scores all 81: its answer is the exhaustive search's, done here.
    const SavedModel& m = half_trained_model();
    const LoadedModel model(m.path);
    // Runs on other fresh sequences (--seed) until one is where greedy and the best differ, so
    // that ignoring --beam would be seen (the first seed shows 3 here; a CPU that rounds
    // differently trains a slightly different model).
    int greedy_differs = 0;
    for (int seed = 1; seed <= 4 && greedy_differs == 0; seed++) {
        CAPTURE(seed);
        const ExampleRun beam = run_example("copy_task", {"--load", m.path.string(), "--eval", "40", "--beam", "27",
                                                          "--seed", std::to_string(seed)});
        REQUIRE(beam.status == 0);
        CHECK(beam.out.find("examples (beam 27 decoding)") != std::string::npos);
        for (const Decoded& d : all_printed(beam.out)) {
            const Ids best = model.most_likely(d.src);
            CHECK(d.out == best);
            greedy_differs += model.greedy(d.src) != best;
        }
    }
    CHECK(greedy_differs > 0);

    // and a beam of 1 is greedy
    const ExampleRun one = run_example("copy_task", {"--load", m.path.string(), "--eval", "40", "--beam", "1"});
    REQUIRE(one.status == 0);
    CHECK(one.out.find("examples (beam 1 decoding)") != std::string::npos);
    for (const Decoded& d : all_printed(one.out)) CHECK(d.out == model.greedy(d.src));
}

TEST_CASE("copy_task --no-kv-cache: recomputing the prefix decodes the same as the cache, and says which ran") {
    // The two paths give the same outputs by design: what the flag can be held to is the line that
    // names the path, outputs equal to a decoding done here (greedy and a beam), and the work done.
    const SavedModel& m = half_trained_model();
    const LoadedModel model(m.path);
    for (const bool beam : {false, true}) {
        CAPTURE(beam);
        std::vector<std::string> args = {"--load", m.path.string(), "--eval", "6"};
        if (beam) args.insert(args.end(), {"--beam", "27"});
        const ExampleRun cached = run_example("copy_task", args);
        args.push_back("--no-kv-cache");
        const ExampleRun recomputed = run_example("copy_task", args);
        REQUIRE(cached.status == 0);
        REQUIRE(recomputed.status == 0);
        CHECK(cached.out.find("(key/value cache)") != std::string::npos);
        CHECK(recomputed.out.find("(recomputing the prefix: --no-kv-cache or --reference)") != std::string::npos);
        CHECK(recomputed.out.find("key/value cache") == std::string::npos);
        for (const Decoded& d : all_printed(recomputed.out)) CHECK(d.out == (beam ? model.most_likely(d.src) : model.greedy(d.src)));
        CHECK(exact_match(recomputed.out) == exact_match(cached.out));
        // The work tells the paths apart: a cached step runs one position per row, a recomputing
        // one the whole prefix. Greedy, 6 sequences of L = 5 (4 steps): 6 x 4 positions against
        // 6 x (1 + 2 + 3 + 4); a beam of 27 over V = 3 tokens holds 1, 3, 9, 27 rows at steps 1-4.
        CHECK(number_after(cached.out, "tokens/s, ") == (beam ? 6 * (1 + 3 + 9 + 27) : 6 * 4));
        CHECK(number_after(recomputed.out, "tokens/s, ") == (beam ? 6 * (1 * 1 + 3 * 2 + 9 * 3 + 27 * 4) : 6 * (1 + 2 + 3 + 4)));
    }
}

TEST_CASE("copy_task --seed: draws both the initial weights and the training data") {
    // L=2 over V=3: each sequence is "1 x" with x = 1 or 2, one target token. At --lr 0 the
    // weights stay the initial ones (so the saved model is the untrained one), and a step's loss
    // is the mean of two per-sequence losses, a for x = 1 and c for x = 2, worked out here from
    // the saved model: loss = (n a + (B - n) c) / B, so the batch's count n of x = 1 reads back as
    // B (loss - c) / (a - c). Different seeds must give different weights and different counts.
    const ScratchDir dir("copy-flags-seed");
    const int B = 8, steps = 6;
    struct Seeded {
        std::vector<float> weights;
        std::vector<double> counts;   // of x = 1 in each step's batch
    };
    auto run = [&](const std::string& seed) {
        const std::string path = (dir.path / ("seed" + seed + ".safetensors")).string();
        const ExampleRun r = run_example("copy_task", {"--vocab", "3", "--seq-len", "2", "--d-model", "16", "--heads", "2",
                                                       "--d-ff", "32", "--batch", std::to_string(B), "--steps",
                                                       std::to_string(steps), "--lr", "0", "--print-every", "1", "--eval",
                                                       "1", "--seed", seed, "--save", path, "--overwrite"});   // (run twice)
        REQUIRE(r.status == 0);
        const LoadedModel model(path);
        Seeded s;
        for (const autograd::Tensor& p : model.model->parameters()) s.weights.insert(s.weights.end(), p.data(), p.data() + p.numel());
        const double a = -model.next_log_probs({1, 1}, {1, 1})[0][1], c = -model.next_log_probs({1, 2}, {1, 2})[0][2];
        REQUIRE(std::abs(a - c) > 0.02);   // far enough apart to tell the counts, from losses printed with 4 decimals
        for (const StepLine& l : step_lines(r.out)) s.counts.push_back(B * (l.loss - c) / (a - c));
        REQUIRE(s.counts.size() == steps);
        for (double n : s.counts) {
            CHECK(std::abs(n - std::round(n)) < 0.05);   // a whole number of sequences
            CHECK((n > -0.5 && n < B + 0.5));
        }
        return s;
    };
    const Seeded first = run("7"), again = run("7"), other = run("8");
    CHECK(first.weights == again.weights);
    CHECK(first.weights != other.weights);
    std::string n_first, n_again, n_other;   // "3 5 4 ..."
    for (int i = 0; i < steps; i++) {
        n_first += std::to_string(std::lround(first.counts[i])) + " ";
        n_again += std::to_string(std::lround(again.counts[i])) + " ";
        n_other += std::to_string(std::lround(other.counts[i])) + " ";
    }
    CHECK(n_first == n_again);
    CHECK(n_first != n_other);
}

TEST_CASE("copy_task --plot: an SVG with one point per step, at the printed losses") {
    const ScratchDir dir("copy-flags-plot");
    const std::string path = (dir.path / "loss.svg").string();
    const ExampleRun r = run_example("copy_task", small_copy_task({"--steps", "7", "--print-every", "1", "--plot", path}));
    const std::string svg = read_whole_file(path);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("wrote " + path) != std::string::npos);
    // the curve: <path ... d="M x,y L x,y ..."/>, y on a log axis whose ticks are labelled
    std::smatch m;
    REQUIRE(std::regex_search(svg, m, std::regex(R"re(<path stroke="[^"]*" d="([^"]*)")re")));
    std::vector<std::pair<double, double>> points;
    const std::string d = m[1];
    const std::regex xy(R"(([0-9.]+),([0-9.]+))");
    for (std::sregex_iterator it(d.begin(), d.end(), xy), end; it != end; ++it)
        points.push_back({std::stod((*it)[1]), std::stod((*it)[2])});
    const std::vector<StepLine> lines = step_lines(r.out);
    REQUIRE(lines.size() == 7);
    REQUIRE(points.size() == 7);
    // y tick labels: <text x=".." y="Y" text-anchor="end" dy="0.35em">LABEL</text>
    std::vector<std::pair<double, double>> ticks;   // (pixel y, value)
    const std::regex tick(R"re(y="([0-9.]+)" text-anchor="end" dy="0.35em">([0-9.e+-]+)<)re");
    for (std::sregex_iterator it(svg.begin(), svg.end(), tick), end; it != end; ++it)
        ticks.push_back({std::stod((*it)[1]), std::stod((*it)[2])});
    REQUIRE(ticks.size() >= 2);
    const auto [y0, v0] = ticks.front();
    const auto [y1, v1] = ticks.back();
    for (int i = 0; i < 7; i++) {
        CAPTURE(i);
        if (i > 0) CHECK(points[i].first > points[i - 1].first);   // one step after another
        const double loss = v0 * std::pow(v1 / v0, (points[i].second - y0) / (y1 - y0));   // log axis, read back
        CHECK(loss == doctest::Approx(lines[i].loss).epsilon(2e-3));
    }
}

TEST_CASE("copy_task --paper: The Annotated Transformer's configuration, and flags given beside it win") {
    SUBCASE("N=2 D=512 F=2048 h=8, dropout 0.1, B=80, 0.5 * Noam(warmup 400): the header and the parameter count") {
        const ExampleRun r = run_example("copy_task", {"--paper", "--steps", "0", "--eval", "1"});
        REQUIRE(r.status == 0);
        CHECK(r.out.find("model N=2 D=512 F=2048 h=8 dropout=0.1 |") != std::string::npos);
        CHECK(printed_parameters(r.out) == transformer_parameters(2, 512, 2048, 11));
        CHECK(r.out.find("0 steps of B=80, Adam(0.9, 0.98, 1e-9), lr = 0.5 * Noam(D=512, warmup=400)") != std::string::npos);
    }
    SUBCASE("400 steps, a line every 20, the lr of 0.5 * Noam(D, 400): on an 8-wide model and batches of 1, fast") {
        const ExampleRun r = run_example("copy_task", {"--paper", "--d-model", "8", "--heads", "2", "--d-ff", "8",
                                                       "--batch", "1", "--seq-len", "2", "--eval", "1"});
        REQUIRE(r.status == 0);
        CHECK(r.out.find("model N=2 D=8 F=8 h=2 dropout=0.1 |") != std::string::npos);
        CHECK(r.out.find("400 steps of B=1,") != std::string::npos);
        const std::vector<StepLine> lines = step_lines(r.out);
        REQUIRE(lines.size() == 20);
        for (int i = 0; i < 20; i++) {
            CAPTURE(i);
            CHECK(lines[i].step == 20 * (i + 1));
            CHECK(lines[i].window == 20);
            CHECK(lines[i].lr == doctest::Approx(noam_lr(lines[i].step, 0.5, 8, 400)).epsilon(1e-3));
        }
        CHECK(lines[19].lr == doctest::Approx(0.5 / std::sqrt(8.0) / 20).epsilon(1e-3));   // the peak, at step 400, by hand
    }
}

// ---- nothing a user trained is lost ----

// Ctrl-C during training: the step in progress ends, the run's whole state is saved, the program
// says how to continue and ends with status 130; --resume continues to the very numbers an
// uninterrupted run prints (dropout on: the generators are part of the state). Two signals at
// once (a script's `timeout -s INT` signals the process and its group) are one interrupt: the run
// is saved all the same (a later second signal quits at once: tests/test_common.cpp).
TEST_CASE("copy_task: Ctrl-C saves the run and says how to continue; --resume ends with the uninterrupted run's numbers") {
    const std::filesystem::path dir = example_scratch_dir("copy-interrupt");
    const std::string save = (dir / "model.safetensors").string(), state = (dir / "model.resume.safetensors").string();
    const std::vector<std::string> args = small_copy_task({"--steps", "400", "--dropout", "0.1", "--print-every", "1", "--seed", "3",
                                                           "--save", save});
    const ExampleRun straight = run_example("copy_task", args);
    REQUIRE(straight.status == 0);
    const std::string straight_model = read_whole_file(save);
    std::filesystem::remove(save);
    // The run is short (a second or two), and its output reaches the file in 4 KB pieces: on a
    // loaded machine the signal can arrive after the training has ended. Then the run finished
    // (status 0) or was stopped in its last evaluation (no status: the handler is gone by then),
    // and the premise of the test did not hold: it tries again, up to three times.
    auto interrupted = [&](const std::vector<int>& signals) {
        ExampleRun r;
        for (int attempt = 0; attempt < 3; attempt++) {
            std::filesystem::remove(save);
            std::filesystem::remove(state);
            r = interrupt_example("copy_task", args, "step    20 ", signals);
            if (r.status != 0 && r.status != -1) break;
        }
        return r;
    };
    const ExampleRun stopped = interrupted({SIGINT});
    INFO(stopped.err);
    CHECK(stopped.status == 130);
    CHECK(stopped.err.find("interrupted after step ") != std::string::npos);
    CHECK(stopped.err.find("--resume " + state) != std::string::npos);
    REQUIRE(std::filesystem::exists(state));
    CHECK_FALSE(std::filesystem::exists(save));   // the run did not finish: its model is the resumable state
    const std::vector<StepLine> first = step_lines(stopped.out);
    REQUIRE(!first.empty());
    std::vector<std::string> again = args;
    again.insert(again.end(), {"--resume", state});
    const std::string kept_state = (dir / "kept.resume.safetensors").string();
    std::filesystem::copy_file(state, kept_state);   // the finished run removes its own state; a check below uses it again
    const ExampleRun resumed = run_example("copy_task", again);
    INFO(resumed.err);
    REQUIRE(resumed.status == 0);
    CHECK(resumed.out.find("removed " + state + ": the run it holds has finished") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(state));
    std::filesystem::rename(kept_state, state);
    const std::vector<StepLine> rest = step_lines(resumed.out), all = step_lines(straight.out);
    REQUIRE(rest.size() + first.size() == all.size());
    CHECK(rest.front().step == first.back().step + 1);
    for (const StepLine& s : rest) {
        CAPTURE(s.step);
        const StepLine& want = all[s.step - 1];
        CHECK(s.loss == want.loss);   // as printed: the same digits
        CHECK(s.lr == want.lr);
    }
    // and the model it saves at the end is the uninterrupted run's, byte for byte
    CHECK(read_whole_file(save) == straight_model);
    // a state made by another model (the run's flags but --d-model) is refused, naming what differs
    std::vector<std::string> other = args;
    other.insert(other.end(), {"--d-model", "32", "--resume", state});
    const ExampleRun refused = run_example("copy_task", other);
    CHECK(refused.status == 1);
    CHECK(refused.err.find("resume with the flags of the run that wrote it") != std::string::npos);
    // two signals a moment apart: the one interrupt, and the run saved. Its status is the signal
    // the process took first: another thread may take SIGTERM before SIGINT reaches its own.
    const ExampleRun twice = interrupted({SIGINT, SIGTERM});
    INFO(twice.err);
    CHECK((twice.status == 130 || twice.status == 143));
    CHECK(twice.err.find("interrupted again") == std::string::npos);
    CHECK(std::filesystem::exists(state));
    std::filesystem::remove_all(dir);
}

// Every output path is checked before the first step: a --save or --plot that cannot be written
// fails in the first second, not after the training. And with --load nothing trains: the flags
// that would are refused, and a model flag that disagrees with the file names both.
TEST_CASE("copy_task: unwritable --save / --plot fail before training; --load refuses flags that do nothing or disagree") {
    for (const char* flag : {"--save", "--plot"}) {
        CAPTURE(flag);
        const ExampleRun r = run_example("copy_task", small_copy_task({"--steps", "2000", flag, "/no/such/folder/x"}));
        CHECK(r.status == 2);
        CHECK(r.err.find(std::string(flag) + " /no/such/folder/x: cannot write in '/no/such/folder'") != std::string::npos);
        CHECK(step_lines(r.out).empty());   // nothing trained
    }
    const ExampleRun folder = run_example("copy_task", small_copy_task({"--save", "/tmp"}));
    CHECK(folder.status == 2);
    CHECK(folder.err.find("--save /tmp: that is a folder") != std::string::npos);
    const std::filesystem::path dir = example_scratch_dir("copy-load-flags");
    const std::string model = (dir / "m.safetensors").string();
    REQUIRE(run_example("copy_task", small_copy_task({"--steps", "2", "--save", model})).status == 0);
    const ExampleRun steps = run_example("copy_task", {"--load", model, "--steps", "5"});
    CHECK(steps.status == 2);
    CHECK(steps.err.find("--steps does nothing with --load") != std::string::npos);
    const ExampleRun width = run_example("copy_task", {"--load", model, "--d-model", "64"});
    CHECK(width.status == 1);
    CHECK(width.err.find("--d-model 64, but the model in '" + model + "' has 16") != std::string::npos);
    const ExampleRun same = run_example("copy_task", {"--load", model, "--d-model", "16", "--eval", "4"});
    CHECK(same.status == 0);
    std::filesystem::remove_all(dir);
}

// ---- what the user has is never lost, and every "saved" line is true ----------------------------

namespace {

// A run's state, written when SIGTERM stopped a 400-step run at step 20 or after (a second or
// two): for the tests of --resume. SIGTERM ends the program as a shell reports a signal, 128 + 15.
struct InterruptedRun {
    ScratchDir dir{"copy-interrupted-state"};
    std::string save = (dir.path / "m.safetensors").string(), state = (dir.path / "m.resume.safetensors").string();
    std::vector<std::string> args = small_copy_task({"--steps", "400", "--print-every", "1", "--save", save});
    int stopped_at = 0;   // the last step it trained
    int status = 0;
    InterruptedRun() {
        for (int attempt = 0; attempt < 3 && stopped_at == 0; attempt++) {   // (a loaded machine may end the run first)
            std::filesystem::remove(save);
            std::filesystem::remove(state);
            const ExampleRun r = interrupt_example("copy_task", args, "step    20 ", {SIGTERM});
            const std::vector<StepLine> lines = step_lines(r.out);
            if (r.status != 0 && r.status != -1 && !lines.empty()) stopped_at = lines.back().step, status = r.status;
        }
    }
};

const InterruptedRun& interrupted_run() {
    static const InterruptedRun r;
    REQUIRE(r.stopped_at >= 20);
    REQUIRE(std::filesystem::exists(r.state));
    return r;
}

std::vector<std::string> plus(std::vector<std::string> args, const std::vector<std::string>& more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

// The model a copy_task file holds, loaded as --load loads it (checksums, config, weights): throws if it does not load.
int64_t loaded_vocab(const std::string& path) {
    const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(path);
    const std::unique_ptr<models::Seq2Seq> model = models::model_from_metadata(f, path);
    nn::load_parameters(*model, f, path, /*allow_unexpected=*/true);
    return model->tgt_vocab();
}

}  // namespace

TEST_CASE("copy_task: an output that names an input or another output is refused before training, naming both flags") {
    const ScratchDir dir("copy-clash");
    const std::string x = (dir.path / "x").string(), link = (dir.path / "link").string();
    const ExampleRun same = run_example("copy_task", small_copy_task({"--steps", "2", "--save", x, "--plot", x}));
    check_refused_in_one_line(same, "--plot " + x + " would replace --save " + x + ", which this run also writes");
    CHECK_FALSE(std::filesystem::exists(x));
    // through a symbolic link, not yet existing: still one file
    std::filesystem::create_symlink("x", link);
    const ExampleRun linked = run_example("copy_task", small_copy_task({"--steps", "2", "--save", x, "--plot", link}));
    check_refused_in_one_line(linked, "--plot " + link + " would replace --save " + x);
    // and through a folder that is a link to this one
    std::filesystem::create_directory_symlink(dir.path, dir.path / "same");
    const std::string via_folder = (dir.path / "same" / "x").string();
    const ExampleRun folder = run_example("copy_task", small_copy_task({"--steps", "2", "--save", x, "--plot", via_folder}));
    check_refused_in_one_line(folder, "--plot " + via_folder + " would replace --save " + x);
    // the state a Ctrl-C writes beside --save is an output too
    const std::string state = (dir.path / "x.resume.safetensors").string();
    const ExampleRun on_state = run_example("copy_task", small_copy_task({"--steps", "2", "--save", x, "--plot", state}));
    check_refused_in_one_line(on_state, "--plot " + state + " would replace the run's state");
    const ExampleRun decode = run_example("copy_task", {"--load", x, "--decode", x});   // two inputs may be one file
    CHECK(decode.err.find("would replace") == std::string::npos);
}

TEST_CASE("copy_task: an existing --save, --plot or state is replaced only with --overwrite, which the refusal names") {
    const ScratchDir dir("copy-existing");
    const std::string x = (dir.path / "x.safetensors").string();
    for (const char* flag : {"--save", "--plot"}) {
        CAPTURE(flag);
        std::ofstream(x) << "the user's file";
        const ExampleRun r = run_example("copy_task", small_copy_task({"--steps", "2", flag, x}));
        check_refused_in_one_line(r, std::string(flag) + " " + x + " exists, and this run would replace it: add --overwrite");
        CHECK(read_whole_file(x) == "the user's file");
    }
    const ExampleRun replaced = run_example("copy_task", small_copy_task({"--steps", "2", "--save", x, "--overwrite"}));
    REQUIRE(replaced.status == 0);
    CHECK(replaced.out.find("saved " + x) != std::string::npos);
    CHECK(loaded_vocab(x) == 11);   // the line is true: the file is the model
    // an interrupted run's state beside --save would be replaced by the next Ctrl-C
    const std::string state = (dir.path / "x.resume.safetensors").string();
    std::ofstream(state) << "an interrupted run";
    const ExampleRun over_state = run_example("copy_task", small_copy_task({"--steps", "2", "--save", x, "--overwrite=false"}));
    CHECK(over_state.status == 2);
    CHECK(over_state.err.find("the run's state (where Ctrl-C saves it) " + state + " exists") != std::string::npos);
}

TEST_CASE("copy_task --resume: another --seed, --batch, --lr, --schedule or --seq-len is refused, each named old -> new") {
    const InterruptedRun& run = interrupted_run();
    CHECK(run.status == 128 + SIGTERM);
    const ExampleRun r = run_example("copy_task", plus(run.args, {"--seed", "2", "--batch", "8", "--lr", "0.002", "--schedule", "noam",
                                                                  "--seq-len", "8", "--resume", run.state}));
    INFO(r.err);
    CHECK(r.status == 1);
    for (const char* difference : {"--seed 1 -> 2", "--batch 16 -> 8", "--seq-len 10 -> 8", "--schedule cosine -> noam", "--lr 0.003 -> 0.002"})
        CHECK(r.err.find(difference) != std::string::npos);
    CHECK(step_lines(r.out).empty());   // nothing trained
    CHECK(r.err.find("--vocab") == std::string::npos);   // what did not change is not named
}

TEST_CASE("copy_task --resume: fewer --steps is refused; the run says what it trained and where it stands; a new --save is true") {
    const InterruptedRun& run = interrupted_run();
    const ExampleRun fewer = run_example("copy_task", plus(run.args, {"--steps", "10", "--resume", run.state}));
    CHECK(fewer.status == 1);
    CHECK(fewer.err.find("--steps 10 is fewer than the " + std::to_string(run.stopped_at) + " steps the run in '" + run.state +
                         "' has trained") != std::string::npos);
    const std::string other = (run.dir.path / "other.safetensors").string();
    const ExampleRun resumed = run_example("copy_task", plus(run.args, {"--steps", "60", "--save", other, "--resume", run.state}));
    INFO(resumed.err);
    REQUIRE(resumed.status == 0);
    CHECK(resumed.out.find("trained " + std::to_string(60 - run.stopped_at) + " steps (resumed after step " +
                           std::to_string(run.stopped_at) + ": the run now stands at step 60)") != std::string::npos);
    CHECK(resumed.out.find("saved " + other) != std::string::npos);
    CHECK(loaded_vocab(other) == 11);
}

// Every entry of copy_task's identity (examples/copy_task.cpp), changed alone, makes --resume
// refuse the state and name that entry: a setting dropped from identity() would let a resumed run
// quietly become another run.
TEST_CASE("copy_task --resume: each setting of the run's identity, changed alone, is refused naming it") {
    const InterruptedRun& run = interrupted_run();
    const bool has_bf16 = read_whole_file("/proc/cpuinfo").find(" avx512_bf16") != std::string::npos;
    check_identity_walk("copy_task", run.args, run.state,
                        {{"--seed", {"--seed", "2"}, "2"}, {"--batch", {"--batch", "8"}, "8"}, {"--vocab", {"--vocab", "12"}, "12"},
                         {"--seq-len", {"--seq-len", "9"}, "9"}, {"--schedule", {"--schedule", "noam"}, "noam"},
                         {"--lr", {"--lr", "0.002"}, "0.002"}, {"--lr-factor", {"--lr-factor", "2"}, "2"},
                         {"--warmup", {"--warmup", "7"}, "7"}, {"--shards", {"--shards", "3"}, "3"},
                         {"--bf16", {"--bf16"}, "true"}, {"--reference", {"--reference"}, "true"}},
                        [&](const IdentityChange& c) { return c.entry == "--bf16" && !has_bf16; });
}

// The state --resume reads is an input: no output of the run may be it, with --overwrite or not
// (the run would replace what it resumes from). The run's own state, where its next Ctrl-C saves,
// may be named in another spelling of its path.
TEST_CASE("copy_task --resume: its file is an input that --save or --plot may not replace, even with --overwrite") {
    const InterruptedRun& run = interrupted_run();
    const std::string before = read_whole_file(run.state), other = (run.dir.path / "elsewhere.safetensors").string();
    for (const char* flag : {"--save", "--plot"}) {
        CAPTURE(flag);
        const ExampleRun r = run_example("copy_task", plus(run.args, {"--save", other, flag, run.state, "--resume", run.state, "--overwrite"}));
        check_refused_in_one_line(r, std::string(flag) + " " + run.state + " would replace --resume " + run.state + ", which this run reads");
    }
    // with the run's own --save, the state is where its next Ctrl-C saves: still no --plot there
    const ExampleRun plot = run_example("copy_task", plus(run.args, {"--plot", run.state, "--resume", run.state, "--overwrite"}));
    check_refused_in_one_line(plot, "--plot " + run.state + " would replace the run's state (where Ctrl-C saves it) " + run.state);
    CHECK(read_whole_file(run.state) == before);
    CHECK_FALSE(std::filesystem::exists(other));
    // the run's own state named as ./m.resume.safetensors is still its own: resumed, not "exists"
    const std::string spelled = (run.dir.path / "." / "m.resume.safetensors").string();
    const ExampleRun own = run_example("copy_task", plus(run.args, {"--steps", std::to_string(run.stopped_at), "--resume", spelled}));
    INFO(own.err);
    CHECK(own.status == 0);
    CHECK(own.out.find("trained 0 steps (resumed after step " + std::to_string(run.stopped_at)) != std::string::npos);
}

TEST_CASE("copy_task: a flipped byte in a saved model is refused naming the tensor and file; a file without checksums loads, noted") {
    const ScratchDir dir("copy-checksum");
    const std::string path = (dir.path / "m.safetensors").string();
    REQUIRE(run_example("copy_task", small_copy_task({"--steps", "2", "--save", path})).status == 0);
    std::string bytes = read_whole_file(path);
    const std::string good = bytes;
    bytes[bytes.size() - 1] ^= 0x01;   // an exponent bit of the last weight
    std::ofstream(path, std::ios::binary) << bytes;
    const ExampleRun flipped = run_example("copy_task", {"--load", path, "--eval", "2"});
    CHECK(flipped.status == 1);
    CHECK(flipped.err.find("'" + path + "': tensor \"") != std::string::npos);
    CHECK(flipped.err.find("fails its CRC-32C check") != std::string::npos);
    // the same file as it was before checksums: its header without "crc32c"
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= static_cast<uint64_t>(static_cast<unsigned char>(good[i])) << (8 * i);
    autograd::io::json::Value header = autograd::io::json::parse(good.substr(8, n));
    auto& meta = header.as_object().front().second.as_object();
    REQUIRE(header.as_object().front().first == "__metadata__");
    meta.erase(std::find_if(meta.begin(), meta.end(), [](const auto& e) { return e.first == "crc32c"; }));
    std::string text = autograd::io::json::dump(header);
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string old(8, '\0');
    for (int i = 0; i < 8; i++) old[i] = static_cast<char>(text.size() >> (8 * i));
    std::ofstream(path, std::ios::binary) << old << text << good.substr(8 + n);
    const ExampleRun unchecked = run_example("copy_task", {"--load", path, "--eval", "2"});
    CHECK(unchecked.status == 0);
    CHECK(unchecked.err.find("note: '" + path + "' carries no checksums") != std::string::npos);
    CHECK(count_lines(unchecked.err) == 1);
}

TEST_CASE("copy_task --load: --seq-len and --vocab are refused; --decode refuses an id past int32 and a token that is not a number") {
    const SavedModel& m = half_trained_model();
    for (const char* flag : {"--seq-len", "--vocab"}) {
        const ExampleRun r = run_example("copy_task", {"--load", m.path.string(), flag, "7"});
        check_refused_in_one_line(r, std::string(flag) + " does nothing with --load");
    }
    const ScratchDir dir("copy-decode-words");
    const std::string path = (dir.path / "s.txt").string();
    std::ofstream(path) << "1 2 4294967297 1\n";
    const ExampleRun big = run_example("copy_task", {"--load", m.path.string(), "--decode", path});
    CHECK(big.status == 1);
    CHECK(big.err.find(path + ":1: id 4294967297 is not a symbol of this model") != std::string::npos);
    std::ofstream(path) << "1 2 2-\n";
    const ExampleRun dash = run_example("copy_task", {"--load", m.path.string(), "--decode", path});
    CHECK(dash.status == 1);
    CHECK(dash.err.find(path + ":1: expected token ids separated by spaces, got '2-'") != std::string::npos);
    CHECK(dash.out.empty());
}


// The estimate copy_task checks before training (examples/common/memory_budget.h) against the
// peak RSS a run really reaches, where the attention weights dominate (L = 512) and where the
// weights and Adam's moments do (D = 512): within a factor of 2 either way (0.84 and 0.89 of the
// estimate when it was written). The default run needs
// a small part of any machine's memory.
TEST_CASE("copy_task: the memory estimate is within a factor of 2 of the peak RSS; a run that cannot fit is refused with the figure") {
    struct Size {
        std::vector<std::string> args;
        models::TransformerConfig cfg;
        int64_t B, L;
    };
    const std::vector<Size> sizes = {
        {{"--seq-len", "512", "--batch", "8", "--d-model", "16", "--heads", "2", "--d-ff", "32"}, {.src_vocab = 11, .tgt_vocab = 11, .layers = 2, .d_model = 16, .d_ff = 32, .heads = 2}, 8, 512},
        {{"--d-model", "512", "--heads", "8", "--d-ff", "2048", "--batch", "8"}, {.src_vocab = 11, .tgt_vocab = 11, .layers = 2, .d_model = 512, .d_ff = 2048, .heads = 8}, 8, 10},
    };
#if defined(__SANITIZE_ADDRESS__)
    MESSAGE("skipped: AddressSanitizer's shadow memory is in the RSS, and it cannot start under ulimit -v");
    return;
#endif
    for (const Size& s : sizes) {
        CAPTURE(s.L);
        CAPTURE(s.cfg.d_model);
        std::vector<std::string> args = s.args;
        // one shard: the whole batch's activations at once, as the estimate counts them (two shards
        // on one thread, a build without OpenMP or busy cores, hold one half at a time)
        args.insert(args.end(), {"--steps", "1", "--eval", "1", "--shards", "1"});
        const double measured = static_cast<double>(peak_rss_of("copy_task", args));
        const models::Transformer model(s.cfg);
        const double estimate = static_cast<double>(common::training_peak_bytes(model, s.B, s.L, s.L - 1, true));
        CAPTURE(measured);
        CAPTURE(estimate);
        CHECK(estimate > 0.5 * measured);
        CHECK(estimate < 2.0 * measured);
    }
    const models::Transformer defaults({.src_vocab = 11, .tgt_vocab = 11, .layers = 2, .d_model = 128, .d_ff = 256, .heads = 4});
    CHECK(common::training_peak_bytes(defaults, 128, 10, 9, true) < (256 << 20));
    // L = 4096, B = 8: about 14 GB, refused under a 1.5 GB address-space limit, with the figure and what to lower
    const std::filesystem::path dir = example_scratch_dir("copy-memory");
    const std::string cmd = "ulimit -v 1500000; OMP_NUM_THREADS=1 " + shell_quote(std::string(EXAMPLES_BIN) + "/copy_task") +
                            " --seq-len 4096 --batch 8 --steps 1 > " + shell_quote((dir / "out").string()) + " 2> " +
                            shell_quote((dir / "err").string());
    const int raw = std::system(cmd.c_str());
    const std::string err = read_whole_file(dir / "err"), out = read_whole_file(dir / "out");
    INFO(err);
    CHECK((WIFEXITED(raw) && WEXITSTATUS(raw) == 1));
    CHECK(err.find("copy_task: training on batches of 8 x 4096 needs about 1") != std::string::npos);
    CHECK(err.find(" GB at its peak (estimated from the shapes), more than the ") != std::string::npos);
    CHECK(err.find("this process may use (ulimit -v): lower --batch or --seq-len") != std::string::npos);
    CHECK(step_lines(out).empty());   // nothing trained
    std::filesystem::remove_all(dir);
}

// Decoding too is estimated before it starts (examples/common/memory_budget.h): 250 sequences of
// L decoded together, where the encoder's L x L attention weights per head dominate. The estimate
// is held within a factor of 2 of the peak RSS of a --load run at L = 256; at L = 1024 (about 4 GB)
// the run is refused under a 1 GB address-space limit with the figure and what to lower, where it
// once died of std::bad_alloc halfway.
TEST_CASE("copy_task: decoding's memory is estimated before it starts, and a decoding that cannot fit is refused with the figure") {
#if defined(__SANITIZE_ADDRESS__)
    MESSAGE("skipped: AddressSanitizer's shadow memory is in the RSS, and it cannot start under ulimit -v");
    return;
#endif
    const ScratchDir dir("copy-decoding-memory");
    const std::string mid = (dir.path / "mid.safetensors").string(), path = (dir.path / "long.safetensors").string();
    REQUIRE(run_example("copy_task", small_copy_task({"--steps", "0", "--seq-len", "256", "--eval", "1", "--save", mid})).status == 0);
    const double measured = static_cast<double>(peak_rss_of("copy_task", {"--load", mid, "--eval", "250"}));
    const models::Transformer model({.src_vocab = 11, .tgt_vocab = 11, .layers = 2, .d_model = 16, .d_ff = 32, .heads = 2});
    const double estimate = static_cast<double>(common::decoding_peak_bytes(model, 250, 256, 256, 0, true));
    CAPTURE(measured);
    CAPTURE(estimate);
    CHECK(estimate > 0.5 * measured);
    CHECK(estimate < 2.0 * measured);

    REQUIRE(run_example("copy_task", small_copy_task({"--steps", "0", "--seq-len", "1024", "--eval", "1", "--save", path})).status == 0);
    const std::string cmd = "ulimit -v 1000000; OMP_NUM_THREADS=1 " + shell_quote(std::string(EXAMPLES_BIN) + "/copy_task") + " --load " +
                            shell_quote(path) + " --eval 250 > /dev/null 2> " + shell_quote((dir.path / "err").string());
    const int raw = std::system(cmd.c_str());
    const std::string err = read_whole_file(dir.path / "err");
    INFO(err);
    CHECK((WIFEXITED(raw) && WEXITSTATUS(raw) == 1));
    CHECK(err.find("copy_task: decoding 250 sequences of 1024 together needs about ") != std::string::npos);
    CHECK(err.find(" GB at its peak (estimated from the shapes), more than the ") != std::string::npos);
    CHECK(err.find("(ulimit -v): lower --eval (below 250) or --beam") != std::string::npos);
}

// A std::bad_alloc that escapes all the same (another program took the memory after the check)
// says how large the tensor was and what to lower, instead of "std::bad_alloc".
TEST_CASE("out_of_memory_message names the tensor that could not be allocated and the flags that shrink the run") {
#if defined(__SANITIZE_ADDRESS__)
    MESSAGE("skipped: AddressSanitizer ends the process at a request this large instead of failing it");
    return;
#endif
    bool refused = false;
    try {
        const autograd::Tensor huge = autograd::Tensor::zeros({int64_t{1} << 48});   // 1 PB: no machine gives it
    } catch (const std::bad_alloc&) {
        refused = true;
    }
    REQUIRE(refused);
    const std::string message = common::out_of_memory_message("--batch");
    CHECK(message.find("out of memory: a tensor of 1125899.9 GB could not be allocated, with ") == 0);
    CHECK(message.find(" of tensors held: lower --batch") != std::string::npos);
}

// ---- what a user's hands do (issue 59) ----

// The memory is estimated from the config before the model is built: a model of a billion
// weights under a 1.5 GB address-space limit is refused with the estimate, not with "out of
// memory" after its weights were allocated. --steps that leave no step after --warmup (the cosine
// schedule's) are trained with a warning naming both; the Noam schedule, never cut, says nothing.
TEST_CASE("copy_task: a model larger than the memory is refused before it is built; --steps below --warmup warns") {
#if !defined(__SANITIZE_ADDRESS__)
    const ExampleRun big = run_example_limited("copy_task", small_copy_task({"--layers", "8", "--d-model", "4096", "--d-ff", "16384",
                                                                               "--heads", "8", "--steps", "1"}), "ulimit -v 1500000");
    INFO(big.err);
    CHECK(big.status == 1);
    CHECK(big.err.find("copy_task: training on batches of 16 x 10 needs about ") != std::string::npos);
    CHECK(big.err.find("out of memory") == std::string::npos);
#else
    MESSAGE("the memory case is skipped: AddressSanitizer cannot start under ulimit -v");
#endif
    const ExampleRun cut = run_example("copy_task", small_copy_task({"--steps", "3", "--warmup", "3", "--eval", "1"}));
    CHECK(cut.status == 0);
    CHECK(cut.err.find("copy_task: --steps 3 leaves no step after --warmup 3: the warmup is cut to 3 steps") != std::string::npos);
    const ExampleRun noam = run_example("copy_task", small_copy_task({"--steps", "3", "--warmup", "3", "--eval", "1", "--schedule", "noam"}));
    CHECK(noam.status == 0);
    CHECK(noam.err.find("--warmup") == std::string::npos);
}
