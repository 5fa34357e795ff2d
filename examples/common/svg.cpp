#include "examples/common/svg.h"

#include "autograd/io/atomic_file.h"
#include "autograd/io/utf8.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace common {

// =============================================================================================
// Text helpers

static char32_t printable(char32_t cp) {                         // U+FFFD where malformed
    if (cp == 0xFFFE || cp == 0xFFFF) return 0xFFFD;                // not allowed in XML
    if (cp < 0x20 && cp != '\t') return 0x2400 + cp;               // "\n" -> U+240A, visible
    if (cp == 0x7F) return 0x2421;                                  // DEL -> its control picture
    return cp;
}

std::string printable_text(const std::string& text) { return autograd::io::map_code_points(text, printable); }

std::string xml_escape(const std::string& text) {
    std::string out;
    for (char c : printable_text(text)) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&apos;"; break;
            default: out += c;
        }
    }
    return out;
}

std::string utf8_truncate(const std::string& text, int max_points) {
    if (max_points <= 0) return "";
    const auto max = static_cast<size_t>(max_points);
    if (autograd::io::count_code_points(text) <= max) return text;
    return std::string(autograd::io::first_code_points(text, max - 1)) + "\u2026";   // "…"
}

Rgb heat_color(float value) {
    // white, then ColorBrewer's "Blues" from light to dark, interpolated linearly
    static const Rgb stops[] = {
        {255, 255, 255}, {198, 219, 239}, {107, 174, 214}, {33, 113, 181}, {8, 48, 107}};
    const int last = static_cast<int>(std::size(stops)) - 1;
    const float t = std::clamp(value, 0.0f, 1.0f) * last;
    const int k = std::min(static_cast<int>(t), last - 1);
    const float f = t - k;
    const auto mix = [f](int a, int b) { return static_cast<int>(std::lround(a + (b - a) * f)); };
    return {mix(stops[k].r, stops[k + 1].r), mix(stops[k].g, stops[k + 1].g),
            mix(stops[k].b, stops[k + 1].b)};
}

void write_text_file(const std::string& path, const std::string& text) {
    autograd::io::write_file_atomically(path, {text}, "write_text_file");   // a full disk leaves the old file whole
}

// =============================================================================================
// Shared SVG bits

namespace {

// A coordinate or size with at most two decimals and no trailing zeros: 12.5, 3, 0.25.
std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2f", v);
    std::string s = buf;
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    if (s == "-0") s = "0";
    return s;
}

std::string hex_color(Rgb c) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "#%02x%02x%02x", c.r, c.g, c.b);
    return buf;
}

// Rough width of text in a sans-serif font: ~0.6 em per character. Used only for layout.
double text_width(const std::string& text, double font_size) {
    return static_cast<double>(autograd::io::count_code_points(text)) * font_size * 0.6;
}

std::string svg_open(double width, double height, const std::string& title) {
    std::ostringstream s;
    s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width) << "\" height=\""
      << num(height) << "\" viewBox=\"0 0 " << num(width) << " " << num(height)
      << "\" font-family=\"sans-serif\">\n"
      << "<title>" << xml_escape(title) << "</title>\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    return s.str();
}

// <text> with the given attributes (already formatted) around an escaped string.
std::string text_element(double x, double y, const std::string& attributes, const std::string& text) {
    return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" " + attributes + ">" + xml_escape(text) +
           "</text>\n";
}

// <line/> and <rect/>, then any further attributes (already formatted).
std::string line_element(double x1, double y1, double x2, double y2, const std::string& attributes = "") {
    return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) + "\"" +
           (attributes.empty() ? "" : " " + attributes) + "/>";
}
std::string rect_element(double x, double y, double width, double height, const std::string& attributes = "") {
    return "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(width) + "\" height=\"" + num(height) + "\"" +
           (attributes.empty() ? "" : " " + attributes) + "/>";
}

// =============================================================================================
// Axes with "nice" ticks

struct Axis {
    double lo = 0, hi = 1;          // the drawn range
    bool log = false;
    std::vector<double> ticks;
    std::vector<std::string> labels;

    // 0 at lo, 1 at hi
    double fraction(double v) const {
        if (log) return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
        return (v - lo) / (hi - lo);
    }
};

// The 1-2-5 step nearest above raw: 0.13 -> 0.2, 3 -> 5, 700 -> 1000.
double nice_step(double raw) {
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    const double f = raw / magnitude;   // in [1, 10)
    const double nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
    return nice * magnitude;
}

// "0.5", "20", "1e-05" -> tidy text for a tick of a linear axis whose ticks are `step` apart.
std::string linear_label(double v, double step, double largest) {
    char buf[32];
    const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
    if (decimals > 5 || largest >= 1e7) std::snprintf(buf, sizeof(buf), "%.3g", v);
    else std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
    std::string s = buf;
    if (s == "-0" || (s.size() > 1 && s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos))
        s = s.substr(1);   // "-0.0" -> "0.0"
    return s;
}

Axis linear_axis(double min, double max) {
    Axis a;
    if (!(min <= max)) min = 0, max = 1;   // no data
    if (min == max) {                       // one value: give it some room
        const double pad = min == 0 ? 1 : std::fabs(min) * 0.1;
        min -= pad, max += pad;
    }
    const double step = nice_step((max - min) / 6);   // about 5-8 ticks
    a.lo = std::floor(min / step) * step;
    a.hi = std::ceil(max / step) * step;
    const long first = std::lround(a.lo / step), last = std::lround(a.hi / step);
    const double largest = std::max(std::fabs(a.lo), std::fabs(a.hi));
    for (long k = first; k <= last; k++) {
        a.ticks.push_back(k * step);
        a.labels.push_back(linear_label(k * step, step, largest));
    }
    return a;
}

// 0.01 -> "0.01", 20000 -> "20000", 2e-5 -> "2e-5"
std::string log_label(int mantissa, int exponent) {
    if (exponent >= -4 && exponent <= 5) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.*f", std::max(0, -exponent), mantissa * std::pow(10.0, exponent));
        return buf;
    }
    return std::to_string(mantissa) + "e" + std::to_string(exponent);
}

// Ticks at 1, 2, 5 x 10^k; at 1..9 x 10^k when the data spans too little for that; only at
// powers of ten when the data spans many decades.
Axis log_axis(double min, double max) {
    Axis a;
    a.log = true;
    if (!(min > 0 && min <= max)) min = 1, max = 10;   // no positive data
    struct Tick { double value; int mantissa, exponent; };
    const int e_lo = static_cast<int>(std::floor(std::log10(min))) - 1;
    const int e_hi = static_cast<int>(std::ceil(std::log10(max))) + 1;
    // The candidate values m x 10^e just outside the data, and all of them in between.
    const auto ticks_with = [&](std::vector<int> mantissas) {
        std::vector<Tick> candidates;
        for (int e = e_lo; e <= e_hi; e++)
            for (int m : mantissas) candidates.push_back({m * std::pow(10.0, e), m, e});
        size_t lo = 0, hi = candidates.size() - 1;
        while (lo + 1 < candidates.size() && candidates[lo + 1].value <= min * (1 + 1e-12)) lo++;
        while (hi > 0 && candidates[hi - 1].value >= max * (1 - 1e-12)) hi--;
        if (lo == hi) lo = lo > 0 ? lo - 1 : lo, hi = hi + 1 < candidates.size() ? hi + 1 : hi;
        return std::vector<Tick>(candidates.begin() + lo, candidates.begin() + hi + 1);
    };
    std::vector<Tick> ticks = ticks_with({1, 2, 5});
    if (ticks.size() < 4) ticks = ticks_with({1, 2, 3, 4, 5, 6, 7, 8, 9});
    if (ticks.size() > 10) {
        const int e0 = static_cast<int>(std::floor(std::log10(min) + 1e-12));
        int e1 = static_cast<int>(std::ceil(std::log10(max) - 1e-12));
        if (e0 == e1) e1++;
        const int every = (e1 - e0 + 7) / 8;   // at most ~8 labelled decades
        ticks.clear();
        for (int e = e0; e <= e1; e++)
            if ((e - e0) % every == 0 || e == e1) ticks.push_back({std::pow(10.0, e), 1, e});
    }
    a.lo = ticks.front().value;
    a.hi = ticks.back().value;
    for (const Tick& t : ticks) {
        a.ticks.push_back(t.value);
        a.labels.push_back(log_label(t.mantissa, t.exponent));
    }
    return a;
}

// The ten colours of the common "category10" palette: distinct, and readable on white.
const char* series_color(size_t i) {
    static const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    return colors[i % std::size(colors)];
}

}  // namespace

// =============================================================================================
// Line plot

std::string line_plot_svg(const std::string& title, const std::string& x_label,
                          const std::string& y_label, const std::vector<Series>& series,
                          const PlotOptions& options) {
    for (const Series& s : series)
        if (s.x.size() != s.y.size())
            throw std::invalid_argument("line plot: series '" + s.name + "' has " +
                                        std::to_string(s.x.size()) + " x values but " +
                                        std::to_string(s.y.size()) + " y values");
    const auto usable = [&](double x, double y) {
        return std::isfinite(x) && std::isfinite(y) && (!options.log_y || y > 0);
    };

    // 1) data ranges over the usable points, then the axes
    double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
    size_t points = 0;
    for (const Series& s : series)
        for (size_t i = 0; i < s.x.size(); i++)
            if (usable(s.x[i], s.y[i])) {
                x_min = std::min(x_min, s.x[i]), x_max = std::max(x_max, s.x[i]);
                y_min = std::min(y_min, s.y[i]), y_max = std::max(y_max, s.y[i]);
                points++;
            }
    const Axis xa = linear_axis(x_min, x_max);
    const Axis ya = options.log_y ? log_axis(y_min, y_max) : linear_axis(y_min, y_max);

    // 2) layout: margins sized to the tick labels, plot area in between
    const double font = 12, title_font = 16;
    double name_width = 0;   // the legend's box: a short line and the name of each series
    for (const Series& s : series) name_width = std::max(name_width, text_width(s.name, font));
    const double row = 18, box_w = 36 + name_width, box_h = 8 + row * series.size();
    const double beside = options.legend_outside && !series.empty() ? box_w + 16 : 0;   // the legend's room on the right
    const double W = std::max(options.width, 200) + beside, H = std::max(options.height, 150);
    double y_label_width = 0;
    for (const auto& l : ya.labels) y_label_width = std::max(y_label_width, text_width(l, font));
    const double left = 16 + (y_label.empty() ? 0 : font + 10) + y_label_width + 8;
    const double right = 16 + text_width(xa.labels.back(), font) / 2 + beside;   // room for the last x label (and the legend)
    const double top = title.empty() ? 16 : 40;
    const double bottom = 30 + (x_label.empty() ? 0 : font + 12);
    const double plot_w = W - left - right, plot_h = H - top - bottom;
    const auto px = [&](double x) { return left + xa.fraction(x) * plot_w; };
    const auto py = [&](double y) { return top + (1 - ya.fraction(y)) * plot_h; };

    std::ostringstream svg;
    svg << svg_open(W, H, title);
    if (!title.empty())
        svg << text_element(left + plot_w / 2, 26, "font-size=\"" + num(title_font) +
                            "\" font-weight=\"bold\" text-anchor=\"middle\"", title);

    // 3) grid lines and tick labels
    svg << "<g stroke=\"#e3e3e3\" stroke-width=\"1\">\n";
    for (double t : xa.ticks) svg << line_element(px(t), top, px(t), top + plot_h) << "\n";
    for (double t : ya.ticks) svg << line_element(left, py(t), left + plot_w, py(t)) << "\n";
    svg << "</g>\n";
    svg << "<g font-size=\"" << num(font) << "\" fill=\"#333\">\n";
    for (size_t i = 0; i < xa.ticks.size(); i++)
        svg << text_element(px(xa.ticks[i]), top + plot_h + 18, "text-anchor=\"middle\"", xa.labels[i]);
    for (size_t i = 0; i < ya.ticks.size(); i++)
        svg << text_element(left - 8, py(ya.ticks[i]), "text-anchor=\"end\" dy=\"0.35em\"", ya.labels[i]);
    svg << "</g>\n";
    if (!x_label.empty())
        svg << text_element(left + plot_w / 2, H - 12, "font-size=\"" + num(font) +
                            "\" text-anchor=\"middle\"", x_label);
    if (!y_label.empty()) {
        const double x = 16 + font / 2, y = top + plot_h / 2;
        svg << text_element(x, y, "font-size=\"" + num(font) + "\" text-anchor=\"middle\" dy=\"0.35em\" "
                            "transform=\"rotate(-90 " + num(x) + " " + num(y) + ")\"", y_label);
    }
    svg << rect_element(left, top, plot_w, plot_h, "fill=\"none\" stroke=\"#444\"") << "\n";

    // 4) one path per series, broken where points are skipped; dots when points are few
    svg << "<clipPath id=\"plot-area\">" << rect_element(left, top, plot_w, plot_h) << "</clipPath>\n";
    svg << "<g clip-path=\"url(#plot-area)\" fill=\"none\" stroke-width=\"1.8\" "
           "stroke-linejoin=\"round\" stroke-linecap=\"round\">\n";
    for (size_t k = 0; k < series.size(); k++) {
        const Series& s = series[k];
        std::string d, dots;
        size_t run = 0;   // points in the current unbroken run
        size_t usable_count = 0;
        for (size_t i = 0; i < s.x.size(); i++) usable_count += usable(s.x[i], s.y[i]);
        for (size_t i = 0; i < s.x.size(); i++) {
            if (!usable(s.x[i], s.y[i])) { run = 0; continue; }
            const std::string xy = num(px(s.x[i])) + "," + num(py(s.y[i]));
            d += (run == 0 ? (d.empty() ? "M" : " M") : " L") + xy;
            run++;
            // a dot where the line cannot show the point: alone, or when points are few
            const bool alone = (i == 0 || !usable(s.x[i - 1], s.y[i - 1])) &&
                               (i + 1 == s.x.size() || !usable(s.x[i + 1], s.y[i + 1]));
            if (usable_count <= 50 || alone)
                dots += "<circle cx=\"" + num(px(s.x[i])) + "\" cy=\"" + num(py(s.y[i])) + "\" r=\"2.5\"/>";
        }
        svg << "<path stroke=\"" << series_color(k) << "\" d=\"" << d << "\"/>\n";
        if (!dots.empty()) svg << "<g fill=\"" << series_color(k) << "\" stroke=\"none\">" << dots << "</g>\n";
    }
    svg << "</g>\n";
    if (points == 0)
        svg << text_element(left + plot_w / 2, top + plot_h / 2,
                            "font-size=\"14\" fill=\"#888\" text-anchor=\"middle\"", "no data");

    // 5) legend in the top-right corner of the plot, or beside it
    if (!series.empty()) {
        const double bx = beside > 0 ? W - box_w - 8 : left + plot_w - box_w - 8, by = top + 8;
        svg << "<g font-size=\"" << num(font) << "\">\n";
        svg << rect_element(bx, by, box_w, box_h, "fill=\"white\" fill-opacity=\"0.85\" stroke=\"#ccc\"") << "\n";
        for (size_t k = 0; k < series.size(); k++) {
            const double y = by + 4 + row * (k + 0.5);
            svg << line_element(bx + 6, y, bx + 26, y, "stroke=\"" + std::string(series_color(k)) + "\" stroke-width=\"2.5\"") << "\n";
            svg << text_element(bx + 31, y, "dy=\"0.35em\" fill=\"#222\"", series[k].name);
        }
        svg << "</g>\n";
    }
    svg << "</svg>\n";
    return svg.str();
}

void write_line_plot(const std::string& path, const std::string& title, const std::string& x_label,
                     const std::string& y_label, const std::vector<Series>& series,
                     const PlotOptions& options) {
    write_text_file(path, line_plot_svg(title, x_label, y_label, series, options));
}

// =============================================================================================
// Heatmaps

std::string heatmaps_svg(const std::string& title, const std::vector<Heatmap>& maps, int columns,
                         const HeatmapOptions& options) {
    for (const Heatmap& m : maps)
        if (m.values.size() != m.row_labels.size() * m.col_labels.size())
            throw std::invalid_argument("heatmap '" + m.title + "': " + std::to_string(m.values.size()) +
                                        " values for " + std::to_string(m.row_labels.size()) + " x " +
                                        std::to_string(m.col_labels.size()) + " labels");
    if (!(options.hi > options.lo))
        throw std::invalid_argument("heatmap: the colour scale's hi (" + num(options.hi) + ") must be above its lo (" +
                                    num(options.lo) + ")");
    const int max_label = 12;   // code points; longer labels end in "…"
    // a value's colour: lo is white, hi dark blue
    const auto colour_of = [&](float v) { return hex_color(heat_color((v - options.lo) / (options.hi - options.lo))); };

    // 1) one cell size and font for all maps, so the grid lines up
    size_t max_rows = 1, max_cols = 1;
    for (const Heatmap& m : maps) {
        max_rows = std::max(max_rows, m.row_labels.size());
        max_cols = std::max(max_cols, m.col_labels.size());
    }
    const double cell = options.cell > 0 ? options.cell : std::clamp(std::floor(300.0 / std::max(max_rows, max_cols)), 4.0, 24.0);
    const double font = options.label_font > 0 ? options.label_font : std::clamp(cell * 0.8, 7.0, 12.0);
    const int stride = options.label_every > 0 ? options.label_every
                                               : static_cast<int>(std::ceil(font * 1.1 / cell));   // label every stride-th
    double row_label_w = 0, col_label_h = 0, map_title_w = 0;
    for (const Heatmap& m : maps) {
        for (const auto& l : m.row_labels) row_label_w = std::max(row_label_w, text_width(utf8_truncate(l, max_label), font));
        for (const auto& l : m.col_labels) col_label_h = std::max(col_label_h, text_width(utf8_truncate(l, max_label), font));
        map_title_w = std::max(map_title_w, text_width(m.title, 13));
    }

    // 2) every panel: [title][column labels][cells], row labels on the left. The panels form a
    // grid of `ncols` columns; each row of the grid is as tall as its tallest map.
    const double gap = 6, map_title_h = 20;
    const double grid_w = max_cols * cell;
    const double panel_w = std::max(row_label_w + gap + grid_w, map_title_w);
    const double pad = 24, title_h = title.empty() ? 10 : 44, legend_h = 50;
    const int ncols = std::clamp(columns, 1, std::max<int>(1, static_cast<int>(maps.size())));
    const int nrows = (static_cast<int>(maps.size()) + ncols - 1) / ncols;
    std::vector<double> row_top(static_cast<size_t>(nrows) + 1, title_h);   // where each grid row starts
    for (int r = 0; r < nrows; r++) {
        size_t rows = 1;
        for (size_t k = static_cast<size_t>(r) * ncols; k < maps.size() && k < static_cast<size_t>(r + 1) * ncols; k++)
            rows = std::max(rows, maps[k].row_labels.size());
        row_top[r + 1] = row_top[r] + map_title_h + col_label_h + gap + rows * cell + pad;
    }
    const double W = std::max(pad + ncols * (panel_w + pad), 260.0 + 2 * pad);
    const double H = (nrows > 0 ? row_top[nrows] : title_h + pad) + legend_h;

    std::ostringstream svg;
    svg << svg_open(W, H, title);
    if (!title.empty())
        svg << text_element(W / 2, 28, "font-size=\"16\" font-weight=\"bold\" text-anchor=\"middle\"", title);
    if (maps.empty())
        svg << text_element(W / 2, title_h + 20, "font-size=\"14\" fill=\"#888\" text-anchor=\"middle\"", "no heatmaps");

    for (size_t k = 0; k < maps.size(); k++) {
        const Heatmap& m = maps[k];
        const size_t R = m.row_labels.size(), C = m.col_labels.size();
        const double x0 = pad + (k % ncols) * (panel_w + pad);
        const double y0 = row_top[k / ncols];
        const double gx = x0 + row_label_w + gap;                       // the cells' top-left
        const double gy = y0 + map_title_h + col_label_h + gap;

        svg << "<g>\n";
        // the title centred over the cells, unless that would push it out of the panel
        const double title_x = std::max(gx + C * cell / 2, x0 + text_width(m.title, 13) / 2);
        svg << text_element(title_x, y0 + 14, "font-size=\"13\" text-anchor=\"middle\"", m.title);
        // row labels, right-aligned against the cells; column labels rotated to read upwards
        svg << "<g font-size=\"" << num(font) << "\" fill=\"#222\">\n";
        for (size_t r = 0; r < R; r += stride)
            svg << text_element(gx - 4, gy + (r + 0.5) * cell, "text-anchor=\"end\" dy=\"0.35em\"",
                                utf8_truncate(m.row_labels[r], max_label));
        for (size_t c = 0; c < C; c += stride) {
            const double x = gx + (c + 0.5) * cell, y = gy - 4;
            svg << text_element(x, y, "dy=\"0.35em\" transform=\"rotate(-90 " + num(x) + " " + num(y) + ")\"",
                                utf8_truncate(m.col_labels[c], max_label));
        }
        svg << "</g>\n";
        // the cells, each with a tooltip "row -> col: value"
        svg << "<g shape-rendering=\"crispEdges\">\n";
        for (size_t r = 0; r < R; r++) {
            for (size_t c = 0; c < C; c++) {
                const float v = m.values[r * C + c];
                const std::string fill = std::isnan(v) ? "#bbbbbb" : colour_of(v);
                if (options.skip_white_cells && fill == "#ffffff") continue;   // the background shows through
                char value_text[32];
                std::snprintf(value_text, sizeof(value_text), "%.3f", v);
                svg << "<rect class=\"cell\" x=\"" << num(gx + c * cell) << "\" y=\"" << num(gy + r * cell)
                    << "\" width=\"" << num(cell) << "\" height=\"" << num(cell) << "\" fill=\"" << fill
                    << "\"><title>" << xml_escape(m.row_labels[r]) << " \u2192 " << xml_escape(m.col_labels[c])
                    << ": " << value_text << "</title></rect>\n";
            }
        }
        svg << rect_element(gx, gy, C * cell, R * cell, "fill=\"none\" stroke=\"#999\"") << "\n";
        svg << "</g>\n</g>\n";
    }

    const double lx = pad, ly = H - legend_h + 12;
    if (!options.legend.empty()) {
        // 3a) a legend: one swatch per value the data takes, with what it means
        double x = lx;
        svg << "<g font-size=\"12\" fill=\"#222\">\n";
        for (const Swatch& s : options.legend) {
            svg << rect_element(x, ly, 16, 16, "fill=\"" + colour_of(s.value) + "\" stroke=\"#777\"") << "\n";
            svg << text_element(x + 22, ly + 8, "dy=\"0.35em\"", s.label);
            x += 22 + text_width(s.label, 12) + 24;
        }
        svg << "</g>\n</svg>\n";
        return svg.str();
    }
    // 3b) the colour scale: a gradient bar from lo to hi with the same stops as heat_color
    const double lw = 200, lh = 12;
    svg << "<linearGradient id=\"heat-scale\">";
    for (int i = 0; i <= 4; i++)
        svg << "<stop offset=\"" << num(i / 4.0) << "\" stop-color=\"" << hex_color(heat_color(i / 4.0f)) << "\"/>";
    svg << "</linearGradient>\n";
    svg << rect_element(lx, ly, lw, lh, "fill=\"url(#heat-scale)\" stroke=\"#999\"") << "\n";
    svg << "<g font-size=\"11\" fill=\"#333\" text-anchor=\"middle\">\n";
    for (int i = 0; i <= 4; i++)
        svg << text_element(lx + lw * i / 4, ly + lh + 14, "", num(options.lo + (options.hi - options.lo) * i / 4.0));
    svg << "</g>\n</svg>\n";
    return svg.str();
}

void write_heatmaps(const std::string& path, const std::string& title,
                    const std::vector<Heatmap>& maps, int columns, const HeatmapOptions& options) {
    write_text_file(path, heatmaps_svg(title, maps, columns, options));
}

// =============================================================================================
// A canvas for diagrams

SvgCanvas::SvgCanvas(double width, double height, const std::string& title)
    : width_(width), height_(height), title_(title) {}

void SvgCanvas::box(double x, double y, double w, double h, const std::string& fill, const std::string& label, double font,
                    const std::string& stroke) {
    body_ += rect_element(x, y, w, h, "rx=\"5\" fill=\"" + fill + "\" stroke=\"" + stroke + "\"") + "\n";
    if (!label.empty()) text(x + w / 2, y + h / 2, label, font);
}

void SvgCanvas::line(double x1, double y1, double x2, double y2, const std::string& stroke, double width, bool dashed) {
    body_ += line_element(x1, y1, x2, y2, "stroke=\"" + stroke + "\" stroke-width=\"" + num(width) + "\"" +
                                              (dashed ? " stroke-dasharray=\"5 4\"" : "")) + "\n";
}

// An arrowhead: a triangle with its tip at (x2, y2), pointing along the unit vector (ux, uy).
static std::string arrow_head(double x2, double y2, double ux, double uy, double head, const std::string& stroke) {
    const double bx = x2 - ux * head, by = y2 - uy * head;   // the middle of the head's base
    return "<polygon points=\"" + num(x2) + "," + num(y2) + " " + num(bx - uy * head / 2) + "," + num(by + ux * head / 2) + " " +
           num(bx + uy * head / 2) + "," + num(by - ux * head / 2) + "\" fill=\"" + stroke + "\"/>\n";
}

void SvgCanvas::arrow(double x1, double y1, double x2, double y2, const std::string& stroke, double width, bool dashed) {
    // the shaft stops at the head's base; the head is a triangle drawn at (x2, y2)
    const double len = std::hypot(x2 - x1, y2 - y1), head = 8;
    if (len <= 0) return;
    const double ux = (x2 - x1) / len, uy = (y2 - y1) / len;
    line(x1, y1, x2 - ux * head, y2 - uy * head, stroke, width, dashed);
    body_ += arrow_head(x2, y2, ux, uy, head, stroke);
}

void SvgCanvas::curved_arrow(double x1, double y1, double x2, double y2, double bend, const std::string& stroke, double width,
                             bool dashed) {
    // a quadratic Bezier curve whose control point sits `2 * bend` off the chord's middle (the
    // curve itself then passes `bend` from it); the head points along the curve's last tangent
    const double len = std::hypot(x2 - x1, y2 - y1), head = 8;
    if (len <= 0) return;
    const double nx = (y2 - y1) / len, ny = -(x2 - x1) / len;   // the chord's left normal (y down)
    const double cx = (x1 + x2) / 2 + 2 * bend * nx, cy = (y1 + y2) / 2 + 2 * bend * ny;
    const double tl = std::hypot(x2 - cx, y2 - cy), ux = (x2 - cx) / tl, uy = (y2 - cy) / tl;
    body_ += "<path d=\"M" + num(x1) + "," + num(y1) + " Q" + num(cx) + "," + num(cy) + " " + num(x2 - ux * head) + "," +
             num(y2 - uy * head) + "\" fill=\"none\" stroke=\"" + stroke + "\" stroke-width=\"" + num(width) + "\"" +
             (dashed ? " stroke-dasharray=\"5 4\"" : "") + "/>\n";
    body_ += arrow_head(x2, y2, ux, uy, head, stroke);
}

void SvgCanvas::rect(double x, double y, double w, double h, const std::string& fill, const std::string& stroke, double width) {
    body_ += rect_element(x, y, w, h, "fill=\"" + fill + "\" stroke=\"" + stroke + "\" stroke-width=\"" + num(width) + "\"") + "\n";
}


void SvgCanvas::text(double x, double y, const std::string& str, double font, const std::string& anchor,
                     const std::string& fill, bool bold) {
    body_ += text_element(x, y, "font-size=\"" + num(font) + "\" text-anchor=\"" + anchor + "\" dy=\"0.35em\" fill=\"" + fill +
                                    "\"" + (bold ? " font-weight=\"bold\"" : ""), str);
}

std::string SvgCanvas::svg() const { return svg_open(width_, height_, title_) + body_ + "</svg>\n"; }

}  // namespace common
