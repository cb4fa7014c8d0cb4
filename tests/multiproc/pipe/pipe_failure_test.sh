#!/usr/bin/env bash
# Pipes with a dead or stalled peer (pipe_failure_mp_test.cpp), 3 ranks x 1 thread: rank 1 kills
# itself ("dead": rank 0's writer to it and rank 2's reader from it end peer_failed, the pipe
# 0 -> 2 goes on, buffers forwarded to it come back, no region is kept) or stops itself ("stalled": the waits end by their
# deadlines); both survivors exit cleanly. Usage: pipe_failure_test.sh <seriema-run>
# <pipe_failure_mp_test> [launcher args]; UCX_TLS from the environment picks shm or tcp.
set -u
source "$(dirname "$0")/../../support/three_rank_failure.sh"
check() {
  if [ "$1" = dead ]; then
    grep -q "rank 0: dead reader: rmalloc ended peer failed" <<<"$out" ||
      fail "rank 0 did not see its writer's wait end peer_failed"
    grep -q "rank 2: dead writer: rread ended peer failed" <<<"$out" ||
      fail "rank 2 did not see its reader's wait end peer_failed"
    grep -q "rank 0: dead forward target: the forwarded buffers came back" <<<"$out" ||
      fail "the buffers forwarded to the dead rank did not come back to rank 0's heap"
    grep -q "rank 2: dead forward target: .* rforward ended peer failed" <<<"$out" ||
      fail "rank 2's rforward to the dead rank did not end peer_failed"
    if [ -z "${UCX_TLS:-}" ]; then  # shared memory: the three went in place, not copied
      grep -q "rank 2: dead forward target: 3 buffer(s) forwarded in place" <<<"$out" ||
        fail "rank 2 did not forward the three buffers in place"
    fi
  else
    grep -q "rank 0: stalled reader: rmalloc ended exhausted" <<<"$out" ||
      fail "rank 0's rmalloc on the stalled reader did not end by its deadline"
    grep -q "rank 2: stalled writer: rread ended deadline exceeded" <<<"$out" ||
      fail "rank 2's rread from the stalled writer did not end by its deadline"
  fi
}
three_rank_failure_jobs pipe_failure_test check "$@"
