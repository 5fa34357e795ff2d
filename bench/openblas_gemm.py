#!/usr/bin/python3
"""openblas_gemm: GFLOP/s of the system BLAS's sgemm (OpenBLAS), called through numpy, at
bench_gemm's Transformer and Linear shapes, printed in bench_gemm's row format.

Developer-only, like torch_copy_task.py: the project itself never needs Python. Run it through
bench/compare_openblas.sh, which alternates it with bench_gemm and prints the ratios.

    apt-get install -y python3-numpy libopenblas0-openmp
    OMP_NUM_THREADS=2 OPENBLAS_CORETYPE=Haswell /usr/bin/python3 bench/openblas_gemm.py [--ops TN,NT]

Timed as bench_gemm times: one warm-up call, then 15 samples (5 for 2048^3), each repeating the
call for at least ~2 ms; the median sample is printed. numpy hands a transposed view to sgemm as
a transpose flag, so "TN" here is the same call as bench_gemm's "TN". The attention-head shapes
are left out: at 10 x 10 numpy's own overhead per call would be most of what is timed.
"""
import sys
import time

import numpy as np


def shapes():
    """(what, M, N, K, ta, tb), the rows of bench/bench_gemm.cpp, in its order."""
    rows = []
    for m, n, k in [(800, 512, 2048), (800, 2048, 512), (800, 512, 512)]:
        for v in range(4):
            rows.append(("transformer", m, n, k, v >= 2, v % 2 == 1))
    for inp, out in [(512, 2048), (2048, 512), (512, 512), (128, 512), (512, 128), (128, 128)]:
        rows.append(("linear fwd  y = x W^T", 800, out, inp, False, True))
        rows.append(("linear bwd dx = dy W", 800, inp, out, False, False))
        rows.append(("linear bwd dW = dy^T x", out, inp, 800, True, False))
    rows.append(("square", 512, 512, 512, False, False))
    rows.append(("square", 2048, 2048, 2048, False, False))
    return rows


def bench(what, m, n, k, ta, tb):
    rng = np.random.default_rng(1)
    # stored as bench_gemm stores them: op(A) is M x K, op(B) is K x N
    a = rng.uniform(-1, 1, (k, m) if ta else (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(np.float32)
    op_a, op_b = (a.T if ta else a), (b.T if tb else b)
    c = np.empty((m, n), dtype=np.float32)

    def sample(repeat):
        start = time.perf_counter()
        for _ in range(repeat):
            np.matmul(op_a, op_b, out=c)
        return (time.perf_counter() - start) / repeat

    sample(1)  # warm-up: starts OpenBLAS's threads, warms the caches
    repeat = max(1, int(2e-3 / max(sample(1), 1e-9)))
    times = sorted(sample(repeat) for _ in range(5 if m * n >= 2048 * 2048 else 15))
    median = times[len(times) // 2]
    op = ("T" if ta else "N") + ("T" if tb else "N")
    print("%-22s %s %6d %6d %6d %10.1f %9.1f" % (what, op, m, n, k, median * 1e6, 2.0 * m * n * k / median * 1e-9))


def main():
    ops = ""
    args = sys.argv[1:]
    if args[:1] == ["--ops"] and len(args) == 2:
        ops = args[1]
    elif args:
        sys.exit("usage: openblas_gemm.py [--ops TN,NT]")
    print("OpenBLAS sgemm through numpy %s, median of samples\n" % np.__version__)
    print("%-22s %-2s %6s %6s %6s %10s %9s" % ("shape", "op", "M", "N", "K", "fp32 us", "GFLOP/s"))
    for what, m, n, k, ta, tb in shapes():
        op = ("T" if ta else "N") + ("T" if tb else "N")
        if not ops or op in ops:
            bench(what, m, n, k, ta, tb)


if __name__ == "__main__":
    main()
