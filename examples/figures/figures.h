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
void bf16_bits(const std::string& path);             // docs/16: fp32 and bf16 bit layouts

// Prints "wrote PATH".
void wrote(const std::string& path);

}  // namespace figures
