#!/usr/bin/env bash
# Configures and builds seriema into a build directory: scripts/build.sh [build-dir] [cmake args...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSERIEMA_WERROR=$werror "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
