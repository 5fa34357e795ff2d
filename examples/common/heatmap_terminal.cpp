#include "examples/common/heatmap_terminal.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "autograd/io/utf8.h"

namespace common {

namespace {

// Split text into its code points, each as a small UTF-8 string.
std::vector<std::string> code_points(const std::string& text) {
    std::vector<std::string> out;
    for (char32_t cp : autograd::io::to_code_points(text)) out.push_back(autograd::io::encode_utf8(cp));
    return out;
}

// Width on a terminal, in columns: one per code point (true of most scripts, not of CJK).
int width(const std::string& text) { return static_cast<int>(autograd::io::count_code_points(text)); }

// The xterm 256-colour cube index nearest to an RGB colour. The cube's six levels per
// channel are 0, 95, 135, 175, 215, 255; index = 16 + 36 r + 6 g + b.
int cube_index(Rgb c) {
    const auto level = [](int v) {
        static const int levels[6] = {0, 95, 135, 175, 215, 255};
        int best = 0;
        for (int i = 1; i < 6; i++)
            if (std::abs(levels[i] - v) < std::abs(levels[best] - v)) best = i;
        return best;
    };
    return 16 + 36 * level(c.r) + 6 * level(c.g) + level(c.b);
}

// Two characters for one cell.
std::string shade_cell(float v) {
    static const char* shades[5] = {" ", "\u2591", "\u2592", "\u2593", "\u2588"};   // " ░▒▓█"
    if (std::isnan(v)) return "??";
    const int k = static_cast<int>(std::lround(std::clamp(v, 0.0f, 1.0f) * 4));
    return std::string(shades[k]) + shades[k];
}

std::string color_cell(float v) {
    const int index = std::isnan(v) ? 250 : cube_index(heat_color(v));   // 250: light grey
    return "\x1b[48;5;" + std::to_string(index) + "m  ";
}

void trim_right(std::string& s) {
    while (!s.empty() && s.back() == ' ') s.pop_back();
}

}  // namespace

std::string terminal_heatmap(const Heatmap& map, bool color) {
    const size_t R = map.row_labels.size(), C = map.col_labels.size();
    if (map.values.size() != R * C)
        throw std::invalid_argument("terminal_heatmap '" + map.title + "': " +
                                    std::to_string(map.values.size()) + " values for " +
                                    std::to_string(R) + " x " + std::to_string(C) + " labels");
    const int max_col_label = 8, max_row_label = 12;

    // 1) labels: sanitized (control characters become visible symbols), cut, split into code points
    std::vector<std::vector<std::string>> cols;
    size_t header_h = 0;
    for (const auto& l : map.col_labels) {
        cols.push_back(code_points(utf8_truncate(printable_text(l), max_col_label)));
        header_h = std::max(header_h, cols.back().size());
    }
    std::vector<std::string> rows;
    int row_w = 0;
    for (const auto& l : map.row_labels) {
        rows.push_back(utf8_truncate(printable_text(l), max_row_label));
        row_w = std::max(row_w, width(rows.back()));
    }

    std::string out;
    // 2) the title, with the scale
    std::string scale;
    if (color) {
        for (float v : {0.0f, 0.25f, 0.5f, 0.75f, 1.0f}) scale += color_cell(v);
        scale = "(0 " + scale + "\x1b[0m 1)";
    } else {
        scale = "(\u2591\u2592\u2593\u2588 = 0.25 0.5 0.75 1)";
    }
    out += (map.title.empty() ? "" : printable_text(map.title) + "   ") + scale + "\n";

    // 3) column labels written downwards, bottom-aligned so each ends just above its cells
    for (size_t h = 0; h < header_h; h++) {
        std::string line(row_w + 1, ' ');
        for (const auto& label : cols) {
            const size_t blank = header_h - label.size();   // rows above a short label
            line += (h >= blank ? label[h - blank] : " ") + std::string(" ");
        }
        trim_right(line);
        out += line + "\n";
    }

    // 4) one line per row: the right-aligned label, then two characters per cell
    for (size_t r = 0; r < R; r++) {
        std::string line(row_w - width(rows[r]), ' ');
        line += rows[r] + " ";
        for (size_t c = 0; c < C; c++) {
            const float v = map.values[r * C + c];
            line += color ? color_cell(v) : shade_cell(v);
        }
        if (color && C > 0) line += "\x1b[0m";
        out += line + "\n";
    }
    return out;
}

}  // namespace common
