#!/usr/bin/env bash
# Groups with a dead or stalled member (group_failure_mp_test.cpp), 3 ranks x 1 thread: rank 1
# kills itself ("dead") or stops itself ("stalled") mid-stream; both survivors install view 1 of
# members 0 and 2 (a dead member once the runtime finds it dead, a stalled one after
# suspect_after_ms; the delay is printed), delivered the same prefix of view 0, and deliver in
# view 1; both exit cleanly.
# Usage: group_failure_test.sh <seriema-run> <group_failure_mp_test> [launcher args]; UCX_TLS from
# the environment picks shm or tcp.
set -u
source "$(dirname "$0")/../../support/three_rank_failure.sh"
check() {
  for r in 0 2; do
    grep -q "rank $r: $1 view change: view 1 of members 0 and 2" <<<"$out" ||
      fail "rank $r did not install view 1 without rank 1"
  done
  grep -q "rank 0: $1 prefix: both survivors delivered the same" <<<"$out" ||
    fail "the survivors did not deliver the same prefix of view 0"
  # How long the change took is printed, not asserted (tests assert outcomes, never timings):
  # bench/run-failure-detection.sh measures detection.
  grep -oE "rank [02]: $1 view change: .* ms after rank 1 went" <<<"$out" | sed "s/^/  /"
}
three_rank_failure_jobs group_failure_test check "$@"
