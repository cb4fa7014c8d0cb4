#!/usr/bin/env bash
# Pipes with a dead or stalled peer (pipe_failure_mp_test.cpp), 3 ranks x 1 thread: rank 1 kills
# itself ("dead": rank 0's writer to it and rank 2's reader from it end peer_failed within
# keepalive + 1 s, the pipe 0 -> 2 goes on, no region is kept) or stops itself ("stalled": the
# waits end by their deadlines); both survivors exit cleanly. Every job is bounded by
# `timeout 120`. Usage: pipe_failure_test.sh <seriema-run> <pipe_failure_mp_test> [launcher
# args]; UCX_TLS from the environment picks shm or tcp.
set -u
marker=$(mktemp -d)
trap 'rm -rf "$marker"' EXIT
for mode in dead stalled; do
  rm -f "$marker"/run*
  start=$SECONDS
  out=$(SERIEMA_THREADS=1 timeout 120 "$1" -n 3 "${@:3}" --on-failure wait --tag-output -- \
          "$2" "$mode" "$marker/run" 2>&1)
  rc=$?
  fail() { echo "pipe_failure_test ($mode): $1"; printf '%s\n' "$out" | sed 's/^/    /'; exit 1; }
  [ $rc -ne 124 ] || fail "the job hung (killed after 120 s)"
  if grep -q "FAILED" <<<"$out"; then fail "a rank reported a failure"; fi
  if [ "$mode" = dead ]; then
    grep -q "rank 0: dead reader: rmalloc ended peer failed" <<<"$out" ||
      fail "rank 0 did not see its writer's wait end peer_failed"
    grep -q "rank 2: dead writer: rread ended peer failed" <<<"$out" ||
      fail "rank 2 did not see its reader's wait end peer_failed"
  else
    grep -q "rank 0: stalled reader: rmalloc ended exhausted" <<<"$out" ||
      fail "rank 0's rmalloc on the stalled reader did not end by its deadline"
    grep -q "rank 2: stalled writer: rread ended deadline exceeded" <<<"$out" ||
      fail "rank 2's rread from the stalled writer did not end by its deadline"
  fi
  for r in 0 2; do
    grep -q "rank $r: exiting with status 0" <<<"$out" || fail "rank $r did not exit cleanly"
  done
  if grep -q "rank 1: exiting" <<<"$out"; then fail "rank 1 survived"; fi
  grep -E "rank [02]: (dead|stalled)" <<<"$out" | sed "s/^/pipe_failure_test ($mode): /"
  echo "pipe_failure_test ($mode): job $((SECONDS - start)) s"
done
