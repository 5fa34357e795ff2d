// bench_gemm: GFLOP/s of autograd::kernels::gemm (fp32) and gemm_bf16 (bf16 inputs, fp32
// accumulation) at the Transformer's shapes.
//
//   make bench   (or: ./build/bench/bench_gemm, with OMP_NUM_THREADS=1 or 2)
//
// Each row: one warm-up call of each, then `samples` timed pairs of samples, fp32 then bf16
// (each sample repeats the call enough times to last >= ~2 ms, so tiny shapes are timed too).
// Reported: the median sample of each, and the median of the per-pair ratios bf16/fp32 speed
// (alternating the two keeps a load change on the machine from favouring one of them).
// GFLOP/s counts 2*M*N*K flops per call. Variants: N = op is identity, T = transposed, e.g.
// "NT" is C = A * B^T (a Linear layer's forward with weight stored (out, in)).
// On a CPU without AVX512_BF16 the bf16 columns are left out (gemm_bf16 would only round copies
// of the inputs and call gemm). Arguments, all optional:
//   ./build/bench/bench_gemm [--ops TN,NT] [--kernel NAME]
// --ops keeps the rows of those variants; --kernel times gemm through one micro-kernel of the
// build (avx512, avx2, neon, portable; gemm_micro_kernel.h) instead of gemm()'s own.
//   ./build/bench/bench_gemm --tile-picture docs/figures/gemm_tile.svg
// draws the picture of docs/15-making-it-fast.md: how gemm() cuts a product into cache blocks
// and register tiles (with the project's SVG canvas, examples/common/svg.h). `make figures` runs it.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "autograd/kernels/gemm.h"
#include "autograd/kernels/gemm_bf16.h"
#include "autograd/kernels/gemm_micro_kernel.h"
#include "autograd/kernels/parallel.h"
#include "examples/common/svg.h"

namespace {

using Clock = std::chrono::steady_clock;


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

// C (M x N) += op(A) (M x K) · op(B) (K x N) as gemm() cuts it (autograd/kernels/gemm.cpp), with
// AVX2+FMA's sizes: a KC x NC panel of B and an MC x KC block of A are packed; C's MC x NC block is
// computed in MR x NR tiles, each one micro_kernel call that keeps the tile in registers while it
// runs over the KC values of k with one MR-row sliver of A and one NR-column sliver of B.
// Not to scale: the blocks are drawn a few slivers wide.
int draw_tile_picture(const std::string& path) {
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
    std::printf("wrote %s\n", path.c_str());
    return 0;
}

// deterministic fill in [-1, 1): a 32-bit LCG, no <random> needed
void fill(std::vector<float>& v, uint32_t seed) {
    for (float& x : v) {
        seed = seed * 1664525u + 1013904223u;
        x = float(seed >> 8) / float(1 << 23) - 1.0f;
    }
}

struct Shape {
    const char* what;  // where the shape comes from
    int M, N, K;
    bool ta, tb;
};

using autograd::kernels::GemmKernel;
GemmKernel g_kernel = autograd::kernels::gemm_kernels().front();   // --kernel
bool g_bf16 = false;                                                 // time gemm_bf16 too?

// Runs one shape and prints its table row.
void bench(const Shape& s, int samples) {
    // stored sizes: op(A) is M x K, op(B) is K x N; leading dimension = stored row length
    const int lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
    std::vector<float> A(size_t(s.M) * s.K), B(size_t(s.K) * s.N), C(size_t(s.M) * s.N);
    fill(A, 1);
    fill(B, 2);
    auto call = [&](bool bf16) {
        if (bf16) autograd::kernels::gemm_bf16(s.ta, s.tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, C.data(), s.N, false);
        else autograd::kernels::gemm_with(g_kernel, s.ta, s.tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, C.data(), s.N, false);
    };
    // seconds per call, averaged over `repeat` calls
    auto sample = [&](bool bf16, int repeat) {
        const auto start = Clock::now();
        for (int r = 0; r < repeat; r++) call(bf16);
        return std::chrono::duration<double>(Clock::now() - start).count() / repeat;
    };

    call(false);  // warm-up: grows the packing buffers, starts the thread team, warms caches
    if (g_bf16) call(true);
    const int repeat = std::max(1, int(2e-3 / std::max(sample(false, 1), 1e-9)));  // calls per sample

    std::vector<double> fp32, bf16, ratio;
    for (int i = 0; i < samples; i++) {
        fp32.push_back(sample(false, repeat));
        if (!g_bf16) continue;
        bf16.push_back(sample(true, repeat));
        ratio.push_back(fp32.back() / bf16.back());
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    const double flop = 2.0 * s.M * s.N * s.K;
    std::printf("%-22s %c%c %6d %6d %6d %10.1f %9.1f", s.what, s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.M, s.N, s.K,
                median(fp32) * 1e6, flop / median(fp32) * 1e-9);
    if (g_bf16) std::printf(" %10.1f %9.1f %7.2fx", median(bf16) * 1e6, flop / median(bf16) * 1e-9, median(ratio));
    std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
    std::string ops;   // --ops: the variants to keep, e.g. "TN,NT"; empty: all
    for (int i = 1; i < argc; i++) {
        const std::string arg = argv[i];
        if (arg == "--tile-picture" && i + 1 < argc) {
            return draw_tile_picture(argv[i + 1]);
        } else if (arg == "--ops" && i + 1 < argc) {
            ops = argv[++i];
        } else if (arg == "--kernel" && i + 1 < argc) {
            const std::string name = argv[++i];
            const std::pair<const char*, GemmKernel> names[] = {{"avx512", GemmKernel::avx512}, {"avx2", GemmKernel::avx2_fma},
                                                                {"neon", GemmKernel::neon}, {"portable", GemmKernel::portable}};
            bool found = false;
            for (const auto& [n, k] : names) if (name == n) g_kernel = k, found = true;
            const auto& built = autograd::kernels::gemm_kernels();
            if (!found || std::find(built.begin(), built.end(), g_kernel) == built.end()) {
                std::fprintf(stderr, "bench_gemm: --kernel %s: not a micro-kernel of this build (", name.c_str());
                for (GemmKernel k : built) std::fprintf(stderr, " %s;", autograd::kernels::gemm_kernel_name(k));
                std::fprintf(stderr, " )\n");
                return 2;
            }
        } else {
            std::fprintf(stderr, "usage: bench_gemm [--ops TN,NT] [--kernel avx512|avx2|neon|portable] | --tile-picture FILE\n");
            return 2;
        }
    }
    g_bf16 = autograd::kernels::bf16_dot_supported();
    std::printf("autograd::kernels::gemm (fp32, %s micro-kernel) and gemm_bf16 (%s), %d thread(s), median of samples\n\n",
                autograd::kernels::gemm_kernel_name(g_kernel),
                g_bf16 ? "vdpbf16ps" : "no AVX512_BF16 on this CPU: not timed", autograd::kernels::max_threads());
    std::printf("%-22s %-2s %6s %6s %6s %10s %9s", "shape", "op", "M", "N", "K", "fp32 us", "GFLOP/s");
    if (g_bf16) std::printf(" %10s %9s %8s", "bf16 us", "GFLOP/s", "speedup");
    std::printf("\n");

    std::vector<Shape> shapes;
    // the three Transformer shapes (T*B = 800 rows, d_model 512, d_ff 2048), every variant
    const int mnk[3][3] = {{800, 512, 2048}, {800, 2048, 512}, {800, 512, 512}};
    for (const auto& d : mnk)
        for (int v = 0; v < 4; v++) shapes.push_back({"transformer", d[0], d[1], d[2], v >= 2, v % 2 == 1});
    // the same Linear layers as the framework calls them: x (800, in), W (out, in)
    //   forward y = x W^T (NT), backward dx = dy W (NN), dW = dy^T x (TN)
    // (paper's D=512/F=2048, then the d128 configuration's D=128/F=512)
    const int layers[6][2] = {{512, 2048}, {2048, 512}, {512, 512}, {128, 512}, {512, 128}, {128, 128}};  // (in, out)
    for (const auto& l : layers) {
        const int in = l[0], out = l[1];
        shapes.push_back({"linear fwd  y = x W^T", 800, out, in, false, true});
        shapes.push_back({"linear bwd dx = dy W", 800, in, out, false, false});
        shapes.push_back({"linear bwd dW = dy^T x", out, in, 800, true, false});
    }
    shapes.push_back({"square", 512, 512, 512, false, false});
    shapes.push_back({"square", 2048, 2048, 2048, false, false});
    // one attention head of the copy task (T = S = 10; Dk = 64 in --paper, 16 in d128)
    for (int dk : {64, 16}) {
        shapes.push_back({"attention head", 10, 10, dk, false, true});   // scores = q k^T
        shapes.push_back({"attention head", 10, dk, 10, false, false});  // out = p v
        shapes.push_back({"attention head", 10, dk, 10, true, false});   // dv = p^T dout
    }

    for (const Shape& s : shapes) {
        const std::string op = {s.ta ? 'T' : 'N', s.tb ? 'T' : 'N'};
        if (!ops.empty() && ops.find(op) == std::string::npos) continue;
        bench(s, s.M * s.N >= 2048 * 2048 ? 5 : 15);
    }
    return 0;
}
