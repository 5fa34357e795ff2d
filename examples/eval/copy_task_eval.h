// What the copy task does with a trained model: count exact copies of fresh random sequences,
// and decode sequences read from a file (--decode, which tests/reference/make_reference.py uses
// to hold the C++ outputs to PyTorch's).
#pragma once
#include <string>
#include <vector>

#include "autograd/random.h"
#include "models/seq2seq.h"

namespace eval {

struct ExactMatch {
    int correct = 0, total = 0;
    autograd::Tokens shown_src, shown_out;   // the first sequences and their outputs, to print
    std::vector<std::string> misses;         // the first few wrong outputs, as printable lines
    double seconds = 0.0;                    // spent decoding
    bool kv_cache = true;                    // how: with the key/value cache, or recomputing
    int64_t decoder_positions = 0;           // the work: positions the decoder ran (models/decoding.h)
};

// How many sequences exact_match decodes in one batch.
constexpr int kSequencesDecodedTogether = 250;

// Greedy (beam == 0) or beam-search decoding of `count` fresh (count, L) sequences of symbols
// 1..V-1 drawn from rng, in batches; a sequence counts when the output equals its input exactly.
// kv_cache = false decodes by recomputing the whole prefix every step (models/decoding.h).
ExactMatch exact_match(models::Seq2Seq& model, autograd::Rng& rng, int64_t V, int64_t L, int count, int beam,
                       bool kv_cache = true);

// "examples (greedy decoding): src/out pairs, mistakes, exact match: 998/1000 (99.8%)", and the
// decoding time and tokens per second, on stdout.
void print_exact_match(const ExactMatch& r, int beam);

// Greedy-decode each line of `path` (source ids separated by spaces) and print only the outputs,
// one line each, a blank line for a blank line. Throws std::runtime_error naming the file and line
// of a malformed line, an id the model does not know, or a line longer than the model reads.
void decode_file(models::Seq2Seq& model, const std::string& path);

}  // namespace eval
