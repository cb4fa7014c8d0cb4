#!/usr/bin/env bash
# Hex playing strength (issue 23): seriema-hex against OpenSpiel's MCTSBot (textbook UCT, one
# random rollout per simulation, c = 1.4, no solver), colours alternated, on 11x11, in the rows
# of the issue's table plus an equal-time row whose budget is the baseline's median time per move
# measured in the first row of the same run. Prints wins per row and the goals met or missed;
# JSON per row in the results directory.
#
#   bench/run-hex-strength.sh [--games N] [--quick] [--out DIR] [BUILD_DIR]
#
# BUILD_DIR (default build/) must hold games/hex/seriema-hex. OpenSpiel comes from PyPI into a
# venv (HEX_VENV, default BUILD_DIR/hex-venv) on the first run. Full run: 100 games per row,
# about 8 minutes per row on 2 cores (the baseline takes 50-90 ms a move). --quick: 4 games per
# row on 7x7 with 100 simulations (a smoke test; numbers meaningless).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
games=100
rest=()
while (($#)); do
  case $1 in
    --games) games=$2; shift 2 ;;
    *) rest+=("$1"); shift ;;
  esac
done
source "$repo/bench/runner-args.sh" "${rest[@]+"${rest[@]}"}"
engine=$build/games/hex/seriema-hex
require_built "$engine"
size=11 simulations=1000
if ((quick)); then
  games=4 size=7 simulations=100
  out=${out:-$build/bench-results}
else
  out=${out:-$repo/bench/results}
fi
mkdir -p "$out"

venv=${HEX_VENV:-$build/hex-venv}
if ! "$venv/bin/python" -c "import pyspiel" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet open_spiel
fi

match() {  # label, target (minimum win rate or -), simulations, engine options...
  local label=$1 target=$2 sims=$3
  shift 3
  "$venv/bin/python" "$repo/bench/hex_match.py" --label "$label" --games "$games" --size "$size" \
    --simulations "$sims" --engine "$engine --quiet $*" --json "$out/hex-strength-$label.json" |
    tail -n 1
  echo "$label $target" >> "$out/hex-strength-targets.txt"
}

: > "$out/hex-strength-targets.txt"
rollouts=$simulations
match equal-playouts 0.75 "$simulations" --rollouts "$rollouts" --playouts 1
match four-times-playouts 0.50 $((4 * simulations)) --rollouts "$rollouts" --playouts 1
match defaults-equal-playouts 0.75 "$simulations" --rollouts $((rollouts / 16))
per_move=$("$venv/bin/python" -c "import json,sys; print(json.load(open(sys.argv[1]))['baseline_ms_per_move'] / 1000)" \
  "$out/hex-strength-equal-playouts.json")
match equal-time 0.95 "$simulations" --rollouts 0 --seconds "$per_move"

echo
echo "| row | seriema-hex wins | goal | |"
echo "|---|---:|---:|---|"
while read -r label target; do
  "$venv/bin/python" - "$out/hex-strength-$label.json" "$target" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
target = float(sys.argv[2])
met = "met" if r["engine_win_rate"] >= target else "missed"
print(f"| {r['label']} ({r['engine_ms_per_move']:.0f} ms vs {r['baseline_ms_per_move']:.0f} ms a move) "
      f"| {r['engine_wins']}/{r['games']} | {target:.2f} | {met} |")
EOF
done < "$out/hex-strength-targets.txt"
