#include "examples/eval/copy_task_eval.h"

#include <algorithm>
#include <cstdio>
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

// src (n, L) -> outputs (n, L): greedy in one batch, or beam search one sequence at a time.
Tokens decode(models::Transformer& model, const Tokens& src, int beam) {
    const int64_t n = src.size(0), L = src.size(1);
    if (beam == 0) return models::greedy_decode(model, src, models::padding_mask(src, COPY_PAD), {.max_len = L, .bos = COPY_START});
    Tokens out = Tokens::full({n, L}, COPY_PAD);
    for (int64_t i = 0; i < n; i++) {
        const Tokens one(std::vector<int32_t>(src.data.begin() + i * L, src.data.begin() + (i + 1) * L), {1, L});   // (1, L)
        const models::Hypothesis h =
            models::beam_search(model, one, models::padding_mask(one, COPY_PAD), {.beam_size = beam, .max_len = L, .bos = COPY_START});
        std::copy(h.tokens.begin(), h.tokens.end(), out.data.begin() + i * L);
    }
    return out;
}

}  // namespace

ExactMatch exact_match(models::Transformer& model, autograd::Rng& rng, int64_t V, int64_t L, int count, int beam) {
    model.eval();
    ExactMatch r;
    r.total = count;
    const int chunk = 250;   // sequences decoded together
    for (int done = 0; done < count; done += chunk) {
        const int64_t n = std::min(chunk, count - done);
        const Tokens src = data::random_sequences(rng, V, n, L);   // (n, L)
        const Tokens out = decode(model, src, beam);              // (n, L)
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
}

void decode_file(models::Transformer& model, const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read '" + path + "'");
    model.eval();
    std::string line;
    for (int lineno = 1; std::getline(in, line); lineno++) {
        std::istringstream is(line);
        std::vector<int32_t> ids;
        for (int32_t id; is >> id;) ids.push_back(id);
        if (!is.eof()) throw std::runtime_error(path + ":" + std::to_string(lineno) + ": expected token ids separated by spaces");
        if (ids.empty()) continue;
        const Tokens src(ids, {1, static_cast<int64_t>(ids.size())});   // (1, S)
        std::printf("%s\n", join(decode(model, src, 0), 0).c_str());
    }
}

}  // namespace eval
