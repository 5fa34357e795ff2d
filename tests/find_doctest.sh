#!/bin/sh
# Makes sure the tests can #include <doctest/doctest.h>, the suite's one dependency.
#   tests/find_doctest.sh CXX DEST
# 1. If the compiler already finds the header (installed system-wide, or fetched into DEST by an
#    earlier run), there is nothing to do.
# 2. Otherwise fetch Debian's doctest-dev package without root: `apt-get download` it and unpack
#    it with `dpkg-deb -x` into DEST (the Makefile passes -IDEST/usr/include to the tests). As root
#    on a machine whose package lists are empty, `apt-get update` runs first.
# 3. Where neither works (no apt-get, no network), say exactly what to do and fail.
# The Makefile runs this before compiling any test; it prints one line when it does something.
set -u
CXX=${1:-g++}
DEST=${2:-build/doctest}

header_found() {
    printf '#include <doctest/doctest.h>\n' |
        $CXX -std=c++20 -I"$DEST/usr/include" -fsyntax-only -x c++ - >/dev/null 2>&1
}

header_found && exit 0

fail() {
    cat >&2 <<EOF
make test: doctest's header <doctest/doctest.h> was not found, and it could not be fetched ($1).
Install it and run make test again, either:
  - with the package manager: apt-get install doctest-dev (Debian/Ubuntu), dnf install doctest-devel
    (Fedora), brew install doctest (macOS); or
  - by hand: download https://raw.githubusercontent.com/doctest/doctest/v2.4.9/doctest/doctest.h
    and save it as $DEST/usr/include/doctest/doctest.h
EOF
    exit 1
}

command -v apt-get >/dev/null 2>&1 || fail "no apt-get on this machine"
command -v dpkg-deb >/dev/null 2>&1 || fail "no dpkg-deb on this machine"

tmp=$(mktemp -d) || fail "cannot create a temporary folder"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"   # apt-get downloads as the _apt user when it can, and warns when it cannot
log="$tmp/apt.log"

download() { (cd "$tmp" && apt-get download doctest-dev) >>"$log" 2>&1; }
if ! download; then
    # A fresh machine (e.g. a container) has empty package lists; as root we can fill them.
    if [ "$(id -u)" = 0 ] && apt-get update -qq >>"$log" 2>&1 && download; then :; else
        fail "apt-get download doctest-dev failed: $(tail -n 1 "$log")"
    fi
fi

deb=$(ls "$tmp"/doctest-dev_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || fail "apt-get download left no .deb file"
mkdir -p "$DEST" && dpkg-deb -x "$deb" "$DEST" || fail "dpkg-deb -x $deb $DEST failed"
header_found || fail "the unpacked package has no usable doctest/doctest.h"
echo "make test: doctest not installed; fetched $(basename "$deb") (apt-get download, dpkg-deb -x) into $DEST"
