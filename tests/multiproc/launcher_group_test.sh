#!/usr/bin/env bash
# When a rank fails, seriema-run stops the other ranks *and what they started* (each rank leads
# its own process group). Usage: launcher_group_test.sh <seriema-run>
set -u
marker="300.$$$RANDOM"   # a unique sleep duration names rank 0's child
"$1" -n 2 --timeout 10s -- /bin/sh -c \
  "if [ \"\$SERIEMA_RUN_RANK\" = 1 ]; then sleep 2; exit 3; fi; sleep $marker & wait" \
  < /dev/null > /tmp/launcher_group_test.$$ 2>&1 &
job=$!
sleep 1
if ! pgrep -f "sleep $marker" >/dev/null; then
  echo "launcher_group_test: rank 0's child never started (the test would prove nothing)"
  kill $job; exit 1
fi
wait $job; rc=$?
sleep 1
if pgrep -f "sleep $marker" >/dev/null; then
  pkill -f "sleep $marker"
  echo "launcher_group_test: a child of rank 0 outlived the job"; exit 1
fi
if [ $rc -ne 3 ]; then
  echo "launcher_group_test: expected exit status 3, got $rc"; cat /tmp/launcher_group_test.$$
  rm -f /tmp/launcher_group_test.$$; exit 1
fi
rm -f /tmp/launcher_group_test.$$
echo "launcher_group_test: rank 0's child ran during the job and is gone after it (status $rc)"
