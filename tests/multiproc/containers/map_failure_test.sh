#!/usr/bin/env bash
# containers::map with a failed owner (map_failure_mp_test.cpp), 3 ranks x 1 thread: rank 1 is
# killed after a barrier ("dead": the survivors' operations on its keys end with an outcome, the
# others complete, the barrier names rank 1) or stops itself ("stalled": a find with a deadline
# and a barrier with a deadline end by them); both survivors exit cleanly. Every job is bounded
# by `timeout 120`. Usage: map_failure_test.sh <seriema-run> <containers_map_failure_mp_test>
# [launcher args]; UCX_TLS from the environment picks shm or tcp.
set -u
marker=$(mktemp -d)
trap 'rm -rf "$marker"' EXIT
for mode in dead stalled; do
  rm -f "$marker"/run*
  start=$SECONDS
  out=$(SERIEMA_THREADS=1 timeout 120 "$1" -n 3 "${@:3}" --on-failure wait --tag-output -- \
          "$2" "$mode" "$marker/run" 2>&1)
  rc=$?
  fail() { echo "map_failure_test ($mode): $1"; printf '%s\n' "$out" | sed 's/^/    /'; exit 1; }
  [ $rc -ne 124 ] || fail "the job hung (killed after 120 s)"
  if grep -q "FAILED" <<<"$out"; then fail "a rank reported a failure"; fi
  for r in 0 2; do
    if [ "$mode" = dead ]; then
      grep -q "rank $r: dead owner: update destination process failed" <<<"$out" ||
        fail "rank $r did not see its operations on the dead owner fail"
    else
      grep -Eq "rank $r: stalled owner: find failed, (deadline exceeded|not executed)" <<<"$out" ||
        fail "rank $r did not see its find on the stalled owner end by its deadline"
    fi
    grep -q "rank $r: exiting with status 0" <<<"$out" || fail "rank $r did not exit cleanly"
  done
  if grep -q "rank 1: exiting" <<<"$out"; then fail "rank 1 survived"; fi
  grep -m1 " owner: " <<<"$out" | sed "s/^/map_failure_test ($mode): /"
  echo "map_failure_test ($mode): job $((SECONDS - start)) s"
done
