#!/usr/bin/env bash
# Runs seriema under a real one-node Slurm: starts munged, slurmctld and slurmd from Debian's
# packages with private configuration, state and sockets (the system's own are not touched), then
# `srun --mpi=pmix -n 2` an example and `seriema-hex analyze`. Usage: slurm_test.sh <build-dir>
# Skips (exit 77, one line saying why) when not root, when Slurm or munge is not installed, or
# when the daemons do not come up; once Slurm is up, anything that goes wrong is a failure.
set -euo pipefail
build=$(cd "$1" && pwd)
skip() { echo "slurm test skipped: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (munged and slurmd run as root here)"
for tool in munged slurmctld slurmd srun sinfo; do
  command -v "$tool" >/dev/null ||
    skip "$tool is not installed (apt-get install slurmd slurmctld slurm-client munge)"
done
ls /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix*.so >/dev/null 2>&1 ||
  skip "Slurm has no PMIx plugin (mpi_pmix)"

work=$(mktemp -d /tmp/seriema-slurm.XXXXXX)
chmod 755 "$work"
mkdir -p "$work/state" "$work/spool" "$work/tmp"
stop_daemons() {
  [ ! -f "$work/slurmctld.pid" ] || timeout 5 scancel --user=root >/dev/null 2>&1 || true
  local pids=()
  for daemon in slurmd slurmctld munged; do
    [ -f "$work/$daemon.pid" ] && pids+=("$(cat "$work/$daemon.pid")")
  done
  [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true
  for pid in "${pids[@]}"; do  # gone within 10 s, else killed
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap stop_daemons EXIT
show_logs() {
  for log in munged slurmctld slurmd; do
    [ -f "$work/$log.log" ] && { echo "--- last lines of $log.log"; tail -n 15 "$work/$log.log"; }
  done
  return 0
}
# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
  local seconds=$1; shift
  local end=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.5
  done
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])'; }

# munge with its own key and socket.
dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge.key"
munged --force --key-file="$work/munge.key" --socket="$work/munge.socket" \
  --pid-file="$work/munged.pid" --log-file="$work/munged.log" --seed-file="$work/munge.seed" ||
  { show_logs; skip "munged did not start"; }
wait_for 10 test -S "$work/munge.socket" || { show_logs; skip "munged made no socket"; }

# Nothing of an enclosing job (srun, mpirun) may leak into this one.
for variable in $(compgen -e | grep -E '^(SLURM_|PMIX_|PMI_|OMPI_)'); do unset "$variable"; done
host=$(hostname -s)
memory_mb=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512))
export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<CONF
ClusterName=seriema-test
SlurmctldHost=$host
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge.socket
CredType=cred/munge
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
# The PMIx plugin keeps per-step directories in TmpFS and may leave them; job ids restart at 1 in
# every fresh Slurm, so a shared /tmp would make a later run's step fail on a leftover.
TmpFS=$work/tmp
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$memory_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=10 State=UP
CONF
slurmctld -f "$SLURM_CONF" -i || { show_logs; skip "slurmctld did not start"; }
slurmd -f "$SLURM_CONF" || { show_logs; skip "slurmd did not start"; }
node_idle() { [ "$(sinfo -h -N -o %t 2>/dev/null)" = "idle" ]; }
wait_for 40 node_idle || { sinfo -N 2>&1 || true; show_logs; skip "the node did not become idle in 40 s"; }
echo "slurm: $(sinfo --version), node $host idle ($(nproc) CPUs), MpiDefault=pmix"

fail() { echo "FAIL: $1"; cat "$work/out"; show_logs; exit 1; }
# Slurm's own PMIx first (its plugin loads libpmix.so from libpmix-dev), so that a broken
# plugin is not reported as seriema's failure.
timeout 60 srun --mpi=pmix -n 2 -N 1 --time=1 true >"$work/out" 2>&1 ||
  fail "srun --mpi=pmix -n 2 true: Slurm's PMIx plugin does not work here (is libpmix-dev installed?)"
# An example: 2 ranks x 2 threads, each checks what the others wrote into its buffer.
SERIEMA_THREADS=2 timeout 180 srun --mpi=pmix -n 2 -N 1 --time=3 \
  "$build/examples/synchronizers" >"$work/out" 2>&1 || fail "srun synchronizers"
grep -q "^synchronizers: ok" "$work/out" || fail "synchronizers did not say ok"
# Both ranks joined one job (PMIx bootstrap): 2 x 2 threads, ids 0..3.
[ "$(grep -c "both reads" "$work/out")" -eq 4 ] || fail "expected 4 threads of one 2-rank job"
echo "slurm: srun --mpi=pmix -n 2 synchronizers: 4 threads of one job checked"
# The distributed Hex search over the 2 ranks.
SERIEMA_THREADS=1 timeout 180 srun --mpi=pmix -n 2 -N 1 --time=3 \
  "$build/games/hex/seriema-hex" analyze --seconds 2 >"$work/out" 2>&1 || fail "srun seriema-hex"
grep -qi "best move" "$work/out" || fail "seriema-hex printed no best move"
grep -q "distributed (2 x 1 threads" "$work/out" || fail "seriema-hex did not search over 2 ranks"
echo "slurm: srun --mpi=pmix -n 2 seriema-hex analyze: $(grep -i "best move" "$work/out" | head -1)"
