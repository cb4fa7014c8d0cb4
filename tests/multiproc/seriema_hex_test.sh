#!/usr/bin/env bash
# seriema-hex as a user runs it, over 2 processes: analyze finds the one winning move of a
# position (with either playout policy; an unknown one is refused), a df-pn solver beside the
# search proves a small board, play finishes a game against the random player, and a scripted
# GTP session gets the right answers (genmove answers a legal move of the position, errors are
# '?' lines); gtp --help
# shows the search options; genmove resigns a lost position (and only with confidence) and
# answers resign once the game is over; the swap rule set by param_game is used and accepted;
# under a GTP clock the moves come within it; a tree memory budget is kept and reported.
#   seriema_hex_test.sh <seriema-run> <seriema-hex> [launcher options...]
set -euo pipefail
run=$1
hex=$2
shift 2
launch=("$run" -n 2 "$@" --)
fail() { echo "seriema_hex_test: $*" >&2; exit 1; }
# Under AddressSanitizer (CI's second pass, -j 2 beside other multi-process tests on 2 cores) the
# search's end across 2 processes and the pipes take longer than the 0.3 s a clock check allows
# them: there each check allows 1 s. (ldd's output is read whole: `ldd | grep -q` under pipefail
# fails whenever grep quits before ldd has written its last line.)
sanitized=0
[[ $(ldd "$hex" 2>/dev/null) == *libasan* ]] && sanitized=1
slack=$( ((sanitized)) && echo 1.0 || echo 0.3)

# Black (top-bottom) has b1, b2, b4 on 4x4: b3 is the only winning cell. Without the solver
# the search finds it by its statistics and runs its whole budget.
out=$("${launch[@]}" "$hex" analyze --size 4 --rollouts 3000 --solver 0 b1 a1 b2 d4 b4 d1 --quiet)
echo "$out"
grep -q '^best move: b3 ' <<<"$out" || fail "analyze did not find the winning move b3"
grep -Eq '^rollouts: 3000 ' <<<"$out" || fail "analyze did not report 3000 rollouts"
grep -Eq 'remote calls: [1-9]' <<<"$out" || fail "analyze made no remote call over 2 processes"
# With the solver (the default) the win is proven at once and ends the search.
out=$("${launch[@]}" "$hex" analyze --size 4 --rollouts 3000 b1 a1 b2 d4 b4 d1 --quiet)
grep -q '^best move: b3 ' <<<"$out" || fail "analyze with the solver did not play b3: $out"
grep -q '^proven: black (X) wins' <<<"$out" || fail "analyze with the solver proved nothing: $out"
grep -Eq '^rollouts: [0-9]{1,2} ' <<<"$out" || fail "the proof did not end the search: $out"
# With --dfpn a df-pn solver beside the search proves the empty 6x6 board (with H-search and
# must-play, its own knowledge even where the search has them off) and its proof ends a search of
# two minutes; a table under 1M is refused.
out=$("${launch[@]}" "$hex" analyze --size 6 --seconds 120 --dfpn --quiet)
grep -q '^proven: black (X) wins (df-pn ended the search)' <<<"$out" ||
  fail "analyze --dfpn proved nothing: $out"
grep -Eq '^df-pn: proved after [0-9]+ expansions' <<<"$out" || fail "no df-pn line: $out"
if err=$("$hex" analyze --dfpn --dfpn-memory 100k 2>&1); then
  fail "--dfpn-memory 100k was accepted"
fi
grep -q 'dfpn-memory must be at least 1M' <<<"$err" || fail "unclear --dfpn-memory error: $err"
# The same with playouts that answer bridge intrusions (the policy travels with the game).
out=$("${launch[@]}" "$hex" analyze --size 4 --rollouts 3000 --playout-policy bridges \
      b1 a1 b2 d4 b4 d1 --quiet)
grep -q '^best move: b3 ' <<<"$out" || fail "analyze with bridges playouts did not find b3: $out"
# A policy that does not exist is refused, naming the allowed ones.
if err=$("$hex" analyze --playout-policy greedy 2>&1); then
  fail "--playout-policy greedy accepted"
fi
grep -q 'random,bridges' <<<"$err" || fail "--playout-policy greedy: no list of policies: $err"

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
# gtp --help shows the search options that matter there (program-wide ones and its own).
help=$("$hex" gtp --help)
for option in --rollouts --seconds --exploration --playout-policy --seed --resign-threshold \
              time_settings; do
  grep -q -- "$option" <<<"$help" || fail "gtp --help does not show $option"
done

# Resignation and the end of the game (docs/mcts.md). Black's b1 b2 b3 on 4x4 threaten a4 and
# b4 at once: white is lost, and 3000 rollouts see it (about 5% for white's best move).
lost=$'boardsize 4\nplay b b1\nplay w a1\nplay b b2\nplay w d4\nplay b b3\n'
end=$'final_score\nplay w b4\nplay b a4\ngenmove w\ngenmove b\nplay w resign\nfinal_score\nquit\n'
out=$(printf '%s' "${lost}5 genmove w"$'\n'"$end" |
      "${launch[@]}" "$hex" gtp --rollouts 3000 --quiet --resign-threshold 0.2)
echo "$out"
answers=$(grep -E '^[=?]' <<<"$out" | tr '\n' '|')
expected='= |= |= |= |= |= |=5 resign|? game not over|= |= |= resign|= resign|= |= B+|= |'
[[ $answers == "$expected" ]] || fail "resign session answered '$answers', not '$expected'"
# Without confidence (under 1000 rollouts, and no proof without the solver), or with
# --resign-threshold 0, white plays on.
for options in "--rollouts 500 --solver 0" "--rollouts 3000 --resign-threshold 0"; do
  # shellcheck disable=SC2086
  out=$(printf '%s' "${lost}genmove w"$'\nquit\n' | "${launch[@]}" "$hex" gtp $options --quiet)
  grep -Eq '^= [a-d][1-4]$' <<<"$out" || fail "gtp $options resigned or failed: $out"
done

# The swap rule, set as MoHex's controllers set it: after black's centre on 5x5 the search
# swaps (about 60% for swap-pieces against under 50% for any cell), and play accepts the swap.
# 16 playouts per leaf: with 3000 playouts in all (the default 1 per leaf) the search swapped in
# 18 of 20 sessions, with 48 000 in 20 of 20.
swap=$'boardsize 5\nparam_game allow_swap 1\nparam_game\nplay b c3\ngenmove w\nundo\n'
swap+=$'play w swap-pieces\ngenmove b\nquit\n'
out=$(printf '%s' "$swap" | "${launch[@]}" "$hex" gtp --rollouts 3000 --playouts 16 --quiet)
echo "$out"
answers=$(grep -E '^[=?]|^\[' <<<"$out" | tr '\n' '|')
[[ $answers =~ ^'= |= |= |[bool] allow_swap 1|= |= swap-pieces|= |= |= '[a-e][1-5]'|= |'$ ]] ||
  fail "swap session answered '$answers'"

# Under a clock, driven one command at a time so that each genmove is timed here.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# No resignation here: the game goes to its end (resigning is checked above).
coproc ENGINE { "${launch[@]}" "$hex" gtp --size 5 --quiet --resign-threshold 0 2>"$log"; }
# ask COMMAND: its answer's first line in $answer, the seconds it took in $took.
ask() {
  local start=$EPOCHREALTIME line
  printf '%s\n' "$1" >&"${ENGINE[1]}"
  answer=""
  while true; do
    IFS= read -r -t 120 line <&"${ENGINE[0]}" || fail "no answer to '$1' within 120 s"
    [[ -z $line && -n $answer ]] && break
    [[ -z $answer ]] && answer=$line
  done
  took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
}
# within SECONDS LIMIT WHAT: fails unless SECONDS <= LIMIT.
within() { awk -v t="$1" -v l="$2" 'BEGIN { exit !(t <= l) }' || fail "$3 took $1 s, over $2 s"; }
ask "name"  # the job has started
ask "time_settings 4 0 0"
[[ $answer == "= " ]] || fail "time_settings answered '$answer'"
# A whole 5x5 game under 4 s of absolute time each. Every move is charged to the engine's own
# clock; the slack ($slack a side) is for the pipes and the search's end across 2 processes.
declare -A spent=([b]=0 [w]=0)
moves=0
for ((turn = 0; turn < 25; ++turn)); do
  colour=$([[ $((turn % 2)) == 0 ]] && echo b || echo w)
  ask "genmove $colour"
  [[ $answer == "= resign" ]] && break
  [[ $answer =~ ^=\ ([a-e][1-5]|swap-pieces)$ ]] || fail "timed genmove answered '$answer'"
  spent[$colour]=$(awk -v s="${spent[$colour]}" -v t="$took" 'BEGIN { print s + t }')
  moves=$((moves + 1))
done
echo "timed game: $moves moves; black ${spent[b]} s, white ${spent[w]} s of 4 s each"
((moves >= 9)) || fail "the timed game ended after $moves moves"
ask "final_score"
[[ $answer =~ ^=\ [BW]\+$ ]] || fail "the timed game did not end: final_score '$answer'"
# plus S: S seconds and the slack.
plus() { awk -v a="$1" -v b="$slack" 'BEGIN { print a + b }'; }
within "${spent[b]}" "$(plus 4)" "black's timed game"
within "${spent[w]}" "$(plus 4)" "white's timed game"
# time_left states the clock: 1 s left allows at most half of the usable 0.9 s.
ask "clear_board"
ask "time_left b 1 0"
ask "genmove b"
[[ $answer =~ ^=\ [a-e][1-5]$ ]] || fail "genmove with 1 s left answered '$answer'"
within "$took" "$(plus 0.45)" "genmove b with 1 s left"
# Canadian byo-yomi: 2 moves in 2 s.
ask "time_settings 0 2 2"
ask "genmove w"
first=$took
ask "genmove w"
within "$(awk -v a="$first" -v b="$took" 'BEGIN { print a + b }')" "$(plus 2)" "a byo-yomi period"
ask "quit"
wait "$ENGINE_PID" || fail "the timed gtp session failed"
grep -Eq '^seriema-hex: genmove w: [a-e][1-5] after [0-9.]+ s, [0-9.]+ s left$' "$log" ||
  fail "no clock log line: $(cat "$log")"
cat "$log"

# A 4 MiB tree budget per process: analyze reaches it, keeps searching to the rollout count, says
# so, keeps each process's tree within the budget (+ the root's 256 KiB block) and rank 0's peak
# RSS (VmHWM) under 48 MiB (unbounded, this search takes 65-75 MiB: 46 MiB of tree).
# (The budget is reached after about 14 000 rollouts; the rest shows the search going on.)
out=$("${launch[@]}" "$hex" analyze --rollouts 60000 --playouts 2 --max-memory 4M --quiet)
echo "$out"
grep -Eq '^rollouts: 60000 ' <<<"$out" || fail "the budgeted analyze did not complete its rollouts"
memory_line='^memory: tree ([0-9.]+) MiB in the largest of 2 processes, [0-9]+ nodes, [0-9]+ '
memory_line+='bytes/node; budget 4.0 MiB per process; peak RSS of rank 0 ([0-9.]+) MiB$'
[[ $(grep -E '^memory: ' <<<"$out") =~ $memory_line ]] || fail "no memory line in analyze"
within "${BASH_REMATCH[1]}" 4.25 "the tree's MiB"
# Under AddressSanitizer shadow memory and the quarantine make RSS no measure of the tree: there
# only the tree's own count is checked.
if ((sanitized)); then
  echo "seriema_hex_test: AddressSanitizer build, rank 0's peak RSS not checked"
else
  within "${BASH_REMATCH[2]}" 48 "rank 0's peak RSS in MiB"
fi
grep -Eq '^memory budget of 4.0 MiB per process reached after [0-9.]+ s( \([0-9]+ rollouts\))?: ' \
  <<<"$out" || fail "analyze did not say the budget was reached"
out=$("${launch[@]}" "$hex" analyze --size 5 --rollouts 300 --quiet)
grep -q '^memory budget not reached$' <<<"$out" || fail "analyze did not say the budget was not reached"
# play and gtp say it once on stderr, whatever the number of moves that reach it.
errors=$("${launch[@]}" "$hex" play --size 5 --rollouts 500 --max-memory 1K 2>&1 >/dev/null)
(($(grep -c 'memory budget of 0.0 MiB per process reached' <<<"$errors") == 1)) ||
  fail "play did not say once that the budget was reached: $errors"
errors=$(printf 'boardsize 5\ngenmove b\ngenmove w\nquit\n' |
  "${launch[@]}" "$hex" gtp --rollouts 300 --max-memory 1K 2>&1 >/dev/null)
(($(grep -c 'memory budget of 0.0 MiB per process reached' <<<"$errors") == 1)) ||
  fail "gtp did not say once that the budget was reached: $errors"
# Tree reuse between moves (docs/mcts.md): each genmove after the first starts from the
# subtree of the last search that the moves since lead to, kept on every process; with
# --reuse-tree 0 every search starts afresh. play says what it kept.
reuse=$'boardsize 7\ngenmove b\ngenmove w\nplay b a1\ngenmove w\nquit\n'
errors=$(printf '%s' "$reuse" | "${launch[@]}" "$hex" gtp --rollouts 2000 2>&1 >/dev/null)
# (the second genmove keeps the first's reply, the third keeps a1's node, maybe a leaf)
(($(grep -Ec 'the search started from [0-9]+ playouts and [1-9][0-9]* nodes kept' \
   <<<"$errors") == 2)) || fail "gtp did not start two searches from kept subtrees: $errors"
grep -Eq 'the search started from [1-9][0-9]* playouts' <<<"$errors" ||
  fail "gtp kept no playouts: $errors"
errors=$(printf '%s' "$reuse" | "$hex" gtp --engine sequential --rollouts 2000 2>&1 >/dev/null)
grep -Eq 'the search started from [1-9][0-9]* playouts' <<<"$errors" ||
  fail "gtp --engine sequential kept no playouts: $errors"
errors=$(printf '%s' "$reuse" |
  "${launch[@]}" "$hex" gtp --rollouts 2000 --reuse-tree 0 2>&1 >/dev/null)
grep -q 'kept' <<<"$errors" && fail "gtp --reuse-tree 0 kept a tree: $errors"
out=$("${launch[@]}" "$hex" play --size 5 --rollouts 2000 --opponent self --quiet)
grep -Eq 'playouts kept from the last search' <<<"$out" || fail "play kept no tree: $out"
status=0
out=$("$hex" analyze --max-memory 12Q 2>&1) || status=$?
((status == 2)) && grep -q -- '--max-memory=12Q: unknown unit' <<<"$out" ||
  fail "--max-memory 12Q was not refused (status $status): $out"
echo "seriema_hex_test: ok"
