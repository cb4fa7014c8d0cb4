#!/usr/bin/env bash
# Offload requests to a dead or stalled process (offload_failure_mp_test.cpp), 3 ranks x 1
# thread: with rank 1 dead, every request of a burst to it ends (not_executed, may_have_executed,
# or done when it left before the death), later ones not_executed at once, and requests to the
# other survivor done; with rank 1 stalled, the burst ends by its waits' deadline (no call_return
# answered) and the other survivor's requests end done. Both survivors exit cleanly.
# Usage: offload_failure_test.sh <seriema-run> <offload_failure_mp_test> [launcher args];
# UCX_TLS from the environment picks shm or tcp.
set -u
source "$(dirname "$0")/../../support/three_rank_failure.sh"
check() {
  for r in 0 2; do
    grep -q "rank $r: $1 burst: " <<<"$out" || fail "rank $r: no burst to rank 1 was reported"
    grep -q "rank $r: $1 other: done 100, in" <<<"$out" ||
      fail "rank $r: the other survivor's requests did not all end done"
    if [ "$1" = dead ]; then
      grep -q "rank $r: dead after: failed, not executed 20, in" <<<"$out" ||
        fail "rank $r: requests to rank 1, known dead, did not end not executed"
    fi
  done
}
three_rank_failure_jobs offload_failure_test check "$@"
