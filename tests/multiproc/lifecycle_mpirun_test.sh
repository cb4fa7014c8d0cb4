#!/usr/bin/env bash
# The lifecycle scenarios under Open MPI's mpirun (PMIx bootstrap; lifecycle_mp_test.cpp):
# a rank that calls std::exit(0) in its body makes mpirun end the job non-zero naming it (mpirun
# kills the others itself); with --enable-recovery mpirun lets the others run, and their run()
# fails naming the rank that left (the runtime reads PMIx's process table), for std::exit(0) and
# for a kill before any traffic; run(body, deadline) with a stopped rank ends by its deadline.
# Every job is bounded by `timeout 60`. Usage: lifecycle_mpirun_test.sh <mpirun> <lifecycle_mp_test>
set -u
mpirun=$1
program=$2
test_name=lifecycle_mpirun_test
command_line() {
  cmd=("$mpirun" --allow-run-as-root --oversubscribe -np 3 -x SERIEMA_THREADS "${@:3}" "$program"
       "$1" "$2")
}
source "$(dirname "$0")/lifecycle_common.sh"

job exit-in-body
[ $rc -ne 124 ] || fail "the job hung (killed after 60 s)"
[ $rc -ne 0 ] || fail "mpirun exited with status 0"
has "rank 1 is exiting (std::exit, or a return from main) while its runtime was never finalized" ||
  fail "rank 1 did not say that it exits unfinalized"
has "due to process rank 1 with PID" || has "run() failed [0-9.]* s after rank 1 left" ||
  fail "neither mpirun nor a survivor named rank 1"
echo "lifecycle_mpirun_test (exit-in-body): mpirun status $rc (job: ${elapsed} s)"

for variant in exit-in-body kill-before-traffic; do
  job "$variant" --enable-recovery
  [ $rc -ne 124 ] || fail "the job hung (killed after 60 s)"
  has "FAILED" && fail "a rank reported a failure"
  for r in 0 2; do
    has "rank $r: run() failed [0-9.]* s after rank 1 left: .*rank 1 (" ||
      fail "rank $r's run() did not fail naming rank 1"
    has "rank $r: exiting with status 0" || fail "rank $r did not exit by itself with status 0"
  done
  say "rank [02]: run() failed"
  echo "lifecycle_mpirun_test ($variant, --enable-recovery): mpirun status $rc (job: ${elapsed} s)"
done

job stall
[ $rc -ne 124 ] || fail "the job hung (killed after 60 s)"
has "FAILED" && fail "a rank reported a failure"
[ $rc -eq 0 ] || fail "expected status 0, got $rc"
has "rank 0: run(body, deadline) ended .*rank(s) 1 not arrived" ||
  fail "rank 0's run() did not end at its deadline naming rank 1"
say "rank 0: run(body, deadline) ended"
echo "lifecycle_mpirun_test (stall): status 0 (job: ${elapsed} s)"
