#!/usr/bin/env bash
# A callee dies inside its 100th of 10 000 call_returns in flight (send-based, then one-sided):
# every slot must end with the right outcome within the keepalive plus a second, a third rank
# must keep working with the caller, and both survivors' run() must end naming the dead rank.
# Then ("sender") a sender dies with one-sided calls published and a trad batch unpublished:
# the receiver runs exactly the published ones and frees the dead sender's chunks. Last
# ("unpublished") a receiver dies with trad call_returns written but not published: each ends
# not_executed, and none ran. Modes future and coroutine repeat the first through futures
# (get()) and through coroutines awaiting them (co_await): the same outcomes, as typed errors.
# Usage: failure_semantics_test.sh <seriema-run> <failure_semantics_mp_test> [launcher args];
# UCX_TLS from the environment picks shm or tcp (e.g. --machines 3 with UCX_TLS=tcp,self).
set -u
marker=$(mktemp -d)
trap 'rm -rf "$marker"' EXIT
for mode in send write future coroutine sender unpublished; do
  rm -f "$marker/calls" "$marker/calls.rank2-done"
  start=$(date +%s)
  out=$(SERIEMA_THREADS=1 timeout 120 "$1" -n 3 "${@:3}" --on-failure wait --tag-output -- \
          "$2" "$mode" "$marker/calls" 2>&1); rc=$?
  elapsed=$(( $(date +%s) - start ))
  fail() { echo "failure_semantics_test ($mode): $1"; printf '%s\n' "$out" | sed 's/^/    /'; exit 1; }
  [ $rc -ne 124 ] || fail "the job hung (killed after 120 s)"
  grep -q "FAILED" <<<"$out" && fail "a rank reported a failure"
  for r in 0 2; do
    grep -q "rank $r: exiting with status 0" <<<"$out" || fail "rank $r did not exit cleanly"
  done
  grep -q "rank 1: exiting" <<<"$out" && fail "rank 1 survived its kill"
  echo "failure_semantics_test ($mode): $(printf '%s\n' "$out" | grep -m1 -E 'call_returns:|dead sender' | sed 's/^.*rank 0: //') (job: ${elapsed} s)"
  printf '%s\n' "$out" | grep -m1 "rank 2: .* succeeded" | sed "s/^.*rank 2:/failure_semantics_test ($mode): rank 2:/"
done
