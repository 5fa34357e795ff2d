#include "examples/eval/copy_task_eval.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "examples/data/copy_task_data.h"
#include "models/decoding.h"

namespace eval {

using autograd::Tokens;
using data::COPY_PAD;
using data::COPY_START;

namespace {

// Row `row` of t as "1 4 2 9".
std::string join(const Tokens& t, int64_t row) {
    std::string s;
    const int64_t L = t.size(1);
    for (int64_t i = 0; i < L; i++) {
        if (i) s += ' ';
        s += std::to_string(t[row * L + i]);
    }
    return s;
}

// src (n, L) -> outputs (n, L): greedy or beam search, the n sequences in one batch.
Tokens decode(models::Seq2Seq& model, const Tokens& src, int beam, bool kv_cache, int64_t* positions = nullptr) {
    const int64_t n = src.size(0), L = src.size(1);
    const autograd::Mask mask = models::padding_mask(src, COPY_PAD);
    if (beam == 0) return models::greedy_decode_counted(model, src, mask, {.max_len = L, .bos = COPY_START}, kv_cache, positions);
    Tokens out = Tokens::full({n, L}, COPY_PAD);
    const std::vector<models::Hypothesis> best =
        models::beam_search_batch(model, src, mask, {.beam_size = beam, .max_len = L, .bos = COPY_START, .kv_cache = kv_cache, .positions = positions});
    for (int64_t i = 0; i < n; i++) std::copy(best[i].tokens.begin(), best[i].tokens.end(), out.data.begin() + i * L);
    return out;
}

}  // namespace

ExactMatch exact_match(models::Seq2Seq& model, autograd::Rng& rng, int64_t V, int64_t L, int count, int beam, bool kv_cache) {
    model.eval();
    ExactMatch r;
    r.kv_cache = kv_cache;
    r.total = count;
    const int chunk = kSequencesDecodedTogether;
    for (int done = 0; done < count; done += chunk) {
        const int64_t n = std::min(chunk, count - done);
        const Tokens src = data::random_sequences(rng, V, n, L);   // (n, L)
        const auto t0 = std::chrono::steady_clock::now();
        const Tokens out = decode(model, src, beam, kv_cache, &r.decoder_positions);    // (n, L)
        r.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        for (int64_t i = 0; i < n; i++) {
            const bool ok = std::equal(src.data.begin() + i * L, src.data.begin() + (i + 1) * L, out.data.begin() + i * L);
            r.correct += ok;
            if (!ok && r.misses.size() < 6) r.misses.push_back("  src: " + join(src, i) + "\n  out: " + join(out, i) + "   <- wrong");
        }
        if (done == 0) r.shown_src = src, r.shown_out = out;
    }
    return r;
}

void print_exact_match(const ExactMatch& r, int beam) {
    std::printf("examples (%s decoding):\n", beam > 0 ? ("beam " + std::to_string(beam)).c_str() : "greedy");
    for (int64_t i = 0; i < std::min<int64_t>(3, r.shown_src.size(0)); i++)
        std::printf("  src: %s\n  out: %s\n", join(r.shown_src, i).c_str(), join(r.shown_out, i).c_str());
    if (!r.misses.empty()) std::printf("mistakes (first %zu):\n", r.misses.size());
    for (const std::string& m : r.misses) std::printf("%s\n", m.c_str());
    std::printf("exact match: %d/%d (%.1f%%)\n", r.correct, r.total, 100.0 * r.correct / r.total);
    const double tokens = static_cast<double>(r.total) * (r.shown_src.size(1) - 1);   // generated: all but the start symbol
    std::printf("decoding: %.3f s, %.0f tokens/s, %lld decoder positions (%s)\n", r.seconds, tokens / r.seconds,
                (long long)r.decoder_positions, r.kv_cache ? "key/value cache" : "recomputing the prefix: --no-kv-cache or --reference");
}

void decode_file(models::Seq2Seq& model, const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw std::runtime_error("--decode '" + path + "' is a folder: give a file of id lines");
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read '" + path + "': " + std::strerror(errno));
    model.eval();
    std::string line;
    for (int lineno = 1; std::getline(in, line); lineno++) {
        std::istringstream is(line);
        std::vector<int32_t> ids;
        const std::string where = path + ":" + std::to_string(lineno) + ": ";
        // word by word, each whole: ">> int" would stop quietly at "7-" or at a number past int32_t
        for (std::string word; is >> word;) {
            if (word.find_first_not_of("0123456789") != std::string::npos)
                throw std::runtime_error(where + "expected token ids separated by spaces, got '" + word + "'");
            if (word.size() > 9 || std::stoll(word) >= model.tgt_vocab())
                throw std::runtime_error(where + "id " + word + " is not a symbol of this model (0.." +
                                         std::to_string(model.tgt_vocab() - 1) + ")");
            ids.push_back(static_cast<int32_t>(std::stoll(word)));
        }
        if (ids.empty()) {   // a blank line stays a blank line: output line k answers input line k
            std::printf("\n");
            continue;
        }
        if (static_cast<int64_t>(ids.size()) > model.max_len())
            throw std::runtime_error(where + std::to_string(ids.size()) + " ids, more than the model reads (" +
                                     std::to_string(model.max_len()) + ")");
        const Tokens src(ids, {1, static_cast<int64_t>(ids.size())});   // (1, S)
        std::printf("%s\n", join(decode(model, src, 0, true), 0).c_str());
    }
}

}  // namespace eval
