#!/usr/bin/env bash
# The containers benchmark in one run: histogram, HPCC RandomAccess, connected components and word
# count on seriema's containers (bench/containers) against the same kernels on MPI with Alltoallv
# batches (bench/mpi_containers; components by min-label propagation; word count reduced locally
# first, then one exchange), 2 processes x 1 thread and 1 x 2
# (seriema; MPI runs 2 ranks), over shared memory and over TCP between two emulated machines
# (MPI: btl tcp over lo). Prints one
# table with the ratios and each kernel's lines of code in both programs (between their
# "kernel:<name> begin/end" markers), and writes JSON to bench/results/ (--quick: small inputs,
# one repetition, into BUILD_DIR/bench-results).
#   bench/run-containers.sh [--quick] [--out DIR] [BUILD_DIR]
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/bench/runner-args.sh" "$@"
launcher=$build/tools/seriema-run
require_built "$build/bench/containers" "$build/bench/mpi_containers" "$launcher"
if ((quick)); then
  out=${out:-$build/bench-results}
  args=(--reps 1 --updates 100000 --log2-table 16 --scale 12 --words 100000)
else
  out=${out:-$repo/bench/results}
  args=(--reps 5 --updates 2000000 --log2-table 20 --scale 17 --words 1000000)
fi
mkdir -p "$out"
unset UCX_TLS UCX_NET_DEVICES SERIEMA_FLUSH_SIZE
export UCX_WARN_UNUSED_ENV_VARS=n OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1
status=0

for kernel in histogram random_access components word_count; do
  for transport in shm tcp; do
    base="$out/containers-$kernel-$transport"
    if [[ $transport == shm ]]; then
      SERIEMA_THREADS=1 "$launcher" -n 2 -- "$build/bench/containers" "${args[@]}" \
        --kernel "$kernel" --transport shm --json "$base-2x1.json" || status=$?
      SERIEMA_THREADS=2 "$launcher" -n 1 -- "$build/bench/containers" "${args[@]}" \
        --kernel "$kernel" --transport shm --json "$base-1x2.json" || status=$?
      mpirun -np 2 --mca btl self,vader "$build/bench/mpi_containers" "${args[@]}" \
        --kernel "$kernel" --transport shm --json "$base-mpi.json" || status=$?
    else
      SERIEMA_THREADS=1 UCX_TLS=tcp,self "$launcher" -n 2 --machines 2 -- \
        "$build/bench/containers" "${args[@]}" --kernel "$kernel" --transport tcp \
        --json "$base-2x1.json" || status=$?
      mpirun -np 2 --mca btl self,tcp --mca btl_tcp_if_include lo \
        "$build/bench/mpi_containers" "${args[@]}" --kernel "$kernel" --transport tcp \
        --json "$base-mpi.json" || status=$?
    fi
  done
done

# Lines of a kernel in a source: non-blank, non-comment lines between its markers.
kernel_lines() {
  awk -v k="kernel:$2" '$0 ~ k" end" { on = 0 } on && !/^[[:space:]]*(\/\/|$)/ { n++ }
                        $0 ~ k" begin" { on = 1 } END { print n + 0 }' "$1"
}
echo
echo "== containers vs MPI (updates/s, medians; ratio: seriema / MPI)"
printf '%-14s %-4s %14s %14s %14s %8s %8s %10s\n' kernel tls "seriema 2x1" "seriema 1x2" "MPI 2 ranks" \
  "2x1/MPI" "1x2/MPI" "lines s/M"
for kernel in histogram random_access components word_count; do
  lines="$(kernel_lines "$repo/bench/containers.cpp" "$kernel")/$(kernel_lines "$repo/bench/mpi_containers.cpp" "$kernel")"
  for transport in shm tcp; do
    base="$out/containers-$kernel-$transport"
    python3 - "$base" "$kernel" "$transport" "$lines" <<'PY'
import json, os, sys
base, kernel, tls, lines = sys.argv[1:]
def rate(suffix):
    path = f"{base}-{suffix}.json"
    return json.load(open(path))["median_updates_per_s"] if os.path.exists(path) else None
a, b, m = rate("2x1"), rate("1x2"), rate("mpi")
fmt = lambda x: f"{x / 1e6:.2f} M" if x else "-"
ratio = lambda x: f"{x / m:.2f}" if x and m else "-"
print(f"{kernel:<14} {tls:<4} {fmt(a):>14} {fmt(b):>14} {fmt(m):>14} {ratio(a):>8} {ratio(b):>8} {lines:>10}")
PY
  done
done
echo "goals (issue 41): histogram, random_access and components >= 2 x MPI (components: an"
echo "update is an edge; MPI by min-label propagation); word_count >= 1.2 x MPI (an update is a"
echo "word; MPI reduces locally first)"
exit $status
