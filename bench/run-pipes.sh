#!/usr/bin/env bash
# The pipe benchmark in one run per transport (docs/pipes.md, "Measured"): bench/pipe_rate
# (rwrite -> rread latency per write protocol against ucx_perftest ucp_put_lat, 64 KiB streaming
# against the raw transmitter and ucp_put_bw, the irregular trace per fit policy) and the seed's
# baseline, MPI-3 passive-target RMA (bench/mpi_rma_pipe: MPI_Put + MPI_Win_flush + flag), over
# shared memory and over TCP between two emulated machines; and bench/pipe_forward (a relay
# through a middle rank: rforward against the hand-written copy and no relay) over shared memory
# and across three emulated machines. Then bench/plot_pipes.py prints the ratios against the
# issue's goals and draws bench/results/pipes.png.
#   bench/run-pipes.sh [--quick] [--out DIR] [BUILD_DIR]
# Full run: 5 repetitions, about 2 minutes on 2 cores. --quick (smoke test): 1 short repetition,
# into BUILD_DIR/bench-results.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/bench/runner-args.sh" "$@"
launcher=$build/tools/seriema-run
require_built "$build/bench/pipe_rate" "$build/bench/pipe_forward" "$build/bench/mpi_rma_pipe" \
  "$launcher"
if ((quick)); then
  out=${out:-$build/bench-results}
  args=(--reps 1 --round-trips 200 --stream-buffers 100)
  pipe_args=(--trace-buffers 200)
  forward_args=(--reps 1 --round-trips 100 --stream-buffers 100)
else
  out=${out:-$repo/bench/results}
  args=(--reps 5 --round-trips 2000 --stream-buffers 2000)
  pipe_args=(--trace-buffers 2000)
  forward_args=(--reps 5)
fi
mkdir -p "$out"
unset UCX_TLS UCX_NET_DEVICES
export UCX_WARN_UNUSED_ENV_VARS=n OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export SERIEMA_THREADS=1
unset OMPI_MCA_pml
status=0

# MPI variants: Open MPI over UCX (pml ucx, osc ucx: the issue's baseline), and its own
# shared-memory window (osc sm) or message-based RMA over tcp (osc pt2pt); the summary compares
# against the faster one at each size.
mpi_ucx=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca osc ucx)
mpi() {  # mpi <transport> <variant> <mpirun options...>
  local transport=$1 variant=$2
  shift 2
  mpirun -np 2 "$@" "$build/bench/mpi_rma_pipe" "${args[@]}" --transport "$transport-$variant" \
    --json "$out/mpi_rma_pipe-$transport-$variant.json" || status=$?
}

echo "== shared memory: seriema-run -n 2; mpirun over UCX, and with osc sm"
"$launcher" -n 2 -- "$build/bench/pipe_rate" "${args[@]}" "${pipe_args[@]}" --transport shm \
  --json "$out/pipe_rate-shm.json" || status=$?
mpi shm ucx "${mpi_ucx[@]}"
mpi shm sm --mca pml ob1 --mca btl self,vader --mca osc sm
echo
echo "== TCP between two emulated machines: UCX_TLS=tcp,self seriema-run -n 2 --machines 2;"
echo "   mpirun over UCX with UCX_TLS=tcp,self, and ob1 + btl tcp with osc pt2pt (Open MPI sees"
echo "   one node: its shared-memory window is ruled out as seriema's mapping is)"
UCX_TLS=tcp,self "$launcher" -n 2 --machines 2 -- "$build/bench/pipe_rate" "${args[@]}" \
  "${pipe_args[@]}" --transport tcp --perftest-tls tcp,self --json "$out/pipe_rate-tcp.json" \
  || status=$?
UCX_TLS=tcp,self mpi tcp ucx -x UCX_TLS "${mpi_ucx[@]}"
mpi tcp pt2pt --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo --mca osc pt2pt
echo
echo "== forwarding: rank 0 -> 1 -> 2, seriema-run -n 3 over shared memory, and over TCP across"
echo "   three emulated machines (no mapping: rforward copies once, as the hand-written relay)"
"$launcher" -n 3 -- "$build/bench/pipe_forward" "${forward_args[@]}" --transport shm \
  --json "$out/pipe_forward-shm.json" || status=$?
UCX_TLS=tcp,self "$launcher" -n 3 --machines 3 -- "$build/bench/pipe_forward" \
  "${forward_args[@]}" --transport tcp --json "$out/pipe_forward-tcp.json" || status=$?
echo
if ((status == 0)); then
  python=python3
  if ((!quick)); then source "$repo/bench/find-python.sh"; fi
  "$python" "$repo/bench/plot_pipes.py" "$out" $( ((quick)) && echo --no-plot) || status=$?
fi
exit $status
