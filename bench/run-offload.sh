#!/usr/bin/env bash
# The offload benchmark in one run per transport (docs/offload.md, "Measured"): bench/offload_rate
# with 2 processes x 1 worker, rank 0's plain threads reading 8-byte words of rank 1 through an
# offload::engine with each method (direct injection, the seed's baseline; spin, static
# offloading; sleep, dynamic offloading; delegate, queue delegation), alternating methods in each
# repetition: one-get latency, message rate against requester threads 1..64, each requester's
# injection cost, the executors' CPU over a 2 s idle window and the endpoints each process
# opened. Over shared memory (seriema-run -n 2) and over TCP between two emulated machines
# (UCX_TLS=tcp,self, --machines 2), each with two access patterns: contiguous (a requester's
# window reads adjacent words, which executors may coalesce into one get, the seed's linked work
# requests) and scattered (every get a pseudo-random word: nothing to coalesce); and a third run
# of fire-and-forget calls to rank 1's worker (latency: a call_return's round trip) that adds
# "sleep:unbundled", dynamic offloading with a message per call, to show what bundling the calls
# of a batch to one thread into one message (engine_options::bundle_bytes) is worth. Writes
# bench/results/offload_rate-<transport>-<pattern>.json; bench/plot_offload.py prints every goal
# of the issue with its ratio (offloaded latency <= 1.3 x direct; rate at 8+ requesters >= 3 x
# direct over tcp, >= 1.0 x over shm; injection cost flat; idle executor <= 1 % of a core, spin
# ~100 %) and draws bench/results/offload.png.
#   bench/run-offload.sh [--quick] [--out DIR] [BUILD_DIR]
# Full run: 3 repetitions, 0.3 s per rate point, about 3 minutes on 2 cores. --quick (smoke test):
# 1 repetition of 1 and 8 requesters, into BUILD_DIR/bench-results.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/bench/runner-args.sh" "$@"
launcher=$build/tools/seriema-run
require_built "$build/bench/offload_rate" "$launcher"
if ((quick)); then
  out=${out:-$build/bench-results}
  args=(--reps 1 --threads 1,8 --seconds 0.1 --latency-ops 200 --idle-seconds 0.5)
else
  out=${out:-$repo/bench/results}
  args=(--reps 3 --threads 1,2,4,8,16,32,64 --seconds 0.3 --latency-ops 2000 --idle-seconds 2)
fi
mkdir -p "$out"
unset UCX_TLS UCX_NET_DEVICES
# A wait that never ends (a peer gone wrong) fails the run with a message instead.
export UCX_WARN_UNUSED_ENV_VARS=n SERIEMA_THREADS=1 SERIEMA_TIMEOUT=${SERIEMA_TIMEOUT:-120s}

status=0
for pattern in contiguous scattered calls; do
  methods=direct,spin,sleep,delegate
  if [[ $pattern == calls ]]; then methods=direct,sleep:unbundled,sleep,delegate; fi
  echo "== shared memory, $pattern: seriema-run -n 2"
  "$launcher" -n 2 -- "$build/bench/offload_rate" "${args[@]}" --methods "$methods" "${extra[@]}" \
    --pattern "$pattern" --transport shm --json "$out/offload_rate-shm-$pattern.json" || status=$?
  echo "== tcp, $pattern: seriema-run -n 2 --machines 2, UCX_TLS=tcp,self"
  UCX_TLS=tcp,self "$launcher" -n 2 --machines 2 -- "$build/bench/offload_rate" "${args[@]}" \
    --methods "$methods" "${extra[@]}" --pattern "$pattern" --transport tcp \
    --json "$out/offload_rate-tcp-$pattern.json" || status=$?
done
echo
if ((status == 0)); then
  python=python3
  if ((!quick)); then source "$repo/bench/find-python.sh"; fi
  "$python" "$repo/bench/plot_offload.py" "$out" $( ((quick)) && echo --no-plot) || status=$?
fi
exit $status
