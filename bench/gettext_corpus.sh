#!/usr/bin/env bash
# A real English-German corpus from the machine itself: the messages of the installed Debian
# packages and their German translations (the gettext catalogs, /usr/share/locale/de/LC_MESSAGES/
# *.mo), one TSV pair per message. Real sentences, short and long, written by people, with many
# identifiers and format strings: a hard, honest test of the translation example's memory on
# real text (bench/RESULTS.md, "Real-text memory"). Developer-only (needs gettext's msgunfmt);
# the corpus is not shipped, and its size depends on the packages installed.
#
#   bash bench/gettext_corpus.sh OUT.tsv [PAIRS]      # default 47000 pairs, shuffled with seed 1
#
# Each message: its msgid (English) and msgstr (German), escapes (\n, \t) turned into spaces,
# runs of spaces squeezed; plural forms, untranslated and fuzzy entries, the catalog header, and
# pairs seen before are left out, and so are pairs with a side of more than 80 words (as corpus
# cleaning for machine translation does, e.g. Moses' clean-corpus-n: a few catalogs hold whole
# help pages as one message).
set -euo pipefail
out=${1:?usage: bench/gettext_corpus.sh OUT.tsv [PAIRS]}
pairs=${2:-47000}
command -v msgunfmt > /dev/null || { echo "gettext_corpus: needs msgunfmt (apt-get install gettext)"; exit 1; }
shopt -s nullglob
catalogs=(/usr/share/locale/de/LC_MESSAGES/*.mo)
[ ${#catalogs[@]} -gt 0 ] || { echo "gettext_corpus: no German catalogs in /usr/share/locale/de/LC_MESSAGES"; exit 1; }
all=$(mktemp)
trap 'rm -f "$all"' EXIT
for mo in "${catalogs[@]}"; do
    { msgunfmt --no-wrap "$mo" | msgconv --no-wrap -t UTF-8; } 2> /dev/null || true   # some catalogs are in Latin-1
done | awk '
    function unquote(s) { sub(/^[^"]*"/, "", s); sub(/"[ \t]*$/, "", s); return s }
    function clean(s) {
        gsub(/\\[nt]/, " ", s); gsub(/\\"/, "\"", s); gsub(/\\\\/, "\\", s); gsub(/\t/, " ", s)
        gsub(/  +/, " ", s); sub(/^ /, "", s); sub(/ $/, "", s); return s
    }
    function flush() {
        if (!plural && !fuzzy && id != "" && str != "") print clean(id) "\t" clean(str)
        id = ""; str = ""; plural = 0; fuzzy = 0; field = ""
    }
    /^#,.*fuzzy/      { flush(); fuzzy = 1; next }
    /^msgid_plural /  { plural = 1; field = ""; next }
    /^msgid /         { if (field != "" || id != "") flush(); id = unquote($0); field = "id"; next }
    /^msgstr\[/       { plural = 1; field = ""; next }
    /^msgstr /        { str = unquote($0); field = "str"; next }
    /^"/              { if (field == "id") id = id unquote($0); else if (field == "str") str = str unquote($0); next }
    /^$/              { flush(); next }
    END               { flush() }
' | awk -F'\t' 'NF == 2 && $1 != "" && $2 != "" && split($1, a, " ") <= 80 && split($2, b, " ") <= 80 && !seen[$0]++' > "$all"
have=$(wc -l < "$all")
# A fixed shuffle (awk's rand from seed 1): the same catalogs and awk give the same corpus.
awk 'BEGIN { srand(1) } { printf "%.9f\t%s\n", rand(), $0 }' "$all" | sort -t "$(printf '\t')" -k1,1 |
    cut -f2- | awk -v n="$pairs" 'NR <= n' > "$out"
echo "gettext_corpus: $(wc -l < "$out") pairs of $have distinct ones from ${#catalogs[@]} catalogs in $out"
