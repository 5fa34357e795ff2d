#include "examples/eval/compare_eval.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <stdexcept>

#include "autograd/autograd.h"
#include "examples/data/copy_task_data.h"
#include "models/decoding.h"
#include "models/rnn_seq2seq.h"
#include "models/transformer.h"

namespace eval {

using autograd::Tokens;

// ---------------------------------------------------------------- the task

Task task_from_name(const std::string& name) {
    if (name == "copy") return Task::copy;
    if (name == "reverse") return Task::reverse;
    throw std::invalid_argument("unknown task '" + name + "' (copy or reverse)");
}

const char* task_name(Task task) { return task == Task::copy ? "copy" : "reverse"; }

models::Batch make_task_batch(Task task, autograd::Rng& rng, int64_t V, int64_t B, int64_t L) {
    return task == Task::copy ? data::make_copy_batch(rng, V, B, L) : data::make_reverse_batch(rng, V, B, L);
}

int64_t aligned_source_position(Task task, int64_t t, int64_t L) { return task == Task::copy ? t + 1 : L - 1 - t; }

// ---------------------------------------------------------------- the systems

const std::vector<std::string>& systems() {
    static const std::vector<std::string> all = {"rnn-sutskever", "rnn-sutskever-reversed", "rnn-cho",       "rnn-dot",
                                                 "rnn-general",   "rnn-cosine",             "rnn-additive",  "rnn-additive-reversed",
                                                 "transformer"};
    return all;
}

std::string system_names() {
    std::string s;
    for (const std::string& name : systems()) s += (s.empty() ? "" : ", ") + name;
    return s;
}

std::unique_ptr<models::Seq2Seq> make_system(const std::string& name, int64_t V) {
    // LSTM cells, E = Hd / 2, one layer a side, but for Cho et al.'s model, which is built with
    // the gated unit its paper introduced (the GRU): an LSTM there would start its memory c from 0
    // and hand the decoder only h, a handicap no paper had. (GRU cells, tried first everywhere,
    // showed in this budget neither the gain of reversing the source nor the difference between
    // attention's scores; the LSTM shows both.) Without attention the encoder reads one way, as in
    // both papers. With attention it reads both ways (Bahdanau et al.), but for the dot score, which
    // compares the decoder's state with the encoder's directly and so needs them equally wide (one
    // way, as Luong et al.'s encoder reads). The widths give every system about the same number of
    // parameters (the table prints the counts): the attention systems spend more of them on the
    // decoder, which reads [embed(y); C_i], and on the attention, and get a narrower state.
    auto rnn = [V](models::Context context, int64_t Hd) {
        return models::RNNSeq2SeqConfig{.src_vocab = V, .tgt_vocab = V, .embed = Hd / 2, .hidden = Hd, .cell = nn::CellKind::lstm,
                                        .context = context, .bidirectional = false, .dropout = 0.0f};
    };
    models::RNNSeq2SeqConfig c;
    if (name == "rnn-sutskever" || name == "rnn-sutskever-reversed") {
        c = rnn(models::Context::sutskever, 83);
        c.reverse_source = name == "rnn-sutskever-reversed";
    } else if (name == "rnn-cho") {
        c = rnn(models::Context::cho, 77);
        c.cell = nn::CellKind::gru;
    } else if (name == "rnn-dot") {
        c = rnn(models::Context::bahdanau, 70);
        c.score = nn::Score::dot;
    } else if (name == "rnn-general" || name == "rnn-cosine" || name == "rnn-additive" || name == "rnn-additive-reversed") {
        c = rnn(models::Context::bahdanau, 52);
        c.bidirectional = true;
        c.score = nn::score_from_name(name == "rnn-additive-reversed" ? "additive" : name.substr(4));
        c.reverse_source = name == "rnn-additive-reversed";
    } else if (name == "transformer") {
        return std::make_unique<models::Transformer>(models::TransformerConfig{
            .src_vocab = V, .tgt_vocab = V, .layers = 1, .d_model = 64, .d_ff = 128, .heads = 4, .dropout = 0.0f});
    } else {
        throw std::invalid_argument("unknown model '" + name + "' (" + system_names() + ")");
    }
    return std::make_unique<models::RNNSeq2Seq>(c);
}

// ---------------------------------------------------------------- the scores

SourceAttention source_attention(models::Seq2Seq& model) {
    if (auto* rnn = dynamic_cast<models::RNNSeq2Seq*>(&model)) {
        if (!rnn->attention) return {};
        const autograd::Tensor& a = rnn->last_attention;   // (B, T, S), over the encoder's positions
        SourceAttention out{a.to_vector(), {}};
        if (rnn->cfg.bidirectional) out.next_read = {-1, 1};
        else out.next_read = {rnn->cfg.reverse_source ? -1 : 1};
        if (rnn->cfg.reverse_source) {   // encoder position j read source position S-1-j
            const int64_t rows = a.size(0) * a.size(1), S = a.size(2);
            for (int64_t r = 0; r < rows; r++) std::reverse(out.weights.begin() + r * S, out.weights.begin() + (r + 1) * S);
        }
        return out;
    }
    auto* transformer = dynamic_cast<models::Transformer*>(&model);
    if (!transformer) return {};
    const auto& layers = *transformer->decoder->layers;
    const autograd::Tensor& a = layers[layers.size() - 1].src_attn->last_attention;   // (B, H, T, S)
    const int64_t B = a.size(0), H = a.size(1), TS = a.size(2) * a.size(3);
    SourceAttention out{std::vector<float>(B * TS, 0.0f), {}};   // (B, T, S)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < TS; i++) out.weights[b * TS + i] += a.data()[(b * H + h) * TS + i] / static_cast<float>(H);
    return out;
}

int64_t aligned_rows(const SourceAttention& a, int64_t B, int64_t T, int64_t S, Task task) {
    int64_t hits = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            const float* row = a.weights.data() + (b * T + t) * S;   // (S,)
            const int64_t peak = std::max_element(row, row + S) - row, p = aligned_source_position(task, t, S);
            hits += peak == p || std::count(a.next_read.begin(), a.next_read.end(), peak - p) > 0;
        }
    return hits;
}

Scores score(models::Seq2Seq& model, Task task, autograd::Rng& rng, int64_t V, int64_t L, int count) {
    autograd::NoGradGuard no_grad;
    model.eval();
    Scores s;
    const int64_t T = L - 1;   // the positions each output names after the start symbol
    int64_t exact = 0, tokens = 0, aligned = 0;
    bool has_attention = true;
    const int chunk = 250;   // sequences decoded together
    for (int done = 0; done < count; done += chunk) {
        const int64_t n = std::min(chunk, count - done);
        const models::Batch b = make_task_batch(task, rng, V, n, L);
        // 1) free-running: greedy decoding from the start symbol, each output fed back
        const Tokens out = models::greedy_decode_cached(model, b.src, b.src_mask, {.max_len = L, .bos = data::COPY_START});   // (n, L)
        for (int64_t i = 0; i < n; i++) {
            int64_t right = 0;
            for (int64_t t = 0; t < T; t++) right += out[i * L + t + 1] == b.tgt_out[i * T + t];
            exact += right == T;
            tokens += right;
        }
        // 2) teacher-forced, for the attention: the decoder reads the right prefix
        model.keep_attention_weights(true);
        model.logits(b.src, b.tgt_in, b.src_mask, b.tgt_mask);
        model.keep_attention_weights(false);
        const SourceAttention a = source_attention(model);   // (n, T, L)
        has_attention = !a.weights.empty();
        if (!has_attention) continue;
        aligned += aligned_rows(a, n, T, L, task);
        if (done == 0) {
            for (int64_t t = 0; t < T; t++) s.attention.row_labels.push_back(std::to_string(b.tgt_out[t]));
            for (int64_t j = 0; j < L; j++) s.attention.col_labels.push_back(std::to_string(b.src[j]));
            s.attention.values.assign(a.weights.begin(), a.weights.begin() + T * L);
        }
    }
    s.exact = 100.0 * static_cast<double>(exact) / count;
    s.token = 100.0 * static_cast<double>(tokens) / (static_cast<double>(count) * T);
    s.alignment = has_attention ? 100.0 * static_cast<double>(aligned) / (static_cast<double>(count) * T)
                                : std::numeric_limits<double>::quiet_NaN();
    return s;
}

// ---------------------------------------------------------------- the table

std::string table_header() {
    char line[160];
    std::snprintf(line, sizeof line, "%-22s %7s %4s %8s %7s %7s %7s %8s", "system", "params", "L", "loss", "exact%", "token%",
                  "align%", "ms/step");
    return line;
}

std::string table_row(const Row& r) {
    char align[16] = "      -", line[200];
    if (!std::isnan(r.scores.alignment)) std::snprintf(align, sizeof align, "%7.1f", r.scores.alignment);
    std::snprintf(line, sizeof line, "%-22s %7lld %4lld %8.4f %7.1f %7.1f %s %8.1f", r.system.c_str(), (long long)r.params,
                  (long long)r.L, r.loss, r.scores.exact, r.scores.token, align, r.ms_per_step);
    return line;
}

void write_plots(const std::string& dir, const std::vector<Row>& rows, Task task) {
    std::filesystem::create_directories(dir);
    std::vector<common::Series> lines;   // one per system, in the table's order
    std::map<std::string, size_t> line_of;
    int64_t longest = 0;
    for (const Row& r : rows) {
        if (!line_of.count(r.system)) line_of[r.system] = lines.size(), lines.push_back({r.system, {}, {}});
        lines[line_of[r.system]].x.push_back(static_cast<double>(r.L));
        lines[line_of[r.system]].y.push_back(r.scores.exact);
        longest = std::max(longest, r.L);
    }
    const std::string task_text = task_name(task);
    const std::string curve = dir + "/exact_match.svg";
    common::write_line_plot(curve, "Exact match against sequence length (" + task_text + " task)", "sequence length L",
                            "exact match %", lines, {.legend_outside = true});   // the lines fill the top right
    std::printf("wrote %s\n", curve.c_str());
    std::vector<common::Heatmap> maps;
    for (const Row& r : rows)
        if (r.L == longest && !r.scores.attention.values.empty()) {
            maps.push_back(r.scores.attention);
            maps.back().title = r.system;
        }
    if (maps.empty()) return;
    const std::string heat = dir + "/attention.svg";
    common::write_heatmaps(heat, "Attention, L=" + std::to_string(longest) + ", " + task_text + " task: output (rows) over source",
                           maps, std::min<int>(3, static_cast<int>(maps.size())), {.skip_white_cells = true});
    std::printf("wrote %s\n", heat.c_str());
}

}  // namespace eval
