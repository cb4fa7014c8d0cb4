# Helpers of the lifecycle scripts (lifecycle_test.sh, lifecycle_mpirun_test.sh), sourced: a work
# folder removed on exit, one thread per rank and no SERIEMA_TIMEOUT, and job/fail/has/say over
# a job's output. The sourcing script sets test_name and defines command_line <scenario>
# <marker> [options...], which sets the array cmd to its launcher's command line.

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SERIEMA_THREADS=1
unset SERIEMA_TIMEOUT

# job <scenario> [launcher options...]: runs the scenario (at most 60 s); sets out, rc, elapsed.
job() {
  scenario=$1
  shift
  rm -f "$work"/marker*
  command_line "$scenario" "$work/marker" "$@"
  local start=$SECONDS
  out=$(timeout 60 "${cmd[@]}" 2>&1)
  rc=$?
  elapsed=$((SECONDS - start))
}
fail() {
  echo "$test_name ($scenario): $1"
  printf '%s\n' "$out" | sed 's/^/    /'
  exit 1
}
has() { grep -q -e "$1" <<<"$out"; }
say() { grep -e "$1" <<<"$out" | sed "s|^|$test_name ($scenario): |"; }
