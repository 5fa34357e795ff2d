// Memory before it is spent: a training run's peak, estimated from its shapes, against the memory
// this process may use, so that a run too big for the machine is refused in its first second,
// with the figure and what to lower, instead of swapping for an hour or dying of std::bad_alloc.
//
//   const int64_t need = common::training_peak_bytes(model, B, S, T, /*full_logits=*/true);
//   common::check_memory(need, "training (batches of 8 x 4096)", "--batch or --seq-len");   // throws when it cannot fit
//
// The estimate counts what a training step holds at its peak, in floats: the weights, their
// gradients and Adam's two moments (4 per parameter); per token, what each layer keeps for the
// backward pass (about 12 D + 2 F in an encoder layer, 18 D + 2 F in a decoder layer); per pair of
// positions, each attention's weights (H of them, the part that grows as the length squared); the
// logits (three copies of V per target token when the loss reads them whole: logits, softmax,
// gradient); and 30 MB for the program. tests/test_example_flags_copy_task.cpp holds it to the
// peak RSS copy_task reaches, within a factor of 2, at sizes where each part dominates.
#pragma once
#include <cstdint>
#include <string>

#include "models/gpt.h"
#include "models/rnn_seq2seq.h"
#include "models/seq2seq.h"
#include "models/transformer.h"

namespace common {

// Bytes at the peak of one training step of `model` on a padded batch of B rows, sources of S
// tokens and targets of T; full_logits: the loss holds the (B, T, V) logits whole.
int64_t training_peak_bytes(const models::Seq2Seq& model, int64_t B, int64_t S, int64_t T, bool full_logits);
// The same from the model's config alone, before the model is built: a model larger than the
// memory is refused before its weights are allocated.
int64_t training_peak_bytes(const models::TransformerConfig& cfg, int64_t B, int64_t S, int64_t T, bool full_logits);
int64_t training_peak_bytes(const models::RNNSeq2SeqConfig& cfg, int64_t B, int64_t S, int64_t T, bool full_logits);

// Bytes at the peak of decoding `rows` sources of S tokens together into outputs of up to T
// tokens, each source as `beam` hypotheses (1: greedy or sampling); kv_cache false: the decoder
// reruns the whole prefix at every step. No gradients and no optimizer: the weights once; the
// encoder's largest layer (its S x S attention weights, per head) or one decoder step, whichever
// is larger; the encoder's output and the key/value caches, which live through the decoding.
int64_t decoding_peak_bytes(const models::Seq2Seq& model, int64_t rows, int64_t S, int64_t T, int beam, bool kv_cache);

// The same for a GPT (models/gpt.h) on B windows of T tokens. Its loss is fused (the (B, T, V)
// logits never exist whole); a block keeps about what an encoder layer keeps, with F = 4D.
int64_t gpt_training_peak_bytes(const models::GPT& model, int64_t B, int64_t T);
int64_t gpt_training_peak_bytes(const models::GPTConfig& cfg, int64_t B, int64_t T);   // before the model is built

// The memory this process may still use: the smallest of the system's MemAvailable
// (/proc/meminfo), the room left under its cgroup's limit (v2 memory.max, v1
// memory.limit_in_bytes) and under its address-space limit (RLIMIT_AS, `ulimit -v`), with which
// one it is ("MemAvailable", "the cgroup's limit", "ulimit -v"). -1 bytes when none is known.
struct AvailableMemory {
    int64_t bytes = -1;
    std::string source;
};
AvailableMemory available_memory();

// Throws std::runtime_error when `needed` bytes exceed the memory available: "training (batches
// of 8 x 4096) needs about 14.1 GB at its peak (estimated from the shapes), more than the 2.0 GB
// this process may use (ulimit -v): lower --batch or --seq-len".
void check_memory(int64_t needed, const std::string& what, const std::string& lower);

// For a std::bad_alloc that escapes all the same: "out of memory: a tensor of 2.1 GB could not be
// allocated, with 11.3 GB of tensors held: lower --batch ...".
std::string out_of_memory_message(const std::string& lower);

// "14.1 GB", "230 MB": bytes for a message.
std::string human_bytes(double bytes);

}  // namespace common
