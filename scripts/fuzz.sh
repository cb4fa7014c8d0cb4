#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang 16 with ASan+UBSan) and runs each for a bounded
# time on a copy of its seed corpus (tests/fuzz/corpus/<target>); exits non-zero naming the
# target and the input of any finding. docs/fuzzing.md says how to run them for hours.
#   scripts/fuzz.sh [seconds-per-target]      (default 30)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-30}
clang=clang++-16
missing=()
for p in clang-16 libclang-rt-16-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "fuzz: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
build=$root/build-fuzz
targets=(wire_fuzz arguments_fuzz launcher_protocol_fuzz config_fuzz gtp_fuzz pipe_slot_fuzz
         group_row_fuzz)
echo "== build (libFuzzer, ASan+UBSan)"
# Line tables only (-g1, clang's -gline-tables-only): a finding's stack keeps its functions,
# files, lines and inlined frames; variables are not needed, and each compile is shorter.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=$clang \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DSERIEMA_FUZZ=ON \
  -DSERIEMA_BUILD_TESTS=OFF -DSERIEMA_BUILD_BENCH=OFF -DSERIEMA_BUILD_EXAMPLES=OFF \
  -DSERIEMA_WERROR=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

# Runs one target for $seconds on a copy of its seed corpus into $build/<target>.log; the
# exit status says whether it ended without a finding.
fuzz_target() {  # target
  local target=$1 work artifacts=$build/findings/$1
  work=$(mktemp -d)
  cp -r "$root/tests/fuzz/corpus/$target/." "$work/" 2>/dev/null || true
  mkdir -p "$artifacts"
  # -rss_limit_mb: an input that makes the decoder allocate beyond 2 GiB is a finding too.
  local status=0
  timeout $((seconds + 120)) "$build/tests/fuzz/$target" "$work" -max_total_time="$seconds" \
    -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" > "$build/$target.log" 2>&1 || status=1
  rm -rf "$work"
  return $status
}
# One line per target from its log: runs and coverage, or the finding and its stack.
report_target() {  # target exit-status
  local target=$1 artifacts=$build/findings/$1
  if [ "$2" -eq 0 ]; then
    runs=$(grep -m1 "stat::number_of_executed_units" "$build/$target.log" | awk '{print $2}')
    cov=$(grep -o "cov: [0-9]*" "$build/$target.log" | tail -1)
    echo "fuzz: $target: 0 findings in ${runs:-?} runs ($cov, ${seconds} s)"
  else
    echo "fuzz: $target: FINDING (input: $(ls "$artifacts" | head -1)); log: $build/$target.log"
    grep -E "ERROR|SUMMARY|#[0-9] " "$build/$target.log" | head -20
  fi
}

# A target is one single-threaded process: as many run side by side as there are cores, each
# still for $seconds (on 2 cores the five take 3 x $seconds instead of 5 x $seconds).
parallel=$(nproc)
echo "== fuzz ($seconds s per target, $parallel at a time)"
status=0
for ((first = 0; first < ${#targets[@]}; first += parallel)); do
  batch=("${targets[@]:first:parallel}")
  pids=()
  for target in "${batch[@]}"; do
    fuzz_target "$target" &
    pids+=($!)
  done
  for i in "${!batch[@]}"; do
    target_status=0
    wait "${pids[$i]}" || target_status=1
    [ $target_status -eq 0 ] || status=1
    report_target "${batch[$i]}" $target_status
  done
done
exit $status
