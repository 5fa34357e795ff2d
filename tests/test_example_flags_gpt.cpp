// The gpt example's flags, each in a test that fails when the flag's effect is removed: the
// program is run as a user runs it (tests/run_example.h) on a small text and a model of a few
// thousand parameters, and what it prints is checked against a formula (the parameter count),
// against a second run that differs only in the flag, or against the program refusing. The text
// loader on the bad files a user gives it: empty, one character, invalid UTF-8, a folder.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>   // makedev
#include <unistd.h>

#include "autograd/io/safetensors.h"
#include "examples/common/memory_budget.h"
#include "examples/data/text_data.h"
#include "tests/resume_identity.h"
#include "tests/run_example.h"

namespace {

// A small text of 65 lines of a few words: every run reads it in a moment.
std::string small_text() {
    const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to", "it", "was", "red", "Ça", "va"};
    std::string text;
    uint32_t x = 7;
    for (int line = 0; line < 65; line++) {
        for (int w = 0; w < 6; w++) {
            x = x * 1103515245u + 12345u;
            text += words[(x >> 16) % 15];
            text += w < 5 ? " " : ".\n";
        }
    }
    return text;
}

std::filesystem::path text_file() {
    static const std::filesystem::path path = [] {
        const std::filesystem::path dir = example_scratch_dir("gpt-text");
        std::ofstream(dir / "small.txt", std::ios::binary) << small_text();
        return dir / "small.txt";
    }();
    return path;
}

// A tiny GPT on the small text: 6 steps, an evaluation every 3, 20 sampled characters.
std::vector<std::string> tiny(std::vector<std::string> more) {
    std::vector<std::string> args = {"--data", text_file().string(), "--d-model", "8", "--heads", "2", "--layers", "1",
                                     "--block-size", "8", "--batch", "4", "--steps", "6", "--eval-every", "3",
                                     "--eval-batches", "2", "--tokens", "20", "--warmup", "2", "--lr", "0.01"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

ExampleRun run_gpt(const std::vector<std::string>& more, int threads = 1) {
    ExampleRun r = run_example("gpt", tiny(more), "", threads);
    INFO(r.err);
    REQUIRE(r.status == 0);
    return r;
}

// "step     6  train loss 2.1  val loss 2.2": the losses of every evaluation, in order
std::vector<double> val_losses(const std::string& out) {
    std::vector<double> v;
    for (size_t at = 0; (at = out.find("val loss ", at)) != std::string::npos; at++) v.push_back(std::strtod(out.c_str() + at + 9, nullptr));
    return v;
}

// The text after the last "sample (...):" line
std::string final_sample(const std::string& out) {
    const size_t at = out.rfind("sample (");
    REQUIRE(at != std::string::npos);
    std::string s = out.substr(out.find('\n', at) + 1);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
}

// `args` and then `more`.
std::vector<std::string> plus_args(std::vector<std::string> args, const std::vector<std::string>& more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

}  // namespace

TEST_CASE("gpt: the text loader refuses what is not a text to learn from, naming the problem") {
    const std::filesystem::path dir = example_scratch_dir("gpt-bad");
    const auto refused = [&](const std::string& name, const std::string& bytes, const std::string& message) {
        std::ofstream(dir / name, std::ios::binary) << bytes;
        CAPTURE(name);
        try {
            data::read_text_file((dir / name).string());
            FAIL("accepted");
        } catch (const std::runtime_error& e) {
            CHECK(std::string(e.what()).find(message) != std::string::npos);
        }
        const ExampleRun r = run_example("gpt", {"--data", (dir / name).string(), "--steps", "1"});
        CHECK(r.status == 1);
        CHECK(r.err.find(message) != std::string::npos);
    };
    refused("empty.txt", "", "is empty");
    refused("one.txt", "\xC3\xA9", "holds 1 character");
    refused("bad.txt", "ab\xC3\xA9z\xFF", "byte offset 5");   // é is 2 bytes: the bad byte is the 6th
    refused("overlong.txt", "ab\xC0\xAF", "byte offset 2");
    try {
        data::read_text_file(dir.string());
        FAIL("accepted a folder");
    } catch (const std::runtime_error& e) {
        CHECK(std::string(e.what()).find("is a directory") != std::string::npos);
    }
    // two characters are a text; characters are code points: "éa" is two ids, "é" one
    std::ofstream(dir / "two.txt", std::ios::binary) << "\xC3\xA9" "a";
    const std::string two = data::read_text_file((dir / "two.txt").string());
    const data::CorpusCodec codec = data::CorpusCodec::characters(two);
    CHECK(codec.size() == 2);
    CHECK(codec.encode(two) == std::vector<int32_t>{1, 0});
    CHECK(codec.decode({1, 0, 0}) == "\xC3\xA9" "aa");
    CHECK_THROWS_AS(codec.encode("b"), std::invalid_argument);
    // a text too short for a window of --block-size + 1 in either part is refused by the program
    const ExampleRun r = run_example("gpt", {"--data", (dir / "two.txt").string(), "--steps", "1"});
    CHECK(r.status == 1);
    CHECK(r.err.find("--block-size") != std::string::npos);
}

TEST_CASE("gpt: subword and character codecs read their text back, and round-trip through JSON") {
    const std::string text = small_text();
    const data::CorpusCodec chars = data::CorpusCodec::characters(text);
    CHECK(chars.decode(chars.encode(text)) == text);
    CHECK(data::CorpusCodec::from_json(chars.to_json()).encode(text) == chars.encode(text));
    const data::CorpusCodec sub = data::CorpusCodec::subwords(text, 30);
    CHECK(sub.is_subwords());
    CHECK(sub.decode(sub.encode(text)) == text);   // detokenized words: this text has no spaces before punctuation
    CHECK(sub.encode(text).size() < chars.encode(text).size());
    CHECK(data::CorpusCodec::from_json(sub.to_json()).encode(text) == sub.encode(text));
}

TEST_CASE("gpt: the model flags shape the model the parameter count says, and the data flags the corpus") {
    const ExampleRun r = run_gpt({"--layers", "2", "--d-model", "12", "--heads", "3", "--block-size", "10"});
    // V characters: the small text's distinct code points
    const int64_t V = data::CorpusCodec::characters(small_text()).size(), D = 12, T = 10;
    const int64_t block = 4 * D + 4 * (D * D + D) + (D * 4 * D + 4 * D) + (4 * D * D + D);
    CHECK(r.out.find("| " + std::to_string(V * D + T * D + 2 * block + 2 * D) + " parameters") != std::string::npos);
    CHECK(r.out.find("characters, V=" + std::to_string(V)) != std::string::npos);
    const ExampleRun sub = run_gpt({"--bpe", "20"});
    CHECK(sub.out.find("subwords, V=") != std::string::npos);
    CHECK(run_example("gpt", tiny({"--heads", "3"})).status == 2);   // 3 does not divide 8
}

TEST_CASE("gpt: every training flag changes the losses") {
    const std::vector<double> base = val_losses(run_gpt({}).out);
    REQUIRE(base.size() == 3);   // steps 0, 3, 6
    const std::vector<std::vector<std::string>> flags = {
        {"--seed", "2"},           {"--batch", "5"},       {"--lr", "0.02"},        {"--min-lr", "0.005"},
        {"--warmup", "1"},         {"--weight-decay", "5"}, {"--beta2", "0.9"},     {"--clip", "0.01"},
        {"--dropout", "0.3"},      {"--eval-batches", "3"}, {"--steps", "5"},        {"--block-size", "7"}};
    for (const auto& f : flags) {
        CAPTURE(f[0]);
        const std::vector<double> v = val_losses(run_gpt(f).out);
        CHECK(v != base);
    }
    // --eval-every: where the evaluations fall
    CHECK(val_losses(run_gpt({"--eval-every", "2"}).out).size() == 4);   // steps 0, 2, 4, 6
    // --threads and --reference change no number (up to rounding for the plain ops), and say so
    const ExampleRun two = run_gpt({"--threads", "2"}, 2);
    CHECK(val_losses(two.out) == base);
    const ExampleRun plain = run_gpt({"--reference"});
    CHECK(plain.out.find("plain autograd ops") != std::string::npos);
    const std::vector<double> p = val_losses(plain.out);
    REQUIRE(p.size() == base.size());
    for (size_t i = 0; i < p.size(); i++) CHECK(p[i] == doctest::Approx(base[i]).epsilon(1e-3));
}

// What the example hands AdamW (decay on the parameters of 2 dims or more: docs/10a-gpt.md), seen
// in what it saves: one step from the same start with --weight-decay 0 and 5. The first step's
// gradients are the same in both runs, so every vector (a bias, a LayerNorm's gain or bias) comes
// out bit for bit the same unless weight decay touched it, and every matrix (the embeddings,
// every weight) differs.
TEST_CASE("gpt: --weight-decay decays every matrix and no bias or gain") {
    const std::filesystem::path dir = example_scratch_dir("gpt-decay");
    std::map<std::string, autograd::io::SafetensorsFile> saved;
    for (const char* decay : {"0", "5"}) {
        const std::string path = (dir / (std::string("decay") + decay + ".safetensors")).string();
        run_gpt({"--steps", "1", "--eval-every", "1", "--tokens", "1", "--weight-decay", decay, "--save", path});
        saved[decay] = autograd::io::load_safetensors(path);
    }
    int matrices = 0, vectors = 0;
    for (const autograd::io::TensorRecord& t : saved["0"].tensors) {
        CAPTURE(t.name);
        const autograd::io::TensorRecord* other = saved["5"].find(t.name);
        REQUIRE(other != nullptr);
        const bool matrix = t.shape.size() >= 2;
        (matrix ? matrices : vectors)++;
        CHECK((t.bytes != other->bytes) == matrix);
    }
    CHECK(matrices == 2 + 6);   // wte, wpe; w_q, w_k, w_v, w_o, w_1, w_2 of the one block
    CHECK(vectors == 4 + 6 + 2);   // ln_1's and ln_2's gain and bias, the six biases, ln_f's gain and bias
}

TEST_CASE("gpt: the sampling flags change the sample, and the cache changes nothing but the speed") {
    const std::string base = final_sample(run_gpt({}).out);
    CHECK(base.size() == 1 + 20);   // "\n" and 20 ASCII characters
    for (const auto& f : std::vector<std::vector<std::string>>{
             {"--temperature", "3"}, {"--top-k", "1"}, {"--top-p", "0.1"}, {"--tokens", "25"}}) {
        CAPTURE(f[0]);
        CHECK(final_sample(run_gpt(f).out) != base);
    }
    const std::string prompted = final_sample(run_gpt({"--prompt", "the cat"}).out);
    CHECK(prompted.rfind("the cat", 0) == 0);
    CHECK(prompted.size() == 7 + 20);
    // top-k 1 is greedy, and so is a tiny temperature
    CHECK(final_sample(run_gpt({"--top-k", "1"}).out) == final_sample(run_gpt({"--temperature", "0.0001"}).out));
    CHECK(final_sample(run_gpt({"--no-kv-cache"}).out) == base);
    CHECK(run_gpt({"--sample-every", "3"}).out.find("sample at step 3:") != std::string::npos);
    const ExampleRun bad = run_example("gpt", tiny({"--prompt", "\xE2\x82\xAC"}));   // € is not in the text
    CHECK(bad.status == 1);
    CHECK(bad.err.find("U+20AC") != std::string::npos);
}

TEST_CASE("gpt: --save, --load and --plot; flags that would do nothing with --load are refused") {
    const std::filesystem::path dir = example_scratch_dir("gpt-save");
    const std::string model = (dir / "m.safetensors").string(), plot = (dir / "loss.svg").string();
    const ExampleRun trained = run_gpt({"--save", model, "--plot", plot, "--prompt", "the", "--seed", "3"});
    const ExampleRun loaded = run_example("gpt", {"--load", model, "--prompt", "the", "--tokens", "20", "--seed", "3"});
    INFO(loaded.err);
    REQUIRE(loaded.status == 0);
    CHECK(final_sample(loaded.out) == final_sample(trained.out));
    const std::string svg = read_whole_file(plot);
    CHECK(svg.find("<svg") != std::string::npos);
    CHECK(svg.find("validation") != std::string::npos);
    for (const char* f : {"--steps", "--data", "--d-model", "--save"}) {
        CAPTURE(f);
        check_refused_in_one_line(run_example("gpt", {"--load", model, f, f == std::string("--save") ? plot : "4"}),
                                  "does nothing with --load");
    }
    check_refused_in_one_line(run_example("gpt", tiny({"--save", dir.string()})), "that is a folder");
    check_refused_in_one_line(run_example("gpt", tiny({"--top-p", "0"})), "--top-p");
    check_refused_in_one_line(run_example("gpt", tiny({"--min-lr", "0.5"})), "--min-lr");
    const ExampleRun help = run_example("gpt", {"--help"});
    CHECK(help.status == 0);
    for (const char* f : {"--data", "--bpe", "--prompt", "--temperature", "--top-k", "--top-p", "--seed", "--tokens", "--save",
                          "--load", "--resume", "--plot", "--sample-every", "--no-kv-cache"})
        CHECK(help.out.find(f) != std::string::npos);
}

TEST_CASE("gpt: Ctrl-C saves the run, and --resume continues it to the numbers of the run never interrupted") {
    const std::filesystem::path dir = example_scratch_dir("gpt-resume");
    const std::string save = (dir / "m.safetensors").string();
    const std::vector<std::string> args = tiny({"--steps", "1500", "--eval-every", "500", "--save", save});
    const ExampleRun whole = run_gpt({"--steps", "1500", "--eval-every", "500"});
    // two SIGINTs a moment apart, as `timeout -s INT` sends them to a process and its group: one interrupt
    const ExampleRun stopped = interrupt_example("gpt", args, "step     0", {SIGINT, SIGINT});
    CHECK(stopped.status == 130);
    const std::string state = (dir / "m.resume.safetensors").string();
    REQUIRE(std::filesystem::exists(state));
    const int stopped_at = static_cast<int>(number_after(stopped.err, "interrupted after step "));
    REQUIRE(stopped_at < 1500);
    auto plus = [](std::vector<std::string> a, const std::vector<std::string>& more) {
        a.insert(a.end(), more.begin(), more.end());
        return a;
    };

    // another --lr, --seed or --batch is refused, each named old -> new; so is a changed text
    const ExampleRun r = run_example("gpt", plus(args, {"--lr", "0.02", "--seed", "5", "--batch", "3", "--resume", state}));
    CHECK(r.status == 1);
    for (const char* difference : {"--lr 0.01 -> 0.02", "--seed 1337 -> 5", "--batch 4 -> 3"}) {
        INFO(r.err);
        CHECK(r.err.find(difference) != std::string::npos);
    }
    CHECK(r.err.find("--warmup") == std::string::npos);   // what did not change is not named
    CHECK(r.out.find("train loss") == std::string::npos);   // nothing trained
    const std::filesystem::path other_text = dir / "other.txt";
    std::ofstream(other_text, std::ios::binary) << small_text() << "the cat ran.\n";   // the same characters
    std::vector<std::string> moved = plus(args, {"--resume", state});
    moved[1] = other_text.string();   // --data's value
    const ExampleRun changed = run_example("gpt", moved);
    INFO(changed.err);
    CHECK(changed.status == 1);
    CHECK(changed.err.find("--data {") != std::string::npos);
    // fewer --steps than the run has trained is refused
    const ExampleRun fewer = run_example("gpt", plus(args, {"--steps", "1", "--resume", state}));
    CHECK(fewer.status == 1);
    CHECK(fewer.err.find("--steps 1 is fewer than the " + std::to_string(stopped_at) + " steps the run in '" + state +
                         "' has trained") != std::string::npos);
    // the same flags (a new --save may differ): the uninterrupted run's numbers, an honest count, a true "saved"
    const std::string other = (dir / "other.safetensors").string();
    std::vector<std::string> again = plus(args, {"--resume", state});
    *std::find(again.begin(), again.end(), save) = other;
    const ExampleRun resumed = run_example("gpt", again);
    INFO(resumed.err);
    REQUIRE(resumed.status == 0);
    CHECK(val_losses(resumed.out).back() == val_losses(whole.out).back());
    CHECK(final_sample(resumed.out) == final_sample(whole.out));
    CHECK(resumed.out.find("trained " + std::to_string(1500 - stopped_at) + " steps (resumed after step " + std::to_string(stopped_at) +
                           ": the run now stands at step 1500)") != std::string::npos);
    CHECK(resumed.out.find("saved " + other) != std::string::npos);
    const ExampleRun loaded = run_example("gpt", {"--load", other, "--tokens", "5"});
    CHECK(loaded.status == 0);
    CHECK(loaded.out.find("loaded " + other) != std::string::npos);
}

TEST_CASE("gpt: no output names an input or another output, and a file that exists is replaced only with --overwrite") {
    const std::filesystem::path dir = example_scratch_dir("gpt-files");
    const std::string x = (dir / "x").string();
    check_refused_in_one_line(run_example("gpt", tiny({"--save", x, "--plot", x})), "--plot " + x + " would replace --save " + x);
    check_refused_in_one_line(run_example("gpt", tiny({"--plot", text_file().string()})), "would replace --data");
    CHECK(read_whole_file(text_file()) == small_text());
    for (const char* flag : {"--save", "--plot"}) {
        CAPTURE(flag);
        std::ofstream(x) << "the user's file";
        check_refused_in_one_line(run_example("gpt", tiny({flag, x})), std::string(flag) + " " + x +
                                                                            " exists, and this run would replace it: add --overwrite");
        CHECK(read_whole_file(x) == "the user's file");
    }
    const ExampleRun replaced = run_gpt({"--save", x, "--overwrite"});
    CHECK(replaced.out.find("saved " + x) != std::string::npos);
    CHECK(run_example("gpt", {"--load", x, "--tokens", "5"}).status == 0);   // the line is true: the file is the model
    check_refused_in_one_line(run_example("gpt", {"--load", x, "--overwrite"}), "does nothing with --load");
}

namespace {

// A tiny run's state, written when SIGINT stopped it right after its first evaluation (a long
// run: the signal always comes first): for the tests of what --resume must match.
struct InterruptedGpt {
    std::filesystem::path dir = example_scratch_dir("gpt-interrupted");
    std::string save = (dir / "m.safetensors").string(), state = (dir / "m.resume.safetensors").string();
    std::vector<std::string> args = tiny({"--steps", "100000", "--eval-every", "100000", "--save", save});
    InterruptedGpt() { interrupt_example("gpt", args, "step     0", {SIGINT}); }
    ~InterruptedGpt() { std::filesystem::remove_all(dir); }
};

const InterruptedGpt& interrupted_gpt() {
    static const InterruptedGpt r;
    REQUIRE(std::filesystem::exists(r.state));
    return r;
}

}  // namespace

// Every entry of gpt's identity (examples/gpt.cpp), changed alone, makes --resume refuse the state
// and name that entry; the text's entry is its size and CRC-32C.
TEST_CASE("gpt --resume: each setting of the run's identity, changed alone, is refused naming it") {
    const InterruptedGpt& run = interrupted_gpt();
    const std::string other_text = small_text() + "the cat ran.\n", other = (run.dir / "other.txt").string();   // the same characters
    std::ofstream(other, std::ios::binary) << other_text;
    check_identity_walk("gpt", run.args, run.state,
                        {{"--data", {"--data", other}, fingerprint_of(other_text)}, {"--bpe", {"--bpe", "20"}, "20"},
                         {"--seed", {"--seed", "2"}, "2"}, {"--batch", {"--batch", "3"}, "3"}, {"--lr", {"--lr", "0.02"}, "0.02"},
                         {"--min-lr", {"--min-lr", "0.001"}, "0.001"}, {"--warmup", {"--warmup", "3"}, "3"},
                         {"--weight-decay", {"--weight-decay", "0.2"}, "0.2"}, {"--beta2", {"--beta2", "0.9"}, "0.9"},
                         {"--clip", {"--clip", "0.5"}, "0.5"}, {"--eval-batches", {"--eval-batches", "3"}, "3"},
                         {"--reference", {"--reference"}, "true"}},
                        [](const IdentityChange&) { return false; });
    // and the recorded text is this one: the old value named is the fingerprint of the text it read
    const ExampleRun r = run_example("gpt", plus_args(run.args, {"--data", other, "--resume", run.state}));
    CHECK(r.err.find("--data " + fingerprint_of(small_text()) + " -> ") != std::string::npos);
}

// The state --resume reads is an input: no output of the run may be it, with --overwrite or not.
TEST_CASE("gpt --resume: its file is an input that --save or --plot may not replace, even with --overwrite") {
    const InterruptedGpt& run = interrupted_gpt();
    const std::string before = read_whole_file(run.state), elsewhere = (run.dir / "elsewhere.safetensors").string();
    for (const char* flag : {"--save", "--plot"}) {
        CAPTURE(flag);
        const ExampleRun r = run_example("gpt", plus_args(run.args, {"--save", elsewhere, flag, run.state, "--resume", run.state, "--overwrite"}));
        check_refused_in_one_line(r, std::string(flag) + " " + run.state + " would replace --resume " + run.state + ", which this run reads");
    }
    const ExampleRun plot = run_example("gpt", plus_args(run.args, {"--plot", run.state, "--resume", run.state, "--overwrite"}));
    check_refused_in_one_line(plot, "--plot " + run.state + " would replace the run's state (where Ctrl-C saves it) " + run.state);
    CHECK(read_whole_file(run.state) == before);
    CHECK_FALSE(std::filesystem::exists(elsewhere));
}

// The estimate gpt checks before training (examples/common/memory_budget.h) against the peak RSS a
// run really reaches where the attention weights dominate (windows of 512): within a factor of 2
// either way. A run that cannot fit (windows of 2,048, about 17 GB) is refused under a 1.5 GB
// address-space limit with the figure and what to lower, before a step is trained.
TEST_CASE("gpt: the memory estimate is within a factor of 2 of the peak RSS; a run that cannot fit is refused with the figure") {
#if defined(__SANITIZE_ADDRESS__)
    MESSAGE("skipped: AddressSanitizer's shadow memory is in the RSS, and it cannot start under ulimit -v");
    return;
#endif
    const std::filesystem::path dir = example_scratch_dir("gpt-memory");
    const std::string text = (dir / "long.txt").string();
    {
        std::ofstream out(text, std::ios::binary);
        for (int i = 0; i < 50; i++) out << small_text();   // about 65,000 characters: windows of 2,048 fit in its last 10%
    }
    const double measured = static_cast<double>(peak_rss_of("gpt", {"--data", text, "--block-size", "512", "--batch", "8", "--d-model", "16",
                                                                     "--heads", "4", "--layers", "2", "--steps", "1", "--eval-batches", "1",
                                                                     "--tokens", "1"}));
    const models::GPT model({.vocab = 19, .block_size = 512, .layers = 2, .heads = 4, .d_model = 16});
    const double estimate = static_cast<double>(common::gpt_training_peak_bytes(model, 8, 512));
    CAPTURE(measured);
    CAPTURE(estimate);
    CHECK(estimate > 0.5 * measured);
    CHECK(estimate < 2.0 * measured);

    const std::string cmd = "ulimit -v 1500000; OMP_NUM_THREADS=1 " + shell_quote(std::string(EXAMPLES_BIN) + "/gpt") + " --data " +
                            shell_quote(text) + " --block-size 2048 --batch 64 > " + shell_quote((dir / "out").string()) + " 2> " +
                            shell_quote((dir / "err").string());
    const int raw = std::system(cmd.c_str());
    const std::string err = read_whole_file(dir / "err"), out = read_whole_file(dir / "out");
    INFO(err);
    CHECK((WIFEXITED(raw) && WEXITSTATUS(raw) == 1));
    CHECK(err.find("gpt: training on batches of 64 x 2048 needs about ") != std::string::npos);
    CHECK(err.find(" GB at its peak (estimated from the shapes), more than the ") != std::string::npos);
    CHECK(err.find("(ulimit -v): lower --batch or --block-size (or the model: --d-model, --layers)") != std::string::npos);
    CHECK(out.find("train loss") == std::string::npos);   // nothing trained
}

// ---- what a user's hands do (issue 59): odd inputs get a clear refusal before any work ----------

// A script's unset variable passes "": it must not mean "no --save" (the run would train and
// keep nothing), nor "the default text" or "no prompt".
TEST_CASE("gpt: an empty --save, --load, --data, --resume, --plot or --prompt is refused before anything runs") {
    for (const char* flag : {"--save", "--load", "--data", "--resume", "--plot", "--prompt"}) {
        CAPTURE(flag);
        check_refused_in_one_line(run_example("gpt", tiny({flag, ""})), std::string(flag) + " needs ");
        check_refused_in_one_line(run_example("gpt", tiny({std::string(flag) + "="})), "got an empty value");
    }
}

// The memory is estimated from the flags before anything of that size is made: the model, the
// evaluation's windows. Under a 1.5 GB address-space limit, a batch of 10^8 windows and a model of
// 400 million weights are refused with the estimate; made first, they would end in "out of
// memory" (or, without the limit, in the kernel's OOM killer).
TEST_CASE("gpt: a batch or a model larger than the memory is refused from its estimate, before it is allocated") {
#if defined(__SANITIZE_ADDRESS__)
    MESSAGE("skipped: AddressSanitizer cannot start under ulimit -v");
    return;
#endif
    for (const auto& more : std::vector<std::vector<std::string>>{{"--batch", "100000000"},
                                                                  {"--layers", "8", "--d-model", "2048", "--heads", "8"},
                                                                  {"--eval-batches", "100000", "--batch", "1000"}}) {   // 13 GB of windows
        CAPTURE(more[0]);
        const ExampleRun r = run_example_limited("gpt", tiny(more), "ulimit -v 1500000");
        INFO(r.err);
        CHECK(r.status == 1);
        CHECK(r.err.find("gpt: training on batches of ") != std::string::npos);
        CHECK(r.err.find("(estimated from the shapes), more than the ") != std::string::npos);
        CHECK(r.err.find("out of memory") == std::string::npos);
        CHECK(r.out.find("parameters") == std::string::npos);   // no model was made
    }
}

// --data reads a regular file, whole, once: a FIFO (which the run would open a second time for
// its checksum, and wait there forever), a device (/dev/zero never ends) and a file past 2^30
// bytes (a sparse one here: nothing is written) are refused at once, naming what they are; under
// an 800 MB address-space limit, so that a file read before its size is checked ends in "out of
// memory" instead.
TEST_CASE("gpt --data: a FIFO, a device or a file past 1 GiB is refused before it is read") {
#if defined(__SANITIZE_ADDRESS__)
    const std::string limit = "true";   // (AddressSanitizer cannot start under ulimit -v)
#else
    const std::string limit = "ulimit -v 800000";
#endif
    const std::filesystem::path dir = example_scratch_dir("gpt-data-kinds");
    const std::string fifo = (dir / "fifo").string(), big = (dir / "big.txt").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    {
        std::ofstream(big) << "ab";
        std::filesystem::resize_file(big, (int64_t{1} << 30) + 1);
    }
    for (const auto& [path, message] : std::vector<std::pair<std::string, std::string>>{
             {fifo, "is a FIFO (named pipe), not a regular file"},
             {"/dev/zero", "'/dev/zero' is a character device, not a regular file"},
             {big, "holds 1073741825 bytes, more than the 2^30 (1073741824) a run reads from one file"}}) {
        CAPTURE(path);
        const ExampleRun r = run_example_limited("gpt", tiny({"--data", path}), limit);
        INFO(r.err);
        CHECK(r.status == 1);
        CHECK(r.err.find(message) != std::string::npos);
    }
    std::filesystem::remove_all(dir);
}

// Only a regular file is replaced: a FIFO (or, for root, a device node) given as an output is
// refused before the run, --overwrite or not, and is still what it was. The device case needs
// root to make a node (mknod), and is skipped without it.
TEST_CASE("gpt --save / --plot: a FIFO or a device is refused even with --overwrite, and left as it was") {
    const std::filesystem::path dir = example_scratch_dir("gpt-output-kinds");
    const std::string fifo = (dir / "fifo").string(), device = (dir / "full").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::vector<std::string> nodes = {fifo};
    if (::geteuid() == 0 && ::mknod(device.c_str(), S_IFCHR | 0600, ::makedev(1, 7)) == 0) nodes.push_back(device);   // /dev/full's numbers
    else MESSAGE("the device node case is skipped: making one needs root");
    for (const std::string& node : nodes)
        for (const char* flag : {"--save", "--plot"}) {
            CAPTURE(node);
            CAPTURE(flag);
            const ExampleRun r = run_example_limited("gpt", tiny({flag, node, "--overwrite"}), "true");
            check_refused_in_one_line(r, std::string(flag) + " " + node + ": it is " +
                                             (node == fifo ? "a FIFO (named pipe)" : "a character device") +
                                             ", not a regular file: only a regular file is replaced");
            struct stat st {};
            REQUIRE(::lstat(node.c_str(), &st) == 0);
            CHECK((node == fifo ? S_ISFIFO(st.st_mode) : S_ISCHR(st.st_mode)));
        }
    // the writer itself refuses, for a path no check saw: the state, here a FIFO beside --save
    const std::string save = (dir / "m.safetensors").string(), state = (dir / "m.resume.safetensors").string();
    REQUIRE(::mkfifo(state.c_str(), 0600) == 0);
    check_refused_in_one_line(run_example_limited("gpt", tiny({"--save", save, "--overwrite"}), "true"),
                              "the run's state (where Ctrl-C saves it) " + state + ": it is a FIFO");
    std::filesystem::remove_all(dir);
}

// An output path that cannot be written is refused before the training, not after it: a loop of
// symbolic links, a link into a folder that is not there, a name longer than 255 bytes. A legal
// name of 250 bytes, whose temporary file would not fit 255 with ".tmp" and the rest, is saved.
TEST_CASE("gpt --save: a link loop, a dangling link into nowhere, a name past 255 bytes fail first; a 250-byte name saves") {
    const std::filesystem::path dir = example_scratch_dir("gpt-save-names");
    std::filesystem::create_symlink("b", dir / "a");
    std::filesystem::create_symlink("a", dir / "b");
    std::filesystem::create_symlink("/no/such/folder/m.safetensors", dir / "dangling");
    const std::string too_long = (dir / (std::string(244, 'n') + ".safetensors")).string();   // 256 bytes
    for (const auto& [path, message] : std::vector<std::pair<std::string, std::string>>{
             {(dir / "a").string(), "cannot follow its symbolic links: Too many levels of symbolic links"},
             {(dir / "dangling").string(), "(a symbolic link to '/no/such/folder/m.safetensors') cannot write in '/no/such/folder'"},
             {too_long, "its name is 256 bytes, more than the 255 a file name may have"}}) {
        CAPTURE(path);
        const ExampleRun r = run_example("gpt", tiny({"--save", path, "--steps", "2000"}));
        check_refused_in_one_line(r, "--save " + path + ": " + message);
    }
    const std::string long_name = (dir / (std::string(238, 'n') + ".safetensors")).string();   // 250 bytes
    const ExampleRun saved = run_gpt({"--save", long_name});
    CHECK(saved.out.find("saved " + long_name) != std::string::npos);
    CHECK(run_example("gpt", {"--load", long_name, "--tokens", "3"}).status == 0);
    std::filesystem::remove_all(dir);
}

// --plot old.svg --overwrite on a full disk: the new picture cannot be written whole, and the old
// one stays as it was (no truncated SVG where it was). The write fails for real: the file-size
// limit (ulimit -f, SIGXFSZ ignored) makes any write past 4 blocks fail as a full disk would.
TEST_CASE("gpt --plot: a write that fails (the disk full) leaves the old picture whole, and says so") {
    const std::filesystem::path dir = example_scratch_dir("gpt-plot-full");
    const std::string plot = (dir / "old.svg").string();
    std::ofstream(plot) << "<svg>the old picture</svg>";
    const ExampleRun whole = run_gpt({"--plot", plot, "--overwrite", "--steps", "40", "--eval-every", "1"});
    REQUIRE(read_whole_file(plot).size() > 4 * 1024);   // past the limit below, in 512- or 1024-byte blocks
    std::ofstream(plot) << "<svg>the old picture</svg>";
    const ExampleRun full = run_example_limited("gpt", tiny({"--plot", plot, "--overwrite", "--steps", "40", "--eval-every", "1"}),
                                                "trap '' XFSZ; ulimit -f 4");
    INFO(full.err);
    CHECK(full.status == 1);
    CHECK(full.err.find("cannot write '" + plot + "': File too large") != std::string::npos);
    CHECK(read_whole_file(plot) == "<svg>the old picture</svg>");
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path().filename().string());
    CHECK(files == std::vector<std::string>{"old.svg"});   // no temporary left beside it
    std::filesystem::remove_all(dir);
}

// --steps at or below --warmup: the schedule is cut (the warmup squeezed into the run, the rate
// ending at its peak, no decay): the run says so, naming both flags; a run with room after its
// warmup says nothing.
TEST_CASE("gpt: --steps that leave no step after --warmup are trained with a warning naming both") {
    const ExampleRun cut = run_gpt({"--steps", "3", "--warmup", "5"});
    CHECK(cut.err.find("gpt: --steps 3 leaves no step after --warmup 5: the warmup is cut to 3 steps and the learning rate ends "
                       "at its peak (--lr 0.01), never decayed; give --warmup 2 or less") != std::string::npos);
    CHECK(cut.out.find("trained 3 steps") != std::string::npos);
    CHECK(run_gpt({"--steps", "6", "--warmup", "5"}).err.find("--warmup") == std::string::npos);
}

// Messages that name the fix.
TEST_CASE("gpt: a prompt the text cannot give, an invalid UTF-8 prompt, a text too short for subwords: each names the flag") {
    const std::filesystem::path dir = example_scratch_dir("gpt-messages");
    // a text of one line has no newline, the default prompt: refused before training, naming --prompt
    const std::string one_line = (dir / "one-line.txt").string();
    std::string joined = small_text();
    std::replace(joined.begin(), joined.end(), '\n', ' ');
    std::ofstream(one_line, std::ios::binary) << joined;
    const ExampleRun no_newline = run_example("gpt", tiny({"--data", one_line}));
    INFO(no_newline.err);
    CHECK(no_newline.status == 1);
    CHECK(no_newline.err.find("the default --prompt is a newline, and the text '" + one_line + "' has none") != std::string::npos);
    CHECK(no_newline.out.find("train loss") == std::string::npos);
    CHECK(run_example("gpt", tiny({"--data", one_line, "--prompt", "the"})).status == 0);
    // subwords: a prompt of blanks alone holds no token, refused before training too
    const ExampleRun blank = run_example("gpt", tiny({"--bpe", "20", "--prompt", "   "}));
    CHECK(blank.status == 1);
    CHECK(blank.err.find("--prompt '   ' holds no token for the model to continue") != std::string::npos);
    CHECK(blank.out.find("train loss") == std::string::npos);
    // not UTF-8: the byte offset, not U+FFFD
    check_refused_in_one_line(run_example("gpt", tiny({"--prompt", "ab\xFF"})), "--prompt is not valid UTF-8: a bad byte sequence at byte offset 2");
    // subwords of a tiny text at --block-size 1: more text or fewer merges, not a smaller --block-size
    const std::string tiny_text = (dir / "tiny.txt").string();
    std::ofstream(tiny_text, std::ios::binary) << "hello\n";   // 2 subwords: "hello" and the newline
    const ExampleRun short_text = run_example("gpt", tiny({"--data", tiny_text, "--bpe", "50", "--block-size", "1"}));
    INFO(short_text.err);
    CHECK(short_text.status == 1);
    CHECK(short_text.err.find("fewer than a window of --block-size 1 + 1 (use more text, or fewer --bpe merges") != std::string::npos);
    CHECK(short_text.err.find("smaller --block-size") == std::string::npos);
    std::filesystem::remove_all(dir);
}

// A run resumed in its own folder, with its own --save, ends by removing the state it resumed
// from (left there, it would refuse the next run with that --save), and says so; the state, given
// to --load in the meantime, samples from its model with a note that says what the file is.
TEST_CASE("gpt: --load of a run's state says what it is and samples; the finished resumed run removes that state") {
    const std::filesystem::path dir = example_scratch_dir("gpt-finished");
    const std::string save = (dir / "m.safetensors").string(), state = (dir / "m.resume.safetensors").string();
    const std::vector<std::string> args = tiny({"--steps", "1500", "--eval-every", "500", "--save", save});
    const ExampleRun stopped = interrupt_example("gpt", args, "step     0", {SIGINT});
    REQUIRE(stopped.status == 130);
    REQUIRE(std::filesystem::exists(state));
    const ExampleRun loaded = run_example("gpt", {"--load", state, "--tokens", "5"});
    INFO(loaded.err);
    CHECK(loaded.status == 0);
    CHECK(loaded.err.find("note: '" + state + "' is the state of a run interrupted after step ") != std::string::npos);
    CHECK(loaded.err.find("not a --save'd model: using its model as it stood then (--resume " + state + " goes on training it)") !=
          std::string::npos);
    std::vector<std::string> again = args;
    again.insert(again.end(), {"--resume", state});
    const ExampleRun resumed = run_example("gpt", again);
    INFO(resumed.err);
    REQUIRE(resumed.status == 0);
    CHECK(resumed.out.find("saved " + save) != std::string::npos);
    CHECK(resumed.out.find("removed " + state + ": the run it holds has finished (its model is in " + save + ")") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(state));
    // a state resumed into another --save is the user's copy: it stays
    std::vector<std::string> replacing = args;
    replacing.push_back("--overwrite");   // (the finished run's --save is there now)
    REQUIRE(interrupt_example("gpt", replacing, "step     0", {SIGINT}).status == 130);
    REQUIRE(std::filesystem::exists(state));
    const std::vector<std::string> elsewhere = tiny({"--steps", "1500", "--eval-every", "500", "--save", (dir / "other.safetensors").string(),
                                                     "--resume", state});
    const ExampleRun other = run_example("gpt", elsewhere);
    INFO(other.err);
    REQUIRE(other.status == 0);
    CHECK(other.out.find("removed") == std::string::npos);
    CHECK(std::filesystem::exists(state));
    std::filesystem::remove_all(dir);
}
