// Self-contained SVG charts for the example programs: loss curves and attention heatmaps.
// The files need no fonts, stylesheets or scripts and open in any browser.
//
//   common::Series train{"train", steps, train_loss}, val{"validation", val_steps, val_loss};
//   common::write_line_plot("loss.svg", "Copy task", "step", "loss", {train, val},
//                           {.log_y = true});
//
//   std::vector<common::Heatmap> maps;   // e.g. one per (layer, head)
//   maps.push_back({"layer 0 head 0", tgt_tokens, src_tokens, weights});   // (T, S) row-major
//   common::write_heatmaps("attention.svg", "Encoder-decoder attention", maps, /*columns=*/4);
#pragma once

#include <string>
#include <vector>

namespace common {

// One curve. x and y have the same length; points whose x or y is NaN or infinite (or y <= 0
// on a log axis) are skipped, and the line breaks there.
struct Series {
    std::string name;
    std::vector<double> x, y;
};

struct PlotOptions {
    bool log_y = false;   // logarithmic y axis (ticks at 1-2-5 x 10^k)
    int width = 800;      // pixels
    int height = 500;
    // true: the legend beside the plot area, on its right, the picture wider by the legend's width
    // (for lines that fill the top right corner, where the legend sits by default)
    bool legend_outside = false;
};

// One matrix: values has row_labels.size() * col_labels.size() entries, row-major, in the
// options' lo..hi, 0..1 by default (clamped; NaN is drawn grey). For attention, rows are queries
// and columns are keys.
struct Heatmap {
    std::string title;
    std::vector<std::string> row_labels, col_labels;
    std::vector<float> values;
};

// One entry of a heatmap legend: the colour of `value`, and what it means ("masked").
struct Swatch {
    float value;
    std::string label;
};

struct HeatmapOptions {
    float lo = 0, hi = 1;          // the values drawn white and dark blue: the colour bar's ends
    // Non-empty: these swatches instead of the colour bar, for data that takes a few values
    // (a mask's 0 and 1), where a continuous bar would suggest values in between.
    std::vector<Swatch> legend = {};
    double cell = 0;               // pixels per cell; 0: from the largest map (4 to 24)
    double label_font = 0;         // font size of the row and column labels; 0: from the cell
    int label_every = 0;           // label every n-th row and column; 0: as many as fit
    // true: a cell whose colour is white (the background's) is left out, with its tooltip: the
    // same picture in a far smaller file for sparse maps (a 40 x 40 attention is mostly white)
    bool skip_white_cells = false;
};

// The SVG text, for callers that want it in memory (and for tests).
std::string line_plot_svg(const std::string& title, const std::string& x_label,
                          const std::string& y_label, const std::vector<Series>& series,
                          const PlotOptions& options = {});
std::string heatmaps_svg(const std::string& title, const std::vector<Heatmap>& maps, int columns,
                         const HeatmapOptions& options = {});

// The same, written to `path`. Throws std::runtime_error naming the path if it cannot be
// written, std::invalid_argument if a Series or Heatmap has inconsistent sizes.
void write_line_plot(const std::string& path, const std::string& title, const std::string& x_label,
                     const std::string& y_label, const std::vector<Series>& series,
                     const PlotOptions& options = {});
void write_heatmaps(const std::string& path, const std::string& title,
                    const std::vector<Heatmap>& maps, int columns, const HeatmapOptions& options = {});

// A blank drawing for diagrams (docs' figures: the architecture, a beam-search tree): boxes,
// lines, arrows and text at pixel coordinates, y downwards.
//
//   common::SvgCanvas c(400, 200, "two boxes");
//   c.box(20, 20, 120, 40, "#dbe9f6", "Encoder");
//   c.arrow(140, 40, 260, 40);
//   common::write_text_file("boxes.svg", c.svg());
class SvgCanvas {
public:
    SvgCanvas(double width, double height, const std::string& title);
    // A rectangle (rounded corners), and an optional label centred in it.
    void box(double x, double y, double w, double h, const std::string& fill, const std::string& label = "",
             double font = 13, const std::string& stroke = "#333");
    void line(double x1, double y1, double x2, double y2, const std::string& stroke = "#333", double width = 1.5,
              bool dashed = false);
    void arrow(double x1, double y1, double x2, double y2, const std::string& stroke = "#333", double width = 1.5,
               bool dashed = false);
    // An arrow along a curve that bows out by `bend` pixels to the left of the straight line from
    // (x1, y1) to (x2, y2) (to the right if negative): for an edge that must go around a box.
    void curved_arrow(double x1, double y1, double x2, double y2, double bend, const std::string& stroke = "#333",
                      double width = 1.5, bool dashed = false);
    // A plain rectangle with square corners: a cell of a grid, one bit of a number.
    void rect(double x, double y, double w, double h, const std::string& fill, const std::string& stroke = "#333",
              double width = 1);
    // anchor: "start", "middle" or "end"
    void text(double x, double y, const std::string& text, double font = 13, const std::string& anchor = "middle",
              const std::string& fill = "#222", bool bold = false);
    std::string svg() const;   // the finished document

private:
    double width_, height_;
    std::string title_, body_;
};

// Write `text` to `path`, whole or not at all: to a temporary file beside it, then renamed over
// it (autograd/io/atomic_file.h), so a full disk leaves an old file there as it was. Throws
// std::runtime_error naming the path on failure.
void write_text_file(const std::string& path, const std::string& text);

// ---- text helpers shared by the SVG and terminal writers -----------------------------------

// Text that can be shown: valid UTF-8 (ill-formed bytes become U+FFFD, autograd::io::sanitize_utf8)
// in which every control character but tab becomes its visible Unicode control picture ("\n" ->
// U+240A, which XML also allows) and the non-characters U+FFFE, U+FFFF become U+FFFD. Tokens
// from a byte-level tokenizer may be partial characters.
std::string printable_text(const std::string& text);

// printable_text, then & < > " ' as entities: safe inside SVG text and attribute values.
std::string xml_escape(const std::string& text);

// At most `max_points` code points (autograd::io::count_code_points, what a terminal shows for
// most scripts); a cut label ends in "…" (counted in max_points).
std::string utf8_truncate(const std::string& text, int max_points);

// Heatmap colour for a value in 0..1: white at 0, through light blue, to dark blue at 1.
// As 8-bit channels.
struct Rgb {
    int r, g, b;
};
Rgb heat_color(float value);

}  // namespace common
