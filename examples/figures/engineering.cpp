// The figures of Part II: the GEMM's blocking (chapter 15) and the bf16 bit layout (chapter 16).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/kernels/gemm.h"
#include "autograd/kernels/gemm_bf16.h"
#include "autograd/kernels/gemm_micro_kernel.h"
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

// The sizes the GEMM figure shows: those of gemm_micro_kernel.h's Avx2Fma, on every machine, so
// that the committed figure does not depend on the CPU `make figures` ran on. Where the build has
// that struct (x86-64 with AVX2 and FMA), the compiler checks that the two still agree.
struct Avx2Sizes {
    static constexpr int kLanes = 8, MR = 6, NR = 16, KC = 512, MC = 192, NC = 4096;
};
#if defined(__AVX2__) && defined(__FMA__)
using autograd::kernels::gemm_driver::Avx2Fma;
static_assert(Avx2Fma::kLanes == Avx2Sizes::kLanes && Avx2Fma::MR == Avx2Sizes::MR && Avx2Fma::NR == Avx2Sizes::NR &&
                  Avx2Fma::KC == Avx2Sizes::KC && Avx2Fma::MC == Avx2Sizes::MC && Avx2Fma::NC == Avx2Sizes::NC,
              "gemm_micro_kernel.h's Avx2Fma changed: update Avx2Sizes (and the figure's text in docs/15)");
#endif

}  // namespace

// ---------------------------------------------------------------- chapter 15: the GEMM's blocking

// C (M x N) += op(A) (M x K) · op(B) (K x N) as gemm() cuts it (autograd/kernels/gemm.cpp), with
// AVX2+FMA's sizes: a KC x NC panel of B and an MC x KC block of A are packed; C's MC x NC block is
// computed in MR x NR tiles, each one micro_kernel call that keeps the tile in registers while it
// runs over the KC values of k with one MR-row sliver of A and one NR-column sliver of B.
// Not to scale: the blocks are drawn a few slivers wide.
void gemm_tile(const std::string& path) {
    using S = Avx2Sizes;
    const std::string kernel = autograd::kernels::gemm_kernel_name(autograd::kernels::GemmKernel::avx2_fma);
    const std::string a_fill = "#fdd0a2", b_fill = "#c6dbef", c_fill = "#e5f5e0", tile = "#31a354";
    const std::string a_ink = "#a63603", b_ink = "#08519c", c_ink = "#006d2c";
    const auto n = [](int v) { return std::to_string(v); };
    common::SvgCanvas c(980, 675, "GEMM blocking: " + kernel);
    c.text(490, 22, "gemm(): C += op(A) · op(B) in cache blocks and register tiles, " + kernel, 16, "middle", "#222", true);
    c.text(490, 44, "MR = " + n(S::MR) + ", NR = " + n(S::NR) + ", KC = " + n(S::KC) + ", MC = " + n(S::MC) + ", NC = " + n(S::NC) +
                        " (Avx2Fma in gemm_micro_kernel.h). Not to scale: each block is drawn a few slivers wide.",
           12, "middle", "#444");

    // 1) the three matrices: B above C, A to the left of C (row i of A meets column j of B in C)
    const double ax = 40, ay = 300, aw = 180, ah = 230;    // op(A): M x K
    const double bx = 250, by = 70, bw = 300, bh = 200;    // op(B): K x N
    const double cx = bx, cy = ay, cw = bw, ch = ah;       // C: M x N
    c.rect(ax, ay, aw, ah, "#f7f7f7", "#777");
    c.rect(bx, by, bw, bh, "#f7f7f7", "#777");
    c.rect(cx, cy, cw, ch, "#f7f7f7", "#777");
    c.text(ax + aw / 2, ay + ah + 16, "op(A): M x K", 12);
    c.text(bx - 8, by + 12, "op(B): K x N", 12, "end");
    c.text(cx + cw / 2, cy + ch + 16, "C: M x N", 12);

    // the blocks: A's MC x KC block (rows ic.., columns pc..), B's KC x NC panel (rows pc..,
    // columns jc..), and the MC x NC block of C they update
    const int a_slivers = 5, b_slivers = 7;                // drawn; really MC/MR and NC/NR
    const double sl_h = 22, sl_w = 24;                     // one MR-row sliver, one NR-column sliver
    const double kc_a = 100, kc_b = kc_a * bh / aw;        // KC, along A's columns and along B's rows
    const double pc_a = ax + 45, pc_b = by + 45 * bh / aw; // where the KC slice starts in A and in B
    const double ic = ay + 40, jc = bx + 24;               // where the MC rows and the NC columns start
    const double mc = a_slivers * sl_h, nc = b_slivers * sl_w;
    c.rect(pc_a, ic, kc_a, mc, a_fill, a_ink, 1.5);
    for (int s = 1; s < a_slivers; s++) c.line(pc_a, ic + s * sl_h, pc_a + kc_a, ic + s * sl_h, a_ink, 0.8);
    c.rect(jc, pc_b, nc, kc_b, b_fill, b_ink, 1.5);
    for (int s = 1; s < b_slivers; s++) c.line(jc + s * sl_w, pc_b, jc + s * sl_w, pc_b + kc_b, b_ink, 0.8);
    c.rect(jc, ic, nc, mc, c_fill, c_ink, 1.5);
    for (int s = 1; s < a_slivers; s++) c.line(jc, ic + s * sl_h, jc + nc, ic + s * sl_h, "#74c476", 0.8);
    for (int s = 1; s < b_slivers; s++) c.line(jc + s * sl_w, ic, jc + s * sl_w, ic + mc, "#74c476", 0.8);
    // one micro-kernel call: tile (2, 4) of C's block, from sliver 2 of Ap and sliver 4 of Bp
    const int tr = 2, tc = 4;
    c.rect(pc_a, ic + tr * sl_h, kc_a, sl_h, "#fd8d3c", a_ink, 1.5);
    c.rect(jc + tc * sl_w, pc_b, sl_w, kc_b, "#6baed6", b_ink, 1.5);
    c.rect(jc + tc * sl_w, ic + tr * sl_h, sl_w, sl_h, tile, "#00441b", 2);
    c.line(pc_a + kc_a, ic + (tr + 0.5) * sl_h, jc + tc * sl_w, ic + (tr + 0.5) * sl_h, a_ink, 1, true);
    c.line(jc + (tc + 0.5) * sl_w, pc_b + kc_b, jc + (tc + 0.5) * sl_w, ic + tr * sl_h, b_ink, 1, true);
    // the sizes along the blocks' edges
    c.text(pc_a + kc_a / 2, ic - 8, "KC = " + n(S::KC), 11, "middle", a_ink);
    c.text(pc_a - 6, ic + mc / 2, "MC", 11, "end", a_ink);
    c.text(jc - 6, pc_b + kc_b / 2, "KC", 11, "end", b_ink);
    c.text(jc + nc / 2, pc_b - 8, "NC = " + n(S::NC), 11, "middle", b_ink);
    c.text(jc + (tc + 1) * sl_w + 4, ic + (tr + 0.5) * sl_h, "MR", 10, "start", "#00441b");
    c.text(jc + (tc + 0.5) * sl_w, ic + mc + 10, "NR", 10, "middle", "#00441b");
    // what each block is, and where it lives (KiB of floats)
    const auto kib = [](long floats) { return std::to_string(floats * 4 / 1024) + " KiB"; };
    c.text(ax + aw / 2, ay - 26, "Ap: the MC x KC block, packed", 11, "middle", a_ink, true);
    c.text(ax + aw / 2, ay - 12, std::string("(") + kib(long(S::MC) * S::KC) + ": stays in L2)", 11, "middle", a_ink);
    c.text(pc_a + kc_a / 2, ic + mc + 14, n(S::MC / S::MR) + " slivers", 11, "middle", a_ink);
    c.text(pc_a + kc_a / 2, ic + mc + 28, "of MR x KC", 11, "middle", a_ink);
    c.text(jc + nc + 8, pc_b + 10, "Bp: the KC x NC", 11, "start", b_ink, true);
    c.text(jc + nc + 8, pc_b + 24, "panel, packed", 11, "start", b_ink, true);
    c.text(jc + nc + 8, pc_b + 38, std::string("(") + kib(long(S::KC) * S::NC) + ": L3)", 11, "start", b_ink);
    c.text(jc + nc + 8, pc_b + 56, n(S::NC / S::NR) + " slivers of", 11, "start", b_ink);
    c.text(jc + nc + 8, pc_b + 70, "KC x NR (" + kib(long(S::KC) * S::NR) + ": L1)", 11, "start", b_ink);
    c.text(jc + nc + 8, ic + 10, "C's MC x NC block:", 11, "start", c_ink, true);
    c.text(jc + nc + 8, ic + 24, "one MR x NR tile per", 11, "start", c_ink);
    c.text(jc + nc + 8, ic + 38, "micro_kernel call", 11, "start", c_ink);

    // 2) the micro-kernel: the dark tile, in vector registers, over the KC values of k
    const double mx = 650, my = 330, mcell = 12;
    const int vectors = S::NR / S::kLanes;
    c.text(mx - 30, 296, "micro_kernel: the dark " + n(S::MR) + " x " + n(S::NR) + " tile", 13, "start", "#222", true);
    c.text(mx + S::NR * mcell / 2, my - 10, "row k of the B sliver: " + n(vectors) + " vectors of " + n(S::kLanes), 11, "middle", b_ink);
    for (int j = 0; j < S::NR; j++) c.rect(mx + j * mcell, my, mcell, mcell, "#6baed6", b_ink, 0.6);
    for (int r = 0; r < S::MR; r++) c.rect(mx - 22, my + 22 + r * mcell, mcell, mcell, "#fd8d3c", a_ink, 0.6);   // A(r, k)
    for (int r = 0; r < S::MR; r++)
        for (int j = 0; j < S::NR; j++) c.rect(mx + j * mcell, my + 22 + r * mcell, mcell, mcell, tile, "#00441b", 0.4);
    for (int r = 0; r < S::MR; r++)   // each accumulator: one register of kLanes floats
        for (int v = 0; v < vectors; v++)
            c.rect(mx + v * S::kLanes * mcell, my + 22 + r * mcell, S::kLanes * mcell, mcell, "none", "#fff", 2);
    for (int v = 0; v < vectors; v++) c.rect(mx + v * S::kLanes * mcell, my, S::kLanes * mcell, mcell, "none", "#08306b", 2);
    c.text(mx + S::NR * mcell + 8, my + 22 + S::MR * mcell / 2 - 8, n(S::MR * vectors) + " accumulators", 11, "start", "#00441b");
    c.text(mx + S::NR * mcell + 8, my + 22 + S::MR * mcell / 2 + 8, "(ymm registers)", 11, "start", "#00441b");
    c.text(mx - 30, my + 22 + S::MR * mcell + 16, "A(r, k), broadcast to all lanes", 11, "start", a_ink);
    // what one k costs, as gemm_micro_kernel.h's comment counts it
    const double ty = my + 22 + S::MR * mcell + 46;
    const struct { double indent; std::string code, count; } steps[] = {
        {0, "for k = 0 .. KC-1:", ""},
        {14, "b[v] = NR floats of B's row k", n(vectors) + " loads"},
        {14, "for r = 0 .. MR-1:", ""},
        {28, "a = A(r, k) in every lane", n(S::MR) + " broadcasts"},
        {28, "acc[r][v] += a · b[v]", n(S::MR * vectors) + " fused multiply-adds"}};
    for (int i = 0; i < 5; i++) {
        c.text(mx - 30 + steps[i].indent, ty + i * 17, steps[i].code, 11, "start", "#222");
        if (!steps[i].count.empty()) c.text(mx + 175, ty + i * 17, steps[i].count, 11, "start", "#666");
    }
    c.text(mx - 30, ty + 5 * 17 + 4, n(S::MR * vectors) + " + " + n(vectors) + " + 1 = " + n(S::MR * vectors + vectors + 1) +
                                         " of the 16 ymm registers", 11, "start", "#444");

    // 3) the loop nest of gemm.cpp, outermost first
    const double ly = 600;
    c.text(40, ly - 20, "The loops of gemm.cpp, outermost first:", 12, "start", "#222", true);
    c.text(40, ly, "for jc in N, step NC = " + n(S::NC) + ", then for pc in K, step KC = " + n(S::KC) +
                       ":  pack the KC x NC panel of op(B) into Bp", 12, "start", b_ink);
    c.text(60, ly + 18, "for ic in M, step MC = " + n(S::MC) + " (split among threads):  pack the MC x KC block of op(A) into Ap", 12,
           "start", a_ink);
    c.text(80, ly + 36, "for jr in NC, step NR = " + n(S::NR) + ", then for ir in MC, step MR = " + n(S::MR) +
                            ":  micro_kernel: C[ic+ir : +MR, jc+jr : +NR] += Ap sliver · Bp sliver", 12, "start", c_ink);
    c.text(40, ly + 58, "Where packing would buy nothing, gemm.cpp skips it: op(A) not transposed is read in place (its rows are "
                        "already contiguous), and only a last, partial sliver is packed.", 11, "start", "#666");
    common::write_text_file(path, c.svg());
    wrote(path);
}

// ---------------------------------------------------------------- chapter 16: the bf16 bit layout

// fp32 and bf16 side by side for three values of docs/16: the fp32 bits (std::memcpy of the float)
// and the bf16 bits from kernels::bf16_bits, the conversion gemm_bf16 packs with. bf16 keeps
// fp32's top 16 bits (sign, the same 8 exponent bits, 7 of the 23 mantissa bits); the dropped half
// decides the rounding: below 0x8000 down, above up (+1 in the last kept bit), exactly 0x8000 to
// the neighbour whose last bit is 0 (ties to even).
void bf16_bits(const std::string& path) {
    const float examples[] = {3.14159265f, -0.1f, 1.00390625f};
    const double cell = 22, x0 = 150, top = 100, block = 112;
    common::SvgCanvas c(x0 + 32 * cell + 30, top + 3 * block - 10, "fp32 and bf16 bit layouts");
    c.text(20, 22, "bf16 is the top 16 bits of an fp32, rounded to nearest even (kernels::bf16_bits)", 16, "start", "#222", true);
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
        const uint16_t b = autograd::kernels::bf16_bits(x);
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
        c.text(x0 - 10, y + cell + 22 + cell / 2 + 8, "= " + exact(autograd::kernels::bf16_to_float(b)), 11, "end", "#444");
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
