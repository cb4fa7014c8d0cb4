#!/usr/bin/env bash
# Bad configuration must stop a program with exit status != 0 and an error line from seriema that
# names each offending setting (one line for one problem, one line per problem for several):
# seriema-info alone, and a 2-process job under the launcher; a setting of a layer the program
# does not link is accepted with one note. Usage:
#   bad_config_test.sh <seriema-info> <seriema-run> <multi-process test program linking fabric only>
set -u
info=$1 launcher=$2 program=$3
failures=0

# expect_error <setting-name-to-find> <command...> (environment given with env before it)
expect_error() {
  local name=$1; shift
  local out rc lines
  out=$("$@" 2>&1 >/dev/null); rc=$?
  # UCX may add its own WARN lines; ours are the ones that start with the program name.
  lines=$(printf '%s\n' "$out" | grep -E '^(seriema|put_get|transfer_ops|seriema test)' | grep -c "$name")
  if [ $rc -eq 0 ]; then
    echo "FAIL: exit status 0 for: $*"; failures=$((failures + 1))
  elif [ "$lines" -lt 1 ]; then
    echo "FAIL: no error line naming $name for: $*"; printf '%s\n' "$out" | sed 's/^/    /'
    failures=$((failures + 1))
  else
    echo "ok: $name -> $(printf '%s\n' "$out" | grep "$name" | head -1)"
  fi
}

# seriema-info must print exactly one line on stderr for seriema's own settings.
expect_single_line() {
  local name=$1; shift
  local out count
  out=$("$@" 2>&1 >/dev/null)
  count=$(printf '%s\n' "$out" | grep -c .)
  if [ "$count" -ne 1 ]; then
    echo "FAIL: expected one stderr line for $name, got $count:"; printf '%s\n' "$out" | sed 's/^/    /'
    failures=$((failures + 1))
  fi
}

expect_error SERIEMA_PAGES env SERIEMA_PAGES=huge "$info" --no-memory
expect_single_line SERIEMA_PAGES env SERIEMA_PAGES=huge "$info" --no-memory
expect_error SERIEMA_THREADS env SERIEMA_THREADS=many "$info" --no-memory
expect_error SERIEMA_KEEPALIVE env SERIEMA_KEEPALIVE=5parsecs "$info" --no-memory
expect_error SERIEMA_SEGMENT_SIZE env SERIEMA_SEGMENT_SIZE=3M "$info" --no-memory
expect_error SERIEMA_TREADS env SERIEMA_TREADS=2 "$info" --no-memory
expect_single_line SERIEMA_TREADS env SERIEMA_TREADS=2 "$info" --no-memory
expect_error SERIEMA_PROCESS_ZONES env SERIEMA_PROCESS_ZONES=64 "$info" --no-memory
expect_single_line SERIEMA_PROCESS_ZONES env SERIEMA_PROCESS_ZONES=64 "$info" --no-memory
expect_error UCX_TLS env UCX_TLS=tcp,foo "$info" --no-memory
expect_error SERIEMA_NET_DEVICES env SERIEMA_NET_DEVICES=eth0,,lo "$info" --no-memory
expect_single_line SERIEMA_NET_DEVICES env SERIEMA_NET_DEVICES=eth0,,lo "$info" --no-memory
expect_error SERIEMA_NET_DEVICES env SERIEMA_NET_DEVICES=lo UCX_NET_DEVICES=eth0 "$info" --no-memory
expect_error "placement '2xx3'" "$info" --no-memory --shape 2xx3
# Every value seriema-info's layers would refuse, including those read only by a running job.
expect_error SERIEMA_CHUNK_SIZE env SERIEMA_CHUNK_SIZE=abc "$info" --no-memory
expect_error SERIEMA_SEND_LIMIT env SERIEMA_SEND_LIMIT=12 "$info" --no-memory
expect_error SERIEMA_FUNCTION_IDS env SERIEMA_FUNCTION_IDS=name "$info" --no-memory
expect_error SERIEMA_THREADS env SERIEMA_THREADS=abc "$info" --settings
# A typo is named with the setting meant.
expect_error "did you mean SERIEMA_THREADS" env SERIEMA_TREADS=2 "$info" --no-memory

# Several problems at once: one line each, all in the one error (not one per attempt).
expect_lines() {  # count, then the command
  local want=$1; shift
  local out count
  out=$("$@" 2>&1 >/dev/null)
  count=$(printf '%s\n' "$out" | grep -c 'SERIEMA_')
  if [ "$count" -ne "$want" ]; then
    echo "FAIL: expected $want lines naming settings, got $count for: $*"
    printf '%s\n' "$out" | sed 's/^/    /'; failures=$((failures + 1))
  else
    echo "ok: $want problems -> $(printf '%s\n' "$out" | tr '\n' '|')"
  fi
}
expect_lines 3 env SERIEMA_THREADS=abc SERIEMA_CHUNK_SIZE=3 SERIEMA_PAGES=2m \
  SERIEMA_SEGMENT_SIZE=3M SERIEMA_MEMORY_SOURCE=self "$info" --no-memory
expect_lines 3 env SERIEMA_THREADS=abc SERIEMA_SEND_LIMIT=12 SERIEMA_PAGES=2m \
  SERIEMA_SEGMENT_SIZE=3M SERIEMA_MEMORY_SOURCE=self SERIEMA_BOOTSTRAP_TIMEOUT=10s \
  "$launcher" -n 1 -- "$program"

# The same through a real 2-process job: every rank refuses, the launcher exits non-zero.
expect_error SERIEMA_PAGES env SERIEMA_PAGES=huge SERIEMA_BOOTSTRAP_TIMEOUT=10s "$launcher" -n 2 -- "$program"
expect_error SERIEMA_PROCESS_ZONES env SERIEMA_PROCESS_ZONES=64 SERIEMA_BOOTSTRAP_TIMEOUT=10s "$launcher" -n 2 -- "$program"
expect_error UCX_TLS env UCX_TLS=tcp,foo SERIEMA_BOOTSTRAP_TIMEOUT=10s "$launcher" -n 2 -- "$program"

# One environment for a job of several programs: a setting of the invoke layer, which this
# program does not link, is not refused; each rank says once that it does not use it.
out=$(env SERIEMA_FLUSH_SIZE=8K SERIEMA_BOOTSTRAP_TIMEOUT=10s "$launcher" -n 2 -- "$program" \
        --gtest_filter=nothing 2>&1); rc=$?
notes=$(printf '%s\n' "$out" |
          grep -c "info: SERIEMA_FLUSH_SIZE=8K: a setting of the invoke layer, which this program")
if [ $rc -ne 0 ] || [ "$notes" -ne 2 ]; then
  echo "FAIL: SERIEMA_FLUSH_SIZE=8K without the invoke layer: status $rc, $notes notes" \
       "(expected 0 and 2):"
  printf '%s\n' "$out" | sed 's/^/    /'; failures=$((failures + 1))
else
  echo "ok: SERIEMA_FLUSH_SIZE=8K -> $(printf '%s\n' "$out" | grep -m1 'info: SERIEMA_FLUSH_SIZE')"
fi

# SERIEMA_PEER_ERRORS=no is accepted, but every rank says once that a death goes undetected.
out=$(env SERIEMA_PEER_ERRORS=no SERIEMA_BOOTSTRAP_TIMEOUT=10s "$launcher" -n 2 -- "$program" \
        --gtest_filter=nothing 2>&1); rc=$?
warnings=$(printf '%s\n' "$out" | grep -c "warning: SERIEMA_PEER_ERRORS=no: a rank that dies will not be detected")
if [ $rc -ne 0 ] || [ "$warnings" -ne 2 ]; then
  echo "FAIL: SERIEMA_PEER_ERRORS=no: status $rc, $warnings warning lines (expected 0 and 2):"
  printf '%s\n' "$out" | sed 's/^/    /'; failures=$((failures + 1))
else
  echo "ok: SERIEMA_PEER_ERRORS=no -> $(printf '%s\n' "$out" | grep -m1 'warning: SERIEMA_PEER_ERRORS')"
fi

if [ $failures -ne 0 ]; then
  echo "bad_config_test: $failures failure(s)"
  exit 1
fi
echo "bad_config_test: all cases rejected with a line naming each setting"
