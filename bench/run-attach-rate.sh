#!/usr/bin/env bash
# Runs the attach benchmark: send-based calls/s and call_return round trips/s from a thread
# attached with runtime::attach against a worker thread of runtime::run (the baseline, measured
# alternately in the same run), 2 ranks x 1 worker, over shared memory and over TCP between two
# emulated machines.
#
#   bench/run-attach-rate.sh [--quick] [--out DIR] [BUILD_DIR] [-- extra attach_rate options]
#
# BUILD_DIR (default build/) must hold bench/attach_rate and tools/seriema-run. Full run: 7
# repetitions of 200 k calls and 20 k round trips per transport (under a minute on 2 cores);
# --quick: 3 short repetitions. Results: bench/results/attach_rate-{shm,tcp}.json.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/bench/runner-args.sh" "$@"
require_built "$build/bench/attach_rate" "$build/tools/seriema-run"
if ((quick)); then
  out=${out:-$build/bench-results}
  args=(--reps 3 --calls 50000 --round-trips 5000)
else
  out=${out:-$repo/bench/results}
  args=(--reps 7)
fi
mkdir -p "$out"
export SERIEMA_THREADS=1
"$build/tools/seriema-run" -n 2 -- "$build/bench/attach_rate" "${args[@]}" --transport shm \
  --json "$out/attach_rate-shm.json" "${extra[@]}"
UCX_TLS=tcp,self "$build/tools/seriema-run" -n 2 --machines 2 -- "$build/bench/attach_rate" \
  "${args[@]}" --transport tcp --json "$out/attach_rate-tcp.json" "${extra[@]}"
