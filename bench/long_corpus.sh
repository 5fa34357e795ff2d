#!/usr/bin/env bash
# A corpus of long sentences from one of short ones: every K consecutive pairs of a TSV file become
# one pair, their sources joined by a space and their targets too. Each side stays a faithful
# translation of the other, sentence by sentence, but a pair is now K sentences long: the
# translation example's cost per pair and its attention spans grow with K, while the words and
# their translations stay real. Developer-only: bench/RESULTS.md, "The fair fight on text not
# tuned on", measures each model family's time per epoch and BLEU on it.
#
#   bash bench/gettext_corpus.sh en-de-47k.tsv && bash bench/long_corpus.sh en-de-47k.tsv en-de-long.tsv 3
#
# The input's order decides which pairs are joined (gettext_corpus.sh's is a fixed shuffle); a
# trailing group of fewer than K pairs is left out. Pairs whose joined sides pass 60 words are
# left out too, so that the joined pairs fit the translation example's default --max-len of 50
# subword tokens less often than not; the example drops and counts the rest.
set -euo pipefail
in=${1:?usage: bench/long_corpus.sh IN.tsv OUT.tsv [K]}
out=${2:?usage: bench/long_corpus.sh IN.tsv OUT.tsv [K]}
k=${3:-3}
[ -f "$in" ] || { echo "long_corpus: no file '$in'"; exit 1; }
[ "$k" -ge 2 ] 2>/dev/null || { echo "long_corpus: K must be a whole number of at least 2, got '$k'"; exit 1; }
[ "$(realpath -m "$in")" != "$(realpath -m "$out")" ] || { echo "long_corpus: OUT must not be IN"; exit 1; }
awk -F'\t' -v k="$k" '
    NF == 2 { s = s (n ? " " : "") $1; t = t (n ? " " : "") $2; n++ }
    n == k  { if (split(s, a, " ") <= 60 && split(t, b, " ") <= 60) print s "\t" t; s = ""; t = ""; n = 0 }
' "$in" > "$out"
echo "long_corpus: $(wc -l < "$out") pairs of $k joined from $(wc -l < "$in") in $out"
