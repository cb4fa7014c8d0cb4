#!/usr/bin/env bash
# Ranks that leave the job before finalize, run()'s deadline and seriema-run's --time-limit
# (lifecycle_mp_test.cpp has the scenarios): 3 ranks, rank 1 the one that leaves or stalls.
# A rank that calls std::exit(0) in its body, returns from main without finalize (before run()
# or before finalize()), or is killed before any traffic reached it (--on-failure wait) makes the
# launcher exit non-zero naming it, and the other ranks' run() (or finalize()) fail naming it;
# a rank stopped with SIGSTOP makes run(body, deadline) end by the deadline naming it; and
# --time-limit names the ranks still running, stops them and exits with status 124. Every job is
# bounded by `timeout 60` (a hang fails the test); times are printed, not asserted.
# Usage: lifecycle_test.sh <seriema-run> <lifecycle_mp_test> [launcher args, e.g. --machines 2];
# UCX_TLS from the environment picks shm or tcp.
set -u
launcher=$1
program=$2
shift 2
test_name=lifecycle_test
command_line() { cmd=("$launcher" -n 3 "${@:3}" --tag-output -- "$program" "$1" "$2"); }
source "$(dirname "$0")/lifecycle_common.sh"
no_hang_no_failure() {
  [ $rc -ne 124 ] || fail "the job hung (killed after 60 s)"
  if has "FAILED"; then fail "a rank reported a failure"; fi
}
survivors_exit_cleanly() {
  for r in 0 2; do
    has "rank $r: exiting with status 0" || fail "rank $r did not exit by itself with status 0"
  done
}

job normal "${@}"
no_hang_no_failure
[ $rc -eq 0 ] || fail "a job whose ranks all finalize exited with status $rc"
for r in 0 1 2; do has "rank $r: exiting with status 0" || fail "rank $r did not finish"; done
echo "lifecycle_test (normal): status 0 (job: ${elapsed} s)"

# A rank that leaves before finalize, with the default --on-failure kill (also with
# SERIEMA_TIMEOUT set: the end of run() does not wait for it), returning from main, or killed
# under --on-failure wait before any traffic reached it.
for variant in exit-in-body exit-in-body/timeout return-before-run return-before-finalize \
               kill-before-traffic; do
  case $variant in
    */timeout) SERIEMA_TIMEOUT=30s job exit-in-body "${@}" ;;
    kill-before-traffic) job "$variant" --on-failure wait "${@}" ;;
    *) job "$variant" "${@}" ;;
  esac
  scenario=$variant
  no_hang_no_failure
  [ $rc -ne 0 ] || fail "the launcher exited with status 0"
  if [ "$variant" = kill-before-traffic ]; then
    [ $rc -eq 137 ] || fail "expected status 137 (rank 1's SIGKILL), got $rc"
    has "seriema-run: rank 1 (pid [0-9]*) killed by signal 9 (SIGKILL)$" ||
      fail "the launcher did not name rank 1's death"
    has "seriema-run: rank 1 (pid [0-9]*) left before finalize; told 2 other running ranks" ||
      fail "the launcher did not tell the others"
  else
    [ $rc -eq 1 ] || fail "expected status 1, got $rc"
    has "seriema-run: rank 1 (pid [0-9]*) exited with status 0 before finalize" ||
      fail "the launcher did not name rank 1 as exiting before finalize"
    has "rank 1 is exiting (std::exit, or a return from main) while its runtime was never finalized" ||
      fail "rank 1 did not say that it exits unfinalized"
  fi
  what="run()"
  [ "$variant" = return-before-finalize ] && what="finalize()"
  for r in 0 2; do
    has "rank $r: $what failed [0-9.]* s after rank 1 left: .*rank 1 (" ||
      fail "rank $r's $what did not fail naming rank 1"
  done
  survivors_exit_cleanly
  say "rank [02]: $what failed"
  echo "lifecycle_test ($variant): launcher status $rc (job: ${elapsed} s)"
done

# run(body, deadline) with rank 1 stopped by rank 0: every run() ends by its deadline.
job stall "${@}"
no_hang_no_failure
[ $rc -eq 0 ] || fail "expected status 0 (every rank checks its deadline and exits), got $rc"
has "rank 0: run(body, deadline) ended [0-9.]* s after its deadline: run()'s termination round #[0-9]* on rank 0: deadline passed after [0-9.]* s with rank(s) 1 not arrived" ||
  fail "rank 0's run() did not end at its deadline naming rank 1"
for r in 1 2; do
  has "rank $r: run(body, deadline) ended .*deadline passed" || fail "rank $r's run() did not end at its deadline"
done
for r in 0 1 2; do has "rank $r: exiting with status 0" || fail "rank $r did not finish"; done
say "run(body, deadline) ended"
echo "lifecycle_test (stall): status 0 (job: ${elapsed} s)"

# --time-limit: rank 0 stops rank 1 and waits in run() for ever.
job hang --time-limit 3s "${@}"
has "FAILED" && fail "a rank reported a failure"
has "seriema-run: the time limit of 3s (--time-limit) passed with 3 ranks still running: rank 0 (pid [0-9]*), rank 1 (pid [0-9]*, stopped), rank 2 (pid [0-9]*); stopping them" ||
  fail "the launcher did not name the ranks still running"
[ $rc -eq 124 ] || fail "expected status 124, got $rc"
[ $elapsed -lt 30 ] || fail "the job took ${elapsed} s with a 3 s limit"
say "seriema-run: the time limit"
echo "lifecycle_test (hang): status $rc (job: ${elapsed} s)"
