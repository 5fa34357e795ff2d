#!/bin/sh
# Side-by-side training-step time and peak memory: this project against the same model and loop in
# PyTorch (bench/torch_copy_task.py), run in turn (ours, PyTorch, ours, PyTorch, ...) so that a
# machine whose speed drifts (a shared VM does) moves both sides of each pair alike. Prints every
# pair, then the medians and the median of the per-pair ratios.
#
#   make build/bench/bench_training
#   sh bench/compare_pytorch.sh [rounds] [configs]
#   (rounds: default 3; configs: default "d128 paper")
#
# PyTorch: Debian's python3-torch (apt-get install -y python3-torch libopenblas0-openmp), run by
# /usr/bin/python3 with 2 threads. Set OPENBLAS_CORETYPE (e.g. SkylakeX) in the environment to
# pick OpenBLAS's kernel on CPUs it does not recognise; it is passed through and printed.
# Peak RSS comes from /usr/bin/time -v (whole process, Python and libraries included for PyTorch).
set -eu
torch_script=$(dirname "$0")/torch_copy_task.py
rounds=${1:-3}
configs=${2:-d128 paper}
ours=./build/bench/bench_training
[ -x "$ours" ] || { echo "compare_pytorch: build $ours first (make build/bench/bench_training)" >&2; exit 2; }
[ -r "$torch_script" ] || { echo "compare_pytorch: cannot read $torch_script" >&2; exit 2; }
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}  OMP_NUM_THREADS=2  rounds=$rounds"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

for config in $configs; do
    case $config in d128|paper) ;; *) echo "compare_pytorch: unknown config '$config' (d128, paper)" >&2; exit 2;; esac
    # the same configurations as bench/bench_training.cpp's
    if [ "$config" = paper ]; then torch_args="--steps 30"; else torch_args="--steps 60 --d_model 128 --d_ff 512"; fi
    : > "$tmp/pairs"
    i=1
    while [ "$i" -le "$rounds" ]; do
        OMP_NUM_THREADS=2 /usr/bin/time -v "$ours" "$config" > "$tmp/o" 2> "$tmp/ot"
        /usr/bin/time -v /usr/bin/python3 "$torch_script" $torch_args > "$tmp/p" 2> "$tmp/pt"
        o_ms=$(sed -n 's/.*median *\([0-9.]*\) ms\/step.*/\1/p' "$tmp/o")
        p_ms=$(sed -n 's/.*median_step_ms=\([0-9.]*\).*/\1/p' "$tmp/p")
        o_mb=$(awk '/Maximum resident/ {printf "%.0f", $6 / 1024}' "$tmp/ot")
        p_mb=$(awk '/Maximum resident/ {printf "%.0f", $6 / 1024}' "$tmp/pt")
        [ -n "$o_ms" ] && [ -n "$p_ms" ] || { echo "compare_pytorch: a run printed no step time:"; cat "$tmp/o" "$tmp/p" "$tmp/pt"; exit 1; }
        echo "$o_ms $p_ms $o_mb $p_mb" >> "$tmp/pairs"
        printf '%-6s round %d: ours %7.1f ms/step %5s MB | PyTorch %7.1f ms/step %5s MB | ratio %.2f\n' \
            "$config" "$i" "$o_ms" "$o_mb" "$p_ms" "$p_mb" "$(echo "$o_ms $p_ms" | awk '{print $1 / $2}')"
        i=$((i + 1))
    done
    printf '%-6s median : ours %7.1f ms/step %5s MB | PyTorch %7.1f ms/step %5s MB | ratio of pairs %.2f, of memory %.2f\n' "$config" \
        "$(awk '{print $1}' "$tmp/pairs" | median)" "$(awk '{print $3}' "$tmp/pairs" | median)" \
        "$(awk '{print $2}' "$tmp/pairs" | median)" "$(awk '{print $4}' "$tmp/pairs" | median)" \
        "$(awk '{print $1 / $2}' "$tmp/pairs" | median)" "$(awk '{print $3 / $4}' "$tmp/pairs" | median)"
done
