#!/usr/bin/env bash
# make docs-check: the docs point at things that exist.
#   1) every relative link in README.md, docs/*.md and bench/RESULTS.md resolves to a file or folder;
#   2) a link whose text names code, "[`name` in path](path)", points at a file containing name;
#   3) every name in backticks (outside ``` blocks) that looks like code exists in the sources:
#      a call `name(...)`, a qualified `a::b`, a snake_case `two_words` or a CamelCase
#      `TwoWords`. Words that match but are not code (a flag, a math symbol) go in ALLOWED.
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
    body=$(awk '/^```/ { fenced = !fenced; next } !fenced { print NR ": " $0 }' "$md")

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

if [ "$problems" -gt 0 ]; then
    echo "docs-check: $problems problems"
    exit 1
fi
echo "docs-check: links and code names in ${#docs[@]} files resolve"
