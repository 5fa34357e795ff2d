#include "examples/data/translation_data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "autograd/runtime.h"
#include "examples/common/memory_report.h"
#include "examples/data/tokenizer.h"
#include "examples/data/toy_grammar.h"

namespace data {

std::vector<std::string> TextCodec::tokenize(const std::string& text) const {
    std::vector<std::string> words = data::tokenize(text, lowercase);
    return subwords ? to_vocab_tokens(bpe.encode(words), src_vocab) : words;
}
std::vector<int32_t> TextCodec::encode_source(const std::vector<std::string>& tokens) const { return src_vocab.encode(tokens, false, true); }
std::vector<int32_t> TextCodec::encode_target(const std::vector<std::string>& tokens) const { return tgt_vocab.encode(tokens, true, true); }
std::string TextCodec::decode_target(const std::vector<int32_t>& ids) const {
    const std::vector<std::string> tokens = tgt_vocab.decode(ids);
    return detokenize(subwords ? Bpe::decode(tokens) : tokens);
}

models::json::Object codec_to_json(const TextCodec& codec) {
    return {{"src_vocab", codec.src_vocab.to_json()}, {"tgt_vocab", codec.tgt_vocab.to_json()},
            {"lowercase", codec.lowercase}, {"max_len", codec.max_len},
            {"bpe", codec.subwords ? codec.bpe.to_json() : models::json::Value()}};
}

TextCodec read_codec(const nn::Metadata& metadata, const std::string& file) {
    TextCodec c;
    c.src_vocab = models::read_metadata(metadata, "src_vocab", file, Vocab::from_json);
    c.tgt_vocab = models::read_metadata(metadata, "tgt_vocab", file, Vocab::from_json);
    c.lowercase = models::read_metadata(metadata, "lowercase", file, [](const models::json::Value& v) { return v.as_bool(); });
    c.max_len = models::read_metadata(metadata, "max_len", file, [](const models::json::Value& v) {
        const int64_t n = models::integer_from_json(v);
        if (n < 1 || n > 1000) throw std::runtime_error("expected 1..1000 (as --max-len), got " + std::to_string(n));
        return static_cast<int>(n);
    });
    const models::json::Value bpe = models::metadata_json(metadata, "bpe", file);
    if (!bpe.is_null()) {
        c.subwords = true;
        c.bpe = models::read_metadata(metadata, "bpe", file, Bpe::from_json);
        if (!(c.src_vocab == c.tgt_vocab)) throw std::runtime_error("'" + file + "': a subword model has one vocabulary for both sides");
        for (const std::string& t : fallback_tokens())
            if (!c.src_vocab.contains(t)) throw std::runtime_error("'" + file + "': the subword vocabulary lacks the token '" + t + "'");
    }
    return c;
}

namespace {

// How messages name the corpus: the --data file, or the built-in one.
std::string corpus_name(const CorpusOptions& o) { return o.data.empty() ? "the toy corpus" : "'" + o.data + "'"; }

std::string plural(size_t n, const std::string& word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

// Reads one TSV file; its warnings go to stderr, each as "file:line: reason".
TsvResult read_tsv_with_warnings(const std::string& path) {
    TsvResult r = read_tsv(path);
    for (const std::string& w : r.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    if (r.skipped) std::fprintf(stderr, "%s: skipped %zu malformed line(s)\n", path.c_str(), r.skipped);
    return r;
}

// --data split into train/valid/test: refused when valid or test comes out empty.
DataSplits split_data(const std::vector<Pair>& pairs, const CorpusOptions& o) {
    DataSplits s = split_pairs(pairs, o.seed, kHeldOutShare, kHeldOutShare);
    if (s.valid.size() >= kMinValidPairs && s.test.size() >= kMinTestPairs) return s;
    std::unordered_set<std::string> sources;
    for (const Pair& p : pairs) sources.insert(p.src);
    size_t need = 1;                                          // fewest distinct sources that give one of each
    while (std::llround(kHeldOutShare * static_cast<double>(need)) < 1) need++;
    throw std::runtime_error(
        corpus_name(o) + " has " + plural(pairs.size(), "sentence pair") + " (" +
        plural(sources.size(), "distinct source sentence") + "), split into train " + std::to_string(s.train.size()) +
        ", valid " + std::to_string(s.valid.size()) + ", test " + std::to_string(s.test.size()) +
        ": too few to validate and test on. Valid and test each get " +
        std::to_string(std::lround(kHeldOutShare * 100)) + "% of the distinct source sentences, so the file needs at least " +
        std::to_string(need) + " of them; pass --valid FILE --test FILE, or use more data");
}

// The toy corpus, or --data split into train/valid/test (or --valid and --test given apart).
DataSplits read_pairs(const CorpusOptions& o) {
    if (o.data.empty()) return make_toy_corpus(o.seed);
    if (o.valid.empty() != o.test.empty()) throw std::runtime_error("--valid and --test go together");
    const TsvResult r = read_tsv_with_warnings(o.data);
    if (o.valid.empty()) return split_data(r.pairs, o);
    return {r.pairs, read_tsv_with_warnings(o.valid).pairs, read_tsv_with_warnings(o.test).pairs};
}

}  // namespace

static TranslationData read_and_encode(const CorpusOptions& o) {
    TranslationData d;
    d.name = o.data.empty() ? "toy English->German grammar" : o.data;
    d.text = read_pairs(o);
    d.codec.lowercase = o.lowercase;
    d.codec.max_len = o.max_len;

    // 1) words of the training pairs; drop pairs with an empty side
    std::vector<std::vector<std::string>> src_tokens, tgt_tokens;
    for (const Pair& p : d.text.train) {
        auto s = data::tokenize(p.src, o.lowercase), t = data::tokenize(p.tgt, o.lowercase);
        if (s.empty() || t.empty()) {
            d.dropped++;
            continue;
        }
        src_tokens.push_back(std::move(s));
        tgt_tokens.push_back(std::move(t));
    }

    // 2) subwords: merges learned from the words of both sides together (one vocabulary, so
    //    the same name is spelled the same way in both languages and the embeddings can be shared)
    if (o.bpe > 0 || o.bpe == kAutoMerges) {
        std::unordered_map<std::string, int64_t> counts;
        for (const auto* side : {&src_tokens, &tgt_tokens})
            for (const auto& sentence : *side)
                for (const std::string& w : sentence) counts[w]++;
        d.codec.subwords = true;
        const int merges = o.bpe != kAutoMerges ? o.bpe : default_bpe_merges(counts.size());
        d.codec.bpe = Bpe::learn(counts, merges, &d.bpe_stats);
        for (auto* side : {&src_tokens, &tgt_tokens})
            for (auto& sentence : *side) sentence = d.codec.bpe.encode(sentence);
    }

    // 3) drop the pairs over max_len tokens (as the model sees them)
    size_t kept = 0;
    for (size_t i = 0; i < src_tokens.size(); i++) {
        if (static_cast<int>(std::max(src_tokens[i].size(), tgt_tokens[i].size())) > o.max_len) {
            d.dropped++;
            continue;
        }
        if (kept != i) {   // (a vector moved into itself would be left empty)
            src_tokens[kept] = std::move(src_tokens[i]);
            tgt_tokens[kept] = std::move(tgt_tokens[i]);
        }
        kept++;
    }
    src_tokens.resize(kept);
    tgt_tokens.resize(kept);
    if (kept < kMinTrainPairs) {
        std::string what = corpus_name(o) + ": " + plural(kept, "training pair");
        if (d.dropped)
            what += " left of " + std::to_string(d.text.train.size()) + " (" + std::to_string(d.dropped) +
                    " dropped: over --max-len " + std::to_string(o.max_len) + " tokens, or no token on a side)";
        throw std::runtime_error(what + "; at least " + std::to_string(kMinTrainPairs) + " are needed: " +
                                 (d.dropped ? "raise --max-len, or use more data" : "use more data"));
    }

    // 4) vocabularies from the training pairs, then every pair as ids. A subword vocabulary is
    //    shared by both sides and holds the byte tokens, so any text can be encoded.
    if (d.codec.subwords) {
        std::unordered_map<std::string, size_t> counts;   // over both sides, without copying them into one list
        for (const auto* side : {&src_tokens, &tgt_tokens})
            for (const auto& sentence : *side)
                for (const std::string& t : sentence) counts[t]++;
        const Vocab seen = Vocab::from_counts(counts, o.min_freq);
        autograd::io::json::Array tokens(seen.tokens().begin(), seen.tokens().end());
        for (const std::string& t : fallback_tokens())
            if (!seen.contains(t)) tokens.push_back(t);
        d.codec.src_vocab = d.codec.tgt_vocab = Vocab::from_json(tokens);
        for (auto* side : {&src_tokens, &tgt_tokens})
            for (auto& sentence : *side) sentence = to_vocab_tokens(sentence, d.codec.src_vocab);
    } else {
        d.codec.src_vocab = Vocab::build(src_tokens, o.min_freq);
        d.codec.tgt_vocab = Vocab::build(tgt_tokens, o.min_freq);
        // a vocabulary of the specials alone would train on <unk> only, and learn nothing
        for (const auto& [side, vocab] : {std::pair{"source", &d.codec.src_vocab}, {"target", &d.codec.tgt_vocab}})
            if (vocab->size() <= static_cast<size_t>(Vocab::kNumSpecials))
                throw std::runtime_error(corpus_name(o) + ": --min-freq " + std::to_string(o.min_freq) + " keeps no " + side +
                                         " word (none occurs that often in training): every word would be <unk>; lower --min-freq");
    }
    for (size_t i = 0; i < src_tokens.size(); i++)
        d.train.push_back({d.codec.encode_source(src_tokens[i]), d.codec.encode_target(tgt_tokens[i])});
    for (const Pair& p : d.text.valid) {
        const auto s = d.codec.tokenize(p.src), t = d.codec.tokenize(p.tgt);
        if (!s.empty() && !t.empty()) d.valid.push_back({d.codec.encode_source(s), d.codec.encode_target(t)});
    }
    if (d.valid.size() < kMinValidPairs)   // every pair has a side of spaces only (U+3000, ...)
        throw std::runtime_error((o.valid.empty() ? corpus_name(o) : "'" + o.valid + "'") +
                                 ": no validation pair has a token on both sides (" +
                                 plural(d.text.valid.size(), "pair") + " read; a side of spaces only, such as "
                                 "U+3000, has none); pass a --valid FILE with text on both sides");
    return d;
}

TranslationData load_translation_data(const CorpusOptions& o) {
    TranslationData d = read_and_encode(o);
    // The pairs, their ids and the vocabularies were made between many short-lived objects (the
    // words, their counts, the cached segmentation of every word), all freed now: the heap is holes
    // between small blocks, pages the system cannot take back. Copied once more, one part after
    // the other, the data fills holes at the bottom, and the pages its old copies leave go back
    // at the next autograd::release_free_memory(): about 18 MB of RSS on 47,000 real pairs
    // (bench/RESULTS.md, "The 200 MB goal met").
    d.codec.bpe.clear_cache();
    auto repack = [](auto& data) {
        autograd::release_free_memory();   // (which also merges malloc's small free blocks, so that a copy fills them)
        auto copy = data;
        data = std::move(copy);
    };
    repack(d.train);
    repack(d.valid);
    repack(d.text);
    repack(d.codec);
    return d;
}

int default_bpe_merges(size_t distinct_words) {
    return static_cast<int>(std::clamp<size_t>(distinct_words / 4, 500, 32000));
}

void check_eval_lengths(const TranslationData& d, const CorpusOptions& o, int64_t max_len) {
    auto check = [&](const std::vector<Pair>& split, const std::string& file, bool targets) {
        for (const Pair& p : split)
            for (const auto& [side, text, extra] : {std::tuple{"source", &p.src, 1}, {"target", &p.tgt, 2}}) {   // + <eos>; <bos> <eos>
                if (!targets && extra == 2) continue;
                const int64_t n = static_cast<int64_t>(d.codec.tokenize(*text).size());
                if (n + extra <= max_len) continue;
                const std::string where = file.empty() ? "the toy corpus" : "'" + file + "'";
                const std::string fix = n <= kLongestMaxLen ? "raise --max-len to " + std::to_string(n) +
                                                              " (up to 1000; it keeps training pairs that long too), or shorten that line"
                                                        : "shorten that line (--max-len reaches 1000 at most)";
                throw std::runtime_error(where + ":" + std::to_string(p.line) + ": the " + side + " has " + std::to_string(n) +
                                         " tokens, more than the model's positions hold (" + std::to_string(max_len - extra) +
                                         "): " + fix);
            }
    };
    check(d.text.valid, o.valid.empty() ? o.data : o.valid, true);    // the validation loss reads both sides
    check(d.text.test, o.test.empty() ? o.data : o.test, false);      // the test decodes the sources
}

void check_batch_fits(const TranslationData& d, const CorpusOptions& o, int batch) {
    if (d.train.size() >= static_cast<size_t>(batch)) return;
    throw std::runtime_error(corpus_name(o) + ": the training split has " + plural(d.train.size(), "pair") +
                             ", fewer than one batch (--batch " + std::to_string(batch) +
                             "): every epoch would be the same single step. Pass --batch " +
                             std::to_string(d.train.size()) + " or less, or use more data");
}

std::vector<std::vector<size_t>> length_batches(const std::vector<Example>& examples, int batch) {
    std::vector<size_t> order(examples.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return std::make_pair(examples[a].src.size(), examples[a].tgt.size()) <
               std::make_pair(examples[b].src.size(), examples[b].tgt.size());
    });
    std::vector<std::vector<size_t>> out;
    for (size_t i = 0; i < order.size(); i += batch)
        out.emplace_back(order.begin() + i, order.begin() + std::min(order.size(), i + batch));
    return out;
}

std::vector<std::vector<size_t>> token_batches(const std::vector<Example>& examples, int max_tokens, autograd::Rng* rng) {
    std::vector<size_t> order(examples.size());
    if (rng) order = shuffled_indices(examples.size(), *rng);
    else std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return std::make_pair(examples[a].src.size(), examples[a].tgt.size()) <
               std::make_pair(examples[b].src.size(), examples[b].tgt.size());
    });
    std::vector<std::vector<size_t>> out;
    size_t longest_src = 0, longest_tgt = 0;
    for (size_t i : order) {
        const size_t s = std::max(longest_src, examples[i].src.size()), t = std::max(longest_tgt, examples[i].tgt.size());
        const size_t b = out.empty() ? 0 : out.back().size() + 1;   // the batch's size with pair i in it
        if (out.empty() || b * std::max(s, t) > static_cast<size_t>(max_tokens)) {
            out.push_back({i});
            longest_src = examples[i].src.size();
            longest_tgt = examples[i].tgt.size();
        } else {
            out.back().push_back(i);
            longest_src = s;
            longest_tgt = t;
        }
    }
    return out;
}

std::vector<size_t> shuffled_indices(size_t n, autograd::Rng& rng) {
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    for (size_t i = n; i > 1; i--) std::swap(order[i - 1], order[rng.below(static_cast<uint32_t>(i))]);
    return order;
}

models::Batch make_batch(const std::vector<Example>& examples, const std::vector<size_t>& idx) {
    std::vector<std::vector<int32_t>> src, tgt;
    for (size_t i : idx) {
        src.push_back(examples[i].src);
        tgt.push_back(examples[i].tgt);
    }
    return models::make_batch(models::pad_rows(src, Vocab::PAD), models::pad_rows(tgt, Vocab::PAD), Vocab::PAD);
}

std::string corpus_bytes(const TranslationData& d, const std::vector<std::vector<size_t>>& batches) {
    auto text = [](const std::vector<Pair>& pairs) {
        double bytes = static_cast<double>(pairs.capacity() * sizeof(Pair));
        for (const Pair& p : pairs)
            for (const std::string* s : {&p.src, &p.tgt})
                if (s->capacity() > 15) bytes += static_cast<double>(s->capacity() + 1);   // longer than the inline buffer
        return bytes;
    };
    auto ids = [](const std::vector<Example>& examples) {
        double bytes = static_cast<double>(examples.capacity() * sizeof(Example));
        for (const Example& e : examples) bytes += static_cast<double>((e.src.capacity() + e.tgt.capacity()) * sizeof(int32_t));
        return bytes;
    };
    double batch_bytes = static_cast<double>(batches.capacity() * sizeof(batches[0]));
    for (const auto& b : batches) batch_bytes += static_cast<double>(b.capacity() * sizeof(size_t));
    return "text " + common::megabytes(text(d.text.train) + text(d.text.valid) + text(d.text.test)) + ", ids " +
           common::megabytes(ids(d.train) + ids(d.valid)) + ", batches " + common::megabytes(batch_bytes);
}

}  // namespace data
