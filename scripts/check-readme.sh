#!/usr/bin/env bash
# Runs the commands of README.md's ```sh blocks, so that what the README tells a newcomer to type
# works: scripts/check-readme.sh [build-dir] (ctest runs it as docs.readme_commands).
#   - Each command (a line, or lines joined by a trailing \) runs from the repository root with
#     `build/` meaning the given build directory, stdin empty, and must exit 0 within 120 s.
#   - Budgets are lowered so that the whole check takes seconds: --seconds S becomes
#     --seconds 0.5 and --rollouts N (N > 300) becomes --rollouts 300; each such command is
#     marked "lowered" in the report.
#   - Skipped, with the reason printed: commands that install packages or build and test the
#     whole tree (the demo, the test command, the install line: scripts/check-install.sh runs
#     the same install into a temporary prefix), and mpirun where Open MPI is not installed.
# It also checks that the README's first program is examples/first_program.cpp.
# Exits 1 naming every command that failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
readme=$root/README.md

# The reason to skip a command, or nothing to run it.
skip_reason() {
  case "$1" in
    ./scripts/demo.sh*)
      echo "installs packages (root), builds the tree and searches for 10 s: the demo itself" ;;
    ./scripts/test.sh*)
      echo "the whole test suite (minutes), which runs this check" ;;
    scripts/build.sh*install*)
      echo "builds and installs into /opt (root); scripts/check-install.sh installs the same way" \
           "into a temporary prefix" ;;
    mpirun*)
      command -v mpirun >/dev/null || echo "mpirun (Open MPI) is not installed here" ;;
  esac
}

# The command with build/ meaning the build directory.
as_built() {
  sed -E "s#(^|[[:space:]=])build/#\\1$build/#g" <<<"$1"
}
# The command as run here: as_built, budgets lowered, and files a command writes (`--out F`
# with F relative) put in a scratch directory instead of the source tree.
as_run() {
  as_built "$1" | sed -E -e 's#--seconds [0-9.]+#--seconds 0.5#g' \
                         -e 's#--rollouts ([0-9]{4,}|[4-9][0-9]{2})#--rollouts 300#g' \
                         -e "s#--out ([^/[:space:]][^[:space:]]*)#--out $scratch/\\1#g"
}

# Every command of every ```sh block, one per line (continuations joined, comments dropped).
commands() {
  awk '
    /^```(sh|bash|shell)[[:space:]]*$/ { inside = 1; next }
    /^```/ { inside = 0; next }
    !inside { next }
    {
      line = $0
      if (pending == "" && (line ~ /^[[:space:]]*#/ || line ~ /^[[:space:]]*$/)) next
      if (line ~ /\\$/) { sub(/\\$/, "", line); pending = pending line; next }
      print pending line
      pending = ""
    }' "$readme" | sed -E 's/[[:space:]]+#[^'"'"'"]*$//; s/^[[:space:]]+//'
}

ran=0 skipped=0 failed=0
failures=()
out=$(mktemp)
scratch=$(mktemp -d)
trap 'rm -rf "$out" "$scratch"' EXIT
while IFS= read -r command; do
  reason=$(skip_reason "$command")
  if [ -n "$reason" ]; then
    echo "skip: $command"
    echo "      ($reason)"
    skipped=$((skipped + 1))
    continue
  fi
  run=$(as_run "$command")
  lowered=""
  [ "$run" != "$(as_built "$command")" ] && lowered=" (lowered)"
  if (cd "$root" && timeout 120 bash -c "$run") </dev/null >"$out" 2>&1; then
    echo "ok:   $command$lowered"
    ran=$((ran + 1))
  else
    status=$?
    echo "FAIL: $command$lowered (exit status $status); its output:"
    tail -n 20 "$out" | sed 's/^/      /'
    failures+=("$command")
    failed=$((failed + 1))
  fi
done < <(commands)

# The README's first program is examples/first_program.cpp (built and run by ctest as
# example.first_program.*): the block under "## A first program" must be that file, less its
# opening comment lines.
first_block=$(awk '/^## A first program/ { section = 1 } section && /^```cpp/ { inside = 1; next }
                   inside && /^```/ { exit } inside { print }' "$readme")
first_file=$(grep -v '^//' "$root/examples/first_program.cpp")
if [ "$first_block" = "$first_file" ]; then
  echo "ok:   the first program is examples/first_program.cpp"
else
  echo "FAIL: README's first program differs from examples/first_program.cpp:"
  diff <(printf '%s\n' "$first_block") <(printf '%s\n' "$first_file") | sed 's/^/      /'
  failures+=("the first program")
  failed=$((failed + 1))
fi

echo "check-readme: $ran commands ran, $skipped skipped, $failed failed"
if [ "$ran" -eq 0 ]; then
  echo "check-readme: no README command ran: the \`\`\`sh blocks were not found" >&2
  exit 1
fi
[ "$failed" -eq 0 ] || { printf 'check-readme: failed: %s\n' "${failures[@]}" >&2; exit 1; }
