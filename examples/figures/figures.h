// The figures of docs/, one function per figure. Each draws its figure from the code it shows
// (the masks from models::padding_mask, the graph from the recorded Node::parents, the bits from
// autograd::round_to_bf16, ...) and writes it as SVG with examples/common/svg.h. make_figures.cpp calls
// them; `make figures` runs it (and the example runs that draw the loss curves and heatmaps).
#pragma once
#include <string>

namespace figures {

// Part I, the model
void broadcasting(const std::string& path);          // docs/01: (2, 3) + (3,) through a stride-0 view
void ab_graph(const std::string& path);              // docs/02: the graph of L = (a·b + a)², values and grads
void layer_norm_row(const std::string& path);        // docs/05: one row through μ, σ², x − μ, x̂ and γ ⊙ x̂ + β
void rnn_encoder_decoder(const std::string& path);   // docs/06a: the RNN encoder-decoder unrolled: C first, C every step, C_i
void attention_flow(const std::string& path);        // docs/07: Q Kᵀ, scale, mask, softmax, · V, with shapes and numbers
void heads(const std::string& path);                 // docs/07: D split into H heads of Dk columns
void masks(const std::string& path);                 // docs/08: padding, subsequent and target masks
void positional_encoding(const std::string& path);   // docs/09: the sinusoid table
void architecture(const std::string& path);          // docs/10: the encoder-decoder's classes
void smoothed_target(const std::string& path);       // docs/11: one-hot vs label-smoothed target
void noam_schedule(const std::string& path);         // docs/12: the examples' learning rates
// docs/14, from trained models: the copy task's attention, a beam-search tree
void copy_attention(const std::string& model_path, const std::string& path);
void beam_tree(const std::string& model_path, const std::string& sentence, const std::string& path);

// Part II, engineering (docs/15's GEMM blocking: bench_gemm --tile-picture)
// docs/15's two measured pictures, drawn from the numbers of its table "Where it stands" (the
// newest measurements of bench/RESULTS.md; tests/test_docs.cpp holds the chapter to them).
struct StepTimes {
    double paper_floor_ms = 149.0;    // --paper: 67 GFLOP at the peak, 2 x 225 GFLOP/s
    double paper_ours_ms = 184.2;     // --paper, fp32, this project
    double paper_torch_ms = 349.1;    // the same step in PyTorch 1.13
    double d128_one_thread_ms[2] = {27.3, 28.5};   // D = 128, the range of the runs
    double d128_two_threads_ms[2] = {14.3, 14.4};
};
inline constexpr StepTimes kStepTimes{};
void step_floor(const std::string& path);            // docs/15: --paper's step against its floor and PyTorch
void two_threads(const std::string& path);           // docs/15: D = 128 on 1 and 2 threads
void bf16_bits(const std::string& path);             // docs/16: fp32 and bf16 bit layouts

// Prints "wrote PATH".
void wrote(const std::string& path);

}  // namespace figures
