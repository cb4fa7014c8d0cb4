#!/usr/bin/env bash
# The replicated key-value store example (examples/replicated_kv.cpp), 3 replicas: all serving,
# then with replica 1 killed halfway; every replica still serving prints the same digest of its
# store. Usage: replicated_kv_test.sh <seriema-run> <replicated_kv> [launcher args]
set -u
launcher=$1 example=$2
shift 2
for mode in all --kill; do
  out=$(SERIEMA_THREADS=1 timeout 120 "$launcher" -n 3 "$@" --on-failure wait -- "$example" \
        $([ "$mode" = --kill ] && echo --kill) 2>&1)
  rc=$?
  fail() { echo "replicated_kv ($mode): $1"; printf '%s\n' "$out" | sed 's/^/    /'; exit 1; }
  [ $rc -ne 124 ] || fail "hung"
  digests=$(grep -oE "replica [0-9]: [0-9]+ keys, digest [0-9a-f]+" <<<"$out")
  expected=3
  if [ "$mode" = --kill ]; then
    expected=2
    grep -q "replica 1: dies" <<<"$out" || fail "replica 1 did not die"
    grep -q "replica 1: [0-9]* keys" <<<"$out" && fail "replica 1 served after its death"
    for r in 0 2; do
      grep -q "replica $r: view 1: 2 replicas serve on" <<<"$out" || fail "replica $r saw no view 1"
    done
  elif [ $rc -ne 0 ]; then
    fail "exit status $rc"
  fi
  [ "$(wc -l <<<"$digests")" -eq $expected ] || fail "$expected replicas should report"
  [ "$(awk '{print $3, $6}' <<<"$digests" | sort -u | wc -l)" -eq 1 ] || fail "the stores differ"
  echo "replicated_kv ($mode): $(head -1 <<<"$digests" | cut -d' ' -f3-)"
done
