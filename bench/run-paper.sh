#!/usr/bin/env bash
# Reproduces the paper's evaluation (§5.1 Fig. 2, §5.2 Table 2) on this machine, each baseline in
# the same run: invoke_rate (send / write / trad / ovfl vs ucx_perftest ucp_am_bw / ucp_put_bw;
# over shm also trad / ovfl through invoke::call instead of a per-destination aggregator),
# the MPI baseline (mpi_rate, unbatched and batched into 4 KiB), and invoke_latency (call_return
# round trip vs ucx_perftest ucp_am_lat x 2); over shared memory and over TCP between two
# emulated machines; ring_floor (a hand-written ring between the same two cores: what they
# move with no call machinery), before and after invoke_rate, and once publishing after every
# record (write mode's floor); and over tcp trad again with
# 4 KiB batches (the MPI baseline's; the default there is 32 KiB). Prints the tables, writes
# JSON, PNG plots and paper-summary.md.
#
#   bench/run-paper.sh [--quick] [--out DIR] [BUILD_DIR]
#
# BUILD_DIR (default build/) must hold bench/{invoke_rate,invoke_latency,mpi_rate,ring_floor}
# and tools/seriema-run (ninja -C build invoke_rate invoke_latency mpi_rate ring_floor
# seriema-run; a Release or RelWithDebInfo build). Full run: 3 to 5 repetitions of ~0.25 s per
# point, about 2 minutes on 2 cores; results in bench/results/. --quick: 1 short repetition (a
# smoke test, numbers meaningless), results in BUILD_DIR/bench-results/ unless --out says
# otherwise.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/bench/runner-args.sh" "$@"
launcher=$build/tools/seriema-run
require_built "$build/bench/invoke_rate" "$build/bench/invoke_latency" "$build/bench/mpi_rate" \
  "$build/bench/ring_floor" "$launcher"
if ((quick)); then
  out=${out:-$build/bench-results}
  rate_args=(--reps 1 --seconds 0.02 --max-calls 200000)
  lat_args=(--reps 1 --round-trips 2000)
  mpi_args=(--reps 1 --seconds 0.02)
  floor_args=(--reps 1 --seconds 0.02)
else
  out=${out:-$repo/bench/results}
  rate_args=(--reps 5 --seconds 0.25)
  lat_args=(--reps 3 --round-trips 20000)
  mpi_args=(--reps 3 --seconds 0.25)
  floor_args=(--reps 5 --seconds 0.25)
fi
mkdir -p "$out"
unset UCX_TLS UCX_NET_DEVICES SERIEMA_FLUSH_SIZE
export SERIEMA_THREADS=1 UCX_WARN_UNUSED_ENV_VARS=n
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
status=0

echo "== shared memory (one machine)"
# The ring right before and right after invoke_rate: trad / ring and write / ring take the
# median of both runs' repetitions, so a spell of the VM weighs on both sides of the ratio.
"$build/bench/ring_floor" "${floor_args[@]}" --json "$out/ring_floor-shm-before.json" || status=$?
echo
"$launcher" -n 2 -- "$build/bench/invoke_rate" "${rate_args[@]}" --transport shm \
  --json "$out/invoke_rate-shm.json" || status=$?
echo
# trad and ovfl again through invoke::call<mode>(ctx, dest, f) on each call instead of an
# aggregator made for the destination: what a caller without one gets.
"$launcher" -n 2 -- "$build/bench/invoke_rate" "${rate_args[@]}" --transport shm --modes trad,ovfl \
  --free-calls --no-perftest --json "$out/invoke_rate-shm-free.json" || status=$?
echo
mpirun -np 2 --mca btl self,vader "$build/bench/mpi_rate" "${mpi_args[@]}" --transport shm \
  --json "$out/mpi_rate-shm.json" || status=$?
echo
"$build/bench/ring_floor" "${floor_args[@]}" --json "$out/ring_floor-shm.json" || status=$?
echo
# The ring again, publishing after every record as write mode publishes every call: the floor
# of a mode that makes each call visible on its own (write / this ring, next to write / ring).
"$build/bench/ring_floor" "${floor_args[@]}" --publish-bytes 8 \
  --json "$out/ring_floor-shm-each.json" || status=$?
echo
"$launcher" -n 2 -- "$build/bench/invoke_latency" "${lat_args[@]}" --transport shm \
  --json "$out/invoke_latency-shm.json" || status=$?

echo
echo "== TCP between two emulated machines (UCX_TLS=tcp,self; MPI: btl tcp over lo)"
UCX_TLS=tcp,self "$launcher" -n 2 --machines 2 -- "$build/bench/invoke_rate" "${rate_args[@]}" \
  --transport tcp --perftest-tls tcp,self --json "$out/invoke_rate-tcp.json" || status=$?
echo
# trad again with the MPI baseline's 4 KiB batches (the default over tcp is 32 KiB: batches that
# travel as write messages, SERIEMA_FLUSH_SIZE=auto).
SERIEMA_FLUSH_SIZE=4K UCX_TLS=tcp,self "$launcher" -n 2 --machines 2 -- "$build/bench/invoke_rate" \
  "${rate_args[@]}" --transport tcp --modes trad --no-perftest \
  --json "$out/invoke_rate-tcp-flush4k.json" || status=$?
echo
mpirun -np 2 --mca btl self,tcp --mca btl_tcp_if_include lo "$build/bench/mpi_rate" "${mpi_args[@]}" \
  --transport tcp --json "$out/mpi_rate-tcp.json" || status=$?
echo
UCX_TLS=tcp,self "$launcher" -n 2 --machines 2 -- "$build/bench/invoke_latency" "${lat_args[@]}" \
  --transport tcp --perftest-tls tcp,self --json "$out/invoke_latency-tcp.json" || status=$?

echo
source "$repo/bench/find-python.sh"
"$python" "$repo/bench/plot_paper.py" "$out" || status=$?
exit $status
