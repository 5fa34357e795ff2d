// translation's own flags (the model and training flags it shares with copy_task are tested with
// copy_task), each in a test that fails when the flag's effect is removed or inverted. The program
// runs as a user runs it (tests/run_example.h), on TSV files this test writes from a tiny
// English->German grammar: "The cat looks at the cup ." -> "Die Katze betrachtet die Tasse .".
// The test knows every word, count, length and translation of that grammar without the program,
// so what the program prints is checked against numbers and sentences worked out here. A 1-layer
// model 32 wide learns the grammar without a mistake in 10 epochs, half a second.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>   // mkfifo

#include "autograd/io/safetensors.h"
#include "autograd/runtime.h"
#include "autograd/kernels/threads.h"
#include "examples/common/training_work.h"
#include "examples/data/translation_data.h"
#include "examples/eval/translation_eval.h"
#include "examples/options/translation_options.h"
#include "models/checkpoint.h"
#include "models/rnn_seq2seq.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "tests/resume_identity.h"
#include "tests/run_example.h"

namespace fs = std::filesystem;

namespace {

// ---- the grammar ------------------------------------------------------------------------------

struct Phrase {
    std::string en, de;
};
// Verbs of one and two words on each side, so source and target lengths differ.
const Phrase kSubjects[] = {{"the cat", "die Katze"}, {"the dog", "der Hund"}, {"a bird", "ein Vogel"},
                            {"my friend", "mein Freund"}, {"the teacher", "der Lehrer"}};
const Phrase kVerbs[] = {{"sees", "sieht"}, {"likes", "mag"}, {"looks at", "betrachtet"}, {"waits for", "wartet auf"}};
const Phrase kObjects[] = {{"the apple", "den Apfel"}, {"the ball", "den Ball"}, {"a book", "ein Buch"},
                           {"the bread", "das Brot"}, {"a fish", "einen Fisch"}, {"the cup", "die Tasse"},
                           {"the hat", "den Hut"}};
constexpr int kDistinctSentences = 5 * 4 * 7;

std::string capitalized(std::string s) {
    s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
    return s;
}

// Sentence i: subject i % 5, verb (i / 5) % 4, object (i / 20) % 7, so sentences 0..139 are all
// different and sentence i + 140 is sentence i again. Words are separated by single spaces, the
// full stop included: the program's tokenizer splits them exactly where words() does.
data::Pair sentence(int i) {
    const Phrase &s = kSubjects[i % 5], &v = kVerbs[(i / 5) % 4], &o = kObjects[(i / 20) % 7];
    return {capitalized(s.en + " " + v.en + " " + o.en + " ."), capitalized(s.de + " " + v.de + " " + o.de + " .")};
}

std::vector<std::string> words(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

// What the program prints for a correct translation: the words detokenized, which joins the full
// stop to the word before it.
std::string printed(const std::string& text) { return text.substr(0, text.size() - 2) + "."; }

std::string lowercase(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// How often each word occurs in `pairs`: in the sources, in the targets, and in both together
// (as the BPE merges are learned).
struct WordCounts {
    std::map<std::string, long long> src, tgt, both;
};

WordCounts count_words(const std::vector<data::Pair>& pairs, bool lower = false) {
    WordCounts n;
    for (const data::Pair& p : pairs) {
        for (const std::string& w : words(lower ? lowercase(p.src) : p.src)) n.src[w]++, n.both[w]++;
        for (const std::string& w : words(lower ? lowercase(p.tgt) : p.tgt)) n.tgt[w]++, n.both[w]++;
    }
    return n;
}

// A vocabulary's size as the program prints it: the 4 special tokens (<pad> <bos> <eos> <unk>) and
// the words.
long long with_specials(const std::map<std::string, long long>& words) { return 4 + static_cast<long long>(words.size()); }

// Every subword vocabulary also holds the 256 byte tokens and "</w>", so that any text can be spelled.
constexpr long long kFallbackTokens = 257;

// ---- the files --------------------------------------------------------------------------------

void write_tsv(const fs::path& path, const std::vector<data::Pair>& pairs) {
    std::ofstream f(path, std::ios::binary);
    for (const data::Pair& p : pairs) f << p.src << '\t' << p.tgt << '\n';
}

// train.tsv holds sentences 0..282 (every sentence twice, 0..2 three times); valid.tsv 13 and
// test.tsv 7 others of the same sentences. Prime counts: no two splits are the same size.
struct Corpus {
    fs::path dir;
    std::vector<data::Pair> train, valid, test;
    std::string train_tsv, valid_tsv, test_tsv;
};

// Removes a test's folder when the test ends, also when a REQUIRE stops it.
struct RemoveOnExit {
    fs::path dir;
    ~RemoveOnExit() { fs::remove_all(dir); }
};

Corpus write_corpus(const std::string& name) {
    Corpus c;
    c.dir = example_scratch_dir(name);
    for (int i = 0; i < 283; i++) c.train.push_back(sentence(i));
    for (int i = 0; i < 13; i++) c.valid.push_back(sentence(11 * i + 3));
    for (int i = 0; i < 7; i++) c.test.push_back(sentence(19 * i + 5));
    c.train_tsv = (c.dir / "train.tsv").string();
    c.valid_tsv = (c.dir / "valid.tsv").string();
    c.test_tsv = (c.dir / "test.tsv").string();
    write_tsv(c.train_tsv, c.train);
    write_tsv(c.valid_tsv, c.valid);
    write_tsv(c.test_tsv, c.test);
    return c;
}

// A run on the corpus: word level, batches of 16 sentence pairs, nothing saved (--no-save, unless
// `more` gives a --save), one epoch of a model 16 wide (18 steps, a few hundredths of a second).
// Later flags in `more` override these.
std::vector<std::string> tiny_run(const Corpus& c, const std::vector<std::string>& more) {
    std::vector<std::string> args = {"--data", c.train_tsv, "--valid", c.valid_tsv, "--test", c.test_tsv, "--bpe", "0",
                                     "--batch-tokens", "0", "--batch", "16", "--layers", "1", "--d-model", "16", "--heads",
                                     "2", "--d-ff", "32", "--epochs", "1"};
    args.insert(args.end(), more.begin(), more.end());
    if (std::find(more.begin(), more.end(), "--save") == more.end()) args.push_back("--no-save");
    return args;
}

// `args` without `flag` and its value.
std::vector<std::string> without(std::vector<std::string> args, const std::string& flag) {
    const auto at = std::find(args.begin(), args.end(), flag);
    if (at != args.end()) args.erase(at, at + 2);
    return args;
}

// `args` and then `more`.
std::vector<std::string> plus(std::vector<std::string> args, const std::vector<std::string>& more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

// A copy of the run state at `from`, at `to`, with its counters set to this epoch and batch: the
// state of a run stopped at another point (its metadata is JSON in the header; the tensors and
// their checksums stay as they are).
void write_with_counters(const std::string& from, const std::string& to, int epoch, int batches_done) {
    namespace json = autograd::io::json;
    const std::string bytes = read_whole_file(from);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
    json::Value header = json::parse(bytes.substr(8, n));
    json::Value& meta = header.as_object().front().second;
    REQUIRE(header.as_object().front().first == "__metadata__");
    json::Value resume = json::parse(meta.find("resume")->as_string());
    json::Value counters = *resume.find("counters");
    counters.set("epoch", epoch);
    counters.set("batches_done", batches_done);
    resume.set("counters", counters);
    meta.set("resume", json::dump(resume));
    std::string text = json::dump(header);
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string length(8, '\0');
    for (int i = 0; i < 8; i++) length[i] = static_cast<char>(text.size() >> (8 * i));
    std::ofstream(to, std::ios::binary) << length << text << bytes.substr(8 + n);
}

// A run that learns the grammar: 10 epochs of 36 batches of 8, a model 32 wide without dropout, at
// half the usual learning rate.
std::vector<std::string> learning_run(const Corpus& c, const std::vector<std::string>& more) {
    std::vector<std::string> args = {"--d-model", "32", "--d-ff", "64", "--dropout", "0", "--warmup", "40", "--lr-factor",
                                     "0.5", "--epochs", "10", "--batch", "8"};
    args.insert(args.end(), more.begin(), more.end());
    return tiny_run(c, args);
}

// ---- reading what the program printed ---------------------------------------------------------

// The whole number captured by the group of `pattern` ("(\\d+) parameters"); fails the test when absent.
long long number_matching(const std::string& text, const std::string& pattern) {
    std::smatch m;
    INFO("looking for /" << pattern << "/ in:\n" << text);
    REQUIRE(std::regex_search(text, m, std::regex(pattern)));
    return std::stoll(m[1].str());
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// The first line that starts with `prefix`; fails the test when there is none.
std::string line_starting(const std::string& text, const std::string& prefix) {
    for (const std::string& line : lines_of(text))
        if (line.rfind(prefix, 0) == 0) return line;
    INFO("no line starts with \"" << prefix << "\" in:\n" << text);
    REQUIRE(false);
    return "";
}

size_t lines_starting(const std::string& text, const std::string& prefix) {
    size_t n = 0;
    for (const std::string& line : lines_of(text)) n += line.rfind(prefix, 0) == 0;
    return n;
}

// The translations of the test split the program shows after a score line (`after`): the text of
// the "  out: " lines that follow it.
std::vector<std::string> outputs_after(const std::string& text, const std::string& after) {
    std::vector<std::string> out;
    bool in_block = false;
    for (const std::string& line : lines_of(text)) {
        if (line.rfind(after, 0) == 0) in_block = true;
        else if (in_block && line.rfind("  out: ", 0) == 0) out.push_back(line.substr(7));
        else if (in_block && line.rfind("  ", 0) != 0) break;
    }
    return out;
}

// The BLEU statistics in brackets of a score line ("test greedy: BLEU 26.4, ... [BLEU = 26.43 ...]").
std::string bleu_details(const std::string& line) {
    const size_t open = line.find('['), close = line.rfind(']');
    REQUIRE(open != std::string::npos);
    return line.substr(open + 1, close - open - 1);
}

// ---- the model, by hand -----------------------------------------------------------------------

// Parameters of the pre-norm Transformer with N layers, width D, feed-forward width F: per
// attention block 4 (D x D + D); per feed-forward 2 D F + F + D; per LayerNorm 2 D; an encoder
// layer has one attention, a decoder layer two, and both stacks end in a LayerNorm. Then the
// source and target embeddings (V x D each) and the projection (D x V + V); tied, the three share
// one V x D matrix and only the projection's bias is added.
long long transformer_parameters(long long Vs, long long Vt, long long D, long long F, long long N, bool tied) {
    const long long attention = 4 * (D * D + D), feed_forward = 2 * D * F + F + D, norm = 2 * D;
    const long long encoder = N * (attention + feed_forward + 2 * norm), decoder = N * (2 * attention + feed_forward + 3 * norm);
    const long long vocab = tied ? Vt * D + Vt : Vs * D + Vt * D + Vt * D + Vt;
    return encoder + decoder + 2 * norm + vocab;
}

// A checkpoint the program saved, loaded with the library, to compute in the test what the
// program must print for it (the decoders themselves are tested against brute force in
// tests/test_decoding.cpp; here the question is whether the program's flags reach them).
struct Loaded {
    std::unique_ptr<models::Transformer> model;
    data::TextCodec codec;
    int epoch = 0;
};

Loaded load_checkpoint(const std::string& path) {
    const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(path);
    Loaded l;
    l.model = std::make_unique<models::Transformer>(models::read_metadata(f.metadata, "config", path, models::config_from_json));
    nn::load_parameters(*l.model, f, path);
    l.codec = data::read_codec(f.metadata, path);
    l.epoch = static_cast<int>(models::read_metadata(f.metadata, "epoch", path, models::integer_from_json));
    return l;
}

// The sentences of `pairs` as one line each, for --stdin.
std::string source_lines(const std::vector<data::Pair>& pairs) {
    std::string text;
    for (const data::Pair& p : pairs) text += p.src + "\n";
    return text;
}

// A checkpoint of the model that learns the grammar (learning_run), trained once for the tests
// that --load it; its folder goes when the tests end.
struct TrainedCheckpoint {
    Corpus corpus;
    std::string path;   // empty until the training succeeded
    ~TrainedCheckpoint() {
        if (!corpus.dir.empty()) fs::remove_all(corpus.dir);
    }
};

const TrainedCheckpoint& trained_checkpoint() {
    static TrainedCheckpoint trained;
    if (!trained.path.empty()) return trained;
    trained.corpus = write_corpus("translation-trained");
    const std::string path = (trained.corpus.dir / "model.safetensors").string();
    const ExampleRun r = run_example("translation", learning_run(trained.corpus, {"--save", path}));
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    REQUIRE(line_starting(r.out, "test greedy: ").find("exact match 100.0%") != std::string::npos);
    trained.path = path;
    return trained;
}

}  // namespace

TEST_CASE("translation --data, --valid, --test: the splits are the files given; --data alone keeps 5% + 5% of its sources apart") {
    const Corpus c = write_corpus("translation-splits");
    const RemoveOnExit cleanup{c.dir};
    const ExampleRun r = run_example("translation", tiny_run(c, {}));
    REQUIRE(r.status == 0);
    CHECK(number_after(r.out, "| train ") == 283);
    CHECK(number_after(r.out, ", valid ") == 13);
    CHECK(number_after(r.out, ", test ") == 7);
    // the test split is what gets translated: its first sentences are shown with their references
    CHECK(line_starting(r.out, "  src: ") == "  src: " + c.test[0].src);
    CHECK(line_starting(r.out, "  ref: ") == "  ref: " + c.test[0].tgt);

    // --data alone: sentences 0..130, all different, split by source sentence: round(5% of 131)
    // = 7 each for valid and test, the other 117 for training
    const std::string alone = (c.dir / "alone.tsv").string();
    std::vector<data::Pair> pairs;
    for (int i = 0; i < 131; i++) pairs.push_back(sentence(i));
    write_tsv(alone, pairs);
    std::vector<std::string> args = without(without(tiny_run(c, {"--data", alone}), "--valid"), "--test");
    const ExampleRun split = run_example("translation", args);
    REQUIRE(split.status == 0);
    CHECK(number_after(split.out, "| train ") == 117);
    CHECK(number_after(split.out, ", valid ") == 7);
    CHECK(number_after(split.out, ", test ") == 7);

    // --valid without --test is refused
    args.insert(args.end(), {"--valid", c.valid_tsv});
    const ExampleRun half = run_example("translation", args);
    CHECK(half.status != 0);
    CHECK(half.err.find("--valid and --test go together") != std::string::npos);
}

TEST_CASE("translation --max-len N: the training pairs with more than N words on a side are dropped, as many as counted here") {
    const Corpus c = write_corpus("translation-max-len");
    const RemoveOnExit cleanup{c.dir};
    for (int max_len : {5, 6, 7}) {
        CAPTURE(max_len);
        // sentences with a one-word verb have 6 words a side; "looks at" 7 and 6, "waits for" 7 and 7
        long long longer = 0;
        for (const data::Pair& p : c.train) longer += static_cast<int>(std::max(words(p.src).size(), words(p.tgt).size())) > max_len;
        const ExampleRun r = run_example("translation", tiny_run(c, {"--max-len", std::to_string(max_len)}));
        if (max_len == 5) {   // nothing left to train on
            CHECK(r.status != 0);
            CHECK(r.err.find("0 training pairs left of 283 (283 dropped") != std::string::npos);
            continue;
        }
        REQUIRE(r.status == 0);
        CHECK(number_after(r.out, " pairs (") == longer);
        CHECK(number_after(r.out, "| train ") == 283 - longer);
        if (max_len == 6) CHECK(longer == 140);   // verbs 2 and 3: 10 of every 20 sentences, 14 x 10 of 0..282
        if (max_len == 7) CHECK(longer == 0);
    }
}

TEST_CASE("translation --min-freq N: each vocabulary holds the 4 specials and the training words seen at least N times") {
    const Corpus c = write_corpus("translation-min-freq");
    const RemoveOnExit cleanup{c.dir};
    const WordCounts count = count_words(c.train);
    auto kept = [](const std::map<std::string, long long>& counts, int n) {   // the words seen n times or more
        long long k = 0;
        for (const auto& [w, seen] : counts) k += seen >= n;
        return k;
    };
    // an object occurs 40 or 43 times, a subject 56 or 57: a threshold of 40 keeps the words seen
    // exactly 40 times and 41 drops them; 57 also drops two subjects
    REQUIRE(count.tgt.at("Tasse") == 40);
    REQUIRE(count.tgt.at("Lehrer") == 56);
    for (int n : {1, 40, 41, 57}) {
        CAPTURE(n);
        const ExampleRun r = run_example("translation", tiny_run(c, {"--min-freq", std::to_string(n)}));
        REQUIRE(r.status == 0);
        CHECK(number_after(r.out, "| vocab ") == 4 + kept(count.src, n));
        CHECK(number_after(r.out, " source, ") == 4 + kept(count.tgt, n));
    }
    CHECK(kept(count.src, 41) < kept(count.src, 40));
    CHECK(kept(count.tgt, 57) < kept(count.tgt, 41));
}

// Every reference starts with a capital letter. A model trained on lowercased text writes none, so
// case-sensitive exact match is 0% however well it learned, and case-insensitive it is 100% once
// it learned the grammar. The vocabularies count "The" and "the" as one word.
TEST_CASE("translation --lowercase: lowercased vocabularies and output, also after --load; --bleu-lowercase: case-insensitive scores") {
    const Corpus c = write_corpus("translation-lowercase");
    const RemoveOnExit cleanup{c.dir};
    const WordCounts cased_words = count_words(c.train), lower_words = count_words(c.train, true);
    REQUIRE(lower_words.src.size() < cased_words.src.size());
    REQUIRE(lower_words.tgt.size() < cased_words.tgt.size());

    const ExampleRun cased = run_example("translation", tiny_run(c, {}));
    REQUIRE(cased.status == 0);
    CHECK(number_after(cased.out, "| vocab ") == with_specials(cased_words.src));
    CHECK(number_after(cased.out, " source, ") == with_specials(cased_words.tgt));

    const std::string saved = (c.dir / "lower.safetensors").string();
    const ExampleRun lower = run_example("translation", learning_run(c, {"--lowercase", "--save", saved}));
    REQUIRE(lower.status == 0);
    CHECK(number_after(lower.out, "| vocab ") == with_specials(lower_words.src));
    CHECK(number_after(lower.out, " source, ") == with_specials(lower_words.tgt));
    const std::string sensitive = line_starting(lower.out, "test greedy: ");
    CHECK(sensitive.find("exact match 0.0%") != std::string::npos);
    CHECK(number_after(sensitive, "BLEU ") < 100.0);
    CHECK(line_starting(lower.out, "test BLEU: ").find("case:mixed") != std::string::npos);
    for (const std::string& out : outputs_after(lower.out, "test greedy: ")) CHECK(out == lowercase(out));

    const ExampleRun folded = run_example("translation", learning_run(c, {"--lowercase", "--bleu-lowercase"}));
    REQUIRE(folded.status == 0);
    const std::string insensitive = line_starting(folded.out, "test greedy: ");
    CHECK(insensitive.find("BLEU 100.0, exact match 100.0%") != std::string::npos);
    CHECK(line_starting(folded.out, "test BLEU: ").find("case:lc") != std::string::npos);

    // the checkpoint remembers --lowercase: shouted input is lowercased before it is translated
    const data::Pair p = sentence(17);
    const ExampleRun shout = run_example("translation", {"--load", saved, "--translate", p.src, "--beam", "0"});
    std::string upper = p.src;
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    const ExampleRun loud = run_example("translation", {"--load", saved, "--translate", upper, "--beam", "0"});
    REQUIRE(shout.status == 0);
    REQUIRE(loud.status == 0);
    CHECK(shout.out == lowercase(printed(p.tgt)) + "\n");
    CHECK(loud.out == shout.out);
}

TEST_CASE("translation --bpe N: 0 is word level; N merges into one shared vocabulary; with merges to spare every word is one token") {
    const Corpus c = write_corpus("translation-bpe");
    const RemoveOnExit cleanup{c.dir};
    const WordCounts count = count_words(c.train);

    const ExampleRun word_level = run_example("translation", tiny_run(c, {"--bpe", "0"}));
    REQUIRE(word_level.status == 0);
    CHECK(word_level.out.find("subwords:") == std::string::npos);
    CHECK(number_after(word_level.out, "| vocab ") == with_specials(count.src));
    CHECK(number_after(word_level.out, " source, ") == with_specials(count.tgt));

    const ExampleRun nine = run_example("translation", tiny_run(c, {"--bpe", "9"}));
    REQUIRE(nine.status == 0);
    CHECK(number_after(nine.out, "subwords: ") == 9);
    CHECK(number_after(nine.out, "| vocab ") == number_after(nine.out, " source, "));

    // Learning stops early when no pair of symbols occurs twice. A word seen at least twice is then
    // one symbol (else its first two symbols would be such a pair), so with every word seen twice
    // the vocabulary is the 4 specials, the words of both languages, and the fallback tokens.
    for (const auto& [w, n] : count.both) CHECK(n >= 2);
    const ExampleRun whole = run_example("translation", tiny_run(c, {"--bpe", "100000"}));
    REQUIRE(whole.status == 0);
    CHECK(number_after(whole.out, "subwords: ") < 100000);
    CHECK(number_after(whole.out, "| vocab ") == with_specials(count.both) + kFallbackTokens);
    CHECK(number_after(whole.out, " source, ") == with_specials(count.both) + kFallbackTokens);
}

TEST_CASE("translation --tie-weights, --no-tie-weights: tied, both embeddings and the projection are one V x D matrix; untied, three") {
    const Corpus c = write_corpus("translation-tie");
    const RemoveOnExit cleanup{c.dir};
    const WordCounts count = count_words(c.train);
    const long long V = with_specials(count.both) + kFallbackTokens;   // --bpe 100000: every word whole (see above)
    const long long Vs = with_specials(count.src), Vt = with_specials(count.tgt);
    auto parameters = [&](const std::vector<std::string>& flags) {
        const ExampleRun r = run_example("translation", tiny_run(c, flags));
        INFO(r.err);
        REQUIRE(r.status == 0);
        return number_matching(r.out, R"((\d+) parameters)");
    };
    const long long tied = transformer_parameters(V, V, 16, 32, 1, true), untied = transformer_parameters(V, V, 16, 32, 1, false);
    CHECK(untied - tied == 2 * V * 16);
    CHECK(parameters({"--bpe", "100000"}) == tied);   // tied is the default with a shared vocabulary
    CHECK(parameters({"--bpe", "100000", "--tie-weights"}) == tied);
    CHECK(parameters({"--bpe", "100000", "--no-tie-weights"}) == untied);
    CHECK(parameters({"--bpe", "0"}) == transformer_parameters(Vs, Vt, 16, 32, 1, false));
    // --data without --bpe learns merges too (a quarter of the distinct words), so it ties as well
    const ExampleRun automatic = run_example("translation", without(tiny_run(c, {}), "--bpe"));
    REQUIRE(automatic.status == 0);
    const long long Va = number_matching(automatic.out, R"(vocab (\d+) source)");
    CHECK(number_matching(automatic.out, R"(vocab \d+ source, (\d+) target)") == Va);
    CHECK(number_matching(automatic.out, R"((\d+) parameters)") == transformer_parameters(Va, Va, 16, 32, 1, true));

    const ExampleRun words_tied = run_example("translation", tiny_run(c, {"--bpe", "0", "--tie-weights"}));
    CHECK(words_tied.status == 2);
    CHECK(words_tied.err.find("--tie-weights needs one vocabulary for both languages") != std::string::npos);
    const ExampleRun both_flags = run_example("translation", tiny_run(c, {"--bpe", "9", "--tie-weights", "--no-tie-weights"}));
    CHECK(both_flags.status == 2);
    CHECK(both_flags.err.find("contradict") != std::string::npos);
}

TEST_CASE("translation --batch B: ceil(pairs / B) batches an epoch; --batch-tokens N: floor(N / longest) pairs a batch") {
    const Corpus c = write_corpus("translation-batches");
    const RemoveOnExit cleanup{c.dir};
    for (int B : {16, 7}) {
        CAPTURE(B);
        const ExampleRun r = run_example("translation", tiny_run(c, {"--batch", std::to_string(B)}));
        REQUIRE(r.status == 0);
        CHECK(number_matching(r.out, R"((\d+) batches/epoch)") == (283 + B - 1) / B);   // 18, 41
    }

    // Sentences with a one-word verb only: every source is 6 words + <eos> = 7 ids, every target
    // <bos> + 6 words + <eos> = 8, so a batch of b pairs holds b x 8 tokens a side, padding
    // included. 96 tokens fit 12 pairs exactly (12 x 8 = 96, at the limit), 95 fit 11.
    std::vector<data::Pair> even;
    for (const data::Pair& p : c.train)
        if (words(p.src).size() == 6 && words(p.tgt).size() == 6) even.push_back(p);
    REQUIRE(even.size() == 143);
    const std::string even_tsv = (c.dir / "even.tsv").string();
    write_tsv(even_tsv, even);
    for (const auto& limit : std::vector<std::pair<int, long long>>{{96, 12}, {95, 11}, {8, 1}}) {
        const int tokens = limit.first;          // (not a structured binding: clang 14 cannot capture one)
        const long long per_batch = limit.second;
        CAPTURE(tokens);
        const ExampleRun r = run_example("translation", tiny_run(c, {"--data", even_tsv, "--batch-tokens", std::to_string(tokens)}));
        REQUIRE(r.status == 0);
        CHECK(number_matching(r.out, R"((\d+) batches/epoch)") == (143 + per_batch - 1) / per_batch);   // 12, 13, 143
    }
}

TEST_CASE("translation --epochs E: E epochs; --plot PATH: the loss curves, a point per step and a point per epoch") {
    const Corpus c = write_corpus("translation-epochs");
    const RemoveOnExit cleanup{c.dir};
    const std::string plot = (c.dir / "loss.svg").string();
    for (int E : {1, 3}) {
        CAPTURE(E);
        const ExampleRun r = run_example("translation", tiny_run(c, {"--epochs", std::to_string(E), "--plot", plot}));
        REQUIRE(r.status == 0);
        CHECK(lines_starting(r.out, "epoch ") == static_cast<size_t>(E));
        CHECK(lines_starting(r.out, "epoch  " + std::to_string(E) + "  train loss") == 1);

        // the curves: one <path> per series, "M x,y L x,y ...": the training loss at each of the
        // 18 steps of every epoch, the validation loss at the last step of each epoch
        const std::string svg = read_whole_file(plot);
        std::vector<std::vector<double>> xs;   // [series][point]
        for (size_t at = svg.find("<path stroke="); at != std::string::npos; at = svg.find("<path stroke=", at + 1)) {
            const size_t d = svg.find(" d=\"", at) + 4;
            std::istringstream points(svg.substr(d, svg.find('"', d) - d));
            std::vector<double> x;
            for (std::string point; points >> point;)
                if (point[0] == 'M' || point[0] == 'L') x.push_back(std::stod(point.substr(1)));
            xs.push_back(x);
        }
        REQUIRE(xs.size() == 2);
        REQUIRE(xs[0].size() == static_cast<size_t>(18 * E));
        REQUIRE(xs[1].size() == static_cast<size_t>(E));
        for (int e = 1; e <= E; e++) CHECK(xs[1][e - 1] == doctest::Approx(xs[0][18 * e - 1]));
        fs::remove(plot);
    }
    const ExampleRun none = run_example("translation", tiny_run(c, {}));
    CHECK(!fs::exists(plot));
    CHECK(none.out.find("wrote") == std::string::npos);
}

// With smoothing eps the loss is the cross-entropy against q = (1 - eps) one_hot + eps / V, which
// is at least the entropy of q (Gibbs' inequality), reached when the model predicts q itself.
// A model that has learned the grammar ends its training just above that floor (1.15 for eps 0.2,
// 0.65 for the default 0.1); without smoothing the floor is 0.
TEST_CASE("translation --label-smoothing eps: a trained model's training loss ends just above the entropy of the smoothed targets") {
    const Corpus c = write_corpus("translation-smoothing");
    const RemoveOnExit cleanup{c.dir};
    const double V = static_cast<double>(with_specials(count_words(c.train).tgt));   // the target vocabulary
    auto entropy = [V](double eps) {
        const auto h = [](double q) { return q > 0 ? -q * std::log(q) : 0.0; };   // 0 log 0 = 0
        return h(1 - eps + eps / V) + (V - 1) * h(eps / V);
    };
    CHECK(entropy(0.2) == doctest::Approx(1.1496).epsilon(1e-4));   // V = 31, by hand
    for (double eps : {0.2, 0.0}) {
        CAPTURE(eps);
        const ExampleRun r = run_example("translation", learning_run(c, {"--label-smoothing", eps == 0 ? "0" : "0.2"}));
        REQUIRE(r.status == 0);
        const double last = number_after(r.out, "epoch 10  train loss ");
        CHECK(last >= entropy(eps) - 1e-3);
        CHECK(last <= entropy(eps) + 0.1);   // (measured: 0.04 above at eps 0.2, 0.0005 at eps 0)
    }
}

// Two epochs without label smoothing, scored on every sentence of the grammar. The validation
// file pairs each source with the translation of a sentence that differs in every part (subject,
// verb and object): the better the model translates, the less likely it finds those, so its best
// epoch (the one scored as "test" and saved) is the first, and the last epochs, which --average-last
// averages, are others. Training does not depend on the validation file: a run with the true
// translations trains the same two epochs, and its best is the second.
TEST_CASE("translation --average-last K: the mean of the last K epochs' parameters is scored too; --save keeps the best epoch") {
    const Corpus c = write_corpus("translation-average");
    const RemoveOnExit cleanup{c.dir};
    std::vector<data::Pair> all, wrong;
    for (int i = 0; i < kDistinctSentences; i++) all.push_back(sentence(i));
    for (int i = 0; i < 13; i++) {   // the sources of valid.tsv: subject, verb and object one further along
        const int j = 11 * i + 3, s = j % 5, v = (j / 5) % 4, o = (j / 20) % 7;
        wrong.push_back({sentence(j).src, sentence((s + 1) % 5 + 5 * ((v + 1) % 4) + 20 * ((o + 1) % 7)).tgt});
    }
    const std::string all_tsv = (c.dir / "all.tsv").string(), wrong_tsv = (c.dir / "wrong.tsv").string(),
                      first = (c.dir / "first.safetensors").string(), second = (c.dir / "second.safetensors").string();
    write_tsv(all_tsv, all);
    write_tsv(wrong_tsv, wrong);
    auto run = [&](const std::vector<std::string>& more) {
        return run_example("translation", learning_run(c, plus({"--test", all_tsv, "--epochs", "2", "--label-smoothing", "0"}, more)));
    };

    const ExampleRun plain = run({"--save", second});
    const ExampleRun last1 = run({"--valid", wrong_tsv, "--average-last", "1", "--save", first});
    REQUIRE(plain.status == 0);
    REQUIRE(last1.status == 0);
    REQUIRE(plain.out.find("best epoch 2 ") != std::string::npos);
    REQUIRE(last1.out.find("best epoch 1 ") != std::string::npos);
    CHECK(plain.out.find("averaged") == std::string::npos);   // --average-last 0, the default
    // the two epochs translate differently, so the checks below can tell them apart
    const std::string epoch1 = line_starting(last1.out, "test greedy: "), epoch2 = line_starting(plain.out, "test greedy: ");
    REQUIRE(bleu_details(epoch1) != bleu_details(epoch2));

    // K = 1: the last epoch, epoch 2, which is what the plain run scored as its best
    CHECK(last1.out.find("averaged the parameters of the last 1 epochs") != std::string::npos);
    CHECK(line_starting(last1.out, "averaged test greedy: ") == "averaged " + epoch2);
    CHECK(outputs_after(last1.out, "averaged test greedy: ") == outputs_after(plain.out, "test greedy: "));

    // --save: the best epoch of each run, the one its "test" line scored
    const Loaded one = load_checkpoint(first), two = load_checkpoint(second);
    CHECK(one.epoch == 1);
    CHECK(two.epoch == 2);
    const ExampleRun reload = run_example("translation", {"--load", first, "--stdin", "--beam", "0"}, source_lines(all));
    REQUIRE(reload.status == 0);
    const std::vector<std::string> shown = outputs_after(last1.out, "test greedy: "), again = lines_of(reload.out);
    REQUIRE(shown.size() == 3);
    REQUIRE(again.size() == all.size());
    for (size_t i = 0; i < shown.size(); i++) CHECK(again[i] == shown[i]);

    // K = 5 of 2 epochs: the mean of both, computed here from the two saved checkpoints
    const ExampleRun last5 = run({"--valid", wrong_tsv, "--average-last", "5"});
    REQUIRE(last5.status == 0);
    CHECK(last5.out.find("averaged the parameters of the last 2 epochs") != std::string::npos);
    auto a = one.model->parameters(), b = two.model->parameters();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); i++)
        for (int64_t j = 0; j < a[i].numel(); j++) a[i].data()[j] = (a[i].data()[j] + b[i].data()[j]) / 2;
    const eval::Score mean = eval::score(*one.model, one.codec, all, 0, false);
    const std::string averaged = line_starting(last5.out, "averaged test greedy: ");
    REQUIRE(data::to_string(mean.bleu) != bleu_details(epoch1));
    REQUIRE(data::to_string(mean.bleu) != bleu_details(epoch2));
    CHECK(bleu_details(averaged) == data::to_string(mean.bleu));
    CHECK(outputs_after(last5.out, "averaged test greedy: ") ==
          std::vector<std::string>(mean.hypotheses.begin(), mean.hypotheses.begin() + 3));
}

// A model after one epoch of 18 steps, which translates many sentences of the grammar differently
// with a beam than greedily. The test split is every sentence; what each width gives is computed here with the
// library from the checkpoint the program saved, and the width tried is one whose translations
// differ both from greedy's and from those of the default width 4.
TEST_CASE("translation --beam K: the test score and the translations use a beam of K (0: greedy)") {
    const Corpus c = write_corpus("translation-beam");
    const RemoveOnExit cleanup{c.dir};
    std::vector<data::Pair> all;
    std::vector<std::string> texts;
    for (int i = 0; i < kDistinctSentences; i++) all.push_back(sentence(i)), texts.push_back(sentence(i).src);
    const std::string all_tsv = (c.dir / "all.tsv").string(), saved = (c.dir / "model.safetensors").string();
    write_tsv(all_tsv, all);
    const ExampleRun greedy = run_example("translation", learning_run(c, {"--test", all_tsv, "--epochs", "1", "--batch", "16", "--beam", "0", "--save", saved}));
    REQUIRE(greedy.status == 0);
    const Loaded l = load_checkpoint(saved);
    auto library_score = [&](int beam) { return data::to_string(eval::score(*l.model, l.codec, all, beam, false).bleu); };
    CHECK(lines_starting(greedy.out, "test beam") == 0);
    CHECK(bleu_details(line_starting(greedy.out, "test greedy: ")) == library_score(0));
    CHECK(line_starting(greedy.out, "test BLEU: ").find("(greedy)") != std::string::npos);

    int width = 0;
    for (int w : {2, 3, 5, 6, 8}) {
        if (library_score(w) != library_score(0) && library_score(w) != library_score(4)) {
            width = w;
            break;
        }
    }
    REQUIRE(width > 0);
    const std::string K = std::to_string(width);
    const ExampleRun beam = run_example("translation", learning_run(c, {"--test", all_tsv, "--epochs", "1", "--batch", "16", "--beam", K}));
    REQUIRE(beam.status == 0);
    CHECK(bleu_details(line_starting(beam.out, "test greedy: ")) == library_score(0));   // the same model
    CHECK(bleu_details(line_starting(beam.out, "test beam " + K + ": ")) == library_score(width));
    CHECK(line_starting(beam.out, "test BLEU: ").find("(beam " + K + ")") != std::string::npos);

    // --load: greedy, with a beam of K, and without --beam (4)
    const std::vector<std::vector<std::string>> expected = {eval::translate(*l.model, l.codec, texts, 0),
                                                            eval::translate(*l.model, l.codec, texts, width),
                                                            eval::translate(*l.model, l.codec, texts, 4)};
    REQUIRE(expected[0] != expected[1]);
    REQUIRE(expected[1] != expected[2]);
    for (size_t k = 0; k < 3; k++) {
        CAPTURE(k);
        std::vector<std::string> args = {"--load", saved, "--stdin"};
        if (k < 2) args.insert(args.end(), {"--beam", k == 0 ? "0" : K});
        const ExampleRun loaded = run_example("translation", args, source_lines(all));
        REQUIRE(loaded.status == 0);
        CHECK(lines_of(loaded.out) == expected[k]);
    }
}

// --sample draws each token (models::sample_decode) with --temperature, --top-k and --top-p, and
// --seed the draws: each flag changes the translations, to the library's for the same settings.
// The model is one epoch of a tiny run, unsure of its words, so that every setting shows.
TEST_CASE("translation --sample --temperature --top-k --top-p --seed: each changes the translations, to the library's for them") {
    const Corpus c = write_corpus("translation-sample");
    const RemoveOnExit cleanup{c.dir};
    const std::string saved = (c.dir / "model.safetensors").string();
    // the test score: greedy, then the sampled translations, scored as the library scores them
    const ExampleRun trained = run_example("translation", tiny_run(c, {"--save", saved, "--sample", "--temperature", "2", "--seed", "3"}));
    REQUIRE(trained.status == 0);
    const Loaded l = load_checkpoint(saved);
    const auto with = [](float T, int k, float top_p, uint64_t seed) {
        return models::SampleOptions{.temperature = T, .top_k = k, .top_p = top_p, .seed = seed};
    };
    const models::SampleOptions test_sampling = with(2.0f, 0, 1.0f, 3);
    const eval::Score sampled = eval::score(*l.model, l.codec, c.test, 0, false, true, &test_sampling);
    CHECK(lines_starting(trained.out, "test beam") == 0);
    CHECK(bleu_details(line_starting(trained.out, "test sample T 2: ")) == data::to_string(sampled.bleu));
    CHECK(line_starting(trained.out, "test BLEU: ").find("(sample T 2)") != std::string::npos);
    CHECK(bleu_details(line_starting(trained.out, "test greedy: ")) == data::to_string(eval::score(*l.model, l.codec, c.test, 0, false).bleu));

    // --load --stdin: every sentence of the grammar, with each setting
    std::vector<data::Pair> all;
    std::vector<std::string> texts;
    for (int i = 0; i < kDistinctSentences; i++) all.push_back(sentence(i)), texts.push_back(sentence(i).src);
    const auto library = [&](const models::SampleOptions& opt) { return eval::translate(*l.model, l.codec, texts, 0, true, "", nullptr, &opt); };
    const auto program = [&](std::vector<std::string> flags) {
        flags.insert(flags.begin(), {"--load", saved, "--stdin"});
        const ExampleRun r = run_example("translation", flags, source_lines(all));
        INFO(r.err);
        REQUIRE(r.status == 0);
        return lines_of(r.out);
    };
    const std::vector<std::string> greedy = eval::translate(*l.model, l.codec, texts, 0);
    const std::vector<std::vector<std::string>> expected = {
        library(with(1.0f, 0, 1.0f, 1)),   // --sample (T 1, the default --seed 1)
        library(with(4.0f, 0, 1.0f, 1)),   // --temperature 4
        library(with(4.0f, 0, 1.0f, 2)),   // --seed 2
        library(with(4.0f, 2, 1.0f, 1)),   // --top-k 2
        library(with(4.0f, 0, 0.5f, 1)),   // --top-p 0.5
    };
    for (size_t i = 0; i < expected.size(); i++) {   // the case this test is for: every flag changes something
        CAPTURE(i);
        REQUIRE(expected[i] != greedy);
        if (i > 0) REQUIRE(expected[i] != expected[i == 1 ? 0 : 1]);
    }
    CHECK(program({"--sample"}) == expected[0]);
    CHECK(program({"--sample", "--temperature", "4"}) == expected[1]);
    CHECK(program({"--sample", "--temperature", "4", "--seed", "2"}) == expected[2]);
    CHECK(program({"--sample", "--temperature", "4", "--top-k", "2"}) == expected[3]);
    CHECK(program({"--sample", "--temperature", "4", "--top-p", "0.5"}) == expected[4]);
    CHECK(program({"--sample", "--temperature", "4", "--top-k", "1"}) == greedy);   // one token left: greedy's
    // --translate: the first sentence of the same draws
    const ExampleRun one = run_example("translation", {"--load", saved, "--sample", "--temperature", "4", "--translate", texts[0]});
    REQUIRE(one.status == 0);
    CHECK(one.out == library(with(4.0f, 0, 1.0f, 1))[0] + "\n");
}

// The sampling flags refuse what would do nothing, or could not be drawn from, before anything runs.
TEST_CASE("translation --sample: refused with --beam; --temperature, --top-k, --top-p without it; bad values; --seed with --load only with it") {
    const Corpus c = write_corpus("translation-sample-flags");
    const RemoveOnExit cleanup{c.dir};
    for (const char* flag : {"--temperature", "--top-k", "--top-p"}) {
        CAPTURE(flag);
        check_refused_in_one_line(run_example("translation", tiny_run(c, {flag, "1"})), std::string(flag) + " does nothing without --sample");
    }
    check_refused_in_one_line(run_example("translation", tiny_run(c, {"--sample", "--beam", "4"})),
                              "--sample and --beam each choose how to decode: give one");
    check_refused_in_one_line(run_example("translation", tiny_run(c, {"--sample", "--temperature", "0"})), "--temperature must be > 0, got 0");
    check_refused_in_one_line(run_example("translation", tiny_run(c, {"--sample", "--temperature", "-1"})), "--temperature must be >= 0");
    check_refused_in_one_line(run_example("translation", tiny_run(c, {"--sample", "--top-k", "-1"})), "--top-k must be >= 0, got -1");
    check_refused_in_one_line(run_example("translation", tiny_run(c, {"--sample", "--top-p", "0"})), "--top-p must be > 0, got 0");
    check_refused_in_one_line(run_example("translation", tiny_run(c, {"--sample", "--top-p", "1.5"})), "--top-p must be between 0 and 1, got 1.5");
    const std::string model = (c.dir / "m.safetensors").string();
    REQUIRE(run_example("translation", tiny_run(c, {"--save", model})).status == 0);
    check_refused_in_one_line(run_example("translation", {"--load", model, "--translate", "The cat sees .", "--seed", "3"}),
                              "--seed does nothing with --load");
    CHECK(run_example("translation", {"--load", model, "--translate", "The cat sees .", "--seed", "3", "--sample"}).status == 0);
}

// Greedy decoding (--beam 0) throughout: the question here is what --load, --translate and
// --stdin do; what the beam does is --beam's test.
TEST_CASE("translation --load PATH with --translate TEXT and --stdin: the saved model's translations, one line per input line") {
    const TrainedCheckpoint& t = trained_checkpoint();
    const std::vector<std::string> load = {"--load", t.path, "--beam", "0"};
    auto with = [&](std::vector<std::string> more) {
        more.insert(more.begin(), load.begin(), load.end());
        return more;
    };
    // every sentence of the grammar, as the test knows it translates
    std::vector<data::Pair> all;
    for (int i = 0; i < kDistinctSentences; i++) all.push_back(sentence(i));
    const ExampleRun every = run_example("translation", with({"--stdin"}), source_lines(all));
    REQUIRE(every.status == 0);
    const std::vector<std::string> lines = lines_of(every.out);
    REQUIRE(lines.size() == all.size());
    for (size_t i = 0; i < all.size(); i++) CHECK(lines[i] == printed(all[i].tgt));

    const data::Pair a = sentence(7), b = sentence(88), d = sentence(131);
    const ExampleRun one = run_example("translation", with({"--translate", a.src}));
    REQUIRE(one.status == 0);
    CHECK(one.out == printed(a.tgt) + "\n");

    // an empty line stays empty, a line with a word never seen still gets a line, "\r\n" is a line end
    const std::string input = b.src + "\n\nThe zebra sees the apple .\n" + d.src + "\r\n";
    const ExampleRun piped = run_example("translation", with({"--stdin"}), input);
    REQUIRE(piped.status == 0);
    const std::vector<std::string> out = lines_of(piped.out);
    REQUIRE(out.size() == 4);
    CHECK(out[0] == printed(b.tgt));
    CHECK(out[1] == "");
    CHECK(out[3] == printed(d.tgt));

    // both: --translate first, then standard input
    const ExampleRun together = run_example("translation", with({"--translate", a.src, "--stdin"}), input);
    REQUIRE(together.status == 0);
    CHECK(together.out == one.out + piped.out);

    const ExampleRun no_load = run_example("translation", {"--translate", a.src});
    CHECK(no_load.status == 2);
    CHECK(no_load.err.find("--translate and --stdin need --load PATH") != std::string::npos);
}

TEST_CASE("translation --attention PATH: a heatmap per layer and head, a row per output token, a column per source token") {
    const TrainedCheckpoint& t = trained_checkpoint();
    const std::string svg_path = (t.corpus.dir / "attention.svg").string();
    const data::Pair p = sentence(110);   // "The cat looks at the cup ." -> "Die Katze betrachtet die Tasse ."
    const ExampleRun r = run_example("translation", {"--load", t.path, "--beam", "0", "--translate", p.src, "--attention", svg_path});
    REQUIRE(r.status == 0);
    REQUIRE(r.out == printed(p.tgt) + "\n");

    // rows: the 6 output words and <eos>; columns: the 7 source words and <eos>
    std::vector<std::string> rows = words(p.tgt), cols = words(p.src);
    rows.push_back("&lt;eos&gt;");
    cols.push_back("&lt;eos&gt;");
    REQUIRE(rows.size() == 7);
    REQUIRE(cols.size() == 8);
    // each cell: <rect class="cell" ...><title>row → col: weight</title></rect>, row after row
    const std::string svg = read_whole_file(svg_path);
    const std::regex cell(R"(<rect class="cell"[^>]*><title>(.*) \xE2\x86\x92 (.*): ([0-9.]+)</title>)");
    std::vector<std::smatch> cells;
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), cell); it != std::sregex_iterator(); ++it) cells.push_back(*it);
    const size_t heads = 2;   // 1 layer x 2 heads (learning_run)
    REQUIRE(cells.size() == heads * rows.size() * cols.size());
    for (size_t h = 0; h < heads; h++) {
        CHECK(svg.find("layer 1, head " + std::to_string(h + 1)) != std::string::npos);
        for (size_t i = 0; i < rows.size(); i++) {
            double sum = 0;   // a row is a softmax over the source: its weights add up to 1
            for (size_t j = 0; j < cols.size(); j++) {
                const std::smatch& m = cells[(h * rows.size() + i) * cols.size() + j];
                CHECK(m[1].str() == rows[i]);
                CHECK(m[2].str() == cols[j]);
                sum += std::stod(m[3].str());
            }
            CHECK(sum == doctest::Approx(1.0).epsilon(0.005));
        }
    }
    const ExampleRun alone = run_example("translation", {"--load", t.path, "--attention", svg_path});
    CHECK(alone.status == 2);
    CHECK(alone.err.find("--attention needs a sentence") != std::string::npos);
}

// The model and training flags translation shares with copy_task are parsed by the same code
// (examples/common/training_flags.cpp, tested with copy_task); this holds translation's own use
// of them: the header, the first step's learning rate, the seed.
TEST_CASE("translation --heads --dropout --warmup --lr-factor --seed --threads --shards: each reaches the model or the schedule") {
    const Corpus c = write_corpus("translation-shared");
    const RemoveOnExit cleanup{c.dir};
    const ExampleRun base = run_example("translation", tiny_run(c, {}));
    REQUIRE(base.status == 0);
    CHECK(base.out.find("h=2 dropout=0.1,") != std::string::npos);   // tiny_run's heads, the default dropout
    // Noam at step 1: lr_factor * D^-0.5 * warmup^-1.5 = 0.5 * 16^-0.5 * 400^-1.5 = 1.5625e-5 (the
    // defaults with --data: the Transformer's factor is 0.5)
    CHECK(base.out.find("training: Adam(0.9, 0.98), lr = 0.5 * Noam(D=16, warmup=400), label smoothing 0.1\n") != std::string::npos);
    CHECK(number_after(base.err, "lr ") == doctest::Approx(1.5625e-5).epsilon(0.01));
    // each epoch's line: the time since the start, and this epoch's alone (one epoch: the two agree)
    const std::regex epoch_line(R"(epoch  1  train loss [0-9.]+ \(label-smoothed\)  valid loss [0-9.]+  best  (\d+) s \(this epoch (\d+) s\))");
    std::smatch m;
    REQUIRE(std::regex_search(base.out, m, epoch_line));
    CHECK(std::abs(std::stoi(m[1].str()) - std::stoi(m[2].str())) <= 1);

    const ExampleRun changed = run_example(
        "translation", tiny_run(c, {"--heads", "4", "--dropout", "0.25", "--warmup", "100", "--lr-factor", "2", "--threads", "2"}));
    REQUIRE(changed.status == 0);
    CHECK(changed.out.find("h=4 dropout=0.25,") != std::string::npos);
    CHECK(number_after(changed.err, "lr ") == doctest::Approx(2 * 0.25 * 1e-3).epsilon(0.01));   // 2 * 16^-0.5 * 100^-1.5
    // run_example offers one thread (OMP_NUM_THREADS=1): two can only come from the flag
    const int two_threads = autograd::kernels::kOpenMP ? std::min(2, autograd::available_cores()) : 1;   // clamped to the cores
    CHECK(changed.out.find("| " + std::to_string(two_threads) + " thread") != std::string::npos);   // "1 thread", "2 threads"

    // --seed: the same seed trains the same numbers, another seed other initial weights
    const ExampleRun again = run_example("translation", tiny_run(c, {}));
    const ExampleRun seed2 = run_example("translation", tiny_run(c, {"--seed", "2"}));
    REQUIRE(again.status == 0);
    REQUIRE(seed2.status == 0);
    CHECK(number_after(again.err, "loss ") == number_after(base.err, "loss "));
    CHECK(number_after(seed2.err, "loss ") != number_after(base.err, "loss "));

    // --shards: the header says how many; another count splits the first batch otherwise (its
    // dropout masks drawn per shard), so the first loss differs
    const ExampleRun shards3 = run_example("translation", tiny_run(c, {"--shards", "3"}));
    REQUIRE(shards3.status == 0);
    CHECK(base.out.find(", 2 shards |") != std::string::npos);
    CHECK(shards3.out.find(", 3 shards |") != std::string::npos);
    CHECK(number_after(shards3.err, "loss ") != number_after(base.err, "loss "));
    // without dropout, the parts' mean losses weighted by their shares of the batch's tokens add
    // up to the whole batch's mean: the first loss (printed to 4 digits) is the same with 1 shard
    // and 2, whose halves of a batch hold different numbers of tokens
    const ExampleRun whole = run_example("translation", tiny_run(c, {"--dropout", "0", "--shards", "1"}));
    const ExampleRun halves = run_example("translation", tiny_run(c, {"--dropout", "0", "--shards", "2"}));
    REQUIRE(whole.status == 0);
    REQUIRE(halves.status == 0);
    CHECK(number_after(halves.err, "loss ") == doctest::Approx(number_after(whole.err, "loss ")).epsilon(1e-4));
}

// The cache and recomputing give the same translations by design, so what shows the flag reached
// the decoder is its work, which the program reports on stderr. Greedy decodes the 7 test
// sentences as one batch of 7 rows for T steps: 7 T positions with the cache, 7 (1 + 2 + ... + T)
// recomputing every prefix. With --load, the same for the sentences translated.
TEST_CASE("translation --no-kv-cache: the same translations, and the work of recomputing every prefix") {
    const Corpus c = write_corpus("translation-kv-cache");
    const RemoveOnExit cleanup{c.dir};
    const ExampleRun cached = run_example("translation", tiny_run(c, {"--beam", "0"}));
    const ExampleRun recomputed = run_example("translation", tiny_run(c, {"--beam", "0", "--no-kv-cache"}));
    REQUIRE(cached.status == 0);
    REQUIRE(recomputed.status == 0);
    CHECK(line_starting(recomputed.out, "test greedy: ") == line_starting(cached.out, "test greedy: "));
    CHECK(outputs_after(recomputed.out, "test greedy: ") == outputs_after(cached.out, "test greedy: "));
    const long long with_cache = number_matching(cached.err, R"(test decoding: (\d+) decoder positions \(key/value cache\))");
    const long long without = number_matching(
        recomputed.err, R"(test decoding: (\d+) decoder positions \(recomputing the prefix: --no-kv-cache or --reference\))");
    CHECK(with_cache % 7 == 0);
    const long long T = with_cache / 7;
    CHECK(T >= 2);
    CHECK(without == 7 * T * (T + 1) / 2);

    const TrainedCheckpoint& t = trained_checkpoint();
    const std::string text = sentence(0).src;
    const ExampleRun loaded_cached = run_example("translation", {"--load", t.path, "--beam", "0", "--translate", text});
    const ExampleRun loaded_recomputed =
        run_example("translation", {"--load", t.path, "--beam", "0", "--translate", text, "--no-kv-cache"});
    REQUIRE(loaded_cached.status == 0);
    REQUIRE(loaded_recomputed.status == 0);
    CHECK(loaded_recomputed.out == loaded_cached.out);
    // one sentence: T steps make T positions cached, T (T + 1) / 2 recomputing
    const long long steps = number_matching(loaded_cached.err, R"(decoding: (\d+) decoder positions \(key/value cache\))");
    CHECK(number_matching(loaded_recomputed.err, R"(decoding: (\d+) decoder positions \(recomputing the prefix: --no-kv-cache or --reference\))") ==
          steps * (steps + 1) / 2);
}

// --bf16 with --load: decoding multiplies too, so the saved model decodes with bf16 products, and
// the decoding line on stderr says so. Without AVX512_BF16 the flag is refused for the CPU.
TEST_CASE("translation --load --bf16: the saved model decodes with bf16 products") {
    const TrainedCheckpoint& t = trained_checkpoint();
    const std::string text = sentence(0).src;
    const ExampleRun bf16 = run_example("translation", {"--load", t.path, "--beam", "0", "--translate", text, "--bf16"});
    if (read_whole_file("/proc/cpuinfo").find(" avx512_bf16") == std::string::npos) {
        CHECK(bf16.status == 2);
        CHECK(bf16.err.find("--bf16 needs a CPU with AVX512_BF16") != std::string::npos);
    } else {
        REQUIRE(bf16.status == 0);
        CHECK(bf16.err.find("decoder positions (key/value cache, bf16 products)") != std::string::npos);
        const ExampleRun fp32 = run_example("translation", {"--load", t.path, "--beam", "0", "--translate", text});
        REQUIRE(fp32.status == 0);
        CHECK(fp32.err.find("bf16") == std::string::npos);
    }
}

// --reference in translation: the same training through the plain autograd ops of nn/, so the
// per-epoch train and validation losses agree with the fused run's to 3 decimals (up to float
// rounding; with the default dropout, whose masks both paths draw the same way).
TEST_CASE("translation --reference: says it runs the plain autograd ops, and trains to the fused run's losses") {
    const Corpus c = write_corpus("translation-reference");
    const RemoveOnExit cleanup{c.dir};
    const ExampleRun fused = run_example("translation", tiny_run(c, {"--epochs", "2"}));
    const ExampleRun plain = run_example("translation", tiny_run(c, {"--epochs", "2", "--reference"}));
    REQUIRE(fused.status == 0);
    REQUIRE(plain.status == 0);
    CHECK(fused.out.find("| kernels: fused\n") != std::string::npos);
    CHECK(plain.out.find("| kernels: plain autograd ops (--reference)\n") != std::string::npos);
    // and decodes by the plain greedy_decode, the whole prefix at every step
    CHECK(fused.err.find("decoder positions (key/value cache)") != std::string::npos);
    CHECK(plain.err.find("decoder positions (recomputing the prefix: --no-kv-cache or --reference)") != std::string::npos);
    for (const char* epoch : {"epoch  1  train loss ", "epoch  2  train loss "}) {
        CAPTURE(epoch);
        const double train_fused = number_after(fused.out, epoch), train_plain = number_after(plain.out, epoch);
        CHECK(std::abs(train_plain - train_fused) <= 1e-3);
        const std::string after_fused = fused.out.substr(fused.out.find(epoch));
        const std::string after_plain = plain.out.substr(plain.out.find(epoch));
        CHECK(std::abs(number_after(after_plain, "valid loss ") - number_after(after_fused, "valid loss ")) <= 1e-3);
    }
    CHECK(number_after(fused.out, "epoch  2  train loss ") < number_after(fused.out, "epoch  1  train loss ") - 0.1);
}

TEST_CASE("translation --memory-report: a memory line after each phase, and the same losses and scores as without it") {
    const Corpus c = write_corpus("translation-memory-report");
    const RemoveOnExit cleanup{c.dir};
    const ExampleRun plain = run_example("translation", tiny_run(c, {"--epochs", "2"}));
    const ExampleRun report = run_example("translation", tiny_run(c, {"--epochs", "2", "--memory-report"}));
    REQUIRE(plain.status == 0);
    REQUIRE(report.status == 0);
    CHECK(lines_starting(plain.out, "memory ") == 0);
    // data, model, then training, validation, kept and saved for each of the 2 epochs, then the
    // test's greedy and beam decoding
    CHECK(lines_starting(report.out, "memory ") == 2 + 2 * 3 + 2);
    for (const char* phase : {"memory data: ", "memory training 1: ", "memory validation 2: ", "memory test beam: "})
        CHECK(line_starting(report.out, phase).find("MB peak | RSS ") != std::string::npos);
    CHECK(line_starting(report.out, "memory data: ").find("| text ") != std::string::npos);   // what the corpus takes
    // the report only reads the figures: the run is the same
    for (const char* line : {"epoch  2 ", "test greedy: ", "test BLEU: "})
        CHECK(line_starting(report.out, line).substr(0, 60) == line_starting(plain.out, line).substr(0, 60));
}

// --model: the same data, loop and evaluation train the recurrent encoder-decoders too. The header
// names the model; each recurrent flag reaches it (a line or a parameter count that says so, and
// another training loss); flags of another kind of model are refused, as flags that would do nothing.
TEST_CASE("translation --model rnn / rnn-attention and their flags: each reaches the model; the others' flags refused") {
    const Corpus c = write_corpus("translation-models");
    const RemoveOnExit cleanup{c.dir};
    auto run = [&](std::vector<std::string> more) {
        std::vector<std::string> args = without(without(without(tiny_run(c, {}), "--d-model"), "--heads"), "--d-ff");
        args.insert(args.end(), more.begin(), more.end());
        const ExampleRun r = run_example("translation", args);
        INFO(r.out << r.err);
        REQUIRE(r.status == 0);
        return r;
    };
    const ExampleRun rnn = run({"--model", "rnn", "--embed", "8", "--hidden", "12"});
    // the default: Sutskever et al.'s model, an LSTM, the encoder reading one way
    CHECK(rnn.out.find("model: LSTM encoder-decoder, the encoder's final states start the decoder (Sutskever et al.), E=8 Hd=12 L=1 "
                       "dropout") != std::string::npos);
    // the recurrent models keep the Noam factor 1 with --data (the Transformer's default there is 0.5),
    // and the schedule scales by their width Hd
    CHECK(rnn.out.find("lr = 1 * Noam(D=12, warmup=400)") != std::string::npos);
    // BLEU by source length: each bucket counts the test sources with that many words, all 7 once
    const std::string by_length = rnn.out.substr(rnn.out.find("test BLEU by source length: "));
    std::map<std::pair<int, int>, int> want;
    for (const data::Pair& p : c.test) {
        const int n = static_cast<int>(words(p.src).size());
        for (const auto& [lo, hi] : {std::pair{1, 5}, {6, 10}, {11, 15}}) if (n >= lo && n <= hi) want[{lo, hi}]++;
    }
    int total = 0;
    for (const auto& [range, count] : want) {
        const std::string label = std::to_string(range.first) + "-" + std::to_string(range.second) + " words ";
        CAPTURE(label);
        REQUIRE(by_length.find(label) != std::string::npos);
        const size_t open = by_length.find('(', by_length.find(label));
        CHECK(std::stoi(by_length.substr(open + 1)) == count);
        total += count;
    }
    CHECK(total == 7);
    CHECK(rnn.err.find("(the recurrent state)") != std::string::npos);
    auto params = [](const ExampleRun& r) {
        const size_t at = r.out.find(" parameters |");
        REQUIRE(at != std::string::npos);
        size_t from = r.out.rfind(", ", at);
        return std::stoll(r.out.substr(from + 2, at - from - 2));
    };
    auto loss = [](const ExampleRun& r) { return number_after(r.out, "train loss "); };   // the epoch's mean: every step's loss
    struct Flag { std::vector<std::string> args; const char* header; };
    const Flag flags[] = {
        {{"--model", "rnn", "--embed", "8", "--hidden", "12", "--cell", "gru"}, "GRU encoder-decoder"},
        {{"--model", "rnn", "--embed", "8", "--hidden", "12", "--context", "cho"}, "GRU encoder-decoder, C at every step (Cho et al.)"},
        {{"--model", "rnn", "--embed", "8", "--hidden", "12", "--context", "cho", "--cell", "lstm"}, "LSTM encoder-decoder, C at every step"},
        {{"--model", "rnn", "--embed", "8", "--hidden", "12", "--reverse-source"}, "source reversed"},
        {{"--model", "rnn", "--embed", "6", "--hidden", "12"}, "E=6 Hd=12"},
        {{"--model", "rnn", "--embed", "8", "--hidden", "12", "--layers", "2"}, "Hd=12 L=2"},
        {{"--model", "rnn", "--embed", "8", "--hidden", "12", "--dropout", "0.3"}, "dropout=0.30"},
        {{"--model", "rnn", "--embed", "8", "--hidden", "10"}, "E=8 Hd=10"},
        {{"--model", "rnn-attention", "--embed", "8", "--hidden", "12"}, "GRU encoder-decoder, attention (Bahdanau et al.), additive score, E=8 Hd=12 L=1 bidirectional"},
        {{"--model", "rnn-attention", "--embed", "8", "--hidden", "12", "--unidirectional"}, "additive score, E=8 Hd=12 L=1 dropout"},
        {{"--model", "rnn-attention", "--embed", "8", "--hidden", "12", "--score", "dot", "--unidirectional"}, "dot score"},
        {{"--model", "rnn-attention", "--embed", "8", "--hidden", "12", "--score", "general"}, "general score"},
        {{"--model", "rnn-attention", "--embed", "8", "--hidden", "12", "--score", "cosine"}, "cosine score"},
    };
    for (const Flag& f : flags) {
        const std::string header = f.header;   // (CAPTURE of a const char* would print the pointer)
        CAPTURE(header);
        const ExampleRun r = run(f.args);
        CHECK(r.out.find(f.header) != std::string::npos);
        CHECK((params(r) != params(rnn) || loss(r) != loss(rnn)));
    }
    // refused: flags of another kind of model, and those that do nothing for the recurrent ones
    for (const auto& refused : std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{"--model", "rnn", "--heads", "2"}, "--heads applies to --model transformer, not to --model rnn"},
             {{"--model", "rnn", "--score", "dot"}, "--score applies to --model rnn-attention, not to --model rnn"},
             {{"--model", "rnn-attention", "--context", "cho"}, "--context applies to --model rnn"},
             {{"--model", "rnn", "--unidirectional"}, "--unidirectional applies to --model rnn-attention (the encoder of --model rnn reads one way)"},
             {{"--model", "rnn", "--context", "every_step"}, "unknown context 'every_step' (sutskever, cho or bahdanau)"},
             {{"--model", "rnn", "--context", "bahdanau"}, "--context bahdanau is the model with attention: --model rnn-attention"},
             {{"--model", "rnn-attention", "--score", "dot"}, "the dot score compares the decoder's state (Hd = 256) with the encoder's states (dirs*Hd = 512) directly"},
             {{"--cell", "lstm"}, "--cell applies to the recurrent models (rnn, rnn-attention), not to --model transformer"},
             {{"--model", "rnn", "--no-kv-cache"}, "--no-kv-cache applies to --model transformer"},
             {{"--model", "rnn", "--tie-weights", "--bpe", "20"}, "--tie-weights applies to --model transformer"},
             {{"--model", "gru"}, "--model must be transformer, rnn or rnn-attention, not 'gru'"},
             {{"--model", "rnn-attention", "--score", "cos"}, "unknown attention score 'cos' (dot, general, cosine or additive)"},
             {{"--model", "rnn", "--cell", "GRU"}, "unknown recurrent cell 'GRU' (gru, lstm or rnn)"}}) {
        const auto& [args, message] = refused;
        CAPTURE(refused.second);   // (not message: clang 14 cannot capture a structured binding)
        std::vector<std::string> a = without(without(without(tiny_run(c, {}), "--d-model"), "--heads"), "--d-ff");
        a.insert(a.end(), args.begin(), args.end());
        const ExampleRun r = run_example("translation", a);
        CHECK(r.status == 2);
        CHECK(r.err.find(message) != std::string::npos);
    }
}

// A recurrent model saved by training translates on its own, draws its one attention map, and a
// --model that disagrees with the file is named with the file's kind.
TEST_CASE("translation --model rnn-attention --save, then --load: translates, draws its attention, refuses another --model") {
    const Corpus c = write_corpus("translation-rnn-load");
    const RemoveOnExit cleanup{c.dir};
    const std::string model = (c.dir / "rnn.safetensors").string(), svg = (c.dir / "att.svg").string();
    std::vector<std::string> args = without(without(without(tiny_run(c, {"--save", model}), "--d-model"), "--heads"), "--d-ff");
    // five epochs (90 steps): after one or two, its first word is still the end of the sentence
    for (const char* a : {"--model", "rnn-attention", "--embed", "8", "--hidden", "12", "--epochs", "5"}) args.push_back(a);
    REQUIRE(run_example("translation", args).status == 0);
    const ExampleRun t = run_example("translation", {"--load", model, "--translate", "the dog sees the cat .", "--attention", svg});
    INFO(t.out << t.err);
    CHECK(t.status == 0);
    CHECK(t.out.size() > 1);
    CHECK(t.err.find("additive attention") != std::string::npos);   // the heatmap's title on the terminal
    CHECK(std::filesystem::exists(svg));
    const ExampleRun wrong = run_example("translation", {"--load", model, "--model", "transformer", "--translate", "x"});
    CHECK(wrong.status == 1);
    CHECK(wrong.err.find("--model transformer, but '" + model + "' holds a model of kind rnn-attention") != std::string::npos);
}

// Ctrl-C keeps the work: the first SIGINT stops training before its next step and saves the whole
// run beside --save; --resume continues to the uninterrupted run's epochs, scores and saved model.
// The epoch lines are compared without their seconds.
TEST_CASE("translation: SIGINT saves the run, --resume continues it to the uninterrupted run's epochs and model") {
    const Corpus c = write_corpus("translation-interrupt");
    const RemoveOnExit cleanup{c.dir};
    const std::string save = (c.dir / "m.safetensors").string(), state = (c.dir / "m.resume.safetensors").string();
    const std::vector<std::string> args = learning_run(c, {"--epochs", "8", "--d-model", "48", "--save", save});
    auto epoch_lines = [](const std::string& out) {
        std::vector<std::string> kept;
        for (const std::string& line : lines_of(out))
            if (line.rfind("epoch ", 0) == 0) kept.push_back(line.substr(0, line.rfind("  ")));   // without "  1 s"
        return kept;
    };
    const ExampleRun straight = run_example("translation", args);
    REQUIRE(straight.status == 0);
    const std::string straight_model = read_whole_file(save);
    fs::remove(save);
    const ExampleRun stopped = interrupt_example("translation", args, "epoch  1 ", {SIGINT});
    INFO(stopped.out << stopped.err);
    REQUIRE(stopped.status == 130);
    CHECK(stopped.err.find("--resume " + state) != std::string::npos);
    REQUIRE(fs::exists(state));
    const std::vector<std::string> first = epoch_lines(stopped.out), all = epoch_lines(straight.out);
    REQUIRE(all.size() == 8);
    REQUIRE(first.size() < all.size());
    std::vector<std::string> again = args;
    again.insert(again.end(), {"--resume", state});
    const std::string kept_state = (c.dir / "kept.resume.safetensors").string();
    fs::copy_file(state, kept_state);   // the finished run removes its own state; the checks below use it again
    const ExampleRun resumed = run_example("translation", again);
    INFO(resumed.out << resumed.err);
    REQUIRE(resumed.status == 0);
    CHECK(resumed.out.find("removed " + state + ": the run it holds has finished (its model is in " + save + ")") != std::string::npos);
    CHECK_FALSE(fs::exists(state));
    fs::rename(kept_state, state);
    std::vector<std::string> joined = first;
    for (const std::string& line : epoch_lines(resumed.out)) joined.push_back(line);
    CHECK(joined == all);   // every epoch's train and valid loss, as printed
    CHECK(line_starting(resumed.out, "test BLEU: ") == line_starting(straight.out, "test BLEU: "));
    CHECK(read_whole_file(save) == straight_model);   // the best epoch's model, byte for byte
    CHECK(resumed.out.find("note: ") == std::string::npos);   // resuming, --save's file is the run's own
    // the state is also a model: it translates
    const ExampleRun t = run_example("translation", {"--load", state, "--translate", "The cat sees the cup ."});
    CHECK(t.status == 0);
    // resumed with a new --save: the best epoch, though an earlier process found it, is in that file
    const std::string moved_save = (c.dir / "other.safetensors").string();
    const ExampleRun moved = run_example("translation", plus(without(again, "--save"), {"--save", moved_save}));
    INFO(moved.err);
    REQUIRE(moved.status == 0);
    CHECK(moved.out.find("saved to " + moved_save) != std::string::npos);
    CHECK(read_whole_file(moved_save) == straight_model);
    // a state written as its last epoch ended (a Ctrl-C during that epoch's validation): resumed with
    // a new --save it trains nothing, and that file still gets the best epoch, which the first process found
    const std::string ended = (c.dir / "ended.resume.safetensors").string();
    write_with_counters(state, ended, 9, 0);
    const std::string ended_save = (c.dir / "ended.safetensors").string();
    const ExampleRun nothing_left = run_example("translation", plus(again, {"--resume", ended, "--save", ended_save}));
    INFO(nothing_left.err);
    REQUIRE(nothing_left.status == 0);
    CHECK(epoch_lines(nothing_left.out).empty());
    const int best = static_cast<int>(number_after(nothing_left.out, "best epoch "));
    CHECK(nothing_left.out.find(", saved to " + ended_save) != std::string::npos);
    const autograd::io::SafetensorsFile ended_model = autograd::io::load_safetensors(ended_save);
    CHECK(ended_model.metadata.at("epoch") == std::to_string(best));
    // fewer epochs than the run has begun: refused, not a "saved" line over nothing
    const ExampleRun fewer = run_example("translation", plus(without(again, "--epochs"), {"--epochs", "0"}));
    CHECK(fewer.status == 1);
    CHECK(fewer.err.find("--epochs 0 is fewer than the ") != std::string::npos);
    // another --data of the same vocabulary (the same sentences in another order): refused, named
    std::vector<data::Pair> reordered(c.train.rbegin(), c.train.rend());
    const std::string reordered_tsv = (c.dir / "reordered.tsv").string();
    write_tsv(reordered_tsv, reordered);
    const ExampleRun other_data = run_example("translation", plus(without(again, "--data"), {"--data", reordered_tsv}));
    CHECK(other_data.status == 1);
    CHECK(other_data.err.find("is the state of another run: --data {\"bytes\":") != std::string::npos);
    CHECK(other_data.out.find("epoch ") == std::string::npos);
    // a state made by other flags is refused, naming what differs
    std::vector<std::string> other = learning_run(c, {"--epochs", "8", "--d-model", "32", "--save", save, "--resume", state});
    const ExampleRun refused = run_example("translation", other);
    CHECK(refused.status == 1);
    CHECK(refused.err.find("resume with the flags of the run that wrote it") != std::string::npos);
}

namespace {

// A tiny run's state, written when SIGINT stopped it after its first epoch (a long run: the
// signal always comes first): for the tests of what --resume must match.
struct InterruptedTranslation {
    Corpus c = write_corpus("translation-interrupted");
    RemoveOnExit cleanup{c.dir};
    std::string save = (c.dir / "m.safetensors").string(), state = (c.dir / "m.resume.safetensors").string();
    std::vector<std::string> args = tiny_run(c, {"--epochs", "10000", "--save", save});
    InterruptedTranslation() { interrupt_example("translation", args, "epoch  1 ", {SIGINT}); }
};

const InterruptedTranslation& interrupted_translation() {
    static const InterruptedTranslation r;
    REQUIRE(fs::exists(r.state));
    return r;
}

}  // namespace

// Every entry of translation's identity (examples/translation.cpp), changed alone, makes --resume
// refuse the state and name that entry: each file by its size and CRC-32C, each flag by its value.
// A flag that changes the vocabularies may name them too. The vocabularies and merges the data
// made are an entry of their own (another build's tokenizer could make others from the same
// files): a state that recorded others is refused, naming them.
TEST_CASE("translation --resume: each setting of the run's identity, changed alone, is refused naming it") {
    const InterruptedTranslation& run = interrupted_translation();
    const std::string data = (run.c.dir / "reordered.tsv").string(), valid = (run.c.dir / "valid2.tsv").string(),
                      test = (run.c.dir / "test2.tsv").string(), other_vocab = (run.c.dir / "other-vocab.resume.safetensors").string();
    write_tsv(data, std::vector<data::Pair>(run.c.train.rbegin(), run.c.train.rend()));   // the same vocabulary
    std::vector<data::Pair> v, t;
    for (int i = 0; i < 13; i++) v.push_back(sentence(11 * i + 4));
    for (int i = 0; i < 7; i++) t.push_back(sentence(19 * i + 6));
    write_tsv(valid, v);
    write_tsv(test, t);
    write_with_identity_entry(run.state, other_vocab, "vocabularies and merges", "crc32c 00000000");
    const std::string vocab = "vocabularies and merges";
    const bool has_bf16 = read_whole_file("/proc/cpuinfo").find(" avx512_bf16") != std::string::npos;
    check_identity_walk("translation", run.args, run.state,
                        {{"--data", {"--data", data}, fingerprint_of(read_whole_file(data)), {vocab}},
                         {"--valid", {"--valid", valid}, fingerprint_of(read_whole_file(valid))},
                         {"--test", {"--test", test}, fingerprint_of(read_whole_file(test))},
                         {vocab, {"--save", (run.c.dir / "other-vocab.safetensors").string()}, "", {}, other_vocab},   // its own state
                         {"--seed", {"--seed", "2"}, "2"}, {"--lowercase", {"--lowercase"}, "true", {vocab}},
                         {"--min-freq", {"--min-freq", "2"}, "2", {vocab}}, {"--bpe", {"--bpe", "30"}, "30", {vocab}},
                         {"--max-len", {"--max-len", "12"}, "12", {vocab}}, {"--batch", {"--batch", "8"}, "8"},
                         {"--batch-tokens", {"--batch-tokens", "200"}, "200"}, {"--label-smoothing", {"--label-smoothing", "0.2"}, "0.2"},
                         {"--warmup", {"--warmup", "7"}, "7"}, {"--lr-factor", {"--lr-factor", "2"}, "2"},
                         {"--shards", {"--shards", "3"}, "3"}, {"--bf16", {"--bf16"}, "true"}, {"--reference", {"--reference"}, "true"},
                         {"--average-last", {"--average-last", "2"}, "2"}},
                        [&](const IdentityChange& c) { return c.entry == "--bf16" && !has_bf16; });
}

// The state --resume reads is an input: no output of the run may be it, with --overwrite or not;
// --attention, which only a --load'ed model draws, is refused beside --resume.
TEST_CASE("translation --resume: its file is an input that --save, --plot or --attention may not replace, even with --overwrite") {
    const InterruptedTranslation& run = interrupted_translation();
    const std::string before = read_whole_file(run.state), elsewhere = (run.c.dir / "elsewhere.safetensors").string();
    for (const char* flag : {"--save", "--plot"}) {
        CAPTURE(flag);
        const ExampleRun r = run_example("translation", plus(run.args, {"--save", elsewhere, flag, run.state, "--resume", run.state, "--overwrite"}));
        check_refused_in_one_line(r, std::string(flag) + " " + run.state + " would replace --resume " + run.state + ", which this run reads");
    }
    const ExampleRun plot = run_example("translation", plus(run.args, {"--plot", run.state, "--resume", run.state, "--overwrite"}));
    check_refused_in_one_line(plot, "--plot " + run.state + " would replace the run's state (where Ctrl-C saves it) " + run.state);
    const ExampleRun attention = run_example("translation", plus(run.args, {"--attention", run.state, "--translate", "The cat sees the cup .",
                                                                           "--resume", run.state, "--overwrite"}));
    CHECK(attention.status == 2);
    CHECK(attention.out.empty());
    CHECK(read_whole_file(run.state) == before);
    CHECK_FALSE(fs::exists(elsewhere));
}

// Every output is checked before the corpus is read; with --load nothing trains, so training flags
// are refused, a model flag that disagrees with the file names both values, and --load alone (which
// would do nothing) is an error. An existing --save file is refused unless --overwrite.
TEST_CASE("translation: unwritable outputs fail first; --load refuses flags that do nothing or disagree; --save's old file is kept") {
    const Corpus c = write_corpus("translation-paths");
    const RemoveOnExit cleanup{c.dir};
    for (const char* flag : {"--save", "--plot"}) {
        CAPTURE(flag);
        const ExampleRun r = run_example("translation", tiny_run(c, {"--epochs", "50", flag, "/no/such/folder/x"}));
        CHECK(r.status == 2);
        CHECK(r.err.find(std::string(flag) + " /no/such/folder/x: cannot write in '/no/such/folder'") != std::string::npos);
        CHECK(r.out.find("epoch") == std::string::npos);
    }
    const std::string model = (c.dir / "m.safetensors").string();
    const ExampleRun first = run_example("translation", tiny_run(c, {"--save", model}));
    REQUIRE(first.status == 0);
    CHECK(first.out.find("note: ") == std::string::npos);
    const ExampleRun second = run_example("translation", tiny_run(c, {"--save", model}));
    check_refused_in_one_line(second, "--save " + model + " exists, and this run would replace it: add --overwrite");
    CHECK(run_example("translation", tiny_run(c, {"--save", model, "--overwrite"})).status == 0);
    const ExampleRun svg = run_example("translation", {"--load", model, "--translate", "x", "--attention", "/no/such/folder/a.svg"});
    CHECK(svg.status == 2);
    CHECK(svg.err.find("--attention /no/such/folder/a.svg: cannot write") != std::string::npos);
    const ExampleRun alone = run_example("translation", {"--load", model});
    CHECK(alone.status == 2);
    CHECK(alone.err.find("--load needs something to translate") != std::string::npos);
    for (const char* flag : {"--epochs", "--data", "--batch"}) {
        const ExampleRun r = run_example("translation", {"--load", model, "--translate", "x", flag, "3"});
        CHECK(r.status == 2);
        CHECK(r.err.find(std::string(flag) + " does nothing with --load") != std::string::npos);
    }
    const ExampleRun width = run_example("translation", {"--load", model, "--translate", "x", "--d-model", "64"});
    CHECK(width.status == 1);
    CHECK(width.err.find("--d-model 64, but the model in '" + model + "' has 16") != std::string::npos);
    const ExampleRun same = run_example("translation", {"--load", model, "--translate", "x", "--d-model", "16"});
    CHECK(same.status == 0);
}

// Inputs are checked where they are read, with where they came from: a validation or test sentence
// longer than the model's positions names its file and line before anything trains; a --translate
// or --stdin sentence that is too long or not UTF-8 names the flag or the line (and the byte), and
// nothing is translated; a TSV file with no pair says why its first line was refused.
TEST_CASE("translation: too-long valid/test sentences name file:line; bad --translate / --stdin lines name the line and byte") {
    const Corpus c = write_corpus("translation-inputs");
    const RemoveOnExit cleanup{c.dir};
    std::string long_source = "The cat";
    for (int i = 0; i < 600; i++) long_source += " sees";
    std::vector<data::Pair> valid = c.valid;
    valid.insert(valid.begin() + 2, {long_source + " .", "Die Katze sieht ."});
    const std::string long_tsv = (c.dir / "long.tsv").string();
    write_tsv(long_tsv, valid);
    const ExampleRun v = run_example("translation", tiny_run(c, {"--valid", long_tsv}));
    CHECK(v.status == 1);
    CHECK(v.err.find("'" + long_tsv + "':3: the source has 603 tokens, more than the model's positions hold (511)") != std::string::npos);
    CHECK(v.err.find("raise --max-len to 603") != std::string::npos);
    CHECK(v.out.find("epoch") == std::string::npos);   // nothing trained
    const ExampleRun raised = run_example("translation", tiny_run(c, {"--valid", long_tsv, "--max-len", "603"}));
    CHECK(raised.status == 0);
    const ExampleRun t = run_example("translation", tiny_run(c, {"--test", long_tsv}));
    CHECK(t.status == 1);
    CHECK(t.err.find("'" + long_tsv + "':3: the source has 603") != std::string::npos);
    // a recurrent model reads any length
    std::vector<std::string> rnn = without(without(without(tiny_run(c, {"--valid", long_tsv}), "--d-model"), "--heads"), "--d-ff");
    for (const char* a : {"--model", "rnn", "--hidden", "8", "--embed", "8"}) rnn.push_back(a);
    CHECK(run_example("translation", rnn).status == 0);

    const std::string model = (c.dir / "m.safetensors").string();
    REQUIRE(run_example("translation", tiny_run(c, {"--save", model})).status == 0);
    const ExampleRun given = run_example("translation", {"--load", model, "--translate", long_source});
    CHECK(given.status == 1);
    CHECK(given.err.find("--translate: 602 tokens, more than the model reads (511)") != std::string::npos);
    // a --stdin line that cannot be translated is named and answered with an empty line; the others are translated
    const ExampleRun lines = run_example("translation", {"--load", model, "--stdin"}, "The cat sees .\n\n" + long_source + "\n");
    CHECK(lines.status == 1);
    CHECK(lines.err.find("--stdin line 3: 602 tokens") != std::string::npos);
    REQUIRE(lines_of(lines.out).size() == 3);
    CHECK_FALSE(lines_of(lines.out)[0].empty());
    CHECK(lines_of(lines.out)[2].empty());
    const ExampleRun bytes = run_example("translation", {"--load", model, "--translate", "The cat", "--stdin"},
                                         "Die \xff Katze\nThe cat sees the cup .\n");
    INFO(bytes.err);
    CHECK(bytes.status == 1);
    CHECK(bytes.err.find("--stdin line 1: invalid UTF-8 at byte 4 (0xff)") != std::string::npos);
    CHECK(bytes.err.find("(skipped: its output line is empty)") != std::string::npos);
    REQUIRE(lines_of(bytes.out).size() == 3);
    CHECK(lines_of(bytes.out)[1].empty());
    CHECK_FALSE(lines_of(bytes.out)[2].empty());
    // a line over 1000 tokens, which no --max-len reaches: shorten it, not "raise --max-len to 1503"
    std::string huge = "The cat";
    for (int i = 0; i < 1500; i++) huge += " sees";
    std::vector<data::Pair> huge_valid = c.valid;
    huge_valid.push_back({huge + " .", "Die Katze sieht ."});
    const std::string huge_tsv = (c.dir / "huge.tsv").string();
    write_tsv(huge_tsv, huge_valid);
    const ExampleRun shorten = run_example("translation", tiny_run(c, {"--valid", huge_tsv}));
    CHECK(shorten.status == 1);
    CHECK(shorten.err.find(":14: the source has 1503 tokens, more than the model's positions hold (511): shorten that line "
                           "(--max-len reaches 1000 at most)") != std::string::npos);
    // --min-freq above every word's count: refused, not a run on <unk> alone
    const ExampleRun rare = run_example("translation", tiny_run(c, {"--min-freq", "1000000"}));
    CHECK(rare.status == 1);
    CHECK(rare.err.find("--min-freq 1000000 keeps no source word") != std::string::npos);
    CHECK(rare.out.find("epoch") == std::string::npos);
    const ExampleRun blank = run_example("translation", {"--load", model, "--stdin"}, "The cat sees the cup .\n\nThe dog sees the cup .\n");
    CHECK(blank.status == 0);
    CHECK(lines_of(blank.out).size() == 3);
    CHECK(lines_of(blank.out)[1].empty());

    const std::string bad_tsv = (c.dir / "bad.tsv").string();
    std::ofstream(bad_tsv) << "no tab here\nnor here\n";
    const ExampleRun bad = run_example("translation", tiny_run(c, {"--data", bad_tsv}));
    CHECK(bad.status == 1);
    CHECK(bad.err.find("has no valid sentence pairs (2 lines, 2 malformed, 0 blank); the first: " + bad_tsv +
                       ":1: no tab between source and target") != std::string::npos);
}

// No output names an input or another output: each clash is refused before the corpus is read,
// naming both flags, and the files are as they were.
TEST_CASE("translation: --attention on --load's model, --save on --plot or on --data, --plot on --data: refused, naming both") {
    const Corpus c = write_corpus("translation-clash");
    const RemoveOnExit cleanup{c.dir};
    const std::string model = (c.dir / "m.safetensors").string(), x = (c.dir / "x").string();
    REQUIRE(run_example("translation", tiny_run(c, {"--save", model})).status == 0);
    const std::string saved = read_whole_file(model);
    const ExampleRun svg = run_example("translation", {"--load", model, "--attention", model, "--translate", "The cat sees the cup ."});
    check_refused_in_one_line(svg, "--attention " + model + " would replace --load " + model + ", which this run reads");
    CHECK(read_whole_file(model) == saved);
    const ExampleRun both = run_example("translation", tiny_run(c, {"--save", x, "--plot", x}));
    check_refused_in_one_line(both, "--plot " + x + " would replace --save " + x);
    const std::string corpus = read_whole_file(c.train_tsv);
    const ExampleRun on_data = run_example("translation", tiny_run(c, {"--save", c.train_tsv}));
    check_refused_in_one_line(on_data, "--save " + c.train_tsv + " would replace --data " + c.train_tsv + ", which this run reads");
    const std::string roundabout = (c.dir / ".." / c.dir.filename() / "test.tsv").string();   // another spelling of --test's path
    const ExampleRun plot_on_test = run_example("translation", tiny_run(c, {"--plot", roundabout, "--overwrite"}));
    check_refused_in_one_line(plot_on_test, "would replace --test " + c.test_tsv);
    CHECK(read_whole_file(c.train_tsv) == corpus);
    // --attention onto a file that exists: only with --overwrite
    const std::string picture = (c.dir / "a.svg").string();
    std::ofstream(picture) << "a picture";
    const ExampleRun existing = run_example("translation", {"--load", model, "--attention", picture, "--translate", "The cat ."});
    check_refused_in_one_line(existing, "--attention " + picture + " exists");
    CHECK(run_example("translation", {"--load", model, "--attention", picture, "--translate", "The cat .", "--overwrite"}).status == 0);
    check_refused_in_one_line(run_example("translation", {"--load", model, "--translate", "The cat .", "--overwrite"}),
                              "--overwrite does nothing with --load unless --attention writes a file");
    CHECK(read_whole_file(picture).find("<svg") != std::string::npos);
}

// A recurrent model loaded without --model: the decoding line names what it decodes with.
TEST_CASE("translation --load: a recurrent model's decoding is named as the recurrent state, without --model") {
    const Corpus c = write_corpus("translation-rnn-load");
    const RemoveOnExit cleanup{c.dir};
    const std::string model = (c.dir / "rnn.safetensors").string();
    std::vector<std::string> args = without(without(without(tiny_run(c, {"--save", model}), "--d-model"), "--heads"), "--d-ff");
    for (const char* a : {"--model", "rnn", "--hidden", "8", "--embed", "8"}) args.push_back(a);
    REQUIRE(run_example("translation", args).status == 0);
    const ExampleRun r = run_example("translation", {"--load", model, "--translate", "The cat sees the cup ."});
    CHECK(r.status == 0);
    CHECK(r.err.find("decoder positions (the recurrent state)") != std::string::npos);
}

// --epochs' default with --data: each family gets the same estimated time, kBudgetSeconds x
// (training tokens / 10^6)^kBudgetExponent, and as many epochs as fit in it at its own estimated
// epoch (examples/common/training_work.h). So the budget follows the corpus's work (its tokens,
// not its pairs), the families meet at equal time, and the recurrent model, whose steps cost more
// as sentences grow (its positions run one after another), gets fewer epochs of long sentences
// than the Transformer does, relative to short ones.
namespace {
// n pairs of sources of `len` tokens and targets of len + 1 (<bos>, len - 1 words, <eos>), in
// batches of `rows`; ids from 4 in a vocabulary of 1000.
struct EpochCase {
    data::TranslationData d;
    std::vector<std::vector<size_t>> batches;
};
EpochCase pairs_of(int n, int len, size_t rows) {
    EpochCase c;
    for (int i = 0; i < n; i++) {
        data::Example e{std::vector<int32_t>(len, 4 + i % 900), std::vector<int32_t>(len + 1, 5 + i % 900)};
        c.d.train.push_back(e);
        if (c.batches.empty() || c.batches.back().size() == rows) c.batches.emplace_back();
        c.batches.back().push_back(static_cast<size_t>(i));
    }
    return c;
}
}  // namespace

TEST_CASE("translation --data: --epochs' default gives every family the same estimated time, which follows the corpus's tokens") {
    autograd::manual_seed(1);
    models::Transformer transformer({.src_vocab = 1000, .tgt_vocab = 1000, .layers = 2, .d_model = 128, .d_ff = 512, .heads = 4,
                                     .max_len = 512, .tie_weights = true});
    models::RNNSeq2Seq rnn_attention({.src_vocab = 1000, .tgt_vocab = 1000, .embed = 128, .hidden = 256, .layers = 2,
                                      .cell = nn::CellKind::gru, .context = models::Context::bahdanau, .bidirectional = true});
    models::RNNSeq2Seq rnn({.src_vocab = 1000, .tgt_vocab = 1000, .embed = 128, .hidden = 256, .layers = 2});
    const EpochCase short_pairs = pairs_of(40000, 8, 100), long_pairs = pairs_of(10000, 32, 25);   // 680,000 and 650,000 tokens
    std::map<std::string, std::pair<options::EpochBudget, options::EpochBudget>> got;
    for (const auto& [name, model] : std::vector<std::pair<std::string, const models::Seq2Seq*>>{
             {"transformer", &transformer}, {"rnn-attention", &rnn_attention}, {"rnn", &rnn}}) {
        CAPTURE(name);
        for (const EpochCase* c : {&short_pairs, &long_pairs}) {
            const options::EpochBudget e = options::default_epochs(*model, c->d, c->batches);
            // the budget, from the training set's tokens, both sides
            double tokens = 0;
            for (const data::Example& x : c->d.train) tokens += static_cast<double>(x.src.size() + x.tgt.size());
            CHECK(e.budget_seconds == doctest::Approx(options::kBudgetSeconds * std::pow(tokens / 1e6, options::kBudgetExponent)));
            // the epoch, from each batch's padded shape: the decoder reads every target token but the last
            std::vector<common::BatchShape> shapes;
            for (const auto& b : c->batches)
                shapes.push_back({static_cast<int64_t>(b.size()), static_cast<int64_t>(c->d.train[b[0]].src.size()),
                                  static_cast<int64_t>(c->d.train[b[0]].tgt.size()) - 1});
            CHECK(e.epoch_seconds == doctest::Approx(common::estimated_epoch_seconds(*model, shapes)));
            CHECK(e.epochs == options::epochs_that_fit(e.budget_seconds, e.epoch_seconds));
        }
        got[name] = {options::default_epochs(*model, short_pairs.d, short_pairs.batches),
                     options::default_epochs(*model, long_pairs.d, long_pairs.batches)};
    }
    // the same corpus, the same budget for every family; their epochs x epoch time meet it within half an epoch
    for (const auto& [name, e] : got) {
        CAPTURE(name);
        CHECK(e.first.budget_seconds == got["transformer"].first.budget_seconds);
        CHECK(std::abs(e.first.epochs * e.first.epoch_seconds - e.first.budget_seconds) <= 0.5 * e.first.epoch_seconds);
        CHECK(std::abs(e.second.epochs * e.second.epoch_seconds - e.second.budget_seconds) <= 0.5 * e.second.epoch_seconds);
    }
    // a recurrent model's epoch of long sentences costs more than one of short ones with as many
    // tokens (2 x 10,000 x 32 positions read one by one in the encoder, against 2 x 40,000 x 8 spread
    // over 4 times the batches): relative to the Transformer, it gets fewer epochs of them
    const auto ratio = [&](const options::EpochBudget& r, const options::EpochBudget& t) { return r.epoch_seconds / t.epoch_seconds; };
    CHECK(ratio(got["rnn-attention"].second, got["transformer"].second) > ratio(got["rnn-attention"].first, got["transformer"].first));
    // the budget follows the tokens: twice the text, 2^0.8 the time, whatever the pairs
    const EpochCase twice = pairs_of(80000, 8, 100);
    CHECK(options::default_epochs(transformer, twice.d, twice.batches).budget_seconds ==
          doctest::Approx(got["transformer"].first.budget_seconds * std::pow(2.0, options::kBudgetExponent)));
    // the epochs closest to the budget, at least one and at most kMostDefaultEpochs
    CHECK(options::epochs_that_fit(100, 30) == 3);
    CHECK(options::epochs_that_fit(100, 28) == 4);
    CHECK(options::epochs_that_fit(100, 1000) == 1);
    CHECK(options::epochs_that_fit(1e6, 1) == options::kMostDefaultEpochs);
    const EpochCase tiny = pairs_of(10, 4, 10);
    CHECK(options::default_epochs(transformer, tiny.d, tiny.batches).epochs == options::kMostDefaultEpochs);
}

// Through the example: the header says the epochs and the two estimates they come from, and the
// run trains that many; --epochs overrides them. (32 training pairs of a model 16 wide: a small
// corpus gets many epochs, here the most, 200 of 2 steps each.)
TEST_CASE("translation --data: the header gives the default epochs and their estimates, and the run trains them") {
    Corpus c = write_corpus("translation-default-epochs");
    const RemoveOnExit cleanup{c.dir};
    c.train.resize(32);
    write_tsv(c.train_tsv, c.train);
    const ExampleRun r = run_example("translation", without(tiny_run(c, {}), "--epochs"));
    INFO(r.err);
    REQUIRE(r.status == 0);
    const std::smatch m = [&] {
        std::smatch found;
        std::regex_search(r.out, found, std::regex(R"(epochs: (\d+), to fit an estimated (\d+) s of training on this corpus at ([0-9.]+) s an epoch)"));
        return found;
    }();
    REQUIRE(m.size() == 4);
    const int epochs = std::stoi(m[1]);
    CHECK(epochs == options::kMostDefaultEpochs);
    CHECK(r.out.find(", " + std::to_string(epochs) + " epochs |") != std::string::npos);
    CHECK(r.out.find("epoch " + std::string(epochs < 10 ? " " : "") + std::to_string(epochs) + "  train loss") != std::string::npos);
    CHECK(r.out.find("epoch " + std::string(epochs + 1 < 10 ? " " : "") + std::to_string(epochs + 1) + "  train loss") == std::string::npos);
    const ExampleRun given = run_example("translation", tiny_run(c, {}));   // --epochs 1
    CHECK(given.out.find("epochs: ") == std::string::npos);
    CHECK(given.out.find(", 1 epochs |") != std::string::npos);
}

// --save has a default (translation.safetensors), so "save nothing" has a flag of its own: an
// empty --save, what a script's unset variable gives, is refused and names it.
TEST_CASE("translation --no-save: trains and tests without writing the model; an empty --save is refused, naming --no-save") {
    const Corpus c = write_corpus("translation-no-save");
    const RemoveOnExit cleanup{c.dir};
    const ExampleRun none = run_example("translation", tiny_run(c, {}));   // tiny_run: --no-save
    INFO(none.err);
    REQUIRE(none.status == 0);
    CHECK(none.out.find("best epoch 1 (valid loss ") != std::string::npos);
    CHECK(none.out.find("saved to") == std::string::npos);
    const std::string model = (c.dir / "m.safetensors").string();
    const ExampleRun saved = run_example("translation", tiny_run(c, {"--save", model}));
    CHECK(saved.out.find(", saved to " + model) != std::string::npos);
    CHECK(std::filesystem::exists(model));
    check_refused_in_one_line(run_example("translation", tiny_run(c, {"--save", ""})),
                              "--save needs PATH, got an empty value (an unset variable in a script?): to save nothing, give --no-save");
    check_refused_in_one_line(run_example("translation", plus(tiny_run(c, {"--save", model}), {"--no-save"})),
                              "--no-save and --save contradict each other");
    check_refused_in_one_line(run_example("translation", {"--load", model, "--translate", "the dog", "--no-save"}),
                              "--no-save does nothing with --load");
}

// The files a run reads: only regular files, whole (a FIFO as --data would hang at the second open,
// for its checksum; /dev/zero never ends), refused at once. The model's memory is estimated from
// its config before it is built (under a 1.5 GB address-space limit, a billion weights are
// refused with the estimate, not after their allocation failed).
TEST_CASE("translation: a FIFO or a device as --data, --valid or --test is refused at once; a model past the memory before it is built") {
    const Corpus c = write_corpus("translation-kinds");
    const RemoveOnExit cleanup{c.dir};
    const std::string fifo = (c.dir / "fifo.tsv").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    for (const auto& [flag, path] : std::vector<std::pair<std::string, std::string>>{{"--data", fifo}, {"--valid", "/dev/zero"}}) {
        CAPTURE(flag);
        const ExampleRun r = run_example_limited("translation", plus(without(tiny_run(c, {}), flag), {flag, path}), "true");
        INFO(r.err);
        CHECK(r.status == 1);
        CHECK(r.err.find("read_tsv: '" + path + "' is a " + (path == fifo ? "FIFO (named pipe)" : "character device") +
                         ", not a regular file") != std::string::npos);
    }
#if !defined(__SANITIZE_ADDRESS__)
    const ExampleRun big = run_example_limited("translation", plus(tiny_run(c, {}), {"--layers", "8", "--d-model", "4096", "--d-ff", "16384",
                                                                                    "--heads", "8"}), "ulimit -v 1500000");
    INFO(big.err);
    CHECK(big.status == 1);
    CHECK(big.err.find("translation: training on these batches needs about ") != std::string::npos);
    CHECK(big.err.find("out of memory") == std::string::npos);
#endif
}
