#!/usr/bin/env bash
# The group benchmark in one run per transport (docs/group.md, "Measured"): bench/group_rate
# (ordered multicast against its unordered mode and a sequencer-based total order written with
# seriema calls, all members sending; 1-sender 64 B delivery latency against a call_return round
# trip; 1-sender large messages down the chain of puts against ucx_perftest ucp_put_bw) with 3
# members over shared memory, over TCP on one machine, over TCP across 3 emulated
# machines (pushes by write message, and by put + fence + put: SERIEMA_REMOTE_PUBLISH=put), and
# with 2 members over shared memory (one core per member on a 2-core machine). Then
# bench/plot_groups.py prints the ratios against the issue's goals.
#   bench/run-groups.sh [--quick] [--out DIR] [BUILD_DIR]
# Full run: 5 repetitions, about 2 minutes on 2 cores. --quick (smoke test): 1 short repetition,
# into BUILD_DIR/bench-results.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/bench/runner-args.sh" "$@"
launcher=$build/tools/seriema-run
require_built "$build/bench/group_rate" "$launcher"
if ((quick)); then
  out=${out:-$build/bench-results}
  args=(--reps 1 --messages 200 --latency-samples 100 --large-messages 20)
else
  out=${out:-$repo/bench/results}
  args=(--reps 5 --messages 2000 --latency-samples 1000)
fi
mkdir -p "$out"
unset UCX_TLS UCX_NET_DEVICES SERIEMA_REMOTE_PUBLISH
export UCX_WARN_UNUSED_ENV_VARS=n SERIEMA_THREADS=1
status=0
run() {  # run <label> <launcher options...> -- (environment set by the caller)
  local label=$1
  shift
  echo "== $label"
  "$launcher" "$@" -- "$build/bench/group_rate" "${args[@]}" "${extra[@]}" --transport "$label" \
    --json "$out/group_rate-$label.json" || status=$?
  echo
}
run shm -n 3
run shm-2 -n 2
UCX_TLS=tcp,self run tcp -n 3
UCX_TLS=tcp,self run tcp-machines3 -n 3 --machines 3
UCX_TLS=tcp,self SERIEMA_REMOTE_PUBLISH=put run tcp-machines3-put -n 3 --machines 3
if ((status == 0)); then
  python=python3
  if ((!quick)); then source "$repo/bench/find-python.sh"; fi
  "$python" "$repo/bench/plot_groups.py" "$out" $( ((quick)) && echo --no-plot) || status=$?
fi
exit $status
