#!/usr/bin/env bash
# Measures zero-copy exceeding calls (issue 25.4): invoke_rate's ovfl mode over TCP between two
# emulated machines with SERIEMA_EXCEEDING_COPY=auto (queued records serialized once into
# registered queue pages and sent from there) and =always (heap queue, each record copied into
# a staging unit first), launches alternated A/B so the VM's slow and fast spells fall on both.
# A small ring (SERIEMA_CHUNK_SIZE=64K, SERIEMA_MAX_CHUNKS=2) keeps most calls going through
# the queue; the messenger counters in each result say which path the queued records took.
# Prints medians of the repetitions (each a median of invoke_rate's own repetitions); not
# asserted anywhere.
#
#   bench/run-overflow-copy.sh [--quick] [--out DIR] [BUILD_DIR] [-- extra invoke_rate options]
#
# BUILD_DIR (default build/) must hold bench/invoke_rate and tools/seriema-run. Full run: 5
# launches per setting (LAUNCHES=N for more), each 3 repetitions of 200 000 calls per size,
# under a minute on 2 cores; --quick: 1 launch each, 1 repetition of 20 000 calls.
# Results: bench/results/overflow_copy-{auto,always}-N.json.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/bench/runner-args.sh" "$@"
launcher=$build/tools/seriema-run
require_built "$build/bench/invoke_rate" "$launcher"
if ((quick)); then
  out=${out:-$build/bench-results}
  launches=1
  rate_args=(--reps 1 --calls 20000)
else
  out=${out:-$repo/bench/results}
  launches=${LAUNCHES:-5}
  rate_args=(--reps 3 --calls 200000)
fi
mkdir -p "$out"
unset UCX_NET_DEVICES
export SERIEMA_THREADS=1 UCX_WARN_UNUSED_ENV_VARS=n UCX_TLS=tcp,self
export SERIEMA_CHUNK_SIZE=64K SERIEMA_MAX_CHUNKS=2 SERIEMA_CHUNKS_PER_ALLOCATION=1

for ((i = 0; i < launches; ++i)); do
  for copy in auto always; do
    SERIEMA_EXCEEDING_COPY=$copy "$launcher" -n 2 --machines 2 -- "$build/bench/invoke_rate" \
      "${rate_args[@]}" --modes ovfl --sizes 64,1024 --no-perftest --transport tcp \
      --json "$out/overflow_copy-$copy-$i.json" "${extra[@]}" >/dev/null
  done
done

python3 - "$out" "$launches" <<'PY'
import json, statistics, sys
out, launches = sys.argv[1], int(sys.argv[2])
rows = {}
for copy in ("auto", "always"):
    for i in range(launches):
        with open(f"{out}/overflow_copy-{copy}-{i}.json") as f:
            report = json.load(f)
        for p in report["points"]:
            r = rows.setdefault((p["size"], copy), {"rates": [], "exc": 0, "unc": 0, "cop": 0})
            r["rates"].append(p["calls_per_s"])
            for c in p["counters"]:
                r["exc"] += c["exceeding"]
                r["unc"] += c["exceeding_uncopied"]
                r["cop"] += c["exceeding_copied"]
print("ovfl over tcp (2 emulated machines), SERIEMA_CHUNK_SIZE=64K, SERIEMA_MAX_CHUNKS=2;")
print(f"median of {launches} launches per setting, alternated\n")
print("| closure | SERIEMA_EXCEEDING_COPY | calls/s (median) | runs | queued | sent uncopied "
      "| copied | auto/always |")
print("|---|---|---|---|---|---|---|---|")
for size in sorted({s for s, _ in rows}):
    med = {c: statistics.median(rows[(size, c)]["rates"]) for c in ("auto", "always")}
    for c in ("auto", "always"):
        r = rows[(size, c)]
        runs = ", ".join(f"{x / 1e6:.2f}" for x in r["rates"])
        ratio = f"**{med['auto'] / med['always']:.2f}**" if c == "auto" else ""
        print(f"| {size} B | {c} | {med[c] / 1e6:.2f} M | {runs} | {r['exc']} | {r['unc']} "
              f"| {r['cop']} | {ratio} |")
PY
