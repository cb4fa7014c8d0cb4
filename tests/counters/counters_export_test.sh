#!/usr/bin/env bash
# SERIEMA_COUNTERS: a job writes one JSON file per process whose counts agree with each other and
# with what the program did. Usage: counters_export_test.sh <seriema-run> <one_sided_calls>
#   [seriema-run options, e.g. --machines 2]
set -euo pipefail
run=$1 program=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SERIEMA_THREADS=2

# One file named for all processes is refused before anything runs, with one line saying why.
if SERIEMA_COUNTERS="$work/one.json" timeout 120 "$run" -n 2 "$@" -- "$program" >"$work/refused.out" 2>&1; then
  echo "FAIL: SERIEMA_COUNTERS without {rank} in a 2-process job was accepted"; exit 1
fi
grep -q "put {rank} in the path" "$work/refused.out" ||
  { echo "FAIL: no clear refusal:"; cat "$work/refused.out"; exit 1; }

SERIEMA_COUNTERS="$work/counters.{rank}.json" timeout 300 "$run" -n 2 "$@" -- "$program" \
  >"$work/run.out" 2>&1 || { echo "FAIL: the job failed:"; cat "$work/run.out"; exit 1; }
grep -q "0 failures: ok" "$work/run.out" || { echo "FAIL:"; cat "$work/run.out"; exit 1; }

python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
reports = [json.load(open(f"{work}/counters.{rank}.json")) for rank in (0, 1)]
threads = [t for r in reports for t in r["threads"]]
assert [r["rank"] for r in reports] == [0, 1] and all(r["size"] == 2 for r in reports), reports
assert sorted(t["thread"] for t in threads) == [0, 1, 2, 3], [t["thread"] for t in threads]
sent = sum(m["calls"] for t in threads for m in t["sent"])
received = sum(t["received"]["calls"] for t in threads)
consumed = sum(t["one_sided_consumed"] for t in threads)
# one_sided_calls: each thread makes 2003 one-sided calls to the next thread (write, call_buffer,
# call_return, 2 x 1000 trad); replies of call_return may travel one-sided too.
assert sent == received == consumed, (sent, received, consumed)
assert sent >= 4 * 2003, sent
process_sent = sum(r["process"]["sent"] for r in reports)
process_done = sum(r["process"]["executed"] + r["process"]["rejected_malformed"] for r in reports)
assert process_sent == process_done, (process_sent, process_done)
rejected = sum(v for t in threads for k, v in t["received"].items() if k.startswith("rejected"))
assert rejected == 0, rejected
print(f"counters: 2 files, 4 threads, {sent} one-sided calls sent = received = consumed, "
      f"{process_sent} send-based messages sent = executed")
PY
