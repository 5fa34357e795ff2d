#!/usr/bin/env bash
# make docs-check: the docs point at things that exist, and quote the code as it stands.
#   1) every relative link in README.md, docs/*.md and bench/RESULTS.md resolves to a file or folder;
#   2) a link whose text names code, "[`name` in path](path)", points at a file containing name;
#   3) every name in backticks (outside ``` blocks) that looks like code exists in the sources:
#      a call `name(...)`, a qualified `a::b`, a snake_case `two_words` or a CamelCase
#      `TwoWords`. Words that match but are not code (a flag, a math symbol) go in ALLOWED.
#   4) every line a doc quotes from the library exists in the file it names. Lines compare up to
#      whitespace: runs of blanks count as one, leading and trailing blanks not at all.
#      - A fenced block quotes a file when its first line is a comment naming it alone, a path
#        from the repository's root: "// autograd/engine.cpp" (or "// in autograd/engine.cpp").
#        Every other non-blank line of the block must be a whole line of that file. A line that
#        is just "..." or "// ..." skips lines; a "..." inside a line stands for any text of the
#        same line (the pieces in that order). A block with another first line (usage, math,
#        output) is not checked.
#      - An inline span (outside fenced blocks) is a quoted line when it reads like a statement:
#        it ends with ";", starts with "return ", "if (" or "for (", or holds "+=", "-=", "*="
#        or " = " outside brackets together with a "(" or "[". Spans with a math sign (ᵀ ⊙ Σ ∂
#        √ · − ε ...) are math and skipped. A quoted span must occur, "..." as above, within a
#        line of a source file (.h, .cpp, .sh, Makefile) the same doc links to, or within the
#        line a break-it exercise of that chapter plants (tests/mutations.txt, exercise-NN-*).
#        So a usage line of your own goes in a fenced block, not in backticks. bench/RESULTS.md
#        is a lab notebook: only its fenced blocks that name a file are checked.
# Prints each problem as file:line and exits 1 if there is any.
set -uo pipefail
cd "$(dirname "$0")/.."

# Names that look like code but are not the project's: the x_ pattern of the kernels
# (x_forward for layer_norm_forward, ...) and other projects' names.
ALLOWED="x_forward x_backward median_step_ms LabelSmoothing"

docs=(README.md docs/*.md bench/RESULTS.md)
problems=0
fail() { echo "$1: $2"; problems=$((problems + 1)); }

# Every identifier of the code, once.
idents=$(mktemp)
find autograd nn optim models examples tests bench -name '*.h' -o -name '*.cpp' | sort |
    xargs grep -ohE '[A-Za-z_][A-Za-z0-9_]*' | sort -u > "$idents"
candidates=$(mktemp)
trap 'rm -f "$idents" "$candidates"' EXIT

for md in "${docs[@]}"; do
    dir=$(dirname "$md")
    # text outside fenced code blocks, each line prefixed with its number
    body=$(awk '/^[ \t]*```/ { fenced = !fenced; next } !fenced { print NR ": " $0 }' "$md")

    # 1) and 2): links [text](target), skipping URLs and in-page anchors
    while IFS= read -r hit; do
        line=${hit%%:*}
        link=${hit#*:}
        text=${link#[}; text=${text%%](*}
        target=${link##*](}; target=${target%)}
        case "$target" in http://* | https://* | mailto:* | \#*) continue ;; esac
        path=${target%%#*}
        if [ ! -e "$dir/$path" ]; then fail "$md:$line" "broken link to '$target'"; continue; fi
        if [[ "$text" =~ ^\`([A-Za-z_][A-Za-z0-9_:~]*)[^\`]*\`\ in\  ]] && [ -f "$dir/$path" ]; then
            name=${BASH_REMATCH[1]##*::}
            grep -qw -- "$name" "$dir/$path" || fail "$md:$line" "'$name' is not in $path (link text '$text')"
        fi
    done < <(grep -oE '^[0-9]+|\[[^]]*\]\([^) ]+\)' <<< "$body" | awk '/^[0-9]+$/ { n = $0; next } { print n ":" $0 }')

    # 3) names in backticks: each candidate as "line name span", checked in one pass below
    grep -oE '^[0-9]+|`[^`]+`' <<< "$body" | awk -v md="$md" '
        /^[0-9]+$/ { n = $0; next }
        {
            span = substr($0, 2, length($0) - 2); names = ""
            if (match(span, /^[A-Za-z_][A-Za-z0-9_]*(::~?[A-Za-z_][A-Za-z0-9_]*)*\(/)) names = substr(span, 1, RLENGTH - 1)
            else if (span ~ /^[A-Za-z_][A-Za-z0-9_]*(::~?[A-Za-z_][A-Za-z0-9_]*)+$/) names = span
            else if (span ~ /^[a-z][a-z0-9]*(_[a-z0-9]+)+_?$/ || span ~ /^[A-Z][a-z0-9]+([A-Z][a-z0-9]*)+$/) names = span
            k = split(names, part, "::")
            for (i = 1; i <= k; i++) { sub(/^~/, "", part[i]); print md ":" n "\t" part[i] "\t" span }
        }' >> "$candidates"
done

# 3) continued: every candidate name is an identifier of the code, or allowed
while IFS=$'\t' read -r where name span; do
    fail "$where" "\`$span\`: no '$name' in the code"
done < <(awk -F'\t' -v allowed="$ALLOWED" '
    BEGIN { n = split(allowed, a, " "); for (i = 1; i <= n; i++) ok[a[i]] = 1 }
    FNR == NR { ok[$0] = 1; next }
    !($2 in ok)' "$idents" "$candidates")

# 4) quoted lines, by the rules in the header: one awk over the docs, which reads each file they
# quote or link to once. inline_skip: the docs whose inline spans are not checked.
quotes_awk=$(cat <<'AWK'
    function norm(s) { gsub(/[ \t]+/, " ", s); sub(/^ /, "", s); sub(/ $/, "", s); return s }
    function resolve(p,   n, a, st, i, k, out) {   # "docs/../nn/x.cpp" -> "nn/x.cpp"
        n = split(p, a, "/"); k = 0
        for (i = 1; i <= n; i++) {
            if (a[i] == "" || a[i] == ".") continue
            if (a[i] == ".." && k > 0 && st[k] != "..") { k--; continue }
            st[++k] = a[i]
        }
        out = st[1]
        for (i = 2; i <= k; i++) out = out "/" st[i]
        return out
    }
    function is_source(p) { return p ~ /\.(h|cpp|sh)$/ || p ~ /(^|\/)Makefile$/ }
    # Reads a file once: raw[f, i] and line[f, i] (whitespace-normalized), nlines[f], has[f, line].
    function load(f,   s, n) {
        if (f in nlines) return nlines[f] >= 0
        n = 0
        if (is_source(f) && (getline s < f) > 0) {
            do { n++; raw[f, n] = s; line[f, n] = norm(s); has[f, line[f, n]] = 1 } while ((getline s < f) > 0)
            close(f)
        } else n = -1
        nlines[f] = n
        return n >= 0
    }
    # Does the normalized quote q occur in the normalized line s? "..." in q stands for anything
    # within the line; whole: q must cover s from its first character to its last.
    function found_in(s, q, whole,   n, p, i, piece, pos, at, tail) {
        n = split(q, p, /\.\.\./); pos = 1
        for (i = 1; i <= n; i++) {
            piece = norm(p[i])
            if (piece == "") continue
            if (whole && i == 1) { if (substr(s, 1, length(piece)) != piece) return 0; pos = length(piece) + 1; continue }
            if (whole && i == n) {
                tail = length(s) - length(piece) + 1
                return tail >= pos && substr(s, tail) == piece
            }
            at = index(substr(s, pos), piece)
            if (at == 0) return 0
            pos += at - 1 + length(piece)
        }
        return !whole || pos > length(s) || p[n] ~ /^[ \t]*$/
    }
    function in_file(f, q, whole,   i) {
        if (whole && q !~ /\.\.\./) return (f SUBSEP q) in has
        for (i = 1; i <= nlines[f]; i++) if (found_in(line[f, i], q, whole)) return 1
        return 0
    }
    # A span written like a statement, not like math: see the header of check_docs.sh.
    function is_statement(s,   c, i, d, top) {
        if (s ~ MATH) return 0
        if (s ~ /;$/ || s ~ /^(return |if \(|for \()/) return 1
        if (s !~ /[(\[]/) return 0
        top = ""; d = 0
        for (i = 1; i <= length(s); i++) {   # the span with what is inside brackets left out
            c = substr(s, i, 1)
            if (c == "(" || c == "[" || c == "{") d++
            else if (c == ")" || c == "]" || c == "}") d--
            else if (d == 0) top = top c
        }
        return top ~ /\+=|-=|\*=| = /
    }
    function problem(where, msg) { print where ": " msg }
    # The inline spans of the doc just read, against the source files it links to and the lines its
    # break-it exercises plant (tests/mutations.txt, exercise-NN-...).
    function check_spans(   k, i, f, ok, files, ch, m) {
        ch = md; sub(/^docs\//, "", ch); sub(/-.*/, "", ch)
        for (k = 1; k <= nspans; k++) {
            ok = 0; files = ""
            for (i = 1; i <= nlinked && !ok; i++) { f = linked[i]; files = files (i > 1 ? " " : "") f; ok = in_file(f, spanq[k], 0) }
            for (m = 1; m <= nmut[ch] && !ok; m++) ok = found_in(mutated[ch, m], spanq[k], 0)
            if (!ok) problem(md ":" spanline[k], "quoted line not found in " (files == "" ? "(no linked source file)" : files) ": " span[k])
        }
    }
    function start_doc() {
        md = FILENAME; dir = md; if (!sub(/\/[^\/]*$/, "", dir)) dir = "."
        fenced = 0; nspans = 0; nlinked = 0; split("", islinked)
        check_inline = index(" " inline_skip " ", " " md " ") == 0
    }
    BEGIN {
        MATH = "ᵀ|⊙|Σ|∂|√|·|−|ε|τ|σ|γ|β|μ|α|²|ᵢ|ⱼ|←|→|⇒|≤|≥|≈|∈|∝|ℓ|×"
        # the broken lines of the break-it exercises: the line holding from:, with from: replaced by to:
        mf = "tests/mutations.txt"
        while ((getline s < mf) > 0) {
            if (s ~ /^name:/) { name = s; sub(/^name:[ \t]*/, "", name); file = from = to = "" }
            else if (s ~ /^file:/) { file = s; sub(/^file:[ \t]*/, "", file) }
            else if (s ~ /^from:/) { from = s; sub(/^from:[ \t]*/, "", from) }
            else if (s ~ /^to:/) {
                to = s; sub(/^to:[ \t]*/, "", to)
                if (name !~ /^exercise-/ || !load(file)) continue
                ch = name; sub(/^exercise-/, "", ch); sub(/-.*/, "", ch)
                for (i = 1; i <= nlines[file]; i++)
                    if ((at = index(raw[file, i], from)) > 0)
                        mutated[ch, ++nmut[ch]] = norm(substr(raw[file, i], 1, at - 1) to substr(raw[file, i], at + length(from)))
            }
        }
        close(mf)
    }
    FNR == 1 { if (NR > 1) check_spans(); start_doc() }
    /^[ \t]*```/ {
        if (fenced) { fenced = 0; next }
        fenced = 1; quoted = ""; first = 1; next
    }
    fenced && first {   # "// path" or "// in path" alone: the block quotes that file
        first = 0
        if (match($0, /^[ \t]*\/\/[ \t]+(in[ \t]+)?[A-Za-z0-9_.\/-]+[ \t]*$/)) {
            quoted = norm($0); sub(/^\/\/ (in )?/, "", quoted)
            if (quoted !~ /\// && quoted != "Makefile") quoted = ""
            else if (!load(quoted)) { problem(md ":" FNR, "the block quotes " quoted ", which is not a source file"); quoted = "" }
        }
        next
    }
    fenced {
        if (quoted == "") next
        q = norm($0)
        if (q == "" || q == "..." || q == "// ...") next
        if (!in_file(quoted, q, 1)) problem(md ":" FNR, "quoted line not found in " quoted ": " q)
        next
    }
    {
        # links: [text](target), relative ones to a source file
        s = $0
        while (match(s, /\]\([^) ]+\)/)) {
            t = substr(s, RSTART + 2, RLENGTH - 3); s = substr(s, RSTART + RLENGTH)
            if (t ~ /^(https?:|mailto:|#)/) continue
            sub(/#.*/, "", t); t = resolve(dir "/" t)
            if (is_source(t) && !(t in islinked) && load(t)) { islinked[t] = 1; linked[++nlinked] = t }
        }
        if (!check_inline) next
        s = $0
        while (match(s, /`[^`]+`/)) {
            t = substr(s, RSTART + 1, RLENGTH - 2); s = substr(s, RSTART + RLENGTH)
            if (is_statement(t)) { nspans++; span[nspans] = t; spanq[nspans] = norm(t); spanline[nspans] = FNR }
        }
    }
    END { if (NR > 0) check_spans() }
AWK
)
while IFS= read -r problem; do
    echo "$problem"
    problems=$((problems + 1))
done < <(awk -v inline_skip="bench/RESULTS.md" "$quotes_awk" "${docs[@]}")

if [ "$problems" -gt 0 ]; then
    echo "docs-check: $problems problems"
    exit 1
fi
echo "docs-check: links, code names and quoted lines in ${#docs[@]} files resolve"
