#include "examples/eval/translation_eval.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "examples/common/heatmap_terminal.h"
#include "examples/common/memory_budget.h"
#include "examples/common/svg.h"
#include "autograd/io/utf8.h"
#include "examples/data/tokenizer.h"
#include "models/decoding.h"
#include "models/rnn_seq2seq.h"
#include "models/transformer.h"
#include "nn/nn.h"

namespace eval {

using autograd::Mask;
using autograd::Tensor;
using autograd::Tokens;
using data::Vocab;

double mean_loss(models::Seq2Seq& model, const std::vector<data::Example>& examples, int batch, int batch_tokens) {
    autograd::NoGradGuard no_grad;
    model.eval();
    double total = 0.0;
    int64_t tokens = 0;
    const auto batches = batch_tokens > 0 ? data::token_batches(examples, batch_tokens) : data::length_batches(examples, batch);
    for (const auto& idx : batches) {
        const models::Batch b = data::make_batch(examples, idx);
        total += model.loss(b, {.ignore_index = Vocab::PAD}).item() * b.ntokens;   // cross_entropy of the (B, T, V) logits
        tokens += b.ntokens;
    }
    return tokens ? total / tokens : 0.0;
}

std::vector<std::vector<size_t>> decoding_batches(const std::vector<std::vector<int32_t>>& srcs, int beam) {
    // A batch of 100 sentences of 64 tokens: the score matrices a batch may hold, per head and layer.
    constexpr int64_t kScoreBudget = 100 * 64 * 64;
    const size_t most = beam > 0 ? 50 : 100;
    std::vector<size_t> order(srcs.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return srcs[a].size() < srcs[b].size(); });
    std::vector<std::vector<size_t>> batches;
    for (size_t i : order) {   // shortest first, so sentence i is the longest of the batch it joins
        const int64_t S = std::max<int64_t>(1, static_cast<int64_t>(srcs[i].size()));
        // rows x S x S scores in the encoder's self-attention, each sentence beam times in the decoder's
        const int64_t rows = static_cast<int64_t>(batches.empty() ? 0 : batches.back().size()) + 1;
        if (batches.empty() || batches.back().size() == most || rows * S * S * std::max(beam, 1) > kScoreBudget) batches.emplace_back();
        batches.back().push_back(i);
    }
    return batches;
}

std::vector<std::vector<int32_t>> translate_ids(models::Seq2Seq& model, const std::vector<std::vector<int32_t>>& srcs,
                                                int beam, int64_t max_len, bool kv_cache, int64_t* positions,
                                                const models::SampleOptions* sample) {
    if (sample && beam > 0) throw std::invalid_argument("translate_ids: sampling or a beam, not both");
    model.eval();
    std::vector<std::vector<int32_t>> out(srcs.size());
    autograd::Rng draws(sample ? sample->seed : 0);   // sampling: a seed for each batch
    const std::vector<std::vector<size_t>> batches = decoding_batches(srcs, beam);
    int64_t peak = 0;   // memory before it is spent: the largest batch's decoding, from the shapes
    for (const auto& idx : batches) {
        size_t S = 1;
        for (size_t i : idx) S = std::max(S, srcs[i].size());
        peak = std::max(peak, common::decoding_peak_bytes(model, static_cast<int64_t>(idx.size()), static_cast<int64_t>(S), max_len,
                                                          beam, kv_cache));
    }
    common::check_memory(peak, "decoding " + std::to_string(srcs.size()) + " sentences", "--beam, or translate shorter sentences");
    for (const auto& idx : batches) {   // out[] keeps the input order
        std::vector<std::vector<int32_t>> rows;
        for (size_t i : idx) rows.push_back(srcs[i]);
        const Tokens src = models::pad_rows(rows, Vocab::PAD);   // (B, S)
        const Mask src_mask = models::padding_mask(src, Vocab::PAD);
        if (beam > 0) {
            const std::vector<models::Hypothesis> best = models::beam_search_batch(
                model, src, src_mask,
                {.beam_size = beam, .max_len = max_len, .bos = Vocab::BOS, .eos = Vocab::EOS, .length_penalty = 0.6f, .kv_cache = kv_cache,
                 .positions = positions});
            for (size_t r = 0; r < idx.size(); r++) out[idx[r]] = best[r].tokens;
            continue;
        }
        // sampling: sample's temperature, top_k and top_p, and this batch's seed drawn from `draws`
        const Tokens ys = sample ? models::sample_decode(model, src, src_mask,
                                                         {.max_len = max_len, .bos = Vocab::BOS, .eos = Vocab::EOS, .pad = Vocab::PAD,
                                                          .temperature = sample->temperature, .top_k = sample->top_k,
                                                          .top_p = sample->top_p, .rng = &draws, .kv_cache = kv_cache,
                                                          .positions = positions})
                                 : models::greedy_decode_counted(model, src, src_mask,
                                                                 {.max_len = max_len, .bos = Vocab::BOS, .eos = Vocab::EOS, .pad = Vocab::PAD},
                                                                 kv_cache, positions);
        const int64_t L = ys.size(1);
        for (size_t r = 0; r < idx.size(); r++) {
            out[idx[r]].assign(ys.data.begin() + r * L, ys.data.begin() + (r + 1) * L);
            while (out[idx[r]].size() > 1 && out[idx[r]].back() == Vocab::PAD) out[idx[r]].pop_back();   // a shorter row's padding
        }
    }
    return out;
}

namespace {

// One teacher-forced pass over the chosen output refreshes the model's attention weights: a
// Transformer's src_attn of every decoder layer, one heatmap per (layer, head), the last layer's
// mean over heads to stderr; a recurrent model's soft attention, one heatmap. Rows are the output
// tokens (row t: the token predicted there), columns the source tokens.
void draw_attention(models::Seq2Seq& model, const data::TextCodec& codec, const std::string& text,
                    const std::vector<int32_t>& src_ids, const std::vector<int32_t>& out, const std::string& path) {
    autograd::NoGradGuard no_grad;
    const int64_t S = static_cast<int64_t>(src_ids.size()), T = static_cast<int64_t>(out.size()) - 1;
    const Tokens src(src_ids, {1, S}), ys(std::vector<int32_t>(out.begin(), out.end() - 1), {1, T});
    const Mask src_mask = models::padding_mask(src, Vocab::PAD);
    model.keep_attention_weights(true);
    model.logits(src, ys, src_mask, models::subsequent_mask(T));
    model.keep_attention_weights(false);
    std::vector<std::string> cols, rows;
    for (int32_t id : src_ids) cols.push_back(codec.src_vocab.token(id));
    for (int64_t t = 1; t <= T; t++) rows.push_back(codec.tgt_vocab.token(out[t]));
    std::vector<common::Heatmap> maps;
    common::Heatmap shown{"last layer, mean over heads", rows, cols, std::vector<float>(T * S, 0.0f)};
    int64_t H = 1;
    std::string what;
    if (auto* rnn = dynamic_cast<models::RNNSeq2Seq*>(&model)) {
        if (!rnn->attention) throw std::runtime_error("--attention: this model has no attention to draw (" + rnn->cfg.describe() + ")");
        shown.title = std::string(nn::score_name(rnn->cfg.score)) + " attention";
        shown.values = rnn->last_attention.to_vector();   // (1, T, S)
        maps.push_back(shown);
        what = "1 heatmap";
    } else {
        auto& transformer = dynamic_cast<models::Transformer&>(model);
        const auto& layers = *transformer.decoder->layers;
        H = layers[0].src_attn->heads;
        for (size_t l = 0; l < layers.size(); l++) {
            const Tensor& w = layers[l].src_attn->last_attention;   // (1, H, T, S)
            for (int64_t h = 0; h < H; h++) {
                common::Heatmap m{"layer " + std::to_string(l + 1) + ", head " + std::to_string(h + 1), rows, cols, {}};
                m.values.assign(w.data() + h * T * S, w.data() + (h + 1) * T * S);
                if (l + 1 == layers.size())
                    for (int64_t i = 0; i < T * S; i++) shown.values[i] += m.values[i] / static_cast<float>(H);
                maps.push_back(std::move(m));
            }
        }
        what = std::to_string(maps.size()) + " heatmaps: " + std::to_string(layers.size()) + " layers x " + std::to_string(H) + " heads";
    }
    common::write_heatmaps(path, "Encoder-decoder attention: \"" + text + "\"", maps, static_cast<int>(H));
    std::fprintf(stderr, "%s", common::terminal_heatmap(shown, isatty(2)).c_str());
    std::fprintf(stderr, "wrote %s (%s)\n", path.c_str(), what.c_str());
}

}  // namespace

void check_sentence(const data::TextCodec& codec, int64_t max_len, const std::string& text, const std::string& where) {
    for (size_t at = 0; at < text.size();) {
        const autograd::io::Utf8Char c = autograd::io::decode_utf8(text, at);
        if (!c.valid) {
            char byte[8];
            std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(text[at]));
            throw std::runtime_error(where + ": invalid UTF-8 at byte " + std::to_string(at) + " (" + byte + "): the text must be UTF-8");
        }
        at += c.len;
    }
    const int64_t n = static_cast<int64_t>(codec.tokenize(text).size());
    if (n + 1 > max_len)   // + <eos>
        throw std::runtime_error(where + ": " + std::to_string(n) + " tokens, more than the model reads (" + std::to_string(max_len - 1) +
                                 "): split the sentence");
}

std::vector<std::string> translate(models::Seq2Seq& model, const data::TextCodec& codec, const std::vector<std::string>& texts,
                                   int beam, bool kv_cache, const std::string& attention_svg, int64_t* positions,
                                   const models::SampleOptions* sample) {
    std::vector<std::vector<int32_t>> srcs;
    for (const std::string& text : texts) srcs.push_back(codec.encode_source(codec.tokenize(text)));
    const std::vector<std::vector<int32_t>> outs = translate_ids(model, srcs, beam, codec.max_len + 2, kv_cache, positions, sample);
    if (!attention_svg.empty() && !texts.empty()) draw_attention(model, codec, texts[0], srcs[0], outs[0], attention_svg);
    std::vector<std::string> translations;
    for (const auto& ids : outs) translations.push_back(codec.decode_target(ids));
    return translations;
}

std::string describe(const std::vector<LengthBucket>& buckets) {
    std::string s;
    for (const LengthBucket& b : buckets) {
        char one[96];
        if (b.hi < 0) std::snprintf(one, sizeof one, "%s%d+ words %.1f (%lld)", s.empty() ? "" : ", ", b.lo, b.bleu, (long long)b.count);
        else std::snprintf(one, sizeof one, "%s%d-%d words %.1f (%lld)", s.empty() ? "" : ", ", b.lo, b.hi, b.bleu, (long long)b.count);
        s += one;
    }
    return s;
}

Score score(models::Seq2Seq& model, const data::TextCodec& codec, const std::vector<data::Pair>& pairs, int beam,
            bool bleu_lowercase, bool kv_cache, const models::SampleOptions* sample) {
    std::vector<std::vector<int32_t>> srcs;
    std::vector<std::string> refs;
    for (const data::Pair& p : pairs) {
        srcs.push_back(codec.encode_source(codec.tokenize(p.src)));
        refs.push_back(p.tgt);
    }
    const auto normalized = [&](const std::string& line) {
        return data::tokenize_13a(bleu_lowercase ? data::to_lower_utf8(line) : line);
    };
    Score s;
    for (const auto& ids : translate_ids(model, srcs, beam, codec.max_len + 2, kv_cache, &s.decoder_positions, sample)) {
        s.hypotheses.push_back(codec.decode_target(ids));
        s.exact += normalized(s.hypotheses.back()) == normalized(refs[s.hypotheses.size() - 1]);
    }
    s.exact = pairs.empty() ? 0.0 : 100.0 * s.exact / pairs.size();
    s.bleu = data::corpus_bleu(s.hypotheses, refs, {.lowercase = bleu_lowercase});
    for (const auto& [lo, hi] : {std::pair{1, 5}, {6, 10}, {11, 15}, {16, 20}, {21, 30}, {31, -1}}) {
        std::vector<std::string> hyps, bucket_refs;
        for (size_t i = 0; i < pairs.size(); i++) {
            const int words = static_cast<int>(codec.tokenize(pairs[i].src).size());
            if (words >= lo && (hi < 0 || words <= hi)) hyps.push_back(s.hypotheses[i]), bucket_refs.push_back(refs[i]);
        }
        if (!hyps.empty())
            s.by_length.push_back({lo, hi, static_cast<int64_t>(hyps.size()),
                                   data::corpus_bleu(hyps, bucket_refs, {.lowercase = bleu_lowercase}).score});
    }
    return s;
}

}  // namespace eval
