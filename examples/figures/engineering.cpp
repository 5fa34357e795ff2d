// The figures of Part II drawn here: chapter 15's step against its floor and on 1 and 2 threads
// (from the numbers of its table), and the bf16 bit layout (chapter 16). (Chapter 15's GEMM
// blocking is drawn by bench/bench_gemm.cpp, --tile-picture: it shows the machinery's own sizes.)
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/mixed_precision.h"
#include "examples/common/svg.h"
#include "examples/figures/figures.h"

namespace figures {

namespace {

std::string str(double v) {   // 3.14159274, 192
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

std::string exact(double v) {   // a bf16 value, all its digits: -0.10009765625
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.12g", v);
    return buf;
}

std::string hex(uint32_t v, int digits) {   // hex(0x4049, 4) = "0x4049"
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%0*X", digits, static_cast<unsigned>(v));
    return buf;
}
// Horizontal bars on one time axis, each with its label and value; a bar with a range gets a
// whisker from its low to its high end. A dashed line marks `reference_ms` when it is > 0.
struct Bar {
    std::string label;
    double lo_ms, hi_ms;
    std::string fill;
};
void time_bars(const std::string& path, const std::string& title, const std::vector<Bar>& bars, double axis_ms,
               double reference_ms, const std::string& reference_label) {
    const double left = 250, width = 430, top = 60, row = 46, bar_h = 26;
    const double height = top + row * static_cast<double>(bars.size()) + 40;
    common::SvgCanvas c(left + width + 110, height, title);
    c.text(20, 24, title, 15, "start", "#222", true);
    const auto x_of = [&](double ms) { return left + width * ms / axis_ms; };
    for (size_t i = 0; i < bars.size(); i++) {
        const Bar& b = bars[i];
        const double y = top + row * static_cast<double>(i);
        const double mid = (b.lo_ms + b.hi_ms) / 2;
        c.text(left - 10, y + bar_h / 2 + 4, b.label, 13, "end");
        c.rect(left, y, x_of(mid) - left, bar_h, b.fill, "#333", 1);
        if (b.hi_ms > b.lo_ms) c.line(x_of(b.lo_ms), y + bar_h / 2, x_of(b.hi_ms), y + bar_h / 2, "#000", 2);
        char value[64];
        if (b.hi_ms > b.lo_ms) std::snprintf(value, sizeof value, "%.1f-%.1f ms", b.lo_ms, b.hi_ms);
        else std::snprintf(value, sizeof value, "%.1f ms", b.lo_ms);
        c.text(x_of(b.hi_ms) + 8, y + bar_h / 2 + 4, value, 12, "start");
    }
    const double axis_y = top + row * static_cast<double>(bars.size()) + 4;
    c.line(left, axis_y, left + width, axis_y, "#444", 1);
    for (int t = 0; t <= 4; t++) {
        const double ms = axis_ms * t / 4;
        c.line(x_of(ms), axis_y, x_of(ms), axis_y + 5, "#444", 1);
        c.text(x_of(ms), axis_y + 18, str(ms) + " ms", 11);
    }
    if (reference_ms > 0) {
        c.line(x_of(reference_ms), top - 8, x_of(reference_ms), axis_y, "#c0392b", 1.5, true);
        c.text(x_of(reference_ms), top - 14, reference_label, 11, "middle", "#c0392b");
    }
    common::write_text_file(path, c.svg());
    wrote(path);
}

}  // namespace

// ---------------------------------------------------------------- chapter 16: the bf16 bit layout

// docs/15: --paper's measured step between its floor and PyTorch's, from the chapter's table.
void step_floor(const std::string& path) {
    const StepTimes& t = kStepTimes;
    time_bars(path, "--paper training step, fp32, 2 threads: the floor, this project, PyTorch",
              {{"floor: 67 GFLOP at 2 x 225 GFLOP/s", t.paper_floor_ms, t.paper_floor_ms, "#d9d9d9"},
               {"this project", t.paper_ours_ms, t.paper_ours_ms, "#6baed6"},
               {"PyTorch 1.13", t.paper_torch_ms, t.paper_torch_ms, "#fdae6b"}},
              400.0, t.paper_floor_ms, "floor");
}

// docs/15: the D = 128 step on 1 and 2 threads (the ranges of the runs), against half of 1 thread's.
void two_threads(const std::string& path) {
    const StepTimes& t = kStepTimes;
    const double one = (t.d128_one_thread_ms[0] + t.d128_one_thread_ms[1]) / 2;
    time_bars(path, "D = 128 training step on 1 and 2 threads (dashed: half of 1 thread's time)",
              {{"1 thread", t.d128_one_thread_ms[0], t.d128_one_thread_ms[1], "#c6dbef"},
               {"2 threads, 2 shards", t.d128_two_threads_ms[0], t.d128_two_threads_ms[1], "#6baed6"}},
              32.0, one / 2, "1 thread / 2");
}

// fp32 and bf16 side by side for three values of docs/16: the fp32 bits (std::memcpy of the float)
// and the bits of autograd::round_to_bf16, the conversion the bf16 products read with. bf16 keeps
// fp32's top 16 bits (sign, the same 8 exponent bits, 7 of the 23 mantissa bits); the dropped half
// decides the rounding: below 0x8000 down, above up (+1 in the last kept bit), exactly 0x8000 to
// the neighbour whose last bit is 0 (ties to even).
void bf16_bits(const std::string& path) {
    const float examples[] = {3.14159265f, -0.1f, 1.00390625f};
    const double cell = 22, x0 = 150, top = 100, block = 112;
    common::SvgCanvas c(x0 + 32 * cell + 30, top + 3 * block - 10, "fp32 and bf16 bit layouts");
    c.text(20, 22, "bf16 is the top 16 bits of an fp32, rounded to nearest even (round_to_bf16)", 16, "start", "#222", true);
    const std::string sign = "#fcbba1", exponent = "#c7e9c0", mantissa = "#c6dbef", dropped = "#eeeeee";
    // the field widths, over the first fp32 row
    auto field = [&](int from, int to, const std::string& label, double y) {   // bits from..to, 0 = the sign bit
        c.line(x0 + from * cell + 2, y, x0 + (to + 1) * cell - 2, y, "#444", 1);
        c.text(x0 + (from + to + 1) * cell / 2, y - 9, label, 11, "middle", "#444");
    };
    field(0, 0, "sign", top - 30);
    field(1, 8, "exponent: 8 bits", top - 30);
    field(9, 31, "fp32 mantissa: 23 bits", top - 30);
    field(9, 15, "bf16 keeps 7", top - 50);
    field(16, 31, "the low 16 bits: dropped by bf16, after rounding", top - 50);
    for (int e = 0; e < 3; e++) {
        const float x = examples[e];
        uint32_t f;
        std::memcpy(&f, &x, sizeof f);
        const float rounded = autograd::round_to_bf16(x);
        uint32_t r;
        std::memcpy(&r, &rounded, sizeof r);
        const uint16_t b = static_cast<uint16_t>(r >> 16);   // the bf16 bits: the rounded float's top half
        const uint32_t top_half = f >> 16, low_half = f & 0xFFFF;
        if (b != top_half && b != top_half + 1) throw std::logic_error("bf16_bits: not the top half of the float, rounded");
        const double y = top + e * block;
        auto bits = [&](uint32_t word, int n, double yy, bool dim_low) {   // n bits, most significant first
            for (int i = 0; i < n; i++) {
                const int bit = static_cast<int>((word >> (n - 1 - i)) & 1u);
                const std::string fill = dim_low && i >= 16 ? dropped : i == 0 ? sign : i <= 8 ? exponent : mantissa;
                c.rect(x0 + i * cell, yy, cell, cell, fill, "#888", 0.8);
                c.text(x0 + (i + 0.5) * cell, yy + cell / 2, std::to_string(bit), 12, "middle", dim_low && i >= 16 ? "#999" : "#222");
            }
        };
        bits(f, 32, y, true);
        c.text(x0 - 10, y + cell / 2 - 7, "fp32 " + hex(f, 8), 12, "end", "#222", true);
        c.text(x0 - 10, y + cell / 2 + 8, (std::strtod(str(x).c_str(), nullptr) == x ? "= " : "≈ ") + str(x), 11, "end", "#444");
        bits(b, 16, y + cell + 22, false);
        c.text(x0 - 10, y + cell + 22 + cell / 2 - 7, "bf16 " + hex(b, 4), 12, "end", "#222", true);
        c.text(x0 - 10, y + cell + 22 + cell / 2 + 8, "= " + exact(rounded), 11, "end", "#444");
        // what happened to the dropped half
        const std::string half = "dropped half " + hex(low_half, 4);
        const std::string why[2] = {low_half < 0x8000   ? half + " < 0x8000:" : low_half > 0x8000 ? half + " > 0x8000:"
                                                                                                : half + ": a tie,",
                                    low_half < 0x8000      ? "rounds down, the top half as it is"
                                    : low_half > 0x8000    ? "rounds up, +1 in the last kept bit"
                                    : (top_half & 1u) == 0 ? "to even: the last kept bit is 0, so it stays"
                                                           : "to even: the last kept bit is 1, so up"};
        c.text(x0 + 16 * cell + 10, y + cell + 22 + cell / 2 - 7, why[0], 11, "start", "#444");
        c.text(x0 + 16 * cell + 10, y + cell + 22 + cell / 2 + 8, why[1], 11, "start", "#444");
    }
    common::write_text_file(path, c.svg());
    wrote(path);
}

}  // namespace figures
