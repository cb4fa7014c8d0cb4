#!/usr/bin/env bash
# A rank dies with 10 000 one-sided calls addressed to it in flight, once queued (retry_async)
# and once with the sender blocked in a retry call: the sender must report the pending calls as
# failed within 5 s and exit 0. Usage: invoke_peer_death_test.sh <seriema-run>
# <invoke_peer_death_mp_test>; UCX_TLS from the environment picks shm or tcp.
set -u
for policy in retry_async retry; do
  start=$(date +%s)
  out=$(SERIEMA_THREADS=1 timeout 120 "$1" -n 2 --on-failure wait --tag-output -- "$2" "$policy" 2>&1); rc=$?
  elapsed=$(( $(date +%s) - start ))
  fail() { echo "invoke_peer_death_test ($policy): $1"; printf '%s\n' "$out" | sed 's/^/    /'; exit 1; }
  [ $rc -ne 124 ] || fail "the job hung (killed after 120 s)"
  grep -q "rank 0: peer death noticed" <<<"$out" || fail "rank 0 did not report the death"
  grep -q "rank 0: exiting with status 0" <<<"$out" || fail "rank 0 did not exit cleanly"
  if [ "$policy" = retry ]; then
    grep -q "rank 0: retry call .* returned 'destination process failed'" <<<"$out" ||
      fail "the blocked retry call did not return peer_failed"
  fi
  grep -q "FAILED" <<<"$out" && fail "rank 0 reported a failure"
  blocked=$(printf '%s\n' "$out" | grep -m1 "returned 'destination process failed' after" || true)
  [ -z "$blocked" ] || echo "invoke_peer_death_test ($policy): $blocked"
  echo "invoke_peer_death_test ($policy): $(printf '%s\n' "$out" | grep -m1 'peer death noticed') (job: ${elapsed} s)"
done
