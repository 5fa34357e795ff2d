// The translation example's data, from sentence pairs to training batches:
//
//   text pairs (toy grammar, or a TSV file split into train/valid/test)
//     -> words (tokenize, optionally lowercased)
//     -> subwords (with bpe > 0: byte-pair encoding learned from the training words of both
//        languages, one shared vocabulary; training pairs over max_len tokens dropped)
//     -> vocabularies (built from the training pairs)
//     -> id sequences: src = tokens <eos>, tgt = <bos> tokens <eos>
//     -> batches of similar length (length_batches), padded into a models::Batch (make_batch)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "examples/data/bpe.h"
#include "examples/data/tsv.h"
#include "examples/data/vocab.h"
#include "autograd/random.h"
#include "models/batch.h"
#include "models/checkpoint.h"

namespace data {

// How sentences become ids and back for one trained model. A translation checkpoint stores it
// beside the weights, so the model can translate on its own after --load.
struct TextCodec {
    Vocab src_vocab, tgt_vocab;   // the same vocabulary when subwords is on (joint BPE)
    bool lowercase = false;       // lowercase text before tokenizing
    int max_len = 50;             // longest sentence in tokens (training drops longer pairs)
    bool subwords = false;        // split words with bpe (else: a token is a word)
    Bpe bpe{};

    // Text -> the tokens the vocabulary holds: words, or subwords (with byte fallback).
    std::vector<std::string> tokenize(const std::string& text) const;
    std::vector<int32_t> encode_source(const std::vector<std::string>& tokens) const;   // tokens <eos>
    std::vector<int32_t> encode_target(const std::vector<std::string>& tokens) const;   // <bos> tokens <eos>
    std::string decode_target(const std::vector<int32_t>& ids) const;                  // detokenized text
};

// The codec as checkpoint metadata entries (models/checkpoint.h): "src_vocab" and "tgt_vocab"
// (each a JSON array of its tokens in id order), "lowercase", "max_len" and "bpe" (the merges,
// or null for a word-level model).
models::json::Object codec_to_json(const TextCodec& codec);
TextCodec read_codec(const nn::Metadata& metadata, const std::string& file);

// One sentence pair as ids.
struct Example {
    std::vector<int32_t> src, tgt;   // tokens <eos>; <bos> tokens <eos>
};

constexpr int kAutoMerges = -1;

// --bpe's default (kAutoMerges): a quarter of the distinct training words, between 500 and 32000.
int default_bpe_merges(size_t distinct_words);

// Without --valid and --test, each of the validation and test splits gets this share of --data's
// distinct source sentences (split_pairs rounds it: one of each needs 10 distinct sources).
inline constexpr double kHeldOutShare = 0.05;

// The smallest splits the example trains on. Fewer mean nothing: with no validation pair the
// "valid loss" is 0 and the first epoch is kept as the best, with no test pair the BLEU is 0, and
// a single training pair is memorised, not learned from.
inline constexpr size_t kMinTrainPairs = 2, kMinValidPairs = 1, kMinTestPairs = 1;

inline constexpr int kLongestMaxLen = 1000;   // the largest --max-len (the positions a model is built with follow it)

struct CorpusOptions {
    std::string data, valid, test;   // TSV files; data empty: the built-in toy corpus
    bool lowercase = false;
    int min_freq = 1;                // rarer training words become <unk>
    int max_len = 50;                // training pairs with more tokens are dropped
    int bpe = 0;                     // BPE merges learned jointly on both sides; 0: word level;
                                     // kAutoMerges: distinct training words / 4, in [500, 32000]
    uint64_t seed = 1;               // the toy corpus, and the split of --data
};

struct TranslationData {
    std::string name;              // "toy English->German grammar", or the --data path
    DataSplits text;               // the pairs as written; the test split is scored as text
    TextCodec codec;               // vocabularies built from the training pairs
    std::vector<Example> train, valid;
    size_t dropped = 0;            // training pairs over max_len tokens, or with an empty side
    Bpe::LearnStats bpe_stats;     // what learning the merges took (bpe > 0)
};

// Reads (or generates) the corpus and prepares it as above. TSV warnings (file:line: reason) go
// to stderr, for --valid and --test as for --data. Throws std::runtime_error before anything is
// learned when a split is smaller than the minimums above, e.g. for a one-pair --data:
//   "'one.tsv' has 1 sentence pair (1 distinct source sentence), split into train 1, valid 0,
//    test 0: too few to validate and test on. ... pass --valid FILE --test FILE, or use more data"
TranslationData load_translation_data(const CorpusOptions& o);

// Every validation and test sentence fits a model that reads at most max_len tokens (<bos> and
// <eos> included: models::Seq2Seq::max_len): the validation pairs on both sides, the test sources.
// Throws std::runtime_error naming the file and line of the first that does not, its length, and
// the flag that raises the limit. Training pairs over --max-len are dropped instead (dropped).
void check_eval_lengths(const TranslationData& d, const CorpusOptions& o, int64_t max_len);
// With batches of `batch` sentence pairs (--batch, when not batching by tokens): throws
// std::runtime_error, naming the corpus (o.data) and both counts, if the training split holds
// fewer pairs than one batch, so that every epoch would be the same single step.
void check_batch_fits(const TranslationData& d, const CorpusOptions& o, int batch);

// Batches of example indices, sorted by length so each batch holds sentences of about the same
// length: little padding, so little compute spent on it.
std::vector<std::vector<size_t>> length_batches(const std::vector<Example>& examples, int batch);

// Batches by token count (the paper's section 5.1: "approximately 25000 source tokens and 25000
// target tokens"): pairs of similar length, as many per batch as keep B x (longest source) and
// B x (longest target) at most max_tokens each, padding included (a pair longer than that gets a
// batch of its own). With an rng, pairs of equal length are shuffled first, so each call (each
// epoch) groups them differently, the same way for the same seed.
std::vector<std::vector<size_t>> token_batches(const std::vector<Example>& examples, int max_tokens,
                                               autograd::Rng* rng = nullptr);

// 0..n-1 in a fresh random order (Fisher-Yates): e.g. the order of the batches in one epoch.
std::vector<size_t> shuffled_indices(size_t n, autograd::Rng& rng);

// examples[idx...] padded with Vocab::PAD into one batch.
models::Batch make_batch(const std::vector<Example>& examples, const std::vector<size_t>& idx);

// What the corpus takes on the heap as the run holds it (payloads only, not malloc's own
// overhead), for --memory-report: "text 1.2 MB, ids 0.8 MB, batches 0.1 MB".
std::string corpus_bytes(const TranslationData& d, const std::vector<std::vector<size_t>>& batches);

}  // namespace data
