# Sourced by the bench runners (source "$repo/bench/runner-args.sh" "$@"): parses
#   [--quick] [--out DIR] [BUILD_DIR] [-- extra options for the benchmark]
# into quick (0|1), out, build (absolute; default $repo/build) and extra (array); -h prints the
# calling script's header comment. require_built FILE... exits naming the missing program.
runner=$(basename "$0" .sh)
quick=0
out=""
build=""
extra=()
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --out) out=$2; shift ;;
    --out=*) out=${1#--out=} ;;
    -h|--help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
      exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) build=$1 ;;
  esac
  shift
done
build=${build:-$repo/build}
if ! resolved=$(cd "$build" 2>/dev/null && pwd); then
  echo "$runner: no build directory $build" >&2
  exit 2
fi
build=$resolved

require_built() {
  local f
  for f in "$@"; do
    if [[ ! -x $f ]]; then
      echo "$runner: $f is missing; build it: ninja -C $build $(for g in "$@"; do basename "$g"; done | tr '\n' ' ')" >&2
      exit 2
    fi
  done
}
