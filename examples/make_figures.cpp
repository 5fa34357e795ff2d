// The figures of docs/ that are drawn rather than run: each one from the code it shows (the masks
// from models::padding_mask, the table from nn::PositionalEncoding, the curves from
// optim::NoamSchedule, the bits from autograd::round_to_bf16, ...), one function per figure in
// examples/figures/, written as SVG by examples/common/svg.h. `make figures` runs it, together
// with the short example runs that draw the loss curves and heatmaps, and `make figures-check`
// renders every SVG.
//
//   ./examples/make_figures --out docs/figures
//   ./examples/make_figures --out docs/figures --copy-model copy.safetensors   # + the copy task's attention
//   ./examples/make_figures --out docs/figures --translation-model tr.safetensors   # + the beam-search tree
#include <cstdio>
#include <stdexcept>
#include <string>

#include "examples/common/args.h"
#include "examples/figures/figures.h"

int main(int argc, char** argv) {
    std::string out = "docs/figures", copy_model, translation_model, sentence = "the doctors eat a banana .";
    common::ArgParser p("make_figures", "Draw the figures of docs/ from the current code.");
    p.add("--out", &out, "folder to write the SVG files to", "DIR");
    p.add("--copy-model", &copy_model, "a copy-task model (copy_task --save): also draw its attention", "PATH");
    p.add("--translation-model", &translation_model, "a translation model (translation --save): also draw a beam-search tree",
          "PATH");
    p.add("--sentence", &sentence, "the sentence of the beam-search tree", "TEXT");
    p.parse(argc, argv);
    const auto at = [&](const char* file) { return out + "/" + file; };
    try {
        // Part I, the model
        figures::broadcasting(at("broadcasting.svg"));                 // docs/01
        figures::ab_graph(at("ab_graph.svg"));                         // docs/02
        figures::layer_norm_row(at("layer_norm_row.svg"));             // docs/05
        figures::rnn_encoder_decoder(at("rnn_encoder_decoder.svg"));   // docs/06a
        figures::attention_flow(at("attention_flow.svg"));             // docs/07
        figures::heads(at("heads.svg"));                               // docs/07
        figures::masks(at("masks.svg"));                               // docs/08
        figures::positional_encoding(at("positional_encoding.svg"));   // docs/09
        figures::architecture(at("architecture.svg"));                 // docs/10
        figures::smoothed_target(at("smoothed_target.svg"));           // docs/11
        figures::noam_schedule(at("noam_schedule.svg"));               // docs/12
        if (!copy_model.empty()) figures::copy_attention(copy_model, at("copy_attention.svg"));                      // docs/14
        if (!translation_model.empty()) figures::beam_tree(translation_model, sentence, at("beam_tree.svg"));   // docs/14
        // Part II, engineering
        figures::step_floor(at("step_floor.svg"));                     // docs/15
        figures::two_threads(at("two_threads.svg"));                   // docs/15
        figures::bf16_bits(at("bf16_bits.svg"));                       // docs/16
    } catch (const std::exception& e) {
        std::fprintf(stderr, "make_figures: %s\n", e.what());
        return 1;
    }
}

namespace figures {
void wrote(const std::string& path) { std::printf("wrote %s\n", path.c_str()); }
}  // namespace figures
