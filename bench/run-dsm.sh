#!/usr/bin/env bash
# The shared-space benchmark in one run per transport (docs/shared-memory.md, "Measured"):
# bench/dsm_diff, the seed's diff-merge microbenchmark (a 32 KiB block, half its bytes changed,
# merged into a master copy in another process by seriema's floating release, a packed diff sent
# to the home, one put per changed run, and one put of the whole block), over shared memory and
# over TCP between two emulated machines. Prints each table and the ratios against the issue's
# goals (floating <= 0.5 x packed diff, <= 0.1 x scattered writes); writes
# bench/results/dsm_diff-{shm,tcp}.json.
#   bench/run-dsm.sh [--quick] [--out DIR] [BUILD_DIR]
# Full run: 5 repetitions of 200 merges per method, about a minute on 2 cores. --quick (smoke
# test): 1 repetition of 20, into BUILD_DIR/bench-results.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/bench/runner-args.sh" "$@"
launcher=$build/tools/seriema-run
require_built "$build/bench/dsm_diff" "$launcher"
if ((quick)); then
  out=${out:-$build/bench-results}
  args=(--reps 1 --iterations 20)
else
  out=${out:-$repo/bench/results}
  args=(--reps 5 --iterations 200)
fi
mkdir -p "$out"
unset UCX_TLS UCX_NET_DEVICES
# A wait that never ends (a peer gone wrong) fails the run with a message instead.
export UCX_WARN_UNUSED_ENV_VARS=n SERIEMA_THREADS=1 SERIEMA_TIMEOUT=${SERIEMA_TIMEOUT:-60000}

echo "== shared memory: seriema-run -n 2"
"$launcher" -n 2 -- "$build/bench/dsm_diff" "${args[@]}" "${extra[@]}" --transport shm \
  --json "$out/dsm_diff-shm.json"
echo "== tcp: seriema-run -n 2 --machines 2, UCX_TLS=tcp,self"
UCX_TLS=tcp,self "$launcher" -n 2 --machines 2 -- "$build/bench/dsm_diff" "${args[@]}" \
  "${extra[@]}" --transport tcp --json "$out/dsm_diff-tcp.json"
