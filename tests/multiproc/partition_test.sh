#!/usr/bin/env bash
# A real network partition between two "hosts": each rank runs in its own network namespace,
# joined by a veth pair (addresses the test makes, in namespaces it makes); rank 0 (see
# partition_mp_test.cpp) asks for the cut, checks that calls with a 2 s deadline fail by 3 s,
# asks for the heal and checks that new calls work. The cut is the veth end of rank 1 going
# down (this kernel has no netem). Needs root and iproute2: exits 77 (skipped) without them.
# Usage: partition_test.sh <seriema-run> <partition_mp_test>
#        partition_test.sh --in-namespace <ns-of-rank-0> <ns-of-rank-1> <program> <args...>
set -u
if [ "${1:-}" = "--in-namespace" ]; then  # the launcher starts each rank through this
  ns=$2
  [ "${SERIEMA_RUN_RANK:-0}" = 1 ] && ns=$3
  shift 3
  exec ip netns exec "$ns" "$@"
fi
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  echo "partition_test: skipped (needs root and iproute2 for network namespaces)"
  exit 77
fi
tag="sr$$"
a="$tag-a"; b="$tag-b"
control=$(mktemp -d)
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$control"; }
trap cleanup EXIT
net="10.$(( ($$ >> 8) % 200 + 20 )).$(( $$ % 250 + 1 ))"
ip netns add "$a" && ip netns add "$b" &&
  ip link add "$tag-va" type veth peer name "$tag-vb" &&
  ip link set "$tag-va" netns "$a" && ip link set "$tag-vb" netns "$b" &&
  ip -n "$a" addr add "$net.1/24" dev "$tag-va" && ip -n "$b" addr add "$net.2/24" dev "$tag-vb" &&
  ip -n "$a" link set lo up && ip -n "$b" link set lo up &&
  ip -n "$a" link set "$tag-va" up && ip -n "$b" link set "$tag-vb" up ||
  { echo "partition_test: cannot set up the namespaces"; exit 1; }

SERIEMA_THREADS=1 UCX_TLS=tcp,self timeout 120 "$1" -n 2 --tag-output -- \
  "$0" --in-namespace "$a" "$b" "$2" "$control" > "$control/out" 2>&1 &
job=$!
# Serve rank 0's requests: cut the link, heal it.
while kill -0 $job 2>/dev/null; do
  if [ -e "$control/partition" ] && [ ! -e "$control/partitioned" ]; then
    ip -n "$b" link set "$tag-vb" down && touch "$control/partitioned"
  fi
  if [ -e "$control/heal" ] && [ ! -e "$control/healed" ]; then
    ip -n "$b" link set "$tag-vb" up && touch "$control/healed"
  fi
  sleep 0.05
done
wait $job; rc=$?
out=$(cat "$control/out")
fail() { echo "partition_test: $1"; printf '%s\n' "$out" | sed 's/^/    /'; exit 1; }
[ $rc -ne 124 ] || fail "the job hung (killed after 120 s)"
grep -q "FAILED" <<<"$out" && fail "rank 0 reported a failure"
[ $rc -eq 0 ] || fail "the job failed (status $rc)"
printf '%s\n' "$out" | grep "rank 0: .*call_returns ended" | sed 's/^.*rank 0: /partition_test: /'
