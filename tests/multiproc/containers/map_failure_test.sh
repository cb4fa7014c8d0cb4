#!/usr/bin/env bash
# containers::map with a failed owner (map_failure_mp_test.cpp), 3 ranks x 1 thread: rank 1 is
# killed after a barrier ("dead": the survivors' operations on its keys end with an outcome, the
# others complete, the barrier names rank 1) or stops itself ("stalled": a find with a deadline
# and a barrier with a deadline end by them); both survivors exit cleanly. Every job is bounded
# by `timeout 120`. Usage: map_failure_test.sh <seriema-run> <containers_map_failure_mp_test>
# [launcher args]; UCX_TLS from the environment picks shm or tcp.
set -u
source "$(dirname "$0")/../../support/three_rank_failure.sh"
check() {
  local r
  for r in 0 2; do
    if [ "$1" = dead ]; then
      grep -q "rank $r: dead owner: update destination process failed" <<<"$out" ||
        fail "rank $r did not see its operations on the dead owner fail"
    else
      grep -Eq "rank $r: stalled owner: find failed, (deadline exceeded|not executed)" <<<"$out" ||
        fail "rank $r did not see its find on the stalled owner end by its deadline"
    fi
  done
}
three_rank_failure_jobs map_failure_test check "$@"
