#!/usr/bin/env bash
# Runs the huge-pages benchmark: random 8-byte puts and direct stores into a 1 GiB remote arena
# segment on 2 MiB hugetlb pages against one on 4 KiB pages, alternating in one run (2 ranks,
# shared memory). Reserves the 2 MiB pages it needs as root and gives them back on exit.
#
#   bench/run-huge-pages.sh [--quick] [--out DIR] [BUILD_DIR] [-- extra huge_pages options]
#
# BUILD_DIR (default build/) must hold bench/huge_pages and tools/seriema-run. Full run: 5
# repetitions of 1 M puts and 10 M stores per page kind (about a minute on 2 cores); --quick:
# a 256 MiB segment, 3 short repetitions. Results: bench/results/huge_pages.json.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/bench/runner-args.sh" "$@"
require_built "$build/bench/huge_pages" "$build/tools/seriema-run"
if ((quick)); then
  out=${out:-$build/bench-results}
  args=(--arena-mib 256 --puts 200000 --reps 3)
  mib=256
else
  out=${out:-$repo/bench/results}
  args=(--arena-mib 1024 --reps 5)
  mib=1024
fi
mkdir -p "$out"

nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
old=$(cat "$nr")
trap 'echo "$old" > "$nr"' EXIT
# The segment, the runtime's own segments (2 x 64 MiB) and slack for other processes.
if ! echo $((old + mib / 2 + 256)) > "$nr"; then
  echo "$runner: cannot reserve 2 MiB pages (needs root and a writable $nr)" >&2
  exit 2
fi
grep -E '^HugePages_(Total|Free)' /proc/meminfo | sed "s/^/# $runner: /"
"$build/tools/seriema-run" -n 2 -- "$build/bench/huge_pages" "${args[@]}" \
  --json "$out/huge_pages.json" "${extra[@]}"
