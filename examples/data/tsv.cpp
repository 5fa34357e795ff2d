#include "examples/data/tsv.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "autograd/io/utf8.h"
#include "autograd/random.h"
#include "examples/common/output_files.h"

namespace data {

namespace {

std::string_view trim(std::string_view s) {
    const std::string_view ws = " \t\r\n\v\f";
    const size_t first = s.find_first_not_of(ws);
    if (first == std::string_view::npos) return {};
    const size_t last = s.find_last_not_of(ws);
    return s.substr(first, last - first + 1);
}

}  // namespace

TsvResult parse_tsv(std::string_view content, const std::string& name_for_messages) {
    TsvResult result;
    if (content.substr(0, 3) == "\xEF\xBB\xBF") content.remove_prefix(3);  // UTF-8 BOM

    auto skip = [&](size_t line_no, const char* reason) {
        result.skipped++;
        if (result.warnings.size() < kMaxTsvWarnings)
            result.warnings.push_back(name_for_messages + ":" + std::to_string(line_no) + ": " + reason);
    };

    size_t line_no = 0;
    for (size_t pos = 0; pos < content.size();) {
        // 1) cut one line; drop "\n" and a "\r" before it
        size_t end = content.find('\n', pos);
        if (end == std::string_view::npos) end = content.size();
        std::string_view line = content.substr(pos, end - pos);
        pos = end + 1;
        line_no++;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);

        // 2) check it
        if (trim(line).empty()) {
            result.blank_lines++;
            continue;
        }
        if (!autograd::io::valid_utf8(line)) {
            skip(line_no, "invalid UTF-8, line skipped");
            continue;
        }
        const size_t tab = line.find('\t');
        if (tab == std::string_view::npos) {
            skip(line_no, "no tab between source and target, line skipped");
            continue;
        }
        const size_t tab2 = line.find('\t', tab + 1);  // extra columns (attribution) start here
        const std::string_view src = trim(line.substr(0, tab));
        const std::string_view tgt =
            trim(line.substr(tab + 1, tab2 == std::string_view::npos ? std::string_view::npos : tab2 - tab - 1));
        if (src.empty() || tgt.empty()) {
            skip(line_no, src.empty() ? "empty source, line skipped" : "empty target, line skipped");
            continue;
        }

        // 3) keep it
        result.pairs.push_back({std::string(src), std::string(tgt), line_no});
    }

    if (result.pairs.empty())
        throw std::runtime_error("parse_tsv: '" + name_for_messages + "' has no valid sentence pairs (" +
                                 std::to_string(line_no) + " lines, " + std::to_string(result.skipped) +
                                 " malformed, " + std::to_string(result.blank_lines) + " blank)" +
                                 (result.warnings.empty() ? "" : "; the first: " + result.warnings.front()));
    return result;
}

TsvResult read_tsv(const std::string& path) {
    std::string content;
    try {
        content = common::read_input_file(path, "a TSV file");   // a regular file, of a bounded size
    } catch (const std::runtime_error& e) {
        throw std::runtime_error(std::string("read_tsv: ") + e.what());
    }
    return parse_tsv(content, path);
}

DataSplits split_pairs(const std::vector<Pair>& pairs, uint64_t seed, double valid_frac, double test_frac) {
    if (!(valid_frac >= 0 && test_frac >= 0 && valid_frac + test_frac <= 1))
        throw std::invalid_argument("split_pairs: need 0 <= valid_frac, test_frac and valid_frac + test_frac <= 1");

    // 1) group pair indices by source sentence, groups in order of first appearance
    std::vector<std::vector<size_t>> groups;
    std::unordered_map<std::string, size_t> group_of;  // lookup only, never iterated
    for (size_t i = 0; i < pairs.size(); i++) {
        auto [it, is_new] = group_of.emplace(pairs[i].src, groups.size());
        if (is_new) groups.emplace_back();
        groups[it->second].push_back(i);
    }

    // 2) shuffle the groups (Fisher-Yates)
    autograd::Rng rng(seed);
    for (size_t i = groups.size(); i > 1; i--) std::swap(groups[i - 1], groups[rng.below(static_cast<uint32_t>(i))]);

    // 3) cut: valid first, then test, the rest is train
    const size_t G = groups.size();
    const size_t n_valid = std::min(G, static_cast<size_t>(std::llround(valid_frac * static_cast<double>(G))));
    const size_t n_test = std::min(G - n_valid, static_cast<size_t>(std::llround(test_frac * static_cast<double>(G))));
    DataSplits out;
    for (size_t g = 0; g < G; g++) {
        std::vector<Pair>& dst = g < n_valid ? out.valid : g < n_valid + n_test ? out.test : out.train;
        for (size_t i : groups[g]) dst.push_back(pairs[i]);
    }
    return out;
}

}  // namespace data
