#!/bin/sh
# GEMM against OpenBLAS on this machine: bench_gemm (ours) and bench/openblas_gemm.py (OpenBLAS's
# sgemm through numpy) at the same shapes, run in turn (ours, OpenBLAS, ours, ...) so that a
# machine whose speed drifts moves both sides of each pair alike. Prints, for each shape, the
# median GFLOP/s of each side and the median of the per-round ratios ours / OpenBLAS (above 1:
# ours is faster).
#
#   make build/bench/bench_gemm
#   sh bench/compare_openblas.sh [rounds] [bench_gemm flags, e.g. --kernel avx2 --ops TN]
#   (rounds: default 5; threads: OMP_NUM_THREADS, default 2, for both sides)
#
# Needs Debian's python3-numpy and libopenblas0-openmp. OPENBLAS_CORETYPE is set from the CPU's
# instruction sets unless given, as in compare_pytorch.sh: SkylakeX with AVX-512, Haswell with
# AVX2. For a like-for-like AVX2 comparison on an AVX-512 machine, build ours with
# make ARCH=-march=haswell and run this with OPENBLAS_CORETYPE=Haswell.
set -eu
here=$(dirname "$0")
rounds=${1:-5}
[ $# -gt 0 ] && shift
ours=${BENCH_GEMM:-./build/bench/bench_gemm}
[ -x "$ours" ] || { echo "compare_openblas: build $ours first (make build/bench/bench_gemm)" >&2; exit 2; }
/usr/bin/python3 -c "import numpy" 2>/dev/null ||
    { echo "compare_openblas: needs numpy (apt-get install -y python3-numpy libopenblas0-openmp)" >&2; exit 2; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=Haswell
    fi
fi
ops=$(echo "$*" | sed -n 's/.*--ops \([A-Z,]*\).*/\1/p')
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
i=1
while [ "$i" -le "$rounds" ]; do
    "$ours" "$@" > "$out/ours.$i"
    /usr/bin/python3 "$here/openblas_gemm.py" ${ops:+--ops "$ops"} > "$out/blas.$i"
    i=$((i + 1))
done
head -n 1 "$out/ours.1"
head -n 1 "$out/blas.1"
echo "OMP_NUM_THREADS=$OMP_NUM_THREADS OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, $rounds rounds, medians"
echo
# A row's key is its first 46 characters (shape, op, M, N, K); the fp32 GFLOP/s follows the time.
awk -v rounds="$rounds" '
    function median(list,   n, v, i, j, t) {
        n = split(list, v, " ")
        for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
        return v[int((n + 1) / 2)]
    }
    FNR <= 3 { next }
    {
        key = substr($0, 1, 46); split(substr($0, 47), f, " ")
        side = FILENAME ~ /blas\./ ? "blas" : "ours"; r = FILENAME; sub(/.*\./, "", r)
        gf[side, key, r] = f[2]
        if (side == "ours" && r == 1) order[++rows] = key
    }
    END {
        printf "%-46s %10s %10s %12s\n", "shape                  op      M      N      K", "ours GF/s", "BLAS GF/s", "ours / BLAS"
        for (i = 1; i <= rows; i++) {
            key = order[i]
            if (!(("blas", key, 1) in gf)) continue
            o = b = q = ""
            for (r = 1; r <= rounds; r++) { o = o " " gf["ours", key, r]; b = b " " gf["blas", key, r]; q = q " " gf["ours", key, r] / gf["blas", key, r] }
            printf "%-46s %10.1f %10.1f %11.2fx\n", key, median(o), median(b), median(q)
        }
    }' $(i=1; while [ "$i" -le "$rounds" ]; do echo "$out/ours.$i $out/blas.$i"; i=$((i + 1)); done)
