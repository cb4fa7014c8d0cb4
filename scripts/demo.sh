#!/usr/bin/env bash
# Quick start: install what is missing, build, show what seriema sees, run the two-process demo.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build"
"$root/build/tools/seriema-info" --no-memory
echo
echo "== seriema-run -n 2 -- put_get_roundtrip (shared memory)"
"$root/build/tools/seriema-run" -n 2 -- "$root/build/examples/put_get_roundtrip"
echo
echo "== the same over TCP between two emulated machines (UCX_TLS=tcp,self, --machines 2)"
UCX_TLS=tcp,self "$root/build/tools/seriema-run" -n 2 --machines 2 -- "$root/build/examples/put_get_roundtrip"
