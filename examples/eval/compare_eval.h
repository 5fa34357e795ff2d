// What examples/compare_models.cpp does around its training loop: the systems it compares, built
// by name at widths that give each about the same number of parameters; the task's batches; the
// scores of a trained system on fresh sequences (exact match, token accuracy, and whether its
// attention looks where the answer is); the table they make, and its figures.
//
//   std::unique_ptr<models::Seq2Seq> m = eval::make_system("rnn-additive", V);
//   models::Batch b = eval::make_task_batch(eval::Task::reverse, rng, V, B, L);
//   ... train m on such batches ...
//   eval::Scores s = eval::score(*m, eval::Task::reverse, eval_rng, V, L, 500);
//   // s.exact, s.token, s.alignment (NaN without attention), s.attention (one sequence's map)
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "examples/common/svg.h"
#include "models/batch.h"
#include "models/seq2seq.h"

namespace eval {

// ---- the task

enum class Task {
    copy,      // tgt = src (data::make_copy_batch)
    reverse,   // tgt = 1, then src's other symbols backwards (data::make_reverse_batch)
};
Task task_from_name(const std::string& name);   // "copy", "reverse"; throws std::invalid_argument for another
const char* task_name(Task task);

// B fresh sequences of L symbols (1..V-1 after the start symbol 1) and their targets.
models::Batch make_task_batch(Task task, autograd::Rng& rng, int64_t V, int64_t B, int64_t L);

// The source position that output position t (0 <= t < L-1) must read: the decoder has read
// tgt_in[0..t] and names tgt_out[t] = tgt[t+1], which is src[t+1] when copying and src[L-1-t]
// when reversing. The attention's "right place": the diagonal above the main one, or the
// anti-diagonal.
int64_t aligned_source_position(Task task, int64_t t, int64_t L);

// ---- the systems

// The systems' names, in the table's order, and what each is (models/rnn_seq2seq.h):
//   rnn-sutskever          LSTM encoder-decoder whose decoder starts from the encoder's final (h, c)
//                          (Sutskever, Vinyals & Le 2014)
//   rnn-sutskever-reversed the same, the source read backwards (their trick)
//   rnn-cho                GRU encoder-decoder, C = tanh(V h_S) at every decoder step and at the output layer, the
//                          decoder from tanh(V' C) (Cho et al. 2014)
//   rnn-dot, rnn-general   soft attention (Bahdanau et al. 2014) scored by Luong et al.'s (2015)
//                          s . h_j and s . W h_j; rnn-dot's encoder reads one way (the dot score
//                          needs the decoder's and the encoder's states equally wide), the others' both
//   rnn-cosine             the same with this project's scaled cosine
//   rnn-additive           the same with Bahdanau et al.'s own score, v . tanh(W s + U h_j)
//   rnn-additive-reversed  rnn-additive with the source read backwards
//   transformer            the encoder-decoder Transformer (models/transformer.h), one layer each side
const std::vector<std::string>& systems();
std::string system_names();   // "rnn-sutskever, rnn-sutskever-reversed, ..., transformer", for messages

// A fresh, untrained system for a vocabulary of V symbols, no dropout (the data never repeats).
// Widths are chosen so that every system has about the same number of parameters at V = 11
// (82,015 to 86,811): the systems with attention spend more of them on the decoder, and get a
// narrower state. Throws std::invalid_argument listing the names for an unknown one.
std::unique_ptr<models::Seq2Seq> make_system(const std::string& name, int64_t V);

// ---- the scores

// The encoder-decoder attention of a model's last logits() call, in source order.
struct SourceAttention {
    std::vector<float> weights;   // (B, T, S) row-major; empty for a model without attention
    // The offsets d for which an RNN encoder's state at p + d has read position p's symbol one
    // step before: {+1} reading forwards, {-1} reading the source reversed, both when it reads
    // both ways; none for the Transformer, whose encoder has no reading order.
    std::vector<int64_t> next_read;
};
// An RNN's alpha, its encoder positions mapped back to the source's when it reads the source
// reversed (every row is full length here); the Transformer's last decoder layer's src_attn, mean
// over its heads; nothing for an RNN without attention, or a model of another kind.
SourceAttention source_attention(models::Seq2Seq& model);

// How many of the B x T rows a.weights[b, t, :] put their largest weight on the source position
// of the symbol that output position t names, p = aligned_source_position(task, t, S), or on an
// RNN's p + d for d in a.next_read: the encoder state there has read p's symbol one step before
// and holds it still, and an RNN often learns to look there instead (a bidirectional one, or one
// reading backwards, mostly does). T = S - 1.
int64_t aligned_rows(const SourceAttention& a, int64_t B, int64_t T, int64_t S, Task task);

struct Scores {
    double exact = 0;                  // % of sequences decoded exactly (greedy, free-running)
    double token = 0;                  // % of output positions right (the L-1 after the start symbol)
    double alignment = 0;              // % of positions whose attention peaks where their symbol is (aligned_rows); NaN without attention
    common::Heatmap attention;         // the first sequence's attention (T x S, teacher-forced); no values without attention
};

// `count` fresh sequences from rng, decoded greedily (max length L, start symbol 1) in batches
// of 250, against the task's targets; the attention of the same sequences teacher-forced (the
// decoder reads the right prefix, so position t's attention is the one its answer needs).
Scores score(models::Seq2Seq& model, Task task, autograd::Rng& rng, int64_t V, int64_t L, int count);

// ---- the table

struct Row {
    std::string system;
    int64_t params = 0, L = 0;
    double loss = 0, ms_per_step = 0;   // the mean training loss of the last 10 steps; the time of a step
    Scores scores;
};
std::string table_header();        // the column names
std::string table_row(const Row& r);   // one line, without its newline

// --plot: exact match against L, one line per system (exact_match.svg); each attention system's
// map at the longest L, one sequence (attention.svg). Creates dir if need be; says "wrote PATH"
// for each file.
void write_plots(const std::string& dir, const std::vector<Row>& rows, Task task);

}  // namespace eval
