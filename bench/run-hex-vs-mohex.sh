#!/usr/bin/env bash
# Hex: seriema-hex against MoHex 2.0 (benzene, built outside this repository) at equal time per
# move and equal threads, on 11x11 unless told, colours alternated, no swap, games to the end.
# Every move is also played on OpenSpiel's Hex board and after every move both programs'
# final_score must agree with OpenSpiel's (bench/hex_vs_mohex.py; it stops at any difference).
#
#   MOHEX=/path/to/mohex bench/run-hex-vs-mohex.sh [--games N] [--seconds T]... [--threads K]
#       [--size S] [--json FILE] [--launcher CMD] [--quick] [--out DIR] [BUILD_DIR]
#       [-- extra seriema-hex options]
#
# Defaults: 100 games, 1 s a move, 1 thread, 11x11. --seconds may repeat or list several times
# (--seconds 0.5,1,2): one row each, and a plot of the win rate against the time per move.
# seriema-hex: BUILD_DIR/games/hex/seriema-hex --quiet --rollouts 0 --seconds T [extra options],
# with SERIEMA_THREADS=K, after --launcher CMD if given (--launcher "build/tools/seriema-run -n 2
# --": K threads in each process). MoHex: the GTP settings in hex_vs_mohex.py's mohex_settings
# (num_threads K, max_time T, no time management nor unstable-search extension, no pondering,
# no parallel DFPN solver, no book, no swap); MOHEX_GTP="cmd;cmd" adds commands after them,
# MOHEX_LOG=DIR keeps MoHex's search logs. Without MOHEX it prints how to build MoHex.
# Prints one line per game, each row's win rate +- standard error and both sides' ms per move
# (median, 90th percentile), then a table; writes hex-vs-mohex-<T>s-<K>t.json per row (and a
# plot, hex-vs-mohex.png, with several T) in the results directory (--out, default bench/results;
# --quick: 2 games at 0.2 s into BUILD_DIR/bench-results) and every row in one list to --json
# FILE. open_spiel comes from PyPI into the venv of run-hex-strength.sh (HEX_VENV, default
# BUILD_DIR/hex-venv, same pin).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

mohex_build_help() {
  cat >&2 <<'EOF'
run-hex-vs-mohex: set MOHEX to a MoHex 2.0 binary (nothing of MoHex is in this repository).
Build it (Debian 12, g++ 12, boost 1.74, Berkeley DB 5.3; about 3 minutes on 2 cores):

  apt-get install cmake g++ libboost-system-dev libboost-thread-dev libboost-filesystem-dev \
      libboost-program-options-dev libboost-date-time-dev libdb-dev libdb++-dev
  git clone https://github.com/cgao3/benzene-vanilla-cmake /work/mohex/src  # tested: 9561476
  cd /work/mohex/src && git apply <<'PATCH'
diff --git a/src/hex/BenzenePlayer.cpp b/src/hex/BenzenePlayer.cpp
index b36e40f..d40c27d 100644
--- a/src/hex/BenzenePlayer.cpp
+++ b/src/hex/BenzenePlayer.cpp
@@ -34,6 +34,23 @@ HexPoint BenzenePlayer::GenMove(const HexState& state, const Game& game,
     // Calls brd.ComputeAll(state.ToPlay())
     if (move != INVALID_POINT)
         return move;
+
+    // Local patch: in a position that fill-in decides, the endgame code and
+    // MoHex's search below crash or play an invalid move (no carriers, a
+    // filled-in board). Play into the winner's fill-in (the winner keeps its
+    // win, the loser intrudes), else any empty cell, as PerfectPlayer means to.
+    if (m_fillinCausedWin)
+    {
+        const HexColor color = state.ToPlay();
+        const bitset_t empty = state.Position().GetEmpty();
+        brd.ComputeAll(color);
+        bitset_t moves = brd.GetInferiorCells().Fillin(m_fillinWinner) & empty;
+        if (moves.none())
+            moves = empty;
+        score = (m_fillinWinner == color) ? IMMEDIATE_WIN : IMMEDIATE_LOSS;
+        LogInfo() << "Fill-in decided the game; playing without search.\n";
+        return static_cast<HexPoint>(BitsetUtil::FindSetBit(moves));
+    }
         
     bitset_t consider;
     
diff --git a/src/mohex/MoHexPlayer.cpp b/src/mohex/MoHexPlayer.cpp
index 40fd6f9..03eb67a 100644
--- a/src/mohex/MoHexPlayer.cpp
+++ b/src/mohex/MoHexPlayer.cpp
@@ -122,7 +122,7 @@ HexPoint MoHexPlayer::Search(const HexState& state, const Game& game,
     LogInfo() << "Time for PreSearch: " << timer.GetTime() << "s\n";
 
     maxTime -= timer.GetTime();
-    maxTime = std::max(1.0, maxTime);
+    maxTime = std::max(0.01, maxTime);
         
     // Create the initial state data
     MoHexSharedData data(m_search.FillinMapBits());
PATCH
  mkdir -p /work/mohex/build && cd /work/mohex/build && cmake ../src && make -j2 mohex
  MOHEX=/work/mohex/build/src/mohex/mohex bench/run-hex-vs-mohex.sh --games 2 --seconds 0.2

It builds unpatched, but needs both changes here: unpatched, MoHex crashes or answers an
invalid move in a position that its fill-in decides (games here are played to the end), and it
searches at least 1 s a move whatever max_time says (unequal time below 1 s a move).
EOF
}

games="" seconds_list=() threads=1 size=11 json="" launcher=""
rest=()
while (($#)); do
  case $1 in
    --games) games=$2; shift 2 ;;
    --seconds) IFS=, read -r -a more <<<"$2"; seconds_list+=("${more[@]}"); shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --json) json=$(realpath -m "$2"); shift 2 ;;
    --launcher) launcher=$2; shift 2 ;;
    --) rest+=("$@"); break ;;
    *) rest+=("$1"); shift ;;
  esac
done
source "$repo/bench/runner-args.sh" "${rest[@]+"${rest[@]}"}"
engine=$build/games/hex/seriema-hex
require_built "$engine"
if [[ -z ${MOHEX:-} || ! -x ${MOHEX%% *} ]]; then
  mohex_build_help
  exit 2
fi
if ((quick)); then
  games=${games:-2}
  ((${#seconds_list[@]})) || seconds_list=(0.2)
  out=${out:-$build/bench-results}
else
  games=${games:-100}
  ((${#seconds_list[@]})) || seconds_list=(1)
  out=${out:-$repo/bench/results}
fi
mkdir -p "$out"
rm -f "$out"/hex-vs-mohex-*
unset UCX_TLS UCX_NET_DEVICES
export UCX_WARN_UNUSED_ENV_VARS=n

# The venv (and open_spiel pin) of run-hex-strength.sh.
open_spiel_version=$(sed -n 's/^open_spiel_version=//p' "$repo/bench/run-hex-strength.sh")
venv=${HEX_VENV:-$build/hex-venv}
if ! "$venv/bin/python" -c "import pyspiel" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "open_spiel==$open_spiel_version"
fi

mohex_gtp=()
IFS=';' read -r -a commands <<<"${MOHEX_GTP:-}"
for c in "${commands[@]+"${commands[@]}"}"; do
  [[ -z ${c// /} ]] || mohex_gtp+=(--mohex-gtp "$c")
done

rows=()
for seconds in "${seconds_list[@]}"; do
  name=hex-vs-mohex-${seconds}s-${threads}t
  seriema="${launcher:+$launcher }$(printf '%q' "$engine") --quiet --rollouts 0 --seconds $seconds"
  ((${#extra[@]} == 0)) || seriema+=" $(printf '%q ' "${extra[@]}")"
  log=()
  if [[ -n ${MOHEX_LOG:-} ]]; then
    mkdir -p "$MOHEX_LOG"
    log=(--mohex-log "$MOHEX_LOG/$name.log")
  fi
  echo "== ${size}x$size, $seconds s a move, $threads thread(s) a side, $games games:" \
    "seriema-hex ($seriema) against MoHex ($MOHEX)"
  if ! SERIEMA_THREADS=$threads "$venv/bin/python" "$repo/bench/hex_vs_mohex.py" play \
    --seriema "$seriema" --mohex "$MOHEX" --seconds "$seconds" --threads "$threads" \
    --games "$games" --size "$size" --json "$out/$name.json" \
    "${mohex_gtp[@]+"${mohex_gtp[@]}"}" "${log[@]+"${log[@]}"}"; then
    echo "run-hex-vs-mohex: the match stopped (if MoHex exited or played an invalid move: is it" \
      "built with the patches that this script prints when MOHEX is unset?)" >&2
    exit 1
  fi
  rows+=("$out/$name.json")
done

# The table and every row in one list; the plot needs matplotlib (the venv's, else a python3's).
report=(report "${rows[@]}" ${json:+--json "$json"})
python=$venv/bin/python
if ((${#rows[@]} > 1)); then
  if ! "$python" -c 'import matplotlib' 2>/dev/null; then
    python=$(source "$repo/bench/find-python.sh" && echo "$python") || python=""
  fi
  if [[ -n $python ]]; then
    report+=(--plot "$out/hex-vs-mohex.png")
  else
    python=$venv/bin/python
    echo "run-hex-vs-mohex: no plot (pip install matplotlib in $venv)" >&2
  fi
fi
"$python" "$repo/bench/hex_vs_mohex.py" "${report[@]}"
