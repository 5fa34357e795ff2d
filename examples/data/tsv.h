// Sentence pairs from tab-separated text (the Tatoeba / manythings.org "Anki" format), and a
// deterministic train/valid/test split that keeps each source sentence in one split.
//
//   TsvResult r = read_tsv("eng-fra.tsv");    // "Go.<TAB>Va !<TAB>CC-BY 2.0 (France) ..."
//   DataSplits s = split_pairs(r.pairs, /*seed=*/1, /*valid_frac=*/0.05, /*test_frac=*/0.05);
//
// Line rules of parse_tsv():
//   - a UTF-8 byte order mark at the very start is dropped; lines end in "\n" or "\r\n"; the
//     last line may lack its newline.
//   - blank (or whitespace-only) lines are skipped silently: counted in blank_lines, not in
//     skipped, and no warning.
//   - "source<TAB>target[<TAB>anything...]": columns after the second are ignored; each field is
//     trimmed of ASCII whitespace.
//   - skipped (counted in `skipped`, with a warning for the first kMaxTsvWarnings): a line that is
//     not valid UTF-8, a line with no tab, a line whose source or target is empty after trimming.
//   - zero valid pairs (an empty file included) throws std::runtime_error naming the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace data {

struct Pair {
    std::string src, tgt;
    size_t line = 0;   // the line of the file it was read from, for messages (0: not read from a file)
    bool operator==(const Pair& o) const { return src == o.src && tgt == o.tgt; }   // the text, wherever it was read
};

inline constexpr size_t kMaxTsvWarnings = 10;

struct TsvResult {
    std::vector<Pair> pairs;
    size_t skipped = 0;                 // malformed lines dropped (blank lines not included)
    size_t blank_lines = 0;             // empty or whitespace-only lines, dropped silently
    std::vector<std::string> warnings;  // first kMaxTsvWarnings, as "name:line: reason"
};

// Parses TSV text; name_for_messages (usually the path) prefixes warnings and errors.
TsvResult parse_tsv(std::string_view content, const std::string& name_for_messages);

// Reads and parses a file. Throws std::runtime_error naming the path if it cannot be read, is not
// a regular file or is larger than common::kMaxInputBytes (examples/common/output_files.h).
TsvResult read_tsv(const std::string& path);

struct DataSplits {
    std::vector<Pair> train, valid, test;
};

// Deterministic split for a given seed. Pairs are grouped by source sentence first (a source with
// several translations keeps them all together), the groups are shuffled (Fisher-Yates with
// autograd::Rng), and round(valid_frac * groups) go to valid, round(test_frac * groups) to test, the
// rest to train. Each split lists its pairs in shuffled group order. Throws std::invalid_argument
// unless 0 <= valid_frac, test_frac and valid_frac + test_frac <= 1.
DataSplits split_pairs(const std::vector<Pair>& pairs, uint64_t seed, double valid_frac, double test_frac);

}  // namespace data
