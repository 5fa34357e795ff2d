// The figures of docs/ that are drawn rather than run: each one from the code it shows (the masks
// from models::padding_mask, the table from nn::PositionalEncoding, the curves from
// optim::NoamSchedule, the bits from autograd::round_to_bf16, ...), one function per figure in
// examples/figures/, written as SVG by examples/common/svg.h. `make figures` runs it, together
// with the short example runs that draw the loss curves and heatmaps, and `make figures-check`
// renders every SVG.
//
//   ./examples/make_figures --out docs/figures --overwrite   # redraw them (a figure there is kept without it)
//   ./examples/make_figures --out docs/figures --copy-model copy.safetensors   # + the copy task's attention
//   ./examples/make_figures --out docs/figures --translation-model tr.safetensors   # + the beam-search tree
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "examples/common/args.h"
#include "examples/common/output_files.h"
#include "examples/figures/figures.h"

int main(int argc, char** argv) {
    std::string out = "docs/figures", copy_model, translation_model, sentence = "the doctors eat a banana .";
    bool overwrite = false;
    common::ArgParser p("make_figures", "Draw the figures of docs/ from the current code.");
    p.add("--out", &out, "folder to write the SVG files to", "DIR");
    p.add("--copy-model", &copy_model, "a copy-task model (copy_task --save): also draw its attention", "PATH");
    p.add("--translation-model", &translation_model, "a translation model (translation --save): also draw a beam-search tree",
          "PATH");
    p.add("--sentence", &sentence, "the sentence of the beam-search tree", "TEXT");
    common::add_overwrite_flag(p, &overwrite);
    p.parse(argc, argv);
    // Every figure, the file it goes to and the function that draws it, in the chapters' order
    using Figure = std::pair<const char*, std::function<void(const std::string&)>>;
    std::vector<Figure> drawn = {
        // Part I, the model
        {"broadcasting.svg", figures::broadcasting},                 // docs/01
        {"ab_graph.svg", figures::ab_graph},                         // docs/02
        {"layer_norm_row.svg", figures::layer_norm_row},             // docs/05
        {"rnn_encoder_decoder.svg", figures::rnn_encoder_decoder},   // docs/06a
        {"attention_flow.svg", figures::attention_flow},             // docs/07
        {"heads.svg", figures::heads},                               // docs/07
        {"masks.svg", figures::masks},                               // docs/08
        {"positional_encoding.svg", figures::positional_encoding},   // docs/09
        {"architecture.svg", figures::architecture},                 // docs/10
        {"smoothed_target.svg", figures::smoothed_target},           // docs/11
        {"noam_schedule.svg", figures::noam_schedule},               // docs/12
    };
    if (!copy_model.empty())   // docs/14
        drawn.push_back({"copy_attention.svg", [&](const std::string& path) { figures::copy_attention(copy_model, path); }});
    if (!translation_model.empty())   // docs/14
        drawn.push_back({"beam_tree.svg", [&](const std::string& path) { figures::beam_tree(translation_model, sentence, path); }});
    // Part II, engineering
    drawn.push_back({"step_floor.svg", figures::step_floor});    // docs/15
    drawn.push_back({"two_threads.svg", figures::two_threads});  // docs/15
    drawn.push_back({"bf16_bits.svg", figures::bf16_bits});      // docs/16
    const auto at = [&](const char* file) { return out + "/" + file; };
    common::RunFiles files;   // the models read are no figure, and a figure there already goes only with --overwrite
    files.input("--copy-model", copy_model);
    files.input("--translation-model", translation_model);
    for (const auto& [file, draw] : drawn) files.output("--out", at(file));
    files.check(p, overwrite);
    try {
        for (const auto& [file, draw] : drawn) draw(at(file));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "make_figures: %s\n", e.what());
        return 1;
    }
}

namespace figures {
void wrote(const std::string& path) { std::printf("wrote %s\n", path.c_str()); }
}  // namespace figures
