#!/usr/bin/env bash
# Runs the transfer-rate benchmark (paper Fig. 2) over shared memory and over TCP between two
# emulated machines, each against ucx_perftest measured in the same run, then draws the plots.
#
#   bench/run-transfer-rate.sh [--quick] [--out DIR] [BUILD_DIR] [-- extra transfer_rate options]
#
# BUILD_DIR (default build/) must hold bench/transfer_rate and tools/seriema-run:
#   cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release
#   ninja -C build transfer_rate seriema-run
# Full run: 14 sizes (8 B .. 64 KiB), 5 repetitions of ~0.2 s per mode and size, three cases
# (shm, tcp, and shm with the sender writing only each message's last byte, no more than
# ucx_perftest writes): about 3.5 minutes on 2 cores; results in bench/results/.
# --quick (CI smoke test, < 60 s): 4 sizes, 3 short repetitions, shm and tcp; results in
# BUILD_DIR/bench-results/ unless --out says otherwise.
# In-flight budget (see transfer_rate --help): shm completes puts at once, so a small ring that
# stays in cache (1 MiB, <= 256 puts); TCP acknowledges puts milliseconds later and needs depth
# (16 MiB, <= 4096 puts).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/bench/runner-args.sh" "$@"
bench=$build/bench/transfer_rate
launcher=$build/tools/seriema-run
for f in "$bench" "$launcher"; do
  if [[ ! -x $f ]]; then
    echo "run-transfer-rate: $f is missing; build it: ninja -C $build transfer_rate seriema-run" >&2
    exit 2
  fi
done

if ((quick)); then
  out=${out:-$build/bench-results}
  args=(--sizes 8,256,4096,65536 --reps 3 --seconds 0.04 --max-iters 1000000)
else
  out=${out:-$repo/bench/results}
  args=(--min-size 8 --max-size 65536 --reps 5 --seconds 0.2)
fi
shm_budget=(--inflight-bytes 1048576 --inflight-puts 256)
tcp_budget=(--inflight-bytes 16777216 --inflight-puts 4096)
mkdir -p "$out"
# Unset inherited UCX transport choices: each case below sets its own.
unset UCX_TLS UCX_NET_DEVICES

status=0
jsons=()
echo "== shared memory (one machine): seriema-run -n 2"
"$launcher" -n 2 -- "$bench" "${args[@]}" "${shm_budget[@]}" --transport shm \
  --json "$out/transfer_rate-shm.json" "${extra[@]}" || status=$?
jsons+=("$out/transfer_rate-shm.json")

echo
echo "== TCP between two emulated machines: UCX_TLS=tcp,self seriema-run -n 2 --machines 2"
echo "   (ucx_perftest also runs with UCX_TLS=tcp,self, over 127.0.0.1)"
UCX_TLS=tcp,self UCX_WARN_UNUSED_ENV_VARS=n "$launcher" -n 2 --machines 2 -- "$bench" "${args[@]}" \
  "${tcp_budget[@]}" --transport tcp --perftest-tls tcp,self --json "$out/transfer_rate-tcp.json" \
  "${extra[@]}" || status=$?
jsons+=("$out/transfer_rate-tcp.json")

if ((!quick)); then
  echo
  echo "== shared memory, the sender writes only each message's last byte"
  echo "   (no more than ucx_perftest writes)"
  "$launcher" -n 2 -- "$bench" "${args[@]}" "${shm_budget[@]}" --transport shm-lastbyte \
    --touch last-byte --json "$out/transfer_rate-shm-lastbyte.json" "${extra[@]}" || status=$?
  jsons+=("$out/transfer_rate-shm-lastbyte.json")
fi

echo
source "$repo/bench/find-python.sh"
"$python" "$repo/bench/plot_transfer_rate.py" "${jsons[@]}" || status=$?
exit $status
