#!/usr/bin/env bash
# The numbers docs/ quotes from trained models, checked against the runs that made them.
#
#   bash tests/check_quoted_numbers.sh build/figures     (make figures runs it at its end)
#
# docs/quoted_numbers.txt lists them: a line "in DOC: TEXT" (what the doc says, matched across its
# line breaks), then one or more lines "from LOG: TEXT" (what the run's log in RUNS_FOLDER prints,
# matched within one line). All texts are matched literally. A retrained model that prints other
# numbers, or a doc edited away from its run, fails here, naming the line. The runs are make
# figures' own (fixed seeds, the figures build: the same numbers on every x86-64 CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:?usage: tests/check_quoted_numbers.sh RUNS_FOLDER (make figures writes build/figures)}
list=docs/quoted_numbers.txt
failures=0
checked=0
n=0
doc="" doc_text="" froms=1
fail() { echo "$list:$n: $*"; failures=$((failures + 1)); }
no_log() { [ "$froms" -gt 0 ] || fail "no 'from' line says where \"$doc_text\" comes from"; }
while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    case "$line" in
    '' | '#'*) ;;
    'in '*': '*)
        no_log
        froms=0
        doc=${line#in }; doc=${doc%%: *}; doc_text=${line#in "$doc": }
        if [ ! -f "$doc" ]; then fail "no such doc: $doc"
        else
            # the doc as one line, its runs of spaces squeezed (a variable, not a pipe into grep -q,
            # whose early exit would fail the pipe under pipefail)
            flat=$(tr '\n' ' ' < "$doc" | tr -s ' ')
            grep -qF -- "$doc_text" <<< "$flat" || fail "$doc does not say \"$doc_text\""
        fi ;;
    'from '*': '*)
        log=${line#from }; log=${log%%: *}; log_text=${line#from "$log": }
        checked=$((checked + 1))
        froms=$((froms + 1))
        if [ -z "$doc" ]; then fail "a 'from' line before any 'in' line"
        elif [ ! -f "$runs/$log" ]; then fail "no log $runs/$log (run make figures first)"
        elif ! grep -qF -- "$log_text" "$runs/$log"; then
            fail "$runs/$log does not print \"$log_text\" (quoted in $doc as \"$doc_text\"): the run changed; update the doc and this line"
        fi ;;
    *) fail "expected 'in DOC: TEXT' or 'from LOG: TEXT': $line" ;;
    esac
done < "$list"
no_log
if [ "$failures" -gt 0 ]; then
    echo "check_quoted_numbers: $failures problems in $list ($checked log lines checked)"
    exit 1
fi
echo "check_quoted_numbers: the $checked log lines behind the numbers docs/ quotes are what make figures' runs print"
