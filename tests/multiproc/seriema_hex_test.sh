#!/usr/bin/env bash
# seriema-hex as a user runs it, over 2 processes: analyze finds the one winning move of a
# position, play finishes a game against the random player, and a scripted GTP session gets the
# right answers (genmove answers a legal move of the position, errors are '?' lines); gtp --help
# shows the search options.
#   seriema_hex_test.sh <seriema-run> <seriema-hex> [launcher options...]
set -euo pipefail
run=$1
hex=$2
shift 2
launch=("$run" -n 2 "$@" --)
fail() { echo "seriema_hex_test: $*" >&2; exit 1; }

# Black (top-bottom) has b1, b2, b4 on 4x4: b3 is the only winning cell.
out=$("${launch[@]}" "$hex" analyze --size 4 --rollouts 3000 b1 a1 b2 d4 b4 d1 --quiet)
echo "$out"
grep -q '^best move: b3 ' <<<"$out" || fail "analyze did not find the winning move b3"
grep -Eq '^rollouts: 3000 ' <<<"$out" || fail "analyze did not report 3000 rollouts"
grep -Eq 'remote calls: [1-9]' <<<"$out" || fail "analyze made no remote call over 2 processes"

out=$("${launch[@]}" "$hex" play --size 5 --rollouts 500 --opponent random)
grep -Eq '^(black|white) \([XO]\) wins after [0-9]+ moves' <<<"$out" || fail "play did not end: $out"

script=$'protocol_version\nname\n7 boardsize 5\nplay b c3\nplay w c3\nplay x a1\nfoo\ngenmove w\nfinal_score\nundo\nquit\n'
out=$(printf '%s' "$script" | "${launch[@]}" "$hex" gtp --rollouts 500)
echo "$out"
expected=(
  "= 2"
  "= seriema-hex"
  "=7 "
  "= "
  "? cell occupied"
  "? syntax error"
  "? unknown command"
)
for line in "${expected[@]}"; do
  grep -qF -- "$line" <<<"$out" || fail "GTP answer missing: '$line'"
done
move=$(grep -E '^= [a-e][1-5]$' <<<"$out" | head -1 | cut -c3-)
[[ -n $move && $move != c3 ]] || fail "genmove w did not answer a free cell: '$move'"
grep -q '^? game not over' <<<"$out" || fail "final_score before the end was not an error"
# gtp --help shows the search options that matter there (they are program-wide options).
help=$("$hex" gtp --help)
for option in --rollouts --seconds --exploration --seed; do
  grep -q -- "$option" <<<"$help" || fail "gtp --help does not show $option"
done
echo "seriema_hex_test: ok"
