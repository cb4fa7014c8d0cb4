#!/usr/bin/env bash
# Installs the Debian 12 packages seriema needs, only those missing (idempotent; needs root or sudo).
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config git
          libucx-dev ucx-utils libhwloc-dev hwloc libpmix-dev openmpi-bin libopenmpi-dev
          libgtest-dev libfmt-dev libcli11-dev libcereal-dev libconcurrentqueue-dev nlohmann-json3-dev
          libboost-fiber-dev  # offload: Boost.Fiber requesters (tests, examples)
          slurmd slurmctld slurm-client munge  # tests/slurm: a one-node Slurm for srun --mpi=pmix
          python3 python3-matplotlib
          doxygen  # the API reference (cmake --build build --target docs)
          gdb)  # stacks of a hung multi-process test (tests/support/mp_main.hpp)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
