// A heatmap drawn with text, for a quick look at attention weights in the terminal.
//
//   std::cout << common::terminal_heatmap(map, /*color=*/isatty(STDOUT_FILENO));
//
//   layer 0 head 0   ( ░▒▓█ = 0..1)
//          a
//          b   c       <- column labels written downwards, their last letters next to the cells
//     ab ████░░
//      c ░░▓▓██
//
// Lines: 1 title line, then one line per code point of the longest column label (at most 8),
// then one line per row. Each cell is two characters wide; labels are cut to 8 (columns) or
// 12 (rows) code points, ending in "…". Alignment counts code points, so labels in scripts with
// double-width characters (CJK) will be misaligned.
#pragma once

#include <string>

#include "examples/common/svg.h"   // Heatmap

namespace common {

// color=false: shade characters " ░▒▓█" (0, 0.25, 0.5, 0.75, 1 rounded to the nearest).
// color=true: ANSI 256-colour backgrounds from white to dark blue (ten levels).
std::string terminal_heatmap(const Heatmap& map, bool color);

}  // namespace common
