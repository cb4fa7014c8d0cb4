#!/usr/bin/env bash
# A shared space with a dead or stalled process (dsm_failure_mp_test.cpp), 3 ranks x 1 thread:
# rank 1 holds a mutex, a block's only master copy and an atomic's value, then dies ("dead": each
# survivor's lock, read, load_acquire and barrier end with an error naming rank 1) or stops
# ("stalled": the lock and the barrier end by their deadlines); both survivors exit cleanly.
# Usage: dsm_failure_test.sh <seriema-run> <dsm_failure_mp_test> [launcher args]; UCX_TLS from
# the environment picks shm or tcp.
set -u
source "$(dirname "$0")/../../support/three_rank_failure.sh"
check() {
  local what
  for r in 0 2; do
    if [ "$1" = dead ]; then
      for what in lock home atomic barrier; do
        grep -q "rank $r: dead $what: refused after" <<<"$out" ||
          fail "rank $r: the $what with rank 1 dead was not refused naming it"
      done
      grep -q "rank $r: dead lock: .*rank 1, which died holding it" <<<"$out" ||
        fail "rank $r: the lock did not name rank 1 as the dead holder"
      grep -q "rank $r: dead home: .*block 3 is lost: rank 1" <<<"$out" ||
        fail "rank $r: the read did not report block 3 lost with rank 1"
    else
      grep -q "rank $r: stalled lock: refused after .*past the deadline" <<<"$out" ||
        fail "rank $r: the lock held by a stalled rank did not end by its deadline"
      grep -q "rank $r: stalled barrier: refused: .*past the deadline" <<<"$out" ||
        fail "rank $r: the barrier with a stalled rank did not end by its deadline"
    fi
  done
}
three_rank_failure_jobs dsm_failure_test check "$@"
