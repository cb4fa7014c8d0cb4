#!/usr/bin/env bash
# Processes whose remote-function registries differ must be refused at start, with a message
# that says so. Usage: registry_skew_test.sh <seriema-run> <registry_skew_mp_test>
set -u
out=$("$1" -n 2 -- "$2" 2>&1); rc=$?
fail() { echo "registry_skew_test: $1"; printf '%s\n' "$out" | sed 's/^/    /'; exit 1; }
[ $rc -ne 0 ] || fail "the job exited 0"
grep -q "started" <<<"$out" && fail "a rank started despite the skew"
grep -q "registries differ" <<<"$out" || fail "no message about differing registries"
grep -q "rank 1 (3 functions" <<<"$out" || fail "the message does not name rank 1"
echo "registry_skew_test: refused as expected: $(printf '%s\n' "$out" | grep -m1 'registries differ')"
