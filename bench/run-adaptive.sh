#!/usr/bin/env bash
# The self-tuning channel (channel::adaptive, issue 41) in one run, against the fixed modes:
# invoke_rate with trad, ovfl and adaptive (calls/s at 8, 64 and 256 B; adaptive against the
# better of trad and ovfl), and invoke_bursts (a bursty load in write, trad, ovfl and adaptive),
# both between 2 processes x 1 thread over shared memory and over TCP between two emulated
# machines. The idle round trip (adaptive against write) is invoke_latency's, in
# bench/run-paper.sh. JSON to bench/results/ (--quick: one short repetition, into
# BUILD_DIR/bench-results).
#   bench/run-adaptive.sh [--quick] [--out DIR] [BUILD_DIR]
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/bench/runner-args.sh" "$@"
launcher=$build/tools/seriema-run
require_built "$build/bench/invoke_rate" "$build/bench/invoke_bursts" "$launcher"
if ((quick)); then
  out=${out:-$build/bench-results}
  rate_args=(--reps 1 --calls 200000) bursts_args=(--reps 1 --bursts 40)
else
  out=${out:-$repo/bench/results}
  rate_args=(--reps 7) bursts_args=(--reps 7)
fi
mkdir -p "$out"
unset UCX_TLS UCX_NET_DEVICES SERIEMA_FLUSH_SIZE
export UCX_WARN_UNUSED_ENV_VARS=n SERIEMA_THREADS=1
status=0
for transport in shm tcp; do
  machines=() tls=()
  if [[ $transport == tcp ]]; then
    machines=(--machines 2)
    tls=(env UCX_TLS=tcp,self)
  fi
  "${tls[@]}" "$launcher" -n 2 "${machines[@]}" -- "$build/bench/invoke_rate" --no-perftest \
    --modes trad,ovfl,adaptive "${rate_args[@]}" --transport "$transport" \
    --json "$out/adaptive-rate-$transport.json" || status=$?
  "${tls[@]}" "$launcher" -n 2 "${machines[@]}" -- "$build/bench/invoke_bursts" \
    "${bursts_args[@]}" --transport "$transport" --json "$out/adaptive-bursts-$transport.json" \
    || status=$?
done
exit $status
