// Replays the fuzzing inputs kept in the repo through the fuzz targets' own checks
// (tests/fuzz/fuzz_checks.h): the seeds in tests/fuzz/corpus/<target>/ and, once the fuzzer has
// found something, the inputs kept in tests/fuzz/crashes/<target>/. So a parser bug that the
// fuzzer found once stays fixed, without needing clang or libFuzzer to check it.
// Paths are relative to the repo root, where `make test` runs the suite.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

// A broken promise throws here instead of trapping: one bad input fails one CHECK.
#define FUZZ_CHECK_FAILED(text) \
    (throw fuzz::CheckFailure(std::string(text) + " (" + __FILE__ + ":" + std::to_string(__LINE__) + ")"))
#include "tests/fuzz/fuzz_checks.h"

namespace {

namespace fs = std::filesystem;
using CheckFn = void (*)(const uint8_t*, size_t);

// Directory name under corpus/ and crashes/ -> the check its fuzz target runs.
const std::map<std::string, CheckFn>& checks_by_target() {
    static const std::map<std::string, CheckFn> m = {
        {"json", fuzz::check_json_bytes},
        {"safetensors", fuzz::check_safetensors_bytes},
        {"tsv", fuzz::check_tsv_bytes},
        {"tokenizer", fuzz::check_tokenizer_bytes},
    };
    return m;
}

std::string read_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot read " << p.string());
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs every regular file under dir/<target>/ through its check; returns how many ran.
size_t replay_tree(const fs::path& dir) {
    size_t replayed = 0;
    for (const fs::directory_entry& sub : fs::directory_iterator(dir)) {
        if (!sub.is_directory()) continue;
        const std::string target = sub.path().filename().string();
        const auto it = checks_by_target().find(target);
        CHECK_MESSAGE(it != checks_by_target().end(),
                      "unknown fuzz target directory " << sub.path().string());
        if (it == checks_by_target().end()) continue;
        std::vector<fs::path> files;
        for (const fs::directory_entry& f : fs::directory_iterator(sub.path()))
            if (f.is_regular_file()) files.push_back(f.path());
        std::sort(files.begin(), files.end());  // a stable order, so failures read the same
        for (const fs::path& f : files) {
            const std::string bytes = read_bytes(f);
            INFO("input: " << f.string() << " (" << bytes.size() << " bytes)");
            CHECK_NOTHROW(it->second(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
            replayed++;
        }
    }
    return replayed;
}

}  // namespace

TEST_CASE("fuzz seed corpus: every seed passes its fuzz target's checks") {
    const fs::path corpus = "tests/fuzz/corpus";
    REQUIRE_MESSAGE(fs::is_directory(corpus),
                    "tests/fuzz/corpus not found: run the suite from the repo root (make test)");
    for (const auto& entry : checks_by_target()) {
        const std::string& target = entry.first;   // not a structured binding: INFO's lambda captures it
        INFO("target: " << target);
        CHECK(fs::is_directory(corpus / target));  // each target keeps some seeds
    }
    CHECK(replay_tree(corpus) >= checks_by_target().size());
}

TEST_CASE("fuzz crashes: every input the fuzzer once broke the parsers with now passes") {
    const fs::path crashes = "tests/fuzz/crashes";
    REQUIRE_MESSAGE(fs::is_directory("tests/fuzz"),
                    "tests/fuzz not found: run the suite from the repo root (make test)");
    if (!fs::is_directory(crashes)) return;  // nothing found yet
    replay_tree(crashes);
}

TEST_CASE("fuzz checks catch a broken promise") {
    // The checks must be able to fail, or replaying them proves nothing: a TSV line that the
    // reference and parse_tsv read differently would throw; here we feed the reference directly.
    const fuzz::TsvExpected r = fuzz::tsv_reference("\xEF\xBB\xBF a \t b \t c\r\n\n  \nno tab\n");
    REQUIRE(r.pairs.size() == 1);
    CHECK(r.pairs[0] == data::Pair{"a", "b"});
    CHECK(r.lines == 4);
    CHECK(r.blank == 2);
    CHECK(r.skipped == 1);
    CHECK_THROWS_AS(FUZZ_CHECK(1 + 1 == 3), fuzz::CheckFailure);
}
