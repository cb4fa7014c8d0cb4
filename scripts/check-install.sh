#!/usr/bin/env bash
# Checks seriema as an installed library: scripts/check-install.sh [build-dir]
#   1. cmake --install into a temporary prefix (with the API reference when the build has it);
#      examples/ built out of tree against it through find_package (cmake -S examples) and
#      through pkg-config (a plain g++ line); one example run by the installed seriema-run.
#   2. A project using seriema through add_subdirectory gets the library only (configured, not
#      built: no tools, tests, benchmarks or examples of seriema's own).
#   3. cpack -G DEB; the package installed with dpkg (as root, only when no seriema package is
#      installed already), the example built against /usr the same two ways and run; the package
#      removed again. Skipped with one line when not root.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=$(mktemp -d)
installed_package=0
cleanup() {
  if [ $installed_package -eq 1 ]; then dpkg -r seriema >/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

example=synchronizers
# Runs the example under a launcher and checks its last line (each rank checks its reads).
run_example() {  # launcher binary
  if ! SERIEMA_THREADS=2 timeout 120 "$1" -n 2 -- "$2" >"$work/run.out" 2>&1 ||
     ! grep -q "^$example: ok" "$work/run.out"; then
    echo "check-install: $2 under $1 failed:" >&2; cat "$work/run.out" >&2; exit 1
  fi
  echo "check-install: $2 ran under $1: $(grep -c "both reads" "$work/run.out") threads checked"
}
# Builds examples/ with CMake against the seriema that find_package finds (prefix or /usr).
build_with_find_package() {  # out-dir [cmake args...]
  local out=$1; shift
  cmake -S "$root/examples" -B "$out" -G Ninja "$@" >"$work/configure.out" 2>&1 ||
    { cat "$work/configure.out" >&2; exit 1; }
  cmake --build "$out" --target $example
}
# Builds the example with nothing but g++ and pkg-config.
build_with_pkg_config() {  # out-binary
  # shellcheck disable=SC2046  # pkg-config's flags are meant to split
  g++ -O2 "$root/examples/$example.cpp" -o "$1" $(pkg-config --cflags --libs seriema)
}

echo "== install into a temporary prefix"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
prefix=$work/prefix
echo "check-install: $(find "$prefix" -type f | wc -l) files installed"
# The API reference goes with the installed tree whenever the build has it (the docs target;
# scripts/test.sh builds it first).
if [ -f "$build/docs/html/index.html" ]; then
  api=$(find "$prefix" -path '*/doc/seriema/api/index.html')
  if [ -z "$api" ]; then
    echo "check-install: $build has the API reference, but the install did not put it under" \
         "share/doc/seriema/api" >&2; exit 1
  fi
  echo "check-install: API reference installed: ${api#"$prefix"/}"
else
  echo "check-install: API reference not checked: $build has none" \
       "(cmake --build $build --target docs)"
fi
build_with_find_package "$work/find-package" -DCMAKE_PREFIX_PATH="$prefix"
run_example "$prefix/bin/seriema-run" "$work/find-package/$example"
pc_dir=$(dirname "$(find "$prefix" -name seriema.pc)")
PKG_CONFIG_PATH=$pc_dir build_with_pkg_config "$work/pkg-config-$example"
run_example "$prefix/bin/seriema-run" "$work/pkg-config-$example"

echo "== add_subdirectory"
mkdir -p "$work/subproject"
cat >"$work/subproject/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(consumer LANGUAGES CXX)
add_subdirectory($root seriema)
add_executable($example $root/examples/$example.cpp)
target_link_libraries($example PRIVATE seriema::seriema)
CMAKE
cmake -S "$work/subproject" -B "$work/subproject/build" -G Ninja >"$work/configure.out" 2>&1 ||
  { cat "$work/configure.out" >&2; exit 1; }
targets=$(ninja -C "$work/subproject/build" -t targets all)
for unwanted in seriema-run seriema-hex invoke_rate put_get_roundtrip transmitter_test; do
  if grep -q "^$unwanted:" <<<"$targets"; then
    echo "check-install: a project using add_subdirectory(seriema) builds $unwanted" >&2; exit 1
  fi
done
grep -q "^$example:" <<<"$targets"
echo "check-install: add_subdirectory gives the library targets only"

echo "== Debian package"
if [ "$(id -u)" -ne 0 ]; then
  echo "check-install: Debian package check skipped: dpkg -i needs root"; exit 0
fi
if dpkg-query -W seriema >/dev/null 2>&1; then
  echo "check-install: Debian package check skipped: a seriema package is installed already"; exit 0
fi
(cd "$build" && cpack -G DEB -B "$work/package" >/dev/null)
deb=$(ls "$work"/package/seriema_*.deb)
echo "check-install: built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"
installed_package=1
dpkg -i "$deb" >/dev/null
if [ -f "$build/docs/html/index.html" ] && [ ! -f /usr/share/doc/seriema/api/index.html ]; then
  echo "check-install: the .deb lacks the API reference (/usr/share/doc/seriema/api)" >&2; exit 1
fi
build_with_find_package "$work/deb-find-package"
run_example /usr/bin/seriema-run "$work/deb-find-package/$example"
build_with_pkg_config "$work/deb-pkg-config-$example"
run_example /usr/bin/seriema-run "$work/deb-pkg-config-$example"
echo "check-install: ok"
