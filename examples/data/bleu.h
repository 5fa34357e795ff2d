// Corpus BLEU-4 with sacreBLEU's defaults: '13a' tokenization, case-sensitive, one reference per
// hypothesis, 'exp' smoothing. Written to reproduce `sacrebleu.corpus_bleu(hyps, [refs]).score`
// (sacreBLEU 2.x) step by step, as listed below.
//
//   BleuResult r = corpus_bleu({"the cat sat on the mat"}, {"the cat sat on the mat"});
//   r.score == 100
//
// How the score is made (Papineni et al. 2002, as sacreBLEU computes it):
//   1. tokenize every line with tokenize_13a() and split it on whitespace.
//   2. for n = 1..4, over the whole corpus: correct[n] = sum of clipped n-gram matches (an n-gram
//      counts at most as often as it occurs in the reference), total[n] = hypothesis n-grams.
//   3. precision p_n = 100 * correct[n] / total[n]. If correct[n] == 0 but total[n] > 0, 'exp'
//      smoothing (mteval-v13a's) uses 100 / (2^k * total[n]) instead, k = 1, 2, ... for the 1st,
//      2nd, ... such order. If total[n] == 0 (every hypothesis shorter than n tokens) p_n = 0.
//   4. BP = 1 if c >= r, else exp(1 - r / c) (0 if c == 0); c, r = hypothesis, reference tokens.
//   5. score = BP * exp(mean of log p_n); a p_n of 0 gives a score of 0. No matching unigram at
//      all also gives 0.
// So a corpus with at least one 4-gram position but no matching 4-gram does NOT score 0: it is
// smoothed. It scores 0 only when nothing matches, or when no hypothesis has 4 tokens.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace data {

struct BleuResult {
    double score = 0;                  // 0..100
    double precisions[4] = {0, 0, 0, 0};  // p_1..p_4 in percent, after smoothing
    double bp = 0;                     // brevity penalty
    size_t sys_len = 0, ref_len = 0;   // tokens in all hypotheses / all references
    size_t correct[4] = {0, 0, 0, 0};  // clipped n-gram matches, n = 1..4
    size_t total[4] = {0, 0, 0, 0};    // hypothesis n-grams, n = 1..4
};

// sacreBLEU's default tokenizer ('13a', the one of mteval-v13a.pl), returning the tokens joined
// by single spaces:
//   1. drop trailing whitespace; remove "<skipped>"; join "-\n" line breaks; "\n" -> " ";
//      unescape &quot; &amp; &lt; &gt; (in that order).
//   2. put spaces around every ASCII symbol except ' , - . (so _ / @ # $ % & are split too).
//   3. split '.' and ',' off, unless they sit between two digits ("3.5", "1,000" stay whole).
//   4. split '-' off after a digit ("1990-2000" -> "1990 - 2000"; "well-known" stays).
//   5. collapse whitespace (any Unicode whitespace, as Python's str.split()).
// Case and apostrophes are kept: "It's 3.5 km." -> "It's 3.5 km ."
std::string tokenize_13a(std::string_view line);

struct BleuOptions {
    bool lowercase = false;   // sacreBLEU's -lc: lowercase hypotheses and references first
};

// Corpus BLEU of hypotheses[i] against references[i]: pass the references as written (raw
// text), as sacreBLEU expects; its 13a tokenizer does the splitting. Throws
// std::invalid_argument if the two lists differ in size.
BleuResult corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                       const BleuOptions& opt = {});

// sacreBLEU's signature for the score above, which says exactly which BLEU it is:
// "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" ("case:lc" when lowercased).
std::string bleu_signature(const BleuOptions& opt = {});

// sacreBLEU-style one-liner:
// "BLEU = 32.16 83.3/60.0/25.0/16.7 (BP = 0.846 ratio = 0.857 hyp_len = 6 ref_len = 7)"
std::string to_string(const BleuResult& r);

}  // namespace data
