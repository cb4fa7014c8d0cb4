#!/usr/bin/env bash
# The MCTS scaling figure (paper §5.3, Fig. 3) on this machine: rollouts/s of the distributed
# search on 11x11 Hex for 1 thread, 1 process x 2 threads and 2 processes x 1 thread, local and
# remote-only, each against the sequential reference measured in the same run; then the strength
# check: the distributed search (2 processes) against the sequential one at equal rollouts per
# move, colours alternated, on 9x9. Prints the tables, writes JSON, mcts-scaling.png and
# mcts-summary.md.
#
#   bench/run-mcts.sh [--quick] [--out DIR] [BUILD_DIR]
#
# BUILD_DIR (default build/) must hold bench/mcts_scaling and tools/seriema-run (ninja -C build
# mcts_scaling seriema-run). Full run: 5 searches of 300 000 rollouts per configuration (equal
# rollouts, so every configuration's tree has the same size) and 400 games of 2000 rollouts per
# move, about 3.5 minutes on 2 cores; results in bench/results/. --quick: a
# smoke run (numbers meaningless), results in BUILD_DIR/bench-results/ unless --out says
# otherwise.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/bench/runner-args.sh" "$@"
launcher=$build/tools/seriema-run
bench=$build/bench/mcts_scaling
require_built "$bench" "$launcher"
if ((quick)); then
  out=${out:-$build/bench-results}
  rate_args=(--rollouts 20000 --reps 1)
  strength_args=(--games 4 --rollouts 100)
else
  out=${out:-$repo/bench/results}
  rate_args=(--rollouts 300000 --reps 5)
  strength_args=(--games 400 --rollouts 2000)
fi
mkdir -p "$out"
rm -f "$out"/mcts-rate-*.json "$out"/mcts-strength.json
unset UCX_TLS UCX_NET_DEVICES
export UCX_WARN_UNUSED_ENV_VARS=n

echo "== rollouts/s on 11x11 from the empty board (K = 16), against the sequential reference"
printf '%-22s %8s %12s %12s %7s %12s\n' configuration mode "rollouts/s" "seq/s" ratio "calls/s"
# processes threads mode
for config in "1 1 local" "1 1 remote" "1 2 local" "1 2 remote" "2 1 local" "2 1 remote"; do
  read -r processes threads mode <<<"$config"
  label="${processes}x${threads}"
  extra=()
  [[ $mode == remote ]] && extra=(--remote-only)
  SERIEMA_THREADS=$threads "$launcher" -n "$processes" -- "$bench" rate "${rate_args[@]}" \
    "${extra[@]}" --label "$label" --json "$out/mcts-rate-$label-$mode.json"
done

echo "== strength: distributed (2 processes x 1 thread) vs sequential, equal rollouts per move"
SERIEMA_THREADS=1 "$launcher" -n 2 -- "$bench" strength "${strength_args[@]}" \
  --json "$out/mcts-strength.json"

source "$repo/bench/find-python.sh"
"$python" "$repo/bench/plot_mcts.py" "$out"
