// Tests for examples/data: tokenizer, vocabulary, TSV reader and split, BLEU, toy grammar.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <unistd.h>   // getpid: temp file names unique to this run

#include "autograd/io/utf8.h"
#include "examples/data/bleu.h"
#include "examples/data/tokenizer.h"
#include "examples/data/toy_grammar.h"
#include "examples/data/translation_data.h"
#include "examples/data/tsv.h"
#include "examples/data/vocab.h"
#include "tests/error_of.h"

using data::Pair;
using Tokens = std::vector<std::string>;

namespace {

Tokens split_spaces(const std::string& s) {
    Tokens out;
    std::istringstream in(s);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

}  // namespace

// ---- tokenizer ------------------------------------------------------------------------------

TEST_CASE("tokenize: punctuation becomes separate tokens") {
    CHECK(data::tokenize("Hello, world! How are you?") ==
          Tokens{"Hello", ",", "world", "!", "How", "are", "you", "?"});
    CHECK(data::tokenize("He said \"hi\" (quietly).") ==
          Tokens{"He", "said", "\"", "hi", "\"", "(", "quietly", ")", "."});
    SUBCASE("punctuation inside words and numbers stays") {
        CHECK(data::tokenize("a well-known 3.5 km, 1,000 at 10:30 in the U.S.") ==
              Tokens{"a", "well-known", "3.5", "km", ",", "1,000", "at", "10:30", "in", "the", "U.S", "."});
    }
    SUBCASE("Unicode punctuation and spaces") {
        // French spacing uses a narrow no-break space U+202F before ! and inside « »
        CHECK(data::tokenize("«\u202FOui\u202F»\u202F! ¿Qué? ¡Sí! Bien… — fin") ==
              Tokens{"«", "Oui", "»", "!", "¿", "Qué", "?", "¡", "Sí", "!", "Bien", "…", "—", "fin"});
        CHECK(data::tokenize("“quoted”") == Tokens{"“", "quoted", "”"});
    }
    CHECK(data::tokenize("  \t\n ").empty());
}

TEST_CASE("tokenize: apostrophes - French elisions split, English contractions stay whole") {
    CHECK(data::tokenize("L'homme qu'il voit jusqu'à aujourd'hui") ==
          Tokens{"L'", "homme", "qu'", "il", "voit", "jusqu'", "à", "aujourd'hui"});
    CHECK(data::tokenize("j’ai") == Tokens{"j’", "ai"});  // typographic apostrophe U+2019
    CHECK(data::tokenize("I don't know, it's Tom's.") == Tokens{"I", "don't", "know", ",", "it's", "Tom's", "."});
    CHECK(data::tokenize("'quoted'") == Tokens{"'", "quoted", "'"});  // at a word edge: a quote
}

TEST_CASE("detokenize(tokenize(s)) == s for normally spaced sentences") {
    const std::vector<std::string> sentences = {
        "Hello, world! How are you?",
        "I don't know; it's 3.5 km away: far.",
        "He said \"hi\" (quietly).",
        "The U.S. costs $5, 50% off... Really?!",
        "L'homme est là.",
        "Qu'est-ce que c'est?",
        "Wait — “really”?",
        "¿Dónde está el baño?",
        "我爱你。",
        "I love 🍕! 👍🏽",
    };
    for (const std::string& s : sentences) {
        CAPTURE(s);
        CHECK(data::detokenize(data::tokenize(s)) == s);
    }
    CHECK(data::detokenize({}) == "");
    CHECK(data::detokenize({"Va", "!"}) == "Va!");  // French spacing is not reproduced
}

TEST_CASE("tokenize: UTF-8 is never split inside a character") {
    SUBCASE("accents and umlauts stay inside words") {
        CHECK(data::tokenize("Ärger über Café, naïve Œuvre!") ==
              Tokens{"Ärger", "über", "Café", ",", "naïve", "Œuvre", "!"});
    }
    SUBCASE("each CJK ideograph (and kana) is a token") {
        CHECK(data::tokenize("我喜欢猫。") == Tokens{"我", "喜", "欢", "猫", "。"});
        CHECK(data::tokenize("猫がneko") == Tokens{"猫", "が", "neko"});
        CHECK(data::tokenize("\U00020000x") == Tokens{"\U00020000", "x"});  // extension B, 4 bytes
    }
    SUBCASE("4-byte emoji survive whole, with modifiers and joiners") {
        const std::string family = "👨\u200D👩\u200D👧";
        CHECK(data::tokenize("pizza 🍕!") == Tokens{"pizza", "🍕", "!"});
        CHECK(data::tokenize(family + " ok") == Tokens{family, "ok"});
        for (const std::string& t : data::tokenize("👍🏽 🎉🎉 done")) CHECK(autograd::io::valid_utf8(t));
    }
    SUBCASE("invalid bytes become U+FFFD, output is valid UTF-8") {
        const std::string bad = "ab\xFF" "cd \xE2\x82 x \xC3";  // stray byte, truncated, truncated at end
        const Tokens t = data::tokenize(bad);
        CHECK(t == Tokens{"ab\uFFFDcd", "\uFFFD", "x", "\uFFFD"});
        for (const std::string& s : t) CHECK(autograd::io::valid_utf8(s));
        CHECK(autograd::io::valid_utf8(data::detokenize(t)));
    }
}

TEST_CASE("tokenize: lowercase by code point (ASCII, Latin-1, Latin Extended-A)") {
    CHECK(data::tokenize("ÉCOLE Ärger ÜBER À ÇA Œuvre ŁÓDŹ Ÿ", true) ==
          Tokens{"école", "ärger", "über", "à", "ça", "œuvre", "łódź", "ÿ"});
    CHECK(data::to_lower(U'É') == U'é');
    CHECK(data::to_lower(U'Ä') == U'ä');
    CHECK(data::to_lower(U'×') == U'×');  // U+00D7 sits among the capitals but is no letter
    CHECK(data::to_lower(U'ß') == U'ß');
    CHECK(data::to_lower(U'我') == U'我');
    CHECK(data::to_lower_utf8("L'HOMME") == "l'homme");
}

// ---- vocabulary -----------------------------------------------------------------------------

TEST_CASE("Vocab: specials, frequency order, min_freq") {
    const std::vector<Tokens> sentences = {{"b", "a", "c", "a"}, {"c", "d", "a"}, {"e"}};
    // counts: a 3, c 2, b 1, d 1, e 1
    SUBCASE("min_freq = 1 keeps everything: by count, then alphabetically") {
        const data::Vocab v = data::Vocab::build(sentences, 1);
        CHECK(v.tokens() == Tokens{"<pad>", "<bos>", "<eos>", "<unk>", "a", "c", "b", "d", "e"});
        CHECK(v.size() == 9);
    }
    SUBCASE("min_freq = 2 drops the rare tokens") {
        const data::Vocab v = data::Vocab::build(sentences, 2);
        CHECK(v.tokens() == Tokens{"<pad>", "<bos>", "<eos>", "<unk>", "a", "c"});
        CHECK(v.id("b") == data::Vocab::UNK);
    }
    SUBCASE("max_size caps the size, specials included") {
        CHECK(data::Vocab::build(sentences, 1, 5).tokens() == Tokens{"<pad>", "<bos>", "<eos>", "<unk>", "a"});
    }
    SUBCASE("from_counts: the counts given (as if 'b' were seen 5 times) order the tokens as build's do") {
        const std::unordered_map<std::string, size_t> counts = {{"a", 3}, {"c", 2}, {"b", 5}, {"d", 1}, {"e", 1}};
        CHECK(data::Vocab::from_counts(counts).tokens() == Tokens{"<pad>", "<bos>", "<eos>", "<unk>", "b", "a", "c", "d", "e"});
        CHECK(data::Vocab::from_counts(counts, 2, 6).tokens() == Tokens{"<pad>", "<bos>", "<eos>", "<unk>", "b", "a"});
    }
    const data::Vocab empty;
    CHECK(empty.size() == 4);
    CHECK(empty.id("<pad>") == 0);
    CHECK(empty.id("<bos>") == 1);
    CHECK(empty.id("<eos>") == 2);
    CHECK(empty.id("<unk>") == 3);
    CHECK_THROWS_WITH_AS(data::Vocab::build({{"ok", ""}}), doctest::Contains("Vocab::build: empty token"), std::invalid_argument);
}

TEST_CASE("Vocab: lookups, encode, decode") {
    const data::Vocab v = data::Vocab::build({{"the", "dog", "sees", "the", "cat"}});
    CHECK(v.id("the") == 4);  // most frequent
    CHECK(v.token(4) == "the");
    CHECK(v.id("unicorn") == data::Vocab::UNK);
    CHECK_FALSE(v.contains("unicorn"));

    SUBCASE("a bad id throws out_of_range with a clear message") {
        CHECK_THROWS_WITH_AS(v.token(-1), doctest::Contains("id -1 is outside [0, 8)"), std::out_of_range);
        CHECK_THROWS_WITH_AS(v.token(static_cast<int32_t>(v.size())), doctest::Contains("id 8 is outside [0, 8)"), std::out_of_range);
        try {
            v.token(99);
            FAIL("no throw");
        } catch (const std::out_of_range& e) {
            CHECK(contains(e.what(), "id 99"));
        }
    }
    SUBCASE("encode wraps in <bos> ... <eos>, unknown -> <unk>") {
        const std::vector<int32_t> ids = v.encode({"the", "unicorn"}, true, true);
        CHECK(ids == std::vector<int32_t>{1, 4, 3, 2});
        CHECK(v.encode({"the"}, false, false) == std::vector<int32_t>{4});
    }
    SUBCASE("decode stops at <eos> and skips <pad>/<bos>") {
        const int32_t dog = v.id("dog"), cat = v.id("cat");
        CHECK(v.decode({1, dog, 0, cat, 3, 2, dog, 0}) == Tokens{"dog", "cat", "<unk>"});
        CHECK(v.decode({}).empty());
        CHECK_THROWS_WITH_AS(v.decode({1, 1000}), doctest::Contains("id 1000 is outside"), std::out_of_range);
    }
}

TEST_CASE("Vocab: JSON round trip and validation") {
    namespace json = autograd::io::json;
    const data::Vocab v = data::Vocab::build({{"a", "line\nbreak", "back\\slash", "tab\there", "\"quoted\"", "é", "我"}});
    const std::string text = json::dump(v.to_json());
    CHECK(text.rfind(R"(["<pad>","<bos>","<eos>","<unk>",)", 0) == 0);
    const data::Vocab back = data::Vocab::from_json(json::parse(text));
    CHECK(back == v);
    CHECK(back.id("line\nbreak") == v.id("line\nbreak"));

    SUBCASE("a bad vocabulary throws runtime_error saying what is wrong") {
        const std::string good = R"(["<pad>","<bos>","<eos>","<unk>","hello"])";
        CHECK(data::Vocab::from_json(json::parse(good)).id("hello") == 4);
        struct Case { std::string json; const char* message; };   // the JSON text, what the message must say
        const Case cases[] = {
            {R"({"tokens":[]})", "json: expected an array, got an object"},
            {R"(["<pad>","<bos>","<eos>"])", "3 tokens, fewer than the 4 specials"},
            {R"(["<bos>","<pad>","<eos>","<unk>","hello"])", "id 0: must be <pad>, got '<bos>'"},
            {R"(["<pad>","<bos>","<eos>","<unk>","<pad>"])", "id 4: duplicate token '<pad>'"},
            {R"(["<pad>","<bos>","<eos>","<unk>",""])", "id 4: empty token"},
            {R"(["<pad>","<bos>","<eos>","<unk>",5])", "id 4: expected a string, got 5"},
        };
        for (const Case& c : cases) {
            CAPTURE(c.json);
            CHECK_THROWS_WITH_AS(data::Vocab::from_json(json::parse(c.json)), doctest::Contains(c.message), std::runtime_error);
        }
        // JSON text is valid UTF-8, but a value built in memory may not be
        CHECK_THROWS_WITH_AS(data::Vocab::from_json(json::Array{"<pad>", "<bos>", "<eos>", "<unk>", "\xFF"}),
                             doctest::Contains("id 4: invalid UTF-8"), std::runtime_error);
    }
}

// ---- TSV ------------------------------------------------------------------------------------

TEST_CASE("parse_tsv: the Tatoeba/Anki format") {
    const std::string text =
        "Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM) & #1158250 (Wittydev)\n"
        "Hi.\tSalut !\tCC-BY 2.0 (France) Attribution: tatoeba.org #538123 (CM) & #509819 (Aiji)\n"
        "I'm here.\tJe suis là.\n";  // two columns are fine too
    const data::TsvResult r = data::parse_tsv(text, "sample.tsv");
    CHECK(r.pairs == std::vector<Pair>{{"Go.", "Va !"}, {"Hi.", "Salut !"}, {"I'm here.", "Je suis là."}});
    CHECK(r.skipped == 0);
    CHECK(r.warnings.empty());
}

TEST_CASE("parse_tsv: BOM, CRLF, blank lines, no final newline") {
    const std::string text = "\xEF\xBB\xBFone\teins\r\n\r\n  \ntwo\tzwei\r\nthree\tdrei";
    const data::TsvResult r = data::parse_tsv(text, "x.tsv");
    CHECK(r.pairs == std::vector<Pair>{{"one", "eins"}, {"two", "zwei"}, {"three", "drei"}});
    CHECK(r.skipped == 0);      // blank lines are not counted as skipped ...
    CHECK(r.blank_lines == 2);  // ... but separately
    CHECK(r.warnings.empty());
}

TEST_CASE("parse_tsv: malformed lines are skipped, counted and reported with line numbers") {
    const std::string text =
        "good\tgut\n"
        "no tab here\n"           // line 2
        "   \tleer\n"             // line 3: empty source
        "empty target\t  \tx\n"   // line 4: empty target
        "bad \xFF byte\tx\n"      // line 5: invalid UTF-8
        " padded \t gepolstert \n";
    const data::TsvResult r = data::parse_tsv(text, "in.tsv");
    CHECK(r.pairs == std::vector<Pair>{{"good", "gut"}, {"padded", "gepolstert"}});
    CHECK(r.skipped == 4);
    REQUIRE(r.warnings.size() == 4);
    CHECK(r.warnings[0].rfind("in.tsv:2: ", 0) == 0);
    CHECK(r.warnings[1].rfind("in.tsv:3: ", 0) == 0);
    CHECK(r.warnings[2].rfind("in.tsv:4: ", 0) == 0);
    CHECK(r.warnings[3].rfind("in.tsv:5: ", 0) == 0);
    CHECK(contains(r.warnings[0], "no tab between source and target"));
    CHECK(contains(r.warnings[1], "empty source"));
    CHECK(contains(r.warnings[2], "empty target"));
    CHECK(contains(r.warnings[3], "UTF-8"));

    SUBCASE("only the first few warnings are kept") {
        std::string many = "ok\tok\n";
        for (int i = 0; i < 50; i++) many += "junk\n";
        const data::TsvResult m = data::parse_tsv(many, "m");
        CHECK(m.skipped == 50);
        CHECK(m.warnings.size() == data::kMaxTsvWarnings);
    }
}

TEST_CASE("parse_tsv / read_tsv: no usable data throws, naming the input") {
    CHECK_THROWS_WITH_AS(data::parse_tsv("", "empty.tsv"), doctest::Contains("'empty.tsv' has no valid sentence pairs"), std::runtime_error);
    CHECK_THROWS_WITH_AS(data::parse_tsv("\xEF\xBB\xBF\n\n", "blank.tsv"), doctest::Contains("(2 lines, 0 malformed, 2 blank)"), std::runtime_error);
    try {
        data::parse_tsv("no tabs\nat all\n", "notabs.tsv");
        FAIL("no throw");
    } catch (const std::runtime_error& e) {
        CHECK(contains(e.what(), "notabs.tsv"));
    }

    const std::string missing = "/nonexistent/dir/pairs-42.tsv";
    try {
        data::read_tsv(missing);
        FAIL("no throw");
    } catch (const std::runtime_error& e) {
        CHECK(contains(e.what(), missing));
    }
}

TEST_CASE("read_tsv reads a file") {
    const std::filesystem::path path = std::filesystem::temp_directory_path() / ("test_text_data_pairs_" + std::to_string(::getpid()) + ".tsv");
    {
        std::ofstream out(path, std::ios::binary);
        out << "cat\tKatze\r\ndog\tHund\r\n";
    }
    const data::TsvResult r = data::read_tsv(path.string());
    CHECK(r.pairs == std::vector<Pair>{{"cat", "Katze"}, {"dog", "Hund"}});
    std::filesystem::remove(path);
}

TEST_CASE("split_pairs: deterministic, complete, a source sentence lands in one split only") {
    std::vector<Pair> pairs;
    for (int i = 0; i < 200; i++) {
        pairs.push_back({"src" + std::to_string(i), "tgt" + std::to_string(i)});
        if (i % 3 == 0) pairs.push_back({"src" + std::to_string(i), "other" + std::to_string(i)});  // 2nd translation
    }
    const data::DataSplits a = data::split_pairs(pairs, 7, 0.1, 0.2);
    const data::DataSplits b = data::split_pairs(pairs, 7, 0.1, 0.2);
    const data::DataSplits c = data::split_pairs(pairs, 8, 0.1, 0.2);
    CHECK(a.train == b.train);
    CHECK(a.valid == b.valid);
    CHECK(a.test == b.test);
    CHECK(a.valid != c.valid);

    // 200 source sentences: 20 to valid, 40 to test (with their second translations)
    std::map<std::string, std::set<int>> split_of;
    size_t n = 0;
    for (int s = 0; s < 3; s++) {
        const std::vector<Pair>& part = s == 0 ? a.train : s == 1 ? a.valid : a.test;
        std::set<std::string> sources;
        for (const Pair& p : part) {
            split_of[p.src].insert(s);
            sources.insert(p.src);
        }
        n += part.size();
        if (s == 1) CHECK(sources.size() == 20);
        if (s == 2) CHECK(sources.size() == 40);
    }
    CHECK(n == pairs.size());
    for (const auto& [src, splits] : split_of) CHECK(splits.size() == 1);

    CHECK_THROWS_WITH_AS(data::split_pairs(pairs, 1, 0.6, 0.6), doctest::Contains("valid_frac + test_frac <= 1"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(data::split_pairs(pairs, 1, -0.1, 0.1), doctest::Contains("need 0 <= valid_frac"), std::invalid_argument);
}

// ---- the translation example's corpus: splits too small to mean anything are refused ---------

namespace {

// A directory of TSV files for one test, removed at scope exit.
struct TsvDir {
    std::filesystem::path dir;
    TsvDir() {
        static int counter = 0;
        dir = std::filesystem::temp_directory_path() /
              ("test_text_data_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        std::filesystem::create_directories(dir);
    }
    ~TsvDir() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
    std::string write(const std::string& name, const std::string& text) const {
        const std::string path = (dir / name).string();
        std::ofstream(path, std::ios::binary) << text;
        return path;
    }
};

// "s0\tt0\ns1\tt1\n...": n pairs with n distinct sources.
std::string numbered_pairs(int n) {
    std::string text;
    for (int i = 0; i < n; i++) {   // appended piece by piece: "s" + ... makes g++ 12 -O3 warn
        const std::string k = std::to_string(i);
        text += 's';
        text += k;
        text += "\tt";
        text += k;
        text += '\n';
    }
    return text;
}

// What fn writes to stderr (file descriptor 2, redirected to a temp file meanwhile).
template <class Fn>
std::string stderr_of(Fn fn) {
    std::fflush(stderr);
    std::FILE* tmp = std::tmpfile();
    REQUIRE(tmp);
    const int saved = ::dup(2);
    ::dup2(::fileno(tmp), 2);
    struct Restore {   // also when fn throws
        int saved;
        ~Restore() {
            std::fflush(stderr);
            ::dup2(saved, 2);
            ::close(saved);
        }
    };
    {
        Restore restore{saved};
        fn();
    }
    std::rewind(tmp);
    std::string out;
    for (int c; (c = std::fgetc(tmp)) != EOF;) out += static_cast<char>(c);
    std::fclose(tmp);
    return out;
}

}  // namespace

TEST_CASE("default_bpe_merges (--bpe's default): a quarter of the distinct words, between 500 and 32000") {
    CHECK(data::default_bpe_merges(0) == 500);
    CHECK(data::default_bpe_merges(2003) == 500);      // 2003 / 4 = 500.75
    CHECK(data::default_bpe_merges(2004) == 501);
    CHECK(data::default_bpe_merges(10000) == 2500);
    CHECK(data::default_bpe_merges(128003) == 32000);
    CHECK(data::default_bpe_merges(1000000) == 32000);
}

TEST_CASE("load_translation_data: --data too small to split off valid and test is refused, naming file, counts and flags") {
    // Valid and test each get round(5% of the distinct sources): round(0.45) = 0 for 9 sources,
    // round(0.5) = 1 (half rounds up) for 10. So 10 distinct sources is the least --data can have.
    TsvDir dir;
    data::CorpusOptions o;

    SUBCASE("the one-pair file of the issue") {
        o.data = dir.write("one.tsv", "Hello .\tHallo .\n");
        const std::string msg = error_of([&] { data::load_translation_data(o); });
        CHECK(contains(msg, "'" + o.data + "' has 1 sentence pair (1 distinct source sentence), "
                            "split into train 1, valid 0, test 0: too few to validate and test on"));
        CHECK(contains(msg, "the file needs at least 10 of them"));
        CHECK(contains(msg, "pass --valid FILE --test FILE, or use more data"));
    }
    SUBCASE("9 distinct sources: still none for valid or test") {
        o.data = dir.write("nine.tsv", numbered_pairs(9));
        CHECK(contains(error_of([&] { data::load_translation_data(o); }),
                       "has 9 sentence pairs (9 distinct source sentences), split into train 9, valid 0, test 0"));
    }
    SUBCASE("12 pairs but 9 distinct sources: a source's translations stay together, so 9 count") {
        o.data = dir.write("twelve.tsv", numbered_pairs(9) + "s0\tu0\ns1\tu1\ns2\tu2\n");
        CHECK(contains(error_of([&] { data::load_translation_data(o); }),
                       "has 12 sentence pairs (9 distinct source sentences), split into train 12, valid 0, test 0"));
    }
    SUBCASE("10 distinct sources: one valid pair, one test pair, 8 to train") {
        o.data = dir.write("ten.tsv", numbered_pairs(10));
        const data::TranslationData d = data::load_translation_data(o);
        CHECK(d.train.size() == 8);
        CHECK(d.valid.size() == 1);
        CHECK(d.text.test.size() == 1);
    }
    SUBCASE("the same one pair with --valid and --test given: now the training split is too small") {
        o.data = dir.write("one.tsv", "Hello .\tHallo .\n");
        o.valid = dir.write("valid.tsv", "Good day .\tGuten Tag .\n");
        o.test = dir.write("test.tsv", "Bye .\tTschüss .\n");
        CHECK(error_of([&] { data::load_translation_data(o); }) ==
              "'" + o.data + "': 1 training pair; at least 2 are needed: use more data");
        o.data = dir.write("two.tsv", "Hello .\tHallo .\nYes .\tJa .\n");
        CHECK(data::load_translation_data(o).train.size() == 2);
    }
    SUBCASE("--valid without --test (or the reverse) is refused") {
        o.data = dir.write("ten.tsv", numbered_pairs(10));
        o.valid = dir.write("valid.tsv", "a\tb\n");
        CHECK(error_of([&] { data::load_translation_data(o); }) == "--valid and --test go together");
    }
}

TEST_CASE("load_translation_data: fewer than 2 training pairs left after --max-len, or no usable validation pair, is refused") {
    TsvDir dir;
    data::CorpusOptions o;
    o.valid = dir.write("valid.tsv", "Good day .\tGuten Tag .\n");
    o.test = dir.write("test.tsv", "Bye .\tTschüss .\n");

    SUBCASE("--max-len drops all but one") {
        // "Yes ." is 2 tokens a side; "Hello there , friend ." is 5 on the source side
        o.data = dir.write("train.tsv", "Yes .\tJa .\nHello there , friend .\tHallo .\n");
        o.max_len = 4;
        CHECK(error_of([&] { data::load_translation_data(o); }) ==
              "'" + o.data + "': 1 training pair left of 2 (1 dropped: over --max-len 4 tokens, or no token on a side); "
                             "at least 2 are needed: raise --max-len, or use more data");
        o.max_len = 5;
        CHECK(data::load_translation_data(o).train.size() == 2);
    }
    SUBCASE("the built-in toy corpus is named as such") {
        data::CorpusOptions toy;
        toy.max_len = 1;   // every toy sentence has a word and a full stop
        CHECK(contains(error_of([&] { data::load_translation_data(toy); }), "the toy corpus: 0 training pairs left of "));
    }
    SUBCASE("validation pairs whose side is only wide spaces: no token, so no validation loss") {
        o.data = dir.write("train.tsv", "Yes .\tJa .\nNo .\tNein .\n");
        // U+3000 (ideographic space) is not ASCII whitespace, so the TSV reader keeps the pair,
        // but the tokenizer finds no token in it
        o.valid = dir.write("spaces.tsv", "\xE3\x80\x80\tGuten Tag .\n");
        CHECK(contains(error_of([&] { data::load_translation_data(o); }),
                       "'" + o.valid + "': no validation pair has a token on both sides (1 pair read"));
    }
}

TEST_CASE("load_translation_data: malformed lines of --data, --valid and --test are reported with file and line") {
    TsvDir dir;
    data::CorpusOptions o;
    o.data = dir.write("train.tsv", "Yes .\tJa .\nno tab here\nNo .\tNein .\n");
    o.valid = dir.write("valid.tsv", "Good day .\tGuten Tag .\n\t  Hallo\n");
    o.test = dir.write("test.tsv", "Bye .\tTschüss .\nThanks .\t \n");
    const std::string err = stderr_of([&] { data::load_translation_data(o); });
    CHECK(contains(err, o.data + ":2: no tab between source and target, line skipped"));
    CHECK(contains(err, o.valid + ":2: empty source, line skipped"));
    CHECK(contains(err, o.test + ":2: empty target, line skipped"));
}

TEST_CASE("check_batch_fits: a training split smaller than one --batch is refused, naming both counts") {
    TsvDir dir;
    data::CorpusOptions o;
    o.data = dir.write("ten.tsv", numbered_pairs(10));   // 8 pairs to train (see the split test above)
    const data::TranslationData d = data::load_translation_data(o);
    REQUIRE(d.train.size() == 8);
    CHECK(error_of([&] { data::check_batch_fits(d, o, 9); }) ==
          "'" + o.data + "': the training split has 8 pairs, fewer than one batch (--batch 9): every epoch would be "
                         "the same single step. Pass --batch 8 or less, or use more data");
    CHECK(error_of([&] { data::check_batch_fits(d, o, 8); }).empty());
    CHECK(error_of([&] { data::check_batch_fits(d, o, 1); }).empty());
}

// ---- BLEU -----------------------------------------------------------------------------------

TEST_CASE("tokenize_13a: sacreBLEU's default tokenization") {
    CHECK(data::tokenize_13a("Hello, world! It's 3.5 km.") == "Hello , world ! It's 3.5 km .");
    CHECK(data::tokenize_13a("1,000 people (approx.) in 1990-2000") == "1,000 people ( approx . ) in 1990 - 2000");
    CHECK(data::tokenize_13a("well-known e-mail a/b x_y \"q\"") == "well-known e-mail a / b x _ y \" q \"");
    CHECK(data::tokenize_13a("A &amp; B &lt;tag&gt; &quot;hi&quot;") == "A & B < tag > \" hi \"");
    CHECK(data::tokenize_13a("  spaced   out  \n") == "spaced out");
    CHECK(data::tokenize_13a("über. Straße,") == "über . Straße ,");
    CHECK(data::tokenize_13a("1+1=2 {a|b} [c]~^`") == "1 + 1 = 2 { a | b } [ c ] ~ ^ `");
}

TEST_CASE("corpus_bleu: identical = 100, no overlap = 0") {
    const std::vector<std::string> refs = {"The cat sat on the mat.", "A dog barked loudly at night."};
    const data::BleuResult same = data::corpus_bleu(refs, refs);
    CHECK(same.score == doctest::Approx(100.0));
    CHECK(same.bp == 1.0);

    const data::BleuResult none = data::corpus_bleu({"x y z w v", "q r s t u"}, refs);
    CHECK(none.score == 0.0);

    // sacreBLEU: with no hypothesis of 4 tokens or more there is no 4-gram at all, p_4 = 0, BLEU 0,
    // even for a perfect match
    CHECK(data::corpus_bleu({"ok then"}, {"ok then"}).score == 0.0);
}

TEST_CASE("corpus_bleu: hand-computed case with brevity penalty and smoothing") {
    // hyp "the cat is on the mat"        (6 tokens, c = 6)
    // ref "the cat sat on the mat today" (7 tokens, r = 7)
    // 1-grams: the x2, cat, on, mat match, "is" does not       -> 5/6
    // 2-grams: "the cat" "on the" "the mat" of 5               -> 3/5
    // 3-grams: "on the mat" of 4                               -> 1/4
    // 4-grams: none of 3 -> 'exp' smoothing: 100 / (2 * 3)     -> 16.67 %
    // BP = exp(1 - 7/6) = 0.8465
    // BLEU = BP * (83.33 * 60 * 25 * 16.67)^(1/4) = 0.8465 * 37.99 = 32.16
    const data::BleuResult r = data::corpus_bleu({"the cat is on the mat"}, {"the cat sat on the mat today"});
    CHECK(r.sys_len == 6);
    CHECK(r.ref_len == 7);
    CHECK(r.correct[0] == 5);
    CHECK(r.correct[1] == 3);
    CHECK(r.correct[2] == 1);
    CHECK(r.correct[3] == 0);
    CHECK(r.precisions[0] == doctest::Approx(500.0 / 6));
    CHECK(r.precisions[1] == doctest::Approx(60.0));
    CHECK(r.precisions[2] == doctest::Approx(25.0));
    CHECK(r.precisions[3] == doctest::Approx(100.0 / 6));
    const double bp = std::exp(1.0 - 7.0 / 6.0);
    CHECK(r.bp == doctest::Approx(bp));
    CHECK(r.score == doctest::Approx(bp * std::pow(500.0 / 6 * 60 * 25 * 100.0 / 6, 0.25)));
    CHECK(r.score == doctest::Approx(32.1594).epsilon(1e-5));
    CHECK(data::to_string(r) == "BLEU = 32.16 83.3/60.0/25.0/16.7 (BP = 0.846 ratio = 0.857 hyp_len = 6 ref_len = 7)");
}

TEST_CASE("corpus_bleu: statistics are summed over the corpus, not averaged") {
    // sentence 1: "a b c d" vs "a b c d" -> 4/4, 3/3, 2/2, 1/1
    // sentence 2: "e f" vs "e g h"        -> 1/2, 0/1, no 3- or 4-grams
    // corpus: 5/6, 3/4, 2/2, 1/1; c = 6, r = 7 -> BP = exp(1 - 7/6)
    const data::BleuResult r = data::corpus_bleu({"a b c d", "e f"}, {"a b c d", "e g h"});
    CHECK(r.total[2] == 2);
    CHECK(r.total[3] == 1);
    const double expected = std::exp(1.0 - 7.0 / 6.0) * std::pow(500.0 / 6 * 75.0 * 100.0 * 100.0, 0.25);
    CHECK(r.score == doctest::Approx(expected));  // 75.26
    CHECK_THROWS_WITH_AS(data::corpus_bleu({"a"}, {"a", "b"}), doctest::Contains("1 hypotheses but 2 references"), std::invalid_argument);
}

TEST_CASE("corpus_bleu: case-sensitive by default; --bleu-lowercase (sacreBLEU -lc) folds case; the signature says which") {
    // 13a keeps case: "The" and "the" are different unigrams. Hypothesis "The cat sat on the Mat ."
    // against "the cat sat on the mat .": 5/7, 3/6, 2/5, 1/4 n-grams match; lowercased, all do.
    const data::BleuResult mixed = data::corpus_bleu({"The cat sat on the Mat ."}, {"the cat sat on the mat ."});
    CHECK(mixed.correct[0] == 5);
    CHECK(mixed.correct[3] == 1);
    CHECK(mixed.score == doctest::Approx(100.0 * std::pow(5.0 / 7 * 3.0 / 6 * 2.0 / 5 * 1.0 / 4, 0.25)));   // 43.47
    const data::BleuResult lc = data::corpus_bleu({"The cat sat on the Mat ."}, {"the cat sat on the mat ."}, {.lowercase = true});
    CHECK(lc.score == doctest::Approx(100.0));
    CHECK(data::bleu_signature() == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp");
    CHECK(data::bleu_signature({.lowercase = true}) == "nrefs:1|case:lc|eff:no|tok:13a|smooth:exp");
}

// Golden values for each part of the formula in bleu.h. Each expected score is worked by hand in
// the comment above it (counts, then the formula; the arithmetic done with a calculator), and the
// same hypotheses and references given to sacreBLEU 2.6.0 (git f615c72, `corpus_bleu(hyps, [refs])`)
// score the same to 1e-12. Each case is chosen so that one part done wrong changes the score.

TEST_CASE("corpus_bleu golden: a word repeated more often than the reference has it counts only as often (clipping)") {
    // hyp "the cat the cat sat on the mat" (c = 8), ref "the cat sat on the mat" (r = 6)
    // 1-grams: the x3 (ref has 2) -> 2, cat x2 (ref 1) -> 1, sat on mat -> 3    = 6 of 8
    // 2-grams: "the cat" x2 (ref 1) -> 1, "cat the" 0, cat sat, sat on, on the, the mat = 5 of 7
    // 3-grams: the cat sat, cat sat on, sat on the, on the mat                  = 4 of 6
    // 4-grams: the cat sat on, cat sat on the, sat on the mat                   = 3 of 5
    // c > r: BP = 1 (a longer hypothesis is not penalized; the precisions already pay for it)
    // BLEU = 100 * (6/8 * 5/7 * 4/6 * 3/5)^(1/4) = 100 * (3/14)^(1/4) = 68.03749333
    // (unclipped, 8/8 and 6/7 would give 76.52)
    const data::BleuResult r = data::corpus_bleu({"the cat the cat sat on the mat"}, {"the cat sat on the mat"});
    CHECK(r.correct[0] == 6);
    CHECK(r.correct[1] == 5);
    CHECK(r.correct[2] == 4);
    CHECK(r.correct[3] == 3);
    CHECK(r.total[0] == 8);
    CHECK(r.total[3] == 5);
    CHECK(r.bp == 1.0);
    CHECK(r.score == doctest::Approx(68.03749333).epsilon(1e-9));
}

TEST_CASE("corpus_bleu golden: a hypothesis shorter than its reference pays the brevity penalty exp(1 - r/c)") {
    // hyp "the cat sat on the" (c = 5), ref "the cat sat on the mat today" (r = 7)
    // every n-gram of the hypothesis is in the reference: 5/5, 4/4, 3/3, 2/2, all 100 %
    // BP = exp(1 - r/c) = exp(1 - 7/5) = exp(-0.4) = 0.6703200460
    // BLEU = 100 * BP * 1 = 67.03200460   (exp(1 - c/r) would be 1.33, over 100)
    const data::BleuResult r = data::corpus_bleu({"the cat sat on the"}, {"the cat sat on the mat today"});
    CHECK(r.sys_len == 5);
    CHECK(r.ref_len == 7);
    for (int n = 0; n < 4; n++) CHECK(r.precisions[n] == doctest::Approx(100.0).epsilon(1e-12));
    CHECK(r.bp == doctest::Approx(0.6703200460).epsilon(1e-9));
    CHECK(r.score == doctest::Approx(67.03200460).epsilon(1e-9));
}

TEST_CASE("corpus_bleu golden: counts and lengths are summed over the corpus, not sentence BLEUs averaged") {
    // sentence 1: hyp "a b c d e f" (6), ref "a b c d" (4): 4/6, 3/5, 2/4, 1/3; alone BLEU 50.81
    // sentence 2: hyp "g h i j" (4), ref "g h i j k l" (6): 4/4, 3/3, 2/2, 1/1;
    //             alone BLEU = 100 * exp(1 - 6/4) = 60.65 (too short)
    // corpus: 8/10, 6/8, 4/6, 2/4; c = 6 + 4 = 10, r = 4 + 6 = 10 -> BP = 1: the long sentence
    // makes up for the short one
    // BLEU = 100 * (0.8 * 0.75 * 2/3 * 0.5)^(1/4) = 100 * 0.2^(1/4) = 66.87403050
    // (the mean of the two sentence BLEUs would be 55.73)
    const data::BleuResult r = data::corpus_bleu({"a b c d e f", "g h i j"}, {"a b c d", "g h i j k l"});
    CHECK(r.sys_len == 10);
    CHECK(r.ref_len == 10);
    CHECK(r.correct[0] == 8);
    CHECK(r.correct[3] == 2);
    CHECK(r.total[3] == 4);
    CHECK(r.bp == 1.0);
    CHECK(r.score == doctest::Approx(66.87403050).epsilon(1e-9));
}

TEST_CASE("corpus_bleu golden: an order with no match is smoothed ('exp': 1/2, then 1/4, ... of one n-gram)") {
    SUBCASE("one sentence, no 3-gram and no 4-gram matches") {
        // hyp "a b d e c", ref "a b c d e" (c = r = 5, BP = 1)
        // 1-grams 5/5 = 100 %; 2-grams ab, bd, de, ec: ab and de match, 2/4 = 50 %
        // 3-grams abd, bde, dec: 0 of 3 -> first zero order:  100 / (2 * 3) = 16.666667 %
        // 4-grams abde, bdec:    0 of 2 -> second zero order: 100 / (4 * 2) = 12.5 %
        // BLEU = (100 * 50 * 16.666667 * 12.5)^(1/4) = 31.94715521
        // (without smoothing: 0; with 1/2 for both orders: 37.99)
        const data::BleuResult r = data::corpus_bleu({"a b d e c"}, {"a b c d e"});
        CHECK(r.correct[2] == 0);
        CHECK(r.correct[3] == 0);
        CHECK(r.precisions[1] == doctest::Approx(50.0).epsilon(1e-12));
        CHECK(r.precisions[2] == doctest::Approx(100.0 / 6).epsilon(1e-12));
        CHECK(r.precisions[3] == doctest::Approx(12.5).epsilon(1e-12));
        CHECK(r.score == doctest::Approx(31.94715521).epsilon(1e-9));
    }
    SUBCASE("two sentences: smoothing divides by the corpus's n-gram count") {
        // as above, plus hyp "x y z" vs ref "x y w": 2/3, 1/2, 0/1, no 4-gram (c = r = 8, BP = 1)
        // corpus: 7/8 = 87.5 %, 3/6 = 50 %, 0/4 -> 100 / (2 * 4) = 12.5 %, 0/2 -> 100 / (4 * 2) = 12.5 %
        // BLEU = (87.5 * 50 * 12.5 * 12.5)^(1/4) = 28.75408292   (sentence 2 alone scores 0)
        const data::BleuResult r = data::corpus_bleu({"a b d e c", "x y z"}, {"a b c d e", "x y w"});
        CHECK(r.total[2] == 4);
        CHECK(r.precisions[2] == doctest::Approx(12.5).epsilon(1e-12));
        CHECK(r.score == doctest::Approx(28.75408292).epsilon(1e-9));
    }
}

TEST_CASE("corpus_bleu golden: hypothesis and reference are both 13a-tokenized before counting") {
    // hyp "the cat sat on the mat." -> the cat sat on the mat .  (c = 7: the period is a token)
    // ref "the cat sat on the mat"                                (r = 6)
    // 6/7, 5/6, 4/5, 3/4 (only the n-grams ending in "." miss); BP = 1
    // BLEU = 100 * (6/7 * 5/6 * 4/5 * 3/4)^(1/4) = 100 * (3/7)^(1/4) = 80.91067116
    // (split on spaces alone, "mat." would miss too: 5/6, 4/5, 3/4, 2/3)
    const data::BleuResult r = data::corpus_bleu({"the cat sat on the mat."}, {"the cat sat on the mat"});
    CHECK(r.sys_len == 7);
    CHECK(r.score == doctest::Approx(80.91067116).epsilon(1e-9));
    // the reference is tokenized too: written untokenized, it still matches a tokenized hypothesis
    CHECK(data::corpus_bleu({"Hello , world ! It's 3.5 km ."}, {"Hello, world! It's 3.5 km."}).score ==
          doctest::Approx(100.0).epsilon(1e-12));
}

// ---- toy grammar ----------------------------------------------------------------------------

namespace {

const data::ToyCorpus& toy() {
    static const data::ToyCorpus corpus = data::make_toy_corpus(1);
    return corpus;
}

// The German determiner right before `i`, skipping one adjective (lower case) if there is one.
std::string determiner_before(const Tokens& de, size_t i) {
    static const std::set<std::string> dets = {"der", "die", "das", "den", "ein", "eine", "einen", "kein", "keine",
                                               "keinen", "mein", "meine", "meinen", "dein", "deine", "deinen",
                                               "sein", "seine", "seinen", "ihr", "ihre", "ihren", "unser",
                                               "unsere", "unseren"};
    if (i >= 1 && dets.count(de[i - 1])) return de[i - 1];  // den Hund
    if (i >= 2 && dets.count(de[i - 2])) return de[i - 2];  // den großen Hund
    return "";
}

}  // namespace

TEST_CASE("toy grammar: deterministic, large, distinct, disjoint splits") {
    const data::ToyCorpus& c = toy();
    CHECK(c.train.size() == 12000);
    CHECK(c.valid.size() == 500);
    CHECK(c.test.size() == 500);

    const data::ToyCorpus again = data::make_toy_corpus(1);
    CHECK(again.train == c.train);
    CHECK(again.test == c.test);
    const data::ToyCorpus other = data::make_toy_corpus(2, 100, 10, 10);
    CHECK(other.train.front() != c.train.front());

    std::set<std::string> train_src, en_words, de_words;
    size_t max_len = 0;
    for (const Pair& p : c.train) {
        train_src.insert(p.src);
        for (const std::string& w : split_spaces(p.src)) en_words.insert(w);
        for (const std::string& w : split_spaces(p.tgt)) de_words.insert(w);
        max_len = std::max(max_len, split_spaces(p.src).size());
    }
    CHECK(train_src.size() >= 10000);  // distinct sources, hence distinct pairs
    CHECK(en_words.size() >= 100);
    CHECK(de_words.size() >= 100);
    CHECK(max_len <= 14);

    std::set<std::string> valid_src;
    for (const Pair& p : c.valid) {
        CHECK(train_src.count(p.src) == 0);
        valid_src.insert(p.src);
    }
    CHECK(valid_src.size() == c.valid.size());
    for (const Pair& p : c.test) {
        CHECK(train_src.count(p.src) == 0);
        CHECK(valid_src.count(p.src) == 0);
    }
    // the output is tokenized already: our tokenizer leaves it unchanged
    for (size_t i = 0; i < 50; i++) CHECK(data::tokenize(c.train[i].tgt) == split_spaces(c.train[i].tgt));
}

TEST_CASE("toy grammar: German gender and case on articles and adjectives") {
    size_t acc_def = 0, acc_indef = 0, nom_def = 0;
    for (const Pair& p : toy().train) {
        const Tokens en = split_spaces(p.src), de = split_spaces(p.tgt);
        const size_t E = en.size();
        // "... the (big) dog ." at the end of the English sentence: the object -> accusative "den"
        if (E >= 3 && en[E - 2] == "dog" && (en[E - 3] == "the" || (E >= 4 && en[E - 4] == "the"))) {
            CAPTURE(p.src);
            CAPTURE(p.tgt);
            const size_t k = static_cast<size_t>(std::find(de.begin(), de.end(), "Hund") - de.begin());
            REQUIRE(k < de.size());
            CHECK(determiner_before(de, k) == "den");
            if (en[E - 3] != "the") CHECK(de[k - 1].substr(de[k - 1].size() - 2) == "en");  // den großen Hund
            acc_def++;
        }
        // "... a (big) dog ." as the object: "einen (großen) Hund", or "keinen" when negated
        if (E >= 3 && en[E - 2] == "dog" && (en[E - 3] == "a" || (E >= 4 && en[E - 4] == "a"))) {
            CAPTURE(p.src);
            CAPTURE(p.tgt);
            const size_t k = static_cast<size_t>(std::find(de.begin(), de.end(), "Hund") - de.begin());
            REQUIRE(k < de.size());
            const bool negated = std::find(en.begin(), en.end(), "not") != en.end();
            CHECK(determiner_before(de, k) == (negated ? "keinen" : "einen"));
            acc_indef++;
        }
        // a sentence starting "the dog" / "the cat" / "the car": nominative der / die / das
        if (E >= 2 && en[0] == "the" && en[1] == "dog") {
            CHECK((de[0] == "der" && de[1] == "Hund"));
            nom_def++;
        }
        if (E >= 2 && en[0] == "the" && en[1] == "cat") CHECK((de[0] == "die" && de[1] == "Katze"));
        if (E >= 2 && en[0] == "the" && en[1] == "car") CHECK((de[0] == "das" && de[1] == "Auto"));
    }
    CHECK(acc_def > 0);
    CHECK(acc_indef > 0);
    CHECK(nom_def > 0);
}

TEST_CASE("toy grammar: adjective endings follow the determiner") {
    // after der/das (any case), die + feminine singular: -e; after den: -en;
    // after ein/kein/mein (masc. nom. -er, neuter -es); after einen/keinen/meinen: -en
    auto ends_with = [](const std::string& s, const std::string& suffix) {
        return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    size_t checked = 0;
    std::set<std::string> seen_mixed;  // endings seen after bare ein-words
    for (const Pair& p : toy().train) {
        const Tokens de = split_spaces(p.tgt);
        for (size_t i = 0; i + 2 < de.size(); i++) {
            const std::string &det = de[i], &adj = de[i + 1], &noun = de[i + 2];
            const bool adj_then_noun = std::islower(static_cast<unsigned char>(adj[0])) &&
                                       !std::islower(static_cast<unsigned char>(noun[0])) && noun != "," && noun != "." &&
                                       noun != "?";
            if (!adj_then_noun || adj == "nicht" || adj == "dass") continue;
            CAPTURE(p.tgt);
            if (det == "der" || det == "das") {
                CHECK(ends_with(adj, "e"));
                checked++;
            }
            if (det == "den" || det == "einen" || det == "keinen" || det == "meinen" || det == "unseren") {
                CHECK(ends_with(adj, "en"));
                checked++;
            }
            if (det == "ein" || det == "kein" || det == "mein" || det == "unser") {
                CHECK((ends_with(adj, "er") || ends_with(adj, "es")));
                seen_mixed.insert(adj.substr(adj.size() - 2));
                checked++;
            }
        }
    }
    CHECK(checked > 1000);
    CHECK(seen_mixed == std::set<std::string>{"er", "es"});  // ein großer Hund, ein rotes Auto
}

TEST_CASE("toy grammar: word order - subordinate verb-final, questions verb-first, nicht") {
    size_t sub = 0, neg = 0, quest = 0, eat_animal = 0, eat_human = 0;
    const std::set<std::string> animals = {"dog", "dogs", "bird", "birds", "fox", "foxes", "frog", "frogs", "cat",
                                           "cats", "mouse", "mice", "cow", "cows", "duck", "ducks", "horse",
                                           "horses", "pig", "pigs", "rabbit", "rabbits", "chicken", "chickens"};
    for (const Pair& p : toy().train) {
        const Tokens en = split_spaces(p.src), de = split_spaces(p.tgt);
        CAPTURE(p.src);
        CAPTURE(p.tgt);
        const bool has_that = std::find(en.begin(), en.end(), "that") != en.end();
        // i know that the dog sees the ball . -> ich weiß , dass der Hund den Ball sieht .
        if (has_that && std::find(en.begin(), en.end(), "sees") != en.end()) {
            CHECK(de[2] == ",");
            CHECK(de[3] == "dass");
            CHECK(de[de.size() - 2] == "sieht");
            sub++;
        }
        // the dog does not see the cat . -> der Hund sieht die Katze nicht .
        if (!has_that && en.size() >= 4 && en[en.size() - 3] == "the" && std::find(en.begin(), en.end(), "not") != en.end()) {
            CHECK(de[de.size() - 2] == "nicht");
            neg++;
        }
        // exactly one negation word: "nicht", or "kein..." for an indefinite object, never both
        if (std::find(en.begin(), en.end(), "not") != en.end()) {
            size_t negations = 0;
            for (const std::string& w : de) negations += (w == "nicht" || w.rfind("kein", 0) == 0);
            CHECK(negations == 1);
        }
        // does the dog see the cat ? -> sieht der Hund die Katze ?
        if (en[0] == "does" && en[1] == "the" && en[2] == "dog") {
            CHECK(de[1] == "der");
            CHECK(de[2] == "Hund");
            CHECK(de.back() == "?");
            quest++;
        }
        // animals "fressen", people "essen"
        for (size_t i = 1; i < en.size(); i++) {
            if (en[i] != "eats" && en[i] != "eat") continue;
            // the subject is right before the verb, or before "does not" / "do not"
            const std::string& subj = (i >= 3 && en[i - 1] == "not") ? en[i - 3] : en[i - 1];
            const bool animal = animals.count(subj) > 0;
            const bool fressen = contains(p.tgt, " frisst ") || contains(p.tgt, " fressen ") ||
                                 p.tgt.rfind("frisst ", 0) == 0 || p.tgt.rfind("fressen ", 0) == 0;
            CHECK(fressen == animal);
            (animal ? eat_animal : eat_human)++;
        }
    }
    CHECK(sub > 0);
    CHECK(neg > 0);
    CHECK(quest > 0);
    CHECK(eat_animal > 0);
    CHECK(eat_human > 0);
}
