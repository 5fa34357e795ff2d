// What the translation example does with a trained model: its loss on a set of pairs,
// translations (greedy, beam search or sampling, in length-sorted batches), BLEU and exact match against
// reference translations, and the encoder-decoder attention of one translation as heatmaps.
#pragma once
#include <string>
#include <vector>

#include "examples/data/bleu.h"
#include "examples/data/translation_data.h"
#include "models/decoding.h"
#include "models/seq2seq.h"

namespace eval {

// Mean cross-entropy per target token (no label smoothing) over `examples`, in eval mode, in
// batches of similar length: of about batch_tokens tokens, or (batch_tokens 0) of `batch` pairs.
double mean_loss(models::Seq2Seq& model, const std::vector<data::Example>& examples, int batch, int batch_tokens = 0);

// The batches translate_ids decodes, as indices into srcs: sentences of similar length together
// (little padding), at most 100 (beam search: 50), and fewer when they are long, so that a batch's
// attention scores, rows x S x S per head (x beam), stay within those of 100 sentences of 64
// tokens: a test set with a few sentences of hundreds of tokens decodes in the memory of a short
// one (one sentence of 512 tokens is a batch alone).
std::vector<std::vector<size_t>> decoding_batches(const std::vector<std::vector<int32_t>>& srcs, int beam);

// Source id sequences -> output id sequences (<bos> ... [<eos>]), at most max_len ids each, in
// the input order: greedy (beam == 0) or beam search, in batches of sentences of similar length.
// kv_cache = false decodes by recomputing the whole prefix every step (models/decoding.h); with
// `positions`, the decoder's work is added to it (the positions it ran, models/decoding.h).
// With `sample` (beam must be 0), each token is drawn instead (models::sample_decode) with its
// temperature, top_k and top_p; each batch draws a seed from a generator seeded with its seed, so
// the same sentences and seed give the same translations.
std::vector<std::vector<int32_t>> translate_ids(models::Seq2Seq& model, const std::vector<std::vector<int32_t>>& srcs,
                                                int beam, int64_t max_len, bool kv_cache = true, int64_t* positions = nullptr,
                                                const models::SampleOptions* sample = nullptr);

// A sentence given to translate (--translate, a --stdin line), checked before any is translated:
// it is valid UTF-8 and fits a model that reads max_len tokens (models::Seq2Seq::max_len), else
// std::runtime_error naming `where` ("--stdin line 3") and the first bad byte's offset, or the
// sentence's token count and the limit.
void check_sentence(const data::TextCodec& codec, int64_t max_len, const std::string& text, const std::string& where);

// Sentences, text to text, translated in batches as translate_ids does. With an attention_svg
// path, also draws the encoder-decoder attention of every layer and head while the model writes
// the first translation: all of them to that SVG file, and the last layer's mean over heads on
// stderr (in colour on a terminal).
std::vector<std::string> translate(models::Seq2Seq& model, const data::TextCodec& codec, const std::vector<std::string>& texts,
                                   int beam, bool kv_cache = true, const std::string& attention_svg = "",
                                   int64_t* positions = nullptr, const models::SampleOptions* sample = nullptr);

// BLEU of the sentences whose source has lo..hi words (Bahdanau et al.'s Figure 2 in miniature:
// how a model holds up as sentences grow).
struct LengthBucket {
    int lo, hi;       // words of the source, hi = -1: no upper end
    int64_t count;    // sentences in it
    double bleu;      // corpus BLEU over them
};

// "1-5 words 97.1 (120), 6-10 words 95.0 (310), ...": BLEU and sentence count of each bucket.
std::string describe(const std::vector<LengthBucket>& buckets);

struct Score {
    data::BleuResult bleu;
    std::vector<LengthBucket> by_length;   // 1-5, 6-10, 11-15, 16-20, 21-30 and 31+ source words; empty ones left out
    double exact = 0.0;                    // % of hypotheses equal to their reference (as 13a tokens)
    std::vector<std::string> hypotheses;   // the model's translations, detokenized
    int64_t decoder_positions = 0;         // the decoding's work: positions the decoder ran
};

// BLEU as sacreBLEU computes it: hypotheses (detokenized model output) against the references as
// written in the data, case-sensitive unless bleu_lowercase. Exact match compares the same 13a
// token sequences, so it does not depend on spacing either. by_length splits the BLEU by the
// sources' lengths in words. `sample`: as in translate_ids.
Score score(models::Seq2Seq& model, const data::TextCodec& codec, const std::vector<data::Pair>& pairs, int beam,
            bool bleu_lowercase, bool kv_cache = true, const models::SampleOptions* sample = nullptr);

}  // namespace eval
