#!/usr/bin/env bash
# The whole test suite: install what is missing, build (normal and ASan+UBSan), run every test.
#   scripts/test.sh            everything CI runs: normal, ASan+UBSan, ThreadSanitizer on a
#                              stress subset (about 3 minutes on 2 cores), and the fuzz targets
#                              for 30 s each, one per core at a time (scripts/fuzz.sh: its build,
#                              then 90 s on 2 cores)
#   scripts/test.sh --quick    normal build only, no sanitizer pass
#   scripts/test.sh --tsan     instead of the subset, every shm test under ThreadSanitizer (about
#                              15 minutes more on 2 cores)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
quick=0
tsan=0
case "${1:-}" in
  --quick) quick=1 ;;
  --tsan) tsan=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--quick | --tsan]" >&2; exit 2 ;;
esac
"$root/scripts/install-deps.sh"
jobs=$(nproc)
# The sanitizer builds keep line tables only (-g1 instead of -g): their reports and the hang
# watchdog's gdb stacks need functions, files, lines and inlined frames, which -g1 gives (an ASan
# report is the same frame for frame), not variables, and each of their compiles is shorter.
sanitizer_debug_info=-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"

# CI's normal build (a clean clone each time) keeps line tables only as well: nobody attaches a
# debugger to CI's binaries, and the watchdog's stacks need no more. A local run keeps -g in
# build/ (a cached -g1 would stay there for later builds of the tree).
normal_debug_info=()
[ "${CI:-}" = true ] && normal_debug_info=("$sanitizer_debug_info")

echo "== build (RelWithDebInfo)"
# Configured for the API reference phase below as well (Doxygen's warnings as errors), so that
# phase does not configure the tree a second time.
"$root/scripts/build.sh" "$root/build" -DSERIEMA_DOCS_WERROR=ON "${normal_debug_info[@]}"
echo "== tests"
(cd "$root/build" && ctest --output-on-failure -j "$jobs" --timeout 600)
echo "== API reference (Doxygen over the public headers; any warning fails)"
cmake --build "$root/build" --target docs
echo "== installed library (cmake --install, find_package, pkg-config, add_subdirectory, .deb," \
     "the API reference)"
"$root/scripts/check-install.sh" "$root/build"

if [ $quick -eq 0 ]; then
  echo "== build (ASan+UBSan)"
  "$root/scripts/build.sh" "$root/build-asan" -DSERIEMA_SANITIZE=address -DSERIEMA_BUILD_BENCH=OFF \
    "$sanitizer_debug_info"
  echo "== tests under ASan+UBSan"
  # UCX installs memory hooks ASan does not like; the system libraries' state kept until exit is
  # suppressed in tests/lsan.supp, so leak detection stays on for seriema's own code. The volume
  # tests (1 M-call FIFO, 4 M-call stress, 20 000 waited-for puts per thread in transfer_ops) run
  # at a tenth of their size here: the normal pass carries the volume, this one looks for memory
  # errors on the same paths.
  # Left out here, and only here: mp.transfer_ops.mpirun_np2.tcp. Its tests pass under ASan,
  # but at exit LeakSanitizer segfaults while symbolizing the (suppressed) libpmix leaks under
  # mpirun with UCX_TLS=tcp,self ("nested bug"; with symbolize=0 the run is clean). Seen since
  # the 2026-11-25 merges, not understood yet; the normal pass and mp.transfer_ops.np2.tcp
  # under ASan still cover the same code.
  # Also left out here: the layering probes (layering.*). Each compiles one source against a
  # layer's include view and checks that it fails or passes; the probes do not get the sanitizer
  # flags (seriema_build_flags is private to the layers), so they would repeat the normal pass's
  # compiles exactly, each with ctest's RUN_SERIAL holding every other test back meanwhile.
  # The same for the compile-time diagnostics probes (diagnostics.*), and the README's commands
  # (docs.readme_commands: they check what the README says, which the normal pass did).
  (cd "$root/build-asan" && UCX_MEM_EVENTS=n TEST_FIFO_CALLS=100000 TEST_STRESS_CALLS=400000 \
     TEST_TRANSFER_PUTS=2000 ASAN_OPTIONS=detect_leaks=1 \
     LSAN_OPTIONS=suppressions=$root/tests/lsan.supp \
     UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j "$jobs" --timeout 900 \
       -E '^(mp\.transfer_ops\.mpirun_np2\.tcp|layering\..*|diagnostics\..*|docs\.readme_.*)$')
fi
# UCX's memory hooks crash TSan; only third-party libraries are suppressed (tests/tsan.supp).
export_tsan_environment() {
  export UCX_MEM_EVENTS=n
  export TSAN_OPTIONS="suppressions=$root/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1"
}
if [ $quick -eq 0 ] && [ $tsan -eq 0 ]; then
  # The stress subset: the all-to-all stress (2 processes x 2 submitting threads, a helper
  # thread, every channel and policy), handlers that call onward on every channel and helpers
  # polling for threads in a helped_section (invoke_features), attach slots handed between
  # short-lived threads and the helpers (attach), the failure paths that every
  # rank survives (deadlines, cancel, calls and throws from handlers after the body, a stalled
  # peer), futures and coroutines over every channel in 2 processes (replies of every size,
  # large values lent from the callee's memory and given back, continuations, deferred replies
  # from coroutine handlers, attached threads), and the distributed MCTS in 1 process x 2
  # threads (its relaxed statistics, RAVE and the solver's proofs written by whichever thread
  # steps there; one process, since TSan sees no ordering that passes through another process:
  # a node's fields written by one thread and read by another after a round trip through a
  # peer are reported as a race).
  # Only what these need is built.
  echo "== build (TSan, stress subset)"
  cmake -S "$root" -B "$root/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSERIEMA_SANITIZE=thread -DSERIEMA_BUILD_BENCH=OFF -DSERIEMA_BUILD_EXAMPLES=OFF \
    "$sanitizer_debug_info" \
    -DSERIEMA_WERROR="$([ "${CI:-}" = true ] && echo ON || echo OFF)" >/dev/null
  cmake --build "$root/build-tsan" -j "$jobs" --target seriema-run invoke_onesided_mp_test \
    invoke_features_mp_test failure_handling_mp_test incoming_memory_map_test attach_mp_test \
    mcts_mp_test futures_mp_test coroutines_mp_test offload_mp_test
  echo "== tests under TSan (stress subset)"
  (cd "$root/build-tsan" && export_tsan_environment && TEST_STRESS_CALLS=200000 \
     ctest --output-on-failure -j "$jobs" --timeout 900 \
       -R "^(mp\.(invoke_stress\.np2x2\.shm|invoke_features\.np2\.shm|failure_handling\.np2\.shm|attach\.np2\.shm|mcts\.np1x2\.shm|futures\.np2\.shm|coroutines\.np2\.shm|offload\.np2x2\.shm)|unit\.fabric\.incoming_memory_map_test)$")
fi
if [ $quick -eq 0 ]; then
  # The libFuzzer targets of every parser of untrusted bytes, 30 s each (docs/fuzzing.md).
  "$root/scripts/fuzz.sh" 30
fi
if [ $tsan -eq 1 ]; then
  echo "== build (TSan)"
  "$root/scripts/build.sh" "$root/build-tsan" -DSERIEMA_SANITIZE=thread -DSERIEMA_BUILD_BENCH=OFF \
    "$sanitizer_debug_info"
  echo "== tests under TSan"
  # The TCP variants are left out: over tcp UCX applies a peer's put into a Messenger chunk with a
  # plain memcpy in whichever thread progresses the process worker, which TSan (not seeing the
  # network's ordering) reports against the receiver's acquire load of the published word, often
  # with the writer's stack lost, so no suppression can name it. The shm and intra-process
  # variants run the same seriema code paths.
  # mp.lifecycle.* is left out too: its rank 1 exits (std::exit, a return from main) with its
  # UCX context alive, on purpose, and at exit libucs destroys a global rwlock its async thread
  # still reads, which TSan reports (halt_on_error changes rank 1's exit status); the frames are
  # libucs's without symbols, so no suppression can name the function. The survivors' side
  # (the launcher's notices on the bootstrap's reader thread) was checked under TSan by hand.
  (cd "$root/build-tsan" && export_tsan_environment && TEST_FIFO_CALLS=100000 \
     TEST_STRESS_CALLS=400000 ctest --output-on-failure -j "$jobs" --timeout 1800 \
       -E "tcp|lifecycle")
fi
echo "== all tests passed"
