#!/usr/bin/env bash
# Failure detection and deadline overshoot (docs/failures.md), over shm and over tcp between two
# emulated machines: bench/failure_detection kills a callee inside its 100th of 10 000
# call_returns in flight (send-based and one-sided), REPS times each, and reports the median
# time from the death to the last slot ended against the keepalive interval; then the overshoot
# of waits with a 10 ms deadline (p50/p99) against plain sleep_until to the same deadline,
# measured in the same run. Writes bench/results/failure_detection-{shm,tcp}.json.
#
#   bench/run-failure-detection.sh [--quick] [--out DIR] [BUILD_DIR]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/bench/runner-args.sh" "$@"
launcher=$build/tools/seriema-run
program=$build/bench/failure_detection
require_built "$program" "$launcher"
reps=5
waits=200
if ((quick)); then reps=1; waits=20; out=${out:-$build/bench-results}; else out=${out:-$repo/bench/results}; fi
mkdir -p "$out"
unset UCX_TLS UCX_NET_DEVICES
export SERIEMA_THREADS=1 UCX_WARN_UNUSED_ENV_VARS=n
source "$repo/bench/find-python.sh"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for transport in shm tcp; do
  args=(-n 2)
  if [ "$transport" = tcp ]; then args+=(--machines 2); export UCX_TLS=tcp,self; fi
  : > "$scratch/lines"
  for channel in send write; do
    for ((r = 0; r < reps; ++r)); do
      rm -f "$scratch/marker"
      timeout 120 "$launcher" "${args[@]}" --on-failure wait -- "$program" detect \
        --channel "$channel" --marker "$scratch/marker" 2>/dev/null | grep '^{' >> "$scratch/lines" || true
    done
  done
  timeout 300 "$launcher" "${args[@]}" -- "$program" overshoot --waits "$waits" --deadline-ms 10 \
    2>/dev/null | grep '^{' > "$scratch/overshoot"
  "$python" - "$scratch/lines" "$scratch/overshoot" "$out/failure_detection-$transport.json" \
    "$transport" "$(uname -n) | $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) | $(nproc) CPUs" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
overshoot = json.loads(open(sys.argv[2]).read())
result = {"transport": sys.argv[4], "machine": sys.argv[5], "detection": {}, "overshoot": overshoot}
for channel in ("send", "write"):
    runs = [l for l in lines if l["channel"] == channel]
    if not runs:
        continue
    secs = [r["seconds"] for r in runs]
    keepalive = runs[0]["keepalive_ms"] / 1000
    result["detection"][channel] = {"runs": len(runs), "median_s": statistics.median(secs),
                                    "max_s": max(secs), "keepalive_s": keepalive,
                                    "median_over_keepalive": statistics.median(secs) / keepalive,
                                    "slots": runs[-1]}
    print(f"{sys.argv[4]} {channel}: death -> last of 10000 slots ended: median "
          f"{statistics.median(secs):.3f} s, max {max(secs):.3f} s over {len(runs)} runs "
          f"(keepalive {keepalive:.1f} s: {statistics.median(secs) / keepalive:.2f} x)")
o = overshoot
print(f"{sys.argv[4]} deadline {o['deadline_ms']} ms, {o['waits']} waits: wait_for overshoot p50 "
      f"{o['wait_overshoot_us']['p50']:.0f} us, p99 {o['wait_overshoot_us']['p99']:.0f} us; "
      f"sleep_until (baseline) p50 {o['sleep_overshoot_us']['p50']:.0f} us, p99 "
      f"{o['sleep_overshoot_us']['p99']:.0f} us")
json.dump(result, open(sys.argv[3], "w"), indent=1)
PY
done
