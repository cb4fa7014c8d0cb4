#!/usr/bin/env bash
# The shared-space benchmark in one run per transport (docs/shared-memory.md, "Measured"):
# bench/dsm_diff, the seed's diff-merge microbenchmark (a 32 KiB block, half its bytes changed,
# merged into a master copy in another process by seriema's floating release, a packed diff sent
# to the home, one put per changed run, and one put of the whole block), over shared memory and
# over TCP between two emulated machines. Prints each table and the ratios against the issue's
# goals (floating <= 0.5 x packed diff, <= 0.1 x scattered writes); writes
# bench/results/dsm_diff-{shm,tcp}.json. Then the kernels: NAS EP and CG (classes S and W) on
# the space (bench/dsm_kernels: 2 processes x 1 thread over shm and over tcp between 2 emulated
# machines, 1 x 2; CG on the floating-home protocol and on the fixed-home baseline), against the
# same kernel on MPI (bench/mpi_kernels, 2 ranks, shared memory and tcp) and with OpenMP in one
# process (bench/omp_kernels: 1 thread, the sequential time the speedups are taken against, and
# 2); every program checks NAS's verification values. Writes bench/results/dsm_kernels-*.json and
# prints the table with the ratios and every goal (EP >= 0.9 x MPI, CG >= 0.5 x MPI, CG floating
# >= 1.3 x fixed home; bench/plot_dsm.py, which also draws bench/results/dsm.png). Last,
# bench/dsm_leases: hand-overs that overflow their records, with logical leases against
# "everything" (the space without leases), shm and tcp; bench/results/dsm_leases-{shm,tcp}.json.
#   bench/run-dsm.sh [--quick] [--out DIR] [BUILD_DIR]
# Full run: 5 repetitions of 200 merges per method and 5 of each kernel, about 4 minutes on 2
# cores. --quick (smoke test): 1 repetition of 20 merges and of class S, into
# BUILD_DIR/bench-results.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/bench/runner-args.sh" "$@"
launcher=$build/tools/seriema-run
require_built "$build/bench/dsm_diff" "$build/bench/dsm_kernels" "$build/bench/dsm_leases" \
  "$launcher"
if ((quick)); then
  out=${out:-$build/bench-results}
  args=(--reps 1 --iterations 20)
  kernel_args=(--reps 1)
  lease_args=(--reps 1)
  lease_sections=(40 10)  # shm, tcp
  classes=(S)
else
  out=${out:-$repo/bench/results}
  args=(--reps 5 --iterations 200)
  kernel_args=(--reps 5)
  lease_args=(--reps 5)
  lease_sections=(4000 400)  # shm, tcp
  classes=(S W)
fi
mkdir -p "$out"
unset UCX_TLS UCX_NET_DEVICES
# A wait that never ends (a peer gone wrong) fails the run with a message instead.
export UCX_WARN_UNUSED_ENV_VARS=n SERIEMA_THREADS=1 SERIEMA_TIMEOUT=${SERIEMA_TIMEOUT:-60s}

echo "== shared memory: seriema-run -n 2"
"$launcher" -n 2 -- "$build/bench/dsm_diff" "${args[@]}" "${extra[@]}" --transport shm \
  --json "$out/dsm_diff-shm.json"
echo "== tcp: seriema-run -n 2 --machines 2, UCX_TLS=tcp,self"
UCX_TLS=tcp,self "$launcher" -n 2 --machines 2 -- "$build/bench/dsm_diff" "${args[@]}" \
  "${extra[@]}" --transport tcp --json "$out/dsm_diff-tcp.json"

status=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
# One kernel of one class through every system: OpenMP (1 and 2 threads), MPI (shm, tcp) and the
# space (2 x 1 over shm, 1 x 2, 2 x 1 over tcp between 2 emulated machines); CG's space runs
# each protocol, floating then fixed home back to back.
run_kernel() {
  local kernel=$1 class=$2 protocols=(floating)
  local base="$out/dsm_kernels-$kernel-$class"
  [[ $kernel == cg ]] && protocols=(floating fixed)
  echo "== NAS ${kernel^^} class $class"
  local common=(--kernel "$kernel" --class "$class" "${kernel_args[@]}")
  if [[ -x $build/bench/omp_kernels ]]; then
    "$build/bench/omp_kernels" "${common[@]}" --threads 1 --json "$base-sequential.json" ||
      status=$?
    "$build/bench/omp_kernels" "${common[@]}" --threads 2 --json "$base-openmp.json" || status=$?
  fi
  if [[ -x $build/bench/mpi_kernels ]] && command -v mpirun > /dev/null; then
    mpirun -np 2 --mca btl self,vader "$build/bench/mpi_kernels" "${common[@]}" \
      --json "$base-mpi-shm.json" || status=$?
    mpirun -np 2 --mca btl self,tcp --mca btl_tcp_if_include lo "$build/bench/mpi_kernels" \
      "${common[@]}" --json "$base-mpi-tcp.json" || status=$?
  fi
  local p suffix
  for p in "${protocols[@]}"; do
    suffix=$([[ $p == fixed ]] && echo "-fixed" || true)
    SERIEMA_THREADS=1 "$launcher" -n 2 -- "$build/bench/dsm_kernels" "${common[@]}" \
      --protocol "$p" --transport shm --json "$base-dsm-2x1-shm$suffix.json" || status=$?
  done
  for p in "${protocols[@]}"; do
    suffix=$([[ $p == fixed ]] && echo "-fixed" || true)
    SERIEMA_THREADS=2 "$launcher" -n 1 -- "$build/bench/dsm_kernels" "${common[@]}" \
      --protocol "$p" --transport shm --json "$base-dsm-1x2-shm$suffix.json" || status=$?
  done
  for p in "${protocols[@]}"; do
    suffix=$([[ $p == fixed ]] && echo "-fixed" || true)
    SERIEMA_THREADS=1 UCX_TLS=tcp,self "$launcher" -n 2 --machines 2 -- \
      "$build/bench/dsm_kernels" "${common[@]}" --protocol "$p" --transport tcp \
      --json "$base-dsm-2x1-tcp$suffix.json" || status=$?
  done
}
for class in "${classes[@]}"; do
  run_kernel ep "$class"
  run_kernel cg "$class"
done

echo
echo "== NAS EP and CG: median seconds; speedup over the sequential kernel; seriema / MPI (same"
echo "   transport); CG: floating / fixed home (same configuration); then every goal"
python=python3
if ((!quick)); then source "$repo/bench/find-python.sh"; fi
"$python" "$repo/bench/plot_dsm.py" "$out" "${classes[@]}" $( ((quick)) && echo --no-plot) ||
  status=$?

echo
echo "== hand-overs that overflow: logical leases against 'everything' (bench/dsm_leases)"
"$launcher" -n 2 -- "$build/bench/dsm_leases" "${lease_args[@]}" --sections "${lease_sections[0]}" \
  --transport shm --json "$out/dsm_leases-shm.json" || status=$?
UCX_TLS=tcp,self "$launcher" -n 2 --machines 2 -- "$build/bench/dsm_leases" "${lease_args[@]}" \
  --sections "${lease_sections[1]}" --transport tcp \
  --json "$out/dsm_leases-tcp.json" || status=$?
exit $status
