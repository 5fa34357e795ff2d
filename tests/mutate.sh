#!/usr/bin/env bash
# make mutate: plant mistakes in the code one at a time and see whether the test suite notices.
#
# Each mutation in tests/mutations.txt changes one line of one file the way a plausible mistake
# would (a comparison turned around, a term dropped, a flag not passed on). For each one this
# script builds the suite with the mistake in it and runs it. A mutation the suite fails on is
# "killed"; one it passes with is a "survivor": a mistake nobody would notice. The goal is no
# survivor, or survivors that are equivalent behaviour (the mutation changes no result), each
# explained in mutations.txt.
#
# How, and why it takes minutes rather than hours:
#   - The tree is copied to a scratch folder (tracked and untracked files, no build outputs), so
#     the working tree is never changed, even when the script is interrupted.
#   - The copy starts from this tree's build/ (made up to date first), so only the mutated file
#     and what includes it are recompiled; after each mutation the file and every rebuilt output
#     are put back as they were, so the next mutation starts clean.
#   - The suite runs with --abort-after=1: a killed mutation stops at its first failure. A
#     mutation may name the tests most likely to catch it (`tests:`, doctest's options); those
#     run first, and only when they pass does the whole suite run, so a survivor always survived
#     the whole suite.
#
# Usage: tests/mutate.sh [-k] [NAME_SUBSTRING ...]
#        tests/mutate.sh --check
#   NAME_SUBSTRING  run only the mutations whose name contains one of these
#   -k              keep the scratch folder (its path is printed)
#   --check         build nothing, run nothing: only that every mutation still applies (its file
#                   exists, its `from:` occurs there exactly once, names are unique), so that
#                   code changed under a mutation is seen the day it changes (make docs-check runs
#                   it: the docs' exercises name mutations)
# Exit status: 0 when every mutation was killed or is marked equivalent, 1 when any survived,
# 2 when a mutation does not apply or does not compile (fix mutations.txt).
#
# mutations.txt: blocks separated by blank lines, each
#   name:  a short unique name
#   file:  the file to change, from the project's root
#   from:  text that occurs exactly once in that file
#   to:    what it becomes
#   tests: (optional) doctest options that select the tests to try first, e.g. -sf=*test_bpe*;
#          split at blanks, so a blank inside a filter is written ?. Selecting no test is an
#          error (status 2), as is a `from:` that does not occur once.
#   equivalent: (optional) why the suite cannot and need not see it; such a survivor is reported
#          but does not fail the run
# Lines starting with # are comments. Values are taken literally after the colon and the blanks
# that follow it.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
list="$root/tests/mutations.txt"
keep=0
check_only=0
filters=()
for a in "$@"; do
    case "$a" in
        -k) keep=1 ;;
        --check) check_only=1 ;;
        -h|--help) sed -n '2,42p' "$0"; exit 0 ;;
        *) filters+=("$a") ;;
    esac
done

# ---- parse mutations.txt into parallel arrays
names=() files=() froms=() tos=() tests=() equivs=()
flush() {
    [ -n "$name" ] || return 0
    if [ -z "$file" ] || [ -z "$from" ]; then echo "mutations.txt: '$name' needs file: and from:" >&2; exit 2; fi
    names+=("$name"); files+=("$file"); froms+=("$from"); tos+=("$to"); tests+=("$tst"); equivs+=("$equiv")
}
value() { local v=${1#*:}; printf '%s' "${v#"${v%%[![:space:]]*}"}"; }   # after the colon, without leading blanks
name="" file="" from="" to="" tst="" equiv=""
while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in
        '#'*) continue ;;
        '') flush; name="" file="" from="" to="" tst="" equiv="" ;;
        name:*) name=$(value "$line") ;;
        file:*) file=$(value "$line") ;;
        from:*) from=$(value "$line") ;;
        to:*) to=$(value "$line") ;;
        tests:*) tst=$(value "$line") ;;
        equivalent:*) equiv=$(value "$line") ;;
        *) echo "mutations.txt: cannot read the line: $line" >&2; exit 2 ;;
    esac
done < "$list"
flush

# Does mutation i apply to the tree in the current directory? Prints why not, and fails.
applies() {
    local f=${files[$1]} from=${froms[$1]} text rest
    [ -f "$f" ] || { echo "no file $f"; return 1; }
    text=$(cat "$f"; printf x); text=${text%x}          # keeps trailing newlines
    rest=${text#*"$from"}
    [ "$rest" != "$text" ] || { echo "'from' text not found in $f"; return 1; }
    [[ "$rest" != *"$from"* ]] || { echo "'from' text occurs more than once in $f"; return 1; }
}

if [ $check_only = 1 ]; then
    cd "$root"
    bad=0
    dup=$(printf '%s\n' "${names[@]}" | sort | uniq -d)
    [ -z "$dup" ] || { echo "mutations.txt: names used twice: $dup" >&2; bad=1; }
    for i in "${!names[@]}"; do
        why=$(applies "$i") || { echo "mutations.txt: '${names[$i]}' does not apply: $why" >&2; bad=1; }
    done
    [ $bad = 0 ] || exit 2
    echo "mutate --check: all ${#names[@]} mutations apply"
    exit 0
fi

selected=()
for i in "${!names[@]}"; do
    if [ ${#filters[@]} -eq 0 ]; then selected+=("$i"); continue; fi
    for f in "${filters[@]}"; do [[ "${names[$i]}" == *"$f"* ]] && { selected+=("$i"); break; }; done
done
[ ${#selected[@]} -gt 0 ] || { echo "mutate: no mutation matches: ${filters[*]}" >&2; exit 2; }

# ---- the scratch copy, with an up-to-date build
echo "mutate: building the suite in $root (make build/tests/run_tests) ..."
make -C "$root" -s build/tests/run_tests >/dev/null || { echo "mutate: the unmutated tree does not build" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/mutate.XXXXXX")
[ $keep = 1 ] || trap 'rm -rf "$work"' EXIT
(cd "$root" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$work")
cp -a "$root/build" "$work/build"
for p in "$root"/examples/*; do   # the linked example programs (the flag tests run them)
    [ -f "$p" ] && [ -x "$p" ] && cp -a "$p" "$work/examples/"
done
# Every output gets one time, later than every source's: make sees nothing to do.
now=$(date +%s)
find "$work/build" -type f -exec touch -d "@$now" {} +
for p in "$work"/examples/*; do [ -f "$p" ] && [ -x "$p" ] && touch -d "@$now" "$p"; done
sleep 1   # a mutated file, written later, is newer than every output
cd "$work"
if [ -n "$(make -s -n build/tests/run_tests 2>/dev/null | grep -v '^sh tests/find_doctest.sh')" ]; then
    echo "mutate: the copied build is not up to date; building it once" >&2
    make -s build/tests/run_tests >/dev/null || exit 2
fi
mkdir -p "$work/.pristine"
tar -cf "$work/.pristine/outputs.tar" build $(for p in examples/*; do [ -f "$p" ] && [ -x "$p" ] && echo "$p"; done)

echo "mutate: baseline: the unmutated suite must pass"
t0=$SECONDS
if ! ./build/tests/run_tests --abort-after=1 > "$work/.baseline.log" 2>&1; then
    tail -20 "$work/.baseline.log"; echo "mutate: the suite fails without any mutation" >&2; exit 2
fi
echo "mutate: baseline passed in $((SECONDS - t0)) s; ${#selected[@]} mutations"

# ---- one mutation at a time
killed=0 survived=0 equivalent=0 broken=0
report=()
for i in "${selected[@]}"; do
    n=${names[$i]} f=${files[$i]} from=${froms[$i]} to=${tos[$i]}
    start=$SECONDS
    if ! why=$(applies "$i"); then report+=("BROKEN    $n: $why"); broken=$((broken + 1)); continue; fi
    text=$(cat "$f"; printf x); text=${text%x}          # keeps trailing newlines
    cp -p "$f" "$work/.pristine/source"
    touch "$work/.pristine/marker"
    printf '%s' "${text/"$from"/"$to"}" > "$f"

    verdict="" caught=""
    if ! make -s build/tests/run_tests > "$work/.build.log" 2>&1; then
        verdict=BROKEN; caught="does not compile: $(grep -m1 'error' "$work/.build.log")"
    else
        for pass in first all; do
            opts=()
            if [ $pass = first ]; then
                [ -n "${tests[$i]}" ] || continue
                read -r -a opts <<< "${tests[$i]}"
            fi
            if ! timeout 900 ./build/tests/run_tests --abort-after=1 "${opts[@]}" > "$work/.run.log" 2>&1; then
                verdict=KILLED
                # the test case whose check failed (or that crashed), not the first one that
                # printed anything: a MESSAGE prints its test case's name too
                caught=$(awk '/^TEST CASE:/ { name = $0; sub(/^TEST CASE: */, "", name) }
                              /ERROR: |CRASHED/ && name != "" { print name; exit }' "$work/.run.log")
                [ -n "$caught" ] || caught="the suite stopped: $(tail -1 "$work/.run.log")"
                break
            fi
            # a `tests:` filter that selects no test case would leave the choice to the whole
            # suite without a word (a filter with a space is split in two: write ? for it)
            if [ $pass = first ] && grep -Eq '^\[doctest\] test cases: +0 ' "$work/.run.log"; then
                verdict=BROKEN; caught="its tests: (${tests[$i]}) select no test case"
                break
            fi
        done
        if [ -z "$verdict" ]; then
            if [ -n "${equivs[$i]}" ]; then verdict=EQUIVALENT; caught="${equivs[$i]}"
            else verdict=SURVIVED; fi
        fi
    fi

    # put the file and every output rebuilt since back as they were
    cp -p "$work/.pristine/source" "$f"
    changed=$(find build examples -newer "$work/.pristine/marker" -type f 2>/dev/null)
    [ -z "$changed" ] || tar -xpf "$work/.pristine/outputs.tar" $changed 2>/dev/null
    find build -newer "$work/.pristine/marker" -type f -delete 2>/dev/null   # new files the tar lacks
    if [ -n "$(make -s -n build/tests/run_tests 2>/dev/null | grep -v '^sh tests/find_doctest.sh')" ]; then
        echo "mutate: after '$n' the build was not restored; rebuilding it" >&2   # (the next mutation must start clean)
        make -s build/tests/run_tests >/dev/null 2>&1 || { echo "mutate: cannot rebuild the unmutated tree" >&2; exit 2; }
    fi

    case $verdict in
        KILLED) killed=$((killed + 1)) ;;
        SURVIVED) survived=$((survived + 1)) ;;
        EQUIVALENT) equivalent=$((equivalent + 1)) ;;
        BROKEN) broken=$((broken + 1)) ;;
    esac
    line=$(printf '%-10s %-34s %4d s  %s' "$verdict" "$n" $((SECONDS - start)) "$caught")
    echo "$line"
    report+=("$line")
done

echo
echo "mutate: ${#selected[@]} mutations: $killed killed, $survived survived, $equivalent equivalent, $broken broken ($SECONDS s)"
for r in "${report[@]}"; do case "$r" in SURVIVED*|BROKEN*|EQUIVALENT*) echo "  $r" ;; esac; done
[ $keep = 1 ] && echo "mutate: scratch folder kept: $work"
[ $broken -eq 0 ] || exit 2
[ $survived -eq 0 ] || exit 1
exit 0
