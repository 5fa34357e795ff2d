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
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "autograd/kernels/gemm.h"
#include "autograd/kernels/gemm_bf16.h"
#include "autograd/kernels/parallel.h"

namespace {

using Clock = std::chrono::steady_clock;

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
        else autograd::kernels::detail::gemm_with(g_kernel, s.ta, s.tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, C.data(), s.N, false);
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
        if (arg == "--ops" && i + 1 < argc) {
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
            std::fprintf(stderr, "usage: bench_gemm [--ops TN,NT] [--kernel avx512|avx2|neon|portable]\n");
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
