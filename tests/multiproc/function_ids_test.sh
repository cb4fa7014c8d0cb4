#!/usr/bin/env bash
# Address-based function ids (SERIEMA_FUNCTION_IDS=address): processes of one binary start; a
# second binary that differs only in its build id is refused at start with a message naming it
# (the registries' names and offsets are equal, so only the binary check can refuse it); with
# hash ids the same pair starts; an unknown mode is refused naming the setting.
# Usage: function_ids_test.sh <mpirun> <registry_skew_mp_test>
set -u
mpirun=$1
exe=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
other="$work/other_build"
objcopy --remove-section=.note.gnu.build-id "$exe" "$other" ||
  { echo "function_ids_test: objcopy failed"; exit 1; }
launch() { timeout 120 "$mpirun" --allow-run-as-root --oversubscribe "$@" 2>&1; }
fail() { echo "function_ids_test: $1"; printf '%s\n' "$out" | sed 's/^/    /'; exit 1; }

out=$(SERIEMA_FUNCTION_IDS=address launch -np 2 "$exe") || fail "one binary, address ids: failed"
[ "$(printf '%s\n' "$out" | grep -c started)" -eq 2 ] || fail "one binary: not both ranks started"

out=$(SERIEMA_FUNCTION_IDS=address launch -np 1 "$exe" : -np 1 "$other") &&
  fail "two binaries with address ids: the job exited 0"
grep -q started <<<"$out" && fail "two binaries: a rank started"
grep -q "another binary" <<<"$out" || fail "the refusal does not name the binary"

out=$(SERIEMA_FUNCTION_IDS=hash launch -np 1 "$exe" : -np 1 "$other") ||
  fail "two builds of one program with hash ids: refused"
[ "$(printf '%s\n' "$out" | grep -c started)" -eq 2 ] || fail "hash ids: not both ranks started"

out=$(SERIEMA_FUNCTION_IDS=bogus launch -np 2 "$exe") && fail "SERIEMA_FUNCTION_IDS=bogus: exit 0"
grep -q "SERIEMA_FUNCTION_IDS=bogus" <<<"$out" || fail "bogus: the setting is not named"
echo "function_ids_test: address ids checked (same binary starts, another binary refused)"
