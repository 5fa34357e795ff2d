#include "examples/common/memory_budget.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

#include "autograd/runtime.h"
#include "models/checkpoint.h"
#include "models/rnn_seq2seq.h"
#include "models/transformer.h"

namespace common {

namespace {

constexpr double kProgramBytes = 30.0 * (1 << 20);   // the program, its libraries, the C library's heap

// Floats per token and per pair of positions that one training step keeps, by kind of model.
struct PerToken {
    double src = 0, tgt = 0;   // per source token, per target token
    double src_pair = 0;       // per (source, source) pair of one row: the encoder's self-attention
    double pair = 0;           // per (target, source) pair: the decoder's attention over the source
    double self_pair = 0;      // per (target, target) pair: the decoder's self-attention
};

// The logits' floats per target token: fused into the loss, one slice of V at a time, counted as one
double logit_floats(int64_t tgt_vocab, bool full_logits) { return (full_logits ? 3.0 : 1.0) * static_cast<double>(tgt_vocab); }

PerToken floats_kept(const models::TransformerConfig& t, bool full_logits) {
    PerToken k;
    const double D = static_cast<double>(t.d_model), F = static_cast<double>(t.d_ff);
    const double N = static_cast<double>(t.layers), H = static_cast<double>(t.heads);
    k.src = N * (12 * D + 2 * F);            // LayerNorms, Q K V, context, projections, FFN hidden before and after
    k.tgt = N * (18 * D + 2 * F) + logit_floats(t.tgt_vocab, full_logits);   // the same with a second attention, over the memory
    k.src_pair = N * H;                      // the encoder's weights (S x S), per head
    k.pair = N * H;                          // the cross-attention's (T x S)
    k.self_pair = N * H;                     // the decoder's (T x T)
    return k;
}

PerToken floats_kept(const models::RNNSeq2SeqConfig& r, bool full_logits) {
    PerToken k;
    const double logits = logit_floats(r.tgt_vocab, full_logits);
    const double Hd = static_cast<double>(r.hidden), E = static_cast<double>(r.embed), L = static_cast<double>(r.layers);
    const double dirs = r.bidirectional ? 2 : 1;
    k.src = E + L * dirs * 12 * Hd;                  // each step's gates before and after their nonlinearity, h and c
    k.tgt = E + L * 12 * Hd + 4 * Hd + logits;       // the same, the context and the output layer
    if (r.attention()) k.pair = r.score == nn::Score::additive ? 2 * Hd : 2;   // additive: tanh(W s + U h) for every pair
    // (a recurrent encoder has no self-attention: no S x S pairs)
    return k;
}

// The first number in a file (a /proc or /sys value), or -1.
int64_t read_number(const std::string& path) {
    std::ifstream in(path);
    long long v = -1;
    if (!(in >> v)) return -1;
    return v;
}

// "Key:   123 kB" from /proc/meminfo or /proc/self/status, in bytes, or -1.
int64_t read_kb_field(const std::string& path, const std::string& key) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
    return -1;
}

// One training step's peak, from the parameter count and the floats kept per token and pair.
int64_t training_peak_bytes(int64_t parameters, const PerToken& k, int64_t B, int64_t S, int64_t T) {
    const double b = static_cast<double>(B), s = static_cast<double>(S), t = static_cast<double>(T);
    const double floats = 4.0 * static_cast<double>(parameters)   // weights, gradients, Adam's m and v
                          + b * (s * k.src + t * k.tgt)                         // what each layer keeps per token
                          + b * (s * s * k.src_pair + t * s * k.pair + t * t * k.self_pair);   // the attention weights
    return static_cast<int64_t>(std::min(4.0 * floats + kProgramBytes, 9e18));
}

}  // namespace

int64_t training_peak_bytes(const models::TransformerConfig& cfg, int64_t B, int64_t S, int64_t T, bool full_logits) {
    return training_peak_bytes(cfg.parameter_count(), floats_kept(cfg, full_logits), B, S, T);
}

int64_t training_peak_bytes(const models::RNNSeq2SeqConfig& cfg, int64_t B, int64_t S, int64_t T, bool full_logits) {
    return training_peak_bytes(cfg.parameter_count(), floats_kept(cfg, full_logits), B, S, T);
}

int64_t training_peak_bytes(const models::Seq2Seq& model, int64_t B, int64_t S, int64_t T, bool full_logits) {
    if (const auto* t = dynamic_cast<const models::Transformer*>(&model)) return training_peak_bytes(t->cfg, B, S, T, full_logits);
    return training_peak_bytes(dynamic_cast<const models::RNNSeq2Seq&>(model).cfg, B, S, T, full_logits);
}

int64_t decoding_peak_bytes(const models::Seq2Seq& model, int64_t rows, int64_t S, int64_t T, int beam, bool kv_cache) {
    const double r = static_cast<double>(rows), s = static_cast<double>(S), t = static_cast<double>(T);
    const double hyps = r * std::max(beam, 1);   // the decoder's rows
    const double V = static_cast<double>(model.tgt_vocab());
    double kept = 0, transient = 0;              // floats that live through the decoding; the largest passing peak
    if (const auto* m = dynamic_cast<const models::Transformer*>(&model)) {
        const double D = static_cast<double>(m->cfg.d_model), F = static_cast<double>(m->cfg.d_ff);
        const double N = static_cast<double>(m->cfg.layers), H = static_cast<double>(m->cfg.heads);
        const double encoder_layer = r * (2 * H * s * s + s * (F + 6 * D));   // scores and weights, then the feed-forward
        // the memory, its keys and values in every layer (the cache), each target position's own keys and values
        kept = hyps * s * D * (1 + (kv_cache ? 2 * N : 0)) + (kv_cache ? hyps * t * 2 * N * D : 0);
        const double step = kv_cache ? hyps * (2 * H * (t + s) + F + 6 * D + 2 * V)   // one new position
                                     : hyps * (2 * H * (t * t + t * s) + t * (F + 6 * D) + 2 * V);   // the whole prefix again
        transient = std::max(encoder_layer, step);
    } else {
        const auto& c = dynamic_cast<const models::RNNSeq2Seq&>(model).cfg;
        const double Hd = static_cast<double>(c.hidden), L = static_cast<double>(c.layers), dirs = c.bidirectional ? 2 : 1;
        kept = hyps * s * dirs * Hd * (c.attention() ? 2 : 1) + hyps * t;   // the encoder's states (and their keys); the outputs
        // a step's gates, scores and logits; kv_cache changes nothing: a recurrent decoder carries its state, no prefix is rerun
        const double scores = !c.attention() ? 0 : c.score == nn::Score::additive ? 2 * Hd : 2;   // per source position
        transient = hyps * (L * 8 * Hd + s * scores + 2 * V);
    }
    const double floats = static_cast<double>(model.num_parameters()) + kept + transient;
    return static_cast<int64_t>(std::min(4.0 * floats + kProgramBytes, 9e18));
}

int64_t gpt_training_peak_bytes(const models::GPT& model, int64_t B, int64_t T) { return gpt_training_peak_bytes(model.cfg, B, T); }

int64_t gpt_training_peak_bytes(const models::GPTConfig& cfg, int64_t B, int64_t T) {
    const double D = static_cast<double>(cfg.d_model), F = 4 * D, V = static_cast<double>(cfg.vocab);
    const double N = static_cast<double>(cfg.layers), H = static_cast<double>(cfg.heads);
    const double b = static_cast<double>(B), t = static_cast<double>(T);
    const double floats = 4.0 * static_cast<double>(models::gpt_parameter_count(cfg))   // weights, gradients, AdamW's m and v
                          + b * t * (N * (12 * D + 2 * F) + V)                  // each block's activations, one slice of logits
                          + b * t * t * N * H;                                  // the attention weights
    return static_cast<int64_t>(std::min(4.0 * floats + kProgramBytes, 9e18));
}

AvailableMemory available_memory() {
    AvailableMemory a;
    auto consider = [&](int64_t bytes, const char* source) {
        if (bytes >= 0 && (a.bytes < 0 || bytes < a.bytes)) a.bytes = bytes, a.source = source;
    };
    consider(read_kb_field("/proc/meminfo", "MemAvailable"), "MemAvailable");
    // cgroup v2 ("max" reads as no number: no limit), then v1 (a huge number when there is none)
    const int64_t v2 = read_number("/sys/fs/cgroup/memory.max");
    if (v2 > 0) consider(std::max<int64_t>(0, v2 - std::max<int64_t>(0, read_number("/sys/fs/cgroup/memory.current"))), "the cgroup's memory.max");
    const int64_t v1 = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    if (v1 > 0 && v1 < (int64_t{1} << 60))
        consider(std::max<int64_t>(0, v1 - std::max<int64_t>(0, read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes"))),
                 "the cgroup's memory.limit_in_bytes");
    struct rlimit as {};
    if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
        const int64_t used = std::max<int64_t>(0, read_kb_field("/proc/self/status", "VmSize"));
        consider(std::max<int64_t>(0, static_cast<int64_t>(as.rlim_cur) - used), "ulimit -v");
    }
    return a;
}

std::string human_bytes(double bytes) {
    char text[32];
    if (bytes >= 1e9) std::snprintf(text, sizeof text, "%.1f GB", bytes / 1e9);
    else std::snprintf(text, sizeof text, "%.0f MB", bytes / 1e6);
    return text;
}

void check_memory(int64_t needed, const std::string& what, const std::string& lower) {
    const AvailableMemory a = available_memory();
    if (a.bytes < 0 || needed <= a.bytes) return;
    throw std::runtime_error(what + " needs about " + human_bytes(static_cast<double>(needed)) +
                             " at its peak (estimated from the shapes), more than the " + human_bytes(static_cast<double>(a.bytes)) +
                             " this process may use (" + a.source + "): lower " + lower);
}

std::string out_of_memory_message(const std::string& lower) {
    const double refused = static_cast<double>(autograd::tensor_bytes_refused());
    const std::string what = refused > 0 ? "a tensor of " + human_bytes(refused) + " could not be allocated" : "an allocation failed";
    return "out of memory: " + what + ", with " + human_bytes(static_cast<double>(autograd::tensor_bytes_live())) +
           " of tensors held: lower " + lower;
}

}  // namespace common
