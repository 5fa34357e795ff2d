#!/bin/sh
# Makes sure the tests can #include <doctest/doctest.h>, the suite's one dependency.
#   tests/find_doctest.sh "CXX [FLAGS]" DEST
# 1. If the compiler already finds the header (installed system-wide, in a folder FLAGS name with
#    -I, or fetched into DEST by an earlier run), there is nothing to do.
# 2. Homebrew's (macOS: brew install doctest) is under `brew --prefix doctest`, which the compiler
#    does not search on Apple Silicon: link its folder into DEST (the Makefile passes
#    -IDEST/usr/include to the tests).
# 3. Otherwise fetch Debian's doctest-dev package without root: `apt-get download` it and unpack
#    it with `dpkg-deb -x` into DEST. As root on a machine whose package lists are empty,
#    `apt-get update` runs first.
# 4. Where none of these works (no apt-get, no network), say exactly what to do and fail.
# The Makefile runs this before compiling any test; it prints one line when it does something.
set -u
CXX=${1:-g++}
DEST=${2:-build/doctest}

header_found() {
    printf '#include <doctest/doctest.h>\n' |
        $CXX -std=c++20 -I"$DEST/usr/include" -fsyntax-only -x c++ - >/dev/null 2>&1
}

header_found && exit 0

if command -v brew >/dev/null 2>&1; then
    brewed=$(brew --prefix doctest 2>/dev/null)/include/doctest
    if [ -f "$brewed/doctest.h" ]; then
        mkdir -p "$DEST/usr/include" && ln -sfn "$brewed" "$DEST/usr/include/doctest"
        header_found && { echo "make test: using Homebrew's doctest ($brewed, linked into $DEST)"; exit 0; }
    fi
fi

fail() {
    cat >&2 <<EOF
make test: doctest's header <doctest/doctest.h> was not found, and it could not be fetched ($1).
Install it and run make test again, either:
  - with the package manager: apt-get install doctest-dev (Debian/Ubuntu), dnf install doctest-devel
    (Fedora), brew install doctest (macOS: make test then finds it by itself); or
  - by hand: download https://raw.githubusercontent.com/doctest/doctest/v2.4.9/doctest/doctest.h
    and save it as $DEST/usr/include/doctest/doctest.h.
If it is installed in a folder the compiler does not search, name the folder that holds doctest/:
  make test EXTRA_CXXFLAGS=-I/that/folder
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
