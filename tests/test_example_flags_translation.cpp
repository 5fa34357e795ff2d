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
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "examples/data/translation_data.h"
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

// A run on the corpus: word level, batches of 16 sentence pairs, nothing saved, one epoch of a
// model 16 wide (18 steps, a few hundredths of a second). Later flags in `more` override these.
std::vector<std::string> tiny_run(const Corpus& c, const std::vector<std::string>& more) {
    std::vector<std::string> args = {"--data", c.train_tsv, "--valid", c.valid_tsv, "--test", c.test_tsv, "--bpe", "0",
                                     "--batch-tokens", "0", "--batch", "16", "--layers", "1", "--d-model", "16", "--heads",
                                     "2", "--d-ff", "32", "--epochs", "1", "--save", ""};
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

// `args` without `flag` and its value.
std::vector<std::string> without(std::vector<std::string> args, const std::string& flag) {
    const auto at = std::find(args.begin(), args.end(), flag);
    if (at != args.end()) args.erase(at, at + 2);
    return args;
}

// A run that learns the grammar: 10 epochs of 36 batches of 8, a model 32 wide without dropout, at
// half the usual learning rate.
std::vector<std::string> learning_run(const Corpus& c, const std::vector<std::string>& more) {
    std::vector<std::string> args = tiny_run(c, {"--d-model", "32", "--d-ff", "64", "--dropout", "0", "--warmup", "40", "--lr-factor",
                                                 "0.5", "--epochs", "10", "--batch", "8"});
    args.insert(args.end(), more.begin(), more.end());
    return args;
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

    const ExampleRun words_tied = run_example("translation", tiny_run(c, {"--bpe", "0", "--tie-weights"}));
    CHECK(words_tied.status == 2);
    CHECK(words_tied.err.find("--tie-weights needs one vocabulary for both languages") != std::string::npos);
    const ExampleRun both_flags = run_example("translation", tiny_run(c, {"--bpe", "9", "--tie-weights", "--no-tie-weights"}));
    CHECK(both_flags.status == 2);
    CHECK(both_flags.err.find("contradict") != std::string::npos);
}
