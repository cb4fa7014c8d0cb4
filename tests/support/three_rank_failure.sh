# Sourced by the failure scripts of 3-rank tests whose rank 1 dies or stalls
# (tests/multiproc/*/..._failure_test.sh): three_rank_failure_jobs NAME CHECK SERIEMA_RUN PROGRAM
# [launcher args] runs PROGRAM <mode> <marker> for mode dead, then stalled, under
# `SERIEMA_THREADS=1 timeout 120 SERIEMA_RUN -n 3 --on-failure wait --tag-output`, fails (exit 1,
# printing the job's output) when the job hung, a rank printed FAILED, a survivor (rank 0 or 2)
# did not exit with status 0 or rank 1 did, and calls CHECK <mode> for the scenario's own checks
# (it reads the job's output in $out and calls fail "why"). Prints the survivors' lines that
# match "rank [02]: (dead|stalled) <what>:" and each job's time.
three_rank_failure_jobs() {
  local name=$1 check=$2 launcher=$3 program=$4
  shift 4
  local mode start rc r
  three_rank_marker=$(mktemp -d)  # global: the EXIT trap runs after this function returned
  local marker=$three_rank_marker
  trap 'rm -rf "$three_rank_marker"' EXIT
  for mode in dead stalled; do
    rm -f "$marker"/run*
    start=$SECONDS
    out=$(SERIEMA_THREADS=1 timeout 120 "$launcher" -n 3 "$@" --on-failure wait --tag-output -- \
            "$program" "$mode" "$marker/run" 2>&1)
    rc=$?
    fail() { echo "$name ($mode): $1"; printf '%s\n' "$out" | sed 's/^/    /'; exit 1; }
    [ $rc -ne 124 ] || fail "the job hung (killed after 120 s)"
    if grep -q "FAILED" <<<"$out"; then fail "a rank reported a failure"; fi
    "$check" "$mode"
    for r in 0 2; do
      grep -q "rank $r: exiting with status 0" <<<"$out" || fail "rank $r did not exit cleanly"
    done
    if grep -q "rank 1: exiting" <<<"$out"; then fail "rank 1 survived"; fi
    grep -E "rank [02]: (dead|stalled) [a-z]+:" <<<"$out" | sed "s/^/$name ($mode): /"
    echo "$name ($mode): job $((SECONDS - start)) s"
  done
}
