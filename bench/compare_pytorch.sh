#!/bin/sh
# Side-by-side training-step time and peak memory: this project against the same model and loop in
# PyTorch (bench/torch_copy_task.py), run in turn (ours, PyTorch, ours, PyTorch, ...) so that a
# machine whose speed drifts (a shared VM does) moves both sides of each pair alike. Prints every
# pair, then the medians and the median of the per-pair ratios.
#
#   make build/bench/bench_training
#   sh bench/compare_pytorch.sh [rounds] [configs]
#   (rounds: default 3; configs: default "d128 paper paper-bf16"; also rnn-attention, the GRU
#   encoder-decoder with attention against bench/torch_rnn_seq2seq.py)
#
# paper-bf16 runs ours with mixed precision (bench_training paper-bf16) against PyTorch twice
# per round: fp32, and under torch.autocast("cpu", dtype=torch.bfloat16) (torch_copy_task.py
# --bf16), and prints the ratio to each.
#
# PyTorch: Debian's python3-torch (apt-get install -y python3-torch libopenblas0-openmp), run by
# /usr/bin/python3 with 2 threads. OpenBLAS picks its kernels by CPU model, and in a VM it may not
# recognise the CPU and fall back to slow generic ones; so unless OPENBLAS_CORETYPE is set in the
# environment, this script sets it from the instruction sets the CPU reports: SkylakeX with
# AVX-512, Haswell with AVX2 (a SkylakeX kernel on a CPU without AVX-512 would crash). It is
# printed with the results. OPENBLAS_CORETYPE=Haswell on an AVX-512 machine, with ours built with
# make ARCH=-march=haswell, compares the two AVX2 paths like for like.
# Peak RSS comes from /usr/bin/time -v (whole process, Python and libraries included for PyTorch).
set -eu
torch_script=$(dirname "$0")/torch_copy_task.py
rounds=${1:-3}
configs=${2:-d128 paper paper-bf16}
ours=./build/bench/bench_training
[ -x "$ours" ] || { echo "compare_pytorch: build $ours first (make build/bench/bench_training)" >&2; exit 2; }
[ -r "$torch_script" ] || { echo "compare_pytorch: cannot read $torch_script" >&2; exit 2; }
# Without OpenBLAS, Debian's PyTorch runs on the reference BLAS, 10-40x slower: no comparison.
if ! { ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null | grep -q 'libopenblas\.so'; then
    echo "compare_pytorch: OpenBLAS is not installed, so PyTorch would multiply with the reference BLAS;" \
         "install it first (apt-get install -y libopenblas0-openmp)" >&2
    exit 2
fi
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=Haswell
    fi
fi
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset: OpenBLAS chooses)}  OMP_NUM_THREADS=2  rounds=$rounds"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

# one timed run: the step time (ms) and peak RSS (MB) of the command, as "ms MB"
run() {
    /usr/bin/time -v "$@" > "$tmp/out" 2> "$tmp/time" || { echo "compare_pytorch: failed: $*"; cat "$tmp/out" "$tmp/time"; exit 1; }
    ms=$(sed -n -e 's/.*median *\([0-9.]*\) ms\/step.*/\1/p' -e 's/.*median_step_ms=\([0-9.]*\).*/\1/p' "$tmp/out")
    mb=$(awk '/Maximum resident/ {printf "%.0f", $6 / 1024}' "$tmp/time")
    [ -n "$ms" ] || { echo "compare_pytorch: no step time from: $*"; cat "$tmp/out"; exit 1; }
    echo "$ms $mb"
}

for config in $configs; do
    case $config in d128|paper|paper-bf16|rnn-attention) ;; *) echo "compare_pytorch: unknown config '$config' (d128, paper, paper-bf16, rnn-attention)" >&2; exit 2;; esac
    # the same configurations as bench/bench_training.cpp's
    script=$torch_script
    if [ "$config" = d128 ]; then torch_args="--steps 60 --d_model 128 --d_ff 512"; else torch_args="--steps 30"; fi
    [ "$config" = rnn-attention ] && script=$(dirname "$0")/torch_rnn_seq2seq.py
    : > "$tmp/pairs"
    i=1
    while [ "$i" -le "$rounds" ]; do
        ours_r=$(OMP_NUM_THREADS=2 run "$ours" "$config")
        torch_r=$(run /usr/bin/python3 "$script" $torch_args)
        torch_bf16_r="0 0"
        [ "$config" = paper-bf16 ] && torch_bf16_r=$(run /usr/bin/python3 "$torch_script" $torch_args --bf16)
        # columns: ours ms, ours MB, PyTorch ms, PyTorch MB, PyTorch bf16 ms, PyTorch bf16 MB
        echo "$ours_r $torch_r $torch_bf16_r" >> "$tmp/pairs"
        echo "$ours_r $torch_r $torch_bf16_r" | awk -v c="$config" -v i="$i" '{
            printf "%-10s round %d: ours %7.1f ms/step %5s MB | PyTorch %7.1f ms/step %5s MB | ratio %.2f", c, i, $1, $2, $3, $4, $1 / $3
            if ($5 > 0) printf " | PyTorch bf16 %7.1f ms/step %5s MB | ratio %.2f", $5, $6, $1 / $5
            printf "\n" }'
        i=$((i + 1))
    done
    col() { awk "{print \$$1}" "$tmp/pairs" | median; }
    printf '%-10s median : ours %7.1f ms/step %5s MB | PyTorch %7.1f ms/step %5s MB | ratio of pairs %.2f, of memory %.2f\n' "$config" \
        "$(col 1)" "$(col 2)" "$(col 3)" "$(col 4)" \
        "$(awk '{print $1 / $3}' "$tmp/pairs" | median)" "$(awk '{print $2 / $4}' "$tmp/pairs" | median)"
    if [ "$config" = paper-bf16 ]; then
        printf '%-10s median : PyTorch bf16 (autocast) %7.1f ms/step %5s MB | ours/PyTorch-bf16 ratio of pairs %.2f, of memory %.2f\n' "$config" \
            "$(col 5)" "$(col 6)" "$(awk '{print $1 / $5}' "$tmp/pairs" | median)" "$(awk '{print $2 / $6}' "$tmp/pairs" | median)"
    fi
done
