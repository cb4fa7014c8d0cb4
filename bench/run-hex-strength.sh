#!/usr/bin/env bash
# Hex playing strength (issue 23): seriema-hex with its DEFAULT settings (only budget options and
# where the search runs are passed, never tuning flags) on 11x11, colours alternated:
#  - rules cross-check: random games on sizes 3, 5, 8, 11, 13 in OpenSpiel and seriema-hex must
#    end alike (hex_rules_check.py; fails loudly on any difference);
#  - against OpenSpiel's MCTSBot (textbook UCT, one random rollout per simulation, c = 1.4):
#    equal playouts (1000 each; goal >= 0.75), MCTSBot with 4x playouts (goal >= 0.50), equal
#    time (seriema-hex --seconds = MCTSBot's median time per move in the equal-playouts row of
#    the same run; goal >= 0.95);
#  - against its own sequential search at equal playouts (goal >= 0.47): 1 process x 2 threads,
#    2 processes x 1 thread, remote-only (2x1), tcp between 2 emulated machines;
#  - win rate against budget (10, 30, 100, 300, 1000, 3000 playouts a side against MCTSBot).
# Prints each row (wins/games, rate +- standard error, goal, met/missed) and a table; JSON per
# row, hex-strength-summary.md and hex-strength-budget.png in the results directory.
#
#   bench/run-hex-strength.sh [--games N] [--self-games N] [--budget-games N] [--check-games N]
#                             [--quick] [--out DIR] [BUILD_DIR]
#
# Defaults: 200 games per MCTSBot row (100 for the 4x row; --games N sets all three to N), 200
# per self-play configuration, 100 per budget point, 2000 cross-check games. BUILD_DIR (default
# build/) must hold games/hex/seriema-hex and tools/seriema-run. open_spiel (pinned) comes from
# PyPI into a venv (HEX_VENV, default BUILD_DIR/hex-venv) on the first run. --quick: a smoke
# test of every row kind (7x7, 100 playouts, 2-4 games a row, 100 cross-check games).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
open_spiel_version=2.0.2
games="" self_games=200 budget_games=100 check_games=2000
rest=()
while (($#)); do
  case $1 in
    --games) games=$2; shift 2 ;;
    --self-games) self_games=$2; shift 2 ;;
    --budget-games) budget_games=$2; shift 2 ;;
    --check-games) check_games=$2; shift 2 ;;
    *) rest+=("$1"); shift ;;
  esac
done
source "$repo/bench/runner-args.sh" "${rest[@]+"${rest[@]}"}"
engine=$build/games/hex/seriema-hex
launcher=$build/tools/seriema-run
require_built "$engine" "$launcher"
size=11 playouts=1000 budgets=(10 30 100 300 1000 3000)
if ((quick)); then
  size=7 playouts=100 budgets=(10 100)
  games=${games:-4} self_games=2 budget_games=2 check_games=100
  out=${out:-$build/bench-results}
else
  out=${out:-$repo/bench/results}
fi
row_games=${games:-200} four_times_games=${games:-100}
mkdir -p "$out"
rm -f "$out"/hex-strength-*
unset UCX_TLS UCX_NET_DEVICES
export UCX_WARN_UNUSED_ENV_VARS=n

venv=${HEX_VENV:-$build/hex-venv}
if ! "$venv/bin/python" -c "import pyspiel" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "open_spiel==$open_spiel_version"
fi
installed=$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('open_spiel'))")
if [[ $installed != "$open_spiel_version" ]]; then
  echo "run-hex-strength: $venv has open_spiel $installed; the benchmark pins" \
    "$open_spiel_version (HEX_VENV names another venv, or remove this one)" >&2
  exit 2
fi
bench_python() { "$venv/bin/python" "$repo/bench/$1" "${@:2}"; }

# The engine's budget for N playouts per move: --rollouts N / (default playouts per leaf, read
# from seriema-hex --help) when that divides N, else --playouts 1 --rollouts N.
default_playouts=$("$engine" --help | sed -n 's/^ *--playouts [^=]*=\([0-9]*\).*/\1/p' | head -1)
playout_budget() {
  local n=$1
  if [[ -n $default_playouts ]] && ((default_playouts > 0 && n % default_playouts == 0)); then
    echo "--rollouts $((n / default_playouts))"
  else
    echo "--playouts 1 --rollouts $n"
  fi
}

# label, goal (a minimum win rate, or - for none), games, MCTSBot simulations, engine options...
match() {
  local label=$1 goal=() n=$3 sims=$4
  [[ $2 == - ]] || goal=(--goal "$2")
  shift 4
  bench_python hex_match.py --label "$label" "${goal[@]+"${goal[@]}"}" --games "$n" --size "$size" \
    --simulations "$sims" --engine "$engine --quiet $*" --json "$out/hex-strength-$label.json" |
    tail -n 1
}

self_play() {  # label, environment (VAR=value,...), launcher prefix, extra distributed options
  local label=$1 prefix=$3 extra=$4 budget environment
  IFS=' ' read -r -a environment <<<"$2"
  budget=$(playout_budget "$playouts")
  env "${environment[@]}" "$venv/bin/python" "$repo/bench/hex_head_to_head.py" --label "$label" \
    --goal 0.47 --games "$self_games" --size "$size" --json "$out/hex-strength-$label.json" \
    --a "$prefix $engine --quiet $extra $budget" --b "$engine --quiet --engine sequential $budget" |
    tail -n 1
}

echo "== rules cross-check ($check_games random games)"
bench_python hex_rules_check.py --engine "$engine --quiet" --games "$check_games" \
  --sizes 3,5,8,11,13 --json "$out/hex-rules-check.json"

echo "== against MCTSBot on ${size}x$size (playouts per move: $playouts;" \
  "default playouts per leaf: ${default_playouts:-unknown})"
budget=$(playout_budget "$playouts")
# shellcheck disable=SC2086  # $budget is a list of options
match equal-playouts 0.75 "$row_games" "$playouts" $budget
# shellcheck disable=SC2086
match four-times-playouts 0.50 "$four_times_games" $((4 * playouts)) $budget
per_move=$("$venv/bin/python" -c \
  "import json,sys; print(json.load(open(sys.argv[1]))['baseline_ms_per_move'] / 1000)" \
  "$out/hex-strength-equal-playouts.json")
match equal-time 0.95 "$row_games" "$playouts" --rollouts 0 --seconds "$per_move"

echo "== against its own sequential search at equal playouts"
self_play self-1x2 "SERIEMA_THREADS=2" "" ""
self_play self-2x1 "SERIEMA_THREADS=1" "$launcher -n 2 --" ""
self_play self-remote-only "SERIEMA_THREADS=1" "$launcher -n 2 --" --remote-only
self_play self-tcp-machines2 "SERIEMA_THREADS=1 UCX_TLS=tcp,self" \
  "$launcher -n 2 --machines 2 --" ""

echo "== win rate against budget (equal playouts against MCTSBot)"
for n in "${budgets[@]}"; do
  if ((n == playouts && budget_games <= row_games)); then
    cp "$out/hex-strength-equal-playouts.json" "$out/hex-strength-budget-$n.json"  # same row
    continue
  fi
  # shellcheck disable=SC2086
  match "budget-$n" - "$budget_games" "$n" $(playout_budget "$n")
done

source "$repo/bench/find-python.sh"
"$python" "$repo/bench/plot_hex_strength.py" "$out"
