#!/usr/bin/env bash
# make lesson-lines: what a learner steps through. A debugger walk of one plain training step and
# one greedy decode, `copy_task --reference --threads 1 --shards 1 --steps 2 --eval 2`, built
# with -O0 --coverage in build-lesson/; gcov then says which lines ran. Counted: the lines of
# autograd/ (not kernels/ or io/), nn/, optim/, models/ and examples/copy_task.cpp that ran at
# least once, each line once, per file. Listed apart: the files of autograd/kernels/ the walk
# entered (the storage and the matrix product's arithmetic, below the graph). Fails when the walk
# enters a machinery file: the decoder cache, data parallelism, frozen weights, mixed precision,
# the fused ops, or a kernel that is neither memory nor GEMM nor the one softmax row.
# Developer-only: needs gcov (part of g++). About 2 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build-lesson
make -s BUILD=$B OPT="-O0 --coverage" LDFLAGS="--coverage $(if [ "${OPENMP:-1}" != 0 ]; then echo -fopenmp; fi)" $B/bin/copy_task > /dev/null
find $B -name '*.gcda' -delete
$B/bin/copy_task --reference --threads 1 --shards 1 --steps 2 --eval 2 > /dev/null 2>&1
counts=$(mktemp)
trap 'rm -f "$counts"' EXIT
# every object's report (gcov -t: to stdout), merged: a line ran when it ran in any object
find $B -name '*.gcda' | while read -r f; do gcov -t -o "$(dirname "$f")" "$f" 2> /dev/null || true; done |
    awk -F: '
        /^ *-: *0:Source:/ { src = $0; sub(/.*Source:/, "", src); next }
        {
            c = $1; gsub(/ /, "", c)
            if (c ~ /^[0-9]+\*?$/ && c + 0 > 0 && !((src, $2 + 0) in seen)) { seen[src, $2 + 0] = 1; n[src]++ }
        }
        END { for (s in n) print n[s], s }' | grep -v ' /' | sort -k2 > "$counts"
echo "lines a learner steps through, per file (copy_task --reference --threads 1 --shards 1 --steps 2 --eval 2):"
awk '($2 ~ /^(autograd|nn|optim|models)\// && $2 !~ /^autograd\/(kernels|io)\//) || $2 == "examples/copy_task.cpp" {
         printf "  %5d  %s\n", $1, $2; total += $1; files++ }
     END { printf "  %5d lines in %d files\n", total, files }' "$counts"
echo "below the graph, in autograd/kernels/:"
awk '$2 ~ /^autograd\/kernels\// { printf "  %5d  %s\n", $1, $2 }' "$counts"
machinery=$(awk '$2 ~ /^(models\/decoder_cache|models\/data_parallel|autograd\/data_parallel|autograd\/frozen_weights|autograd\/mixed_precision|autograd\/fused_ops)\./ ||
                 ($2 ~ /^autograd\/kernels\// && $2 !~ /^autograd\/kernels\/(allocator|float_buffer|gemm|gemm_dispatch|gemm_driver|gemm_micro_kernel|precision|softmax_rows|threads)\./) { print $2 }' "$counts")
if [ -n "$machinery" ]; then
    echo "lesson-lines: the walk entered machinery:" $machinery
    exit 1
fi
