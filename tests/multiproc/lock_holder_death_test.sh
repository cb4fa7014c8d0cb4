#!/usr/bin/env bash
# A distributed lock's holder dies holding it (lock_holder_death_mp_test): the waiter's acquire
# must end deadline_exceeded at its 2 s deadline, an atomic on the dead rank must fail, and the
# surviving ranks exit 0. Usage: lock_holder_death_test.sh <seriema-run>
# <lock_holder_death_mp_test> [launcher options]; UCX_TLS from the environment picks shm or tcp.
set -u
launcher=$1
program=$2
shift 2
out=$(SERIEMA_THREADS=1 timeout 120 "$launcher" -n 3 "$@" --on-failure wait --tag-output -- \
      "$program" 2>&1); rc=$?
fail() { echo "lock_holder_death_test: $1"; printf '%s\n' "$out" | sed 's/^/    /'; exit 1; }
[ $rc -ne 124 ] || fail "the job hung (killed after 120 s)"
grep -q "FAILED" <<<"$out" && fail "a rank reported a failure"
grep -q "rank 2: acquire while the holder is dead ended deadline exceeded" <<<"$out" ||
  fail "the waiter's acquire did not end at its deadline"
dead_line="rank 2: atomic on the dead rank ended .*(not executed|may have executed)"
grep -Eq "$dead_line" <<<"$out" ||
  fail "the atomic on the dead rank did not fail"
for rank in 0 2; do
  grep -q "rank $rank: exiting with status 0" <<<"$out" ||
    fail "rank $rank did not exit cleanly"
done
printf '%s\n' "$out" | grep -E "rank 2: (acquire|atomic)" | sed 's/^/lock_holder_death_test: /'
