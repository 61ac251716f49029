#!/bin/sh
# The man pages render without a groff warning and name what the programs have: every config
# key xaggd takes (xaggd.conf.5), every xaggctl command (xaggctl.8), every option of
# xagg-worker and of each xagg-sim subcommand (their section-1 pages), read from --help.
#
#   tests/man_pages_test.sh SOURCE_DIR BINARY_DIR
set -e
src=$(cd "$1" && pwd) bin=$(cd "$2" && pwd)
cd "$src/docs/man"
fail() { echo "$*"; exit 1; }
# Each list read from a program's --help; an empty one (a program that did not run) fails.
listed() { [ -n "$1" ] || fail "no $2 read from --help"; echo "$1"; }
for f in xaggd.8 xaggctl.8 xaggd.conf.5 xagg-worker.1 xagg-sim.1; do
    w=$(groff -man -ww -z "$f" 2>&1)
    [ -z "$w" ] || fail "$f: $w"
done
keys=$("$bin/daemon/xaggd" --help | sed -n 's/^  --\([a-z_]*\).*/\1/p' | grep -v '^config$\|^help$')
for k in $(listed "$keys" "xaggd config keys"); do
    grep -q "^.BR $k " xaggd.conf.5 || fail "xaggd.conf.5 lacks $k"
done
commands=$("$bin/tools/xaggctl" --help | sed -n '/^Subcommands:/,/^$/s/^  \([a-z]*\) .*/\1/p')
for c in $(listed "$commands" "xaggctl commands"); do
    grep -q "^.B $c\|^.BI \"$c" xaggctl.8 || fail "xaggctl.8 lacks $c"
done
# An option OPT of a section-1 page is a .TP entry starting .B or .BI with \-\-OPT.
options() { sed -n 's/^  \(-[a-z],\)\{0,1\}--\([a-z][a-z-]*\).*/\2/p' | grep -v '^help$'; }
has_option() { grep -q "^\.BI\{0,1\} \\\\-\\\\-$(echo "$2" | sed 's/-/\\\\-/g')\( \|$\)" "$1"; }
worker=$("$bin/tools/xagg-worker" --help | options)
for o in $(listed "$worker" "xagg-worker options"); do
    has_option xagg-worker.1 "$o" || fail "xagg-worker.1 lacks --$o"
done
for sub in generate run; do
    sim=$("$bin/tools/xagg-sim" "$sub" --help | options)
    for o in $(listed "$sim" "xagg-sim $sub options"); do
        has_option xagg-sim.1 "$o" || fail "xagg-sim.1 lacks --$o ($sub)"
    done
done
echo "man pages ok"
