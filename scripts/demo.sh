#!/usr/bin/env bash
# Quick start: install what is missing, build, then the headline demo: one distributed MCTS
# search on 11x11 Hex spread over 2 processes started by the launcher (progress bar, best move,
# rollouts/s). Extra arguments go to seriema-hex analyze (e.g. --seconds 20, or moves: f6 e7).
#   scripts/demo.sh [--basics] [analyze arguments...]
#   --basics   also show what seriema sees (seriema-info) and the two-process put/get demo
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
basics=0
if [[ ${1:-} == --basics ]]; then basics=1; shift; fi
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build"
if ((basics)); then
  "$root/build/tools/seriema-info" --no-memory
  echo
  echo "== seriema-run -n 2 -- put_get_roundtrip (shared memory)"
  "$root/build/tools/seriema-run" -n 2 -- "$root/build/examples/put_get_roundtrip"
  echo
  echo "== the same over TCP between two emulated machines (UCX_TLS=tcp,self, --machines 2)"
  UCX_TLS=tcp,self "$root/build/tools/seriema-run" -n 2 --machines 2 -- \
    "$root/build/examples/put_get_roundtrip"
  echo
fi
echo "== seriema-run -n 2 -- seriema-hex analyze --seconds 10: one search tree over 2 processes"
args=("$@")
((${#args[@]})) || args=(--seconds 10)
exec "$root/build/tools/seriema-run" -n 2 -- "$root/build/games/hex/seriema-hex" analyze "${args[@]}"
